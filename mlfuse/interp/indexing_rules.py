"""NumPy semantics of the index-map ops (dialects/tensor_indexing.py) for the tensor
interpreter, the oracle their lowerings and kernels are compared with; and how they
move the rounding analysis' shadows (mlfuse.interp.rounding: each element's error
bound and whether rounding decides it), which follow the elements they move."""
from __future__ import annotations

from typing import Callable

import numpy as np

from mlfuse.dialects.tensor_indexing import gather_fill

from mlfuse.interp.common import numpy_dtype, resolve_shape


def _slice(op, x, *, dims):
    sizes = resolve_shape(tuple(op["sizes"]), dims, op)
    window = []
    for start, step, count, size in zip(op["starts"], op["steps"], sizes, x.shape):
        start = start % size  # -1 (a symbolic axis' last element) is size - 1
        stop = start + count * step
        window.append(slice(start, stop if stop >= 0 else None, step))
    return x[tuple(window)]


def _concat(op, *xs, dims):
    return np.concatenate(xs, axis=op["axis"])


def _pad(op, x, *, dims):
    value = np.array(op["value"]).astype(x.dtype)
    return np.pad(x, list(zip(op["low"], op["high"])), constant_values=value)


def _gather(op, x, indices, *, dims):
    """np.take, with an index outside [-size, size) giving the fill (gather_fill)."""
    taken, inside = _take(op["axis"], x, indices)
    fill = np.array(gather_fill(op.result.type.dtype)).astype(x.dtype)
    return np.where(inside, taken, fill)


def _take(axis: int, x, indices):
    """x taken at indices (negatives wrapped once, the rest clamped into range), and
    where the index was inside the axis, lined up with the result's middle axes."""
    size = x.shape[axis]
    i = indices.astype(np.int64)
    i = np.where(i < 0, i + size, i)
    inside = (i >= 0) & (i < size)
    taken = np.take(x, np.clip(i, 0, size - 1), axis=axis)
    return taken, inside.reshape((1,) * axis + inside.shape + (1,) * (x.ndim - axis - 1))


def _iota(op, *, dims):
    shape = resolve_shape(tuple(op["shape"]), dims, op)
    axis = op["axis"]
    positions = np.arange(shape[axis]).reshape((-1,) + (1,) * (len(shape) - axis - 1))
    return np.broadcast_to(positions.astype(numpy_dtype(op["dtype"])), shape)


INDEXING_RULES: dict[str, Callable] = {
    "tensor.slice": _slice,
    "tensor.concat": _concat,
    "tensor.pad": _pad,
    "tensor.gather": _gather,
    "tensor.iota": _iota,
}


# -- the rounding analysis (mlfuse.interp.rounding): rules (op, shadows, out, dims) ->
# (err, undecided) of the result. Slice is one of its views (the same elements, moved).
def _full(shadow):
    return (np.broadcast_to(shadow.err, shadow.value.shape),
            np.broadcast_to(shadow.undecided, shadow.value.shape))


def _concat_shadows(op, ins, out, dims):
    errs, undecided = zip(*map(_full, ins))
    return (np.concatenate(errs, axis=op["axis"]),
            np.concatenate(undecided, axis=op["axis"]))


def _pad_shadows(op, ins, out, dims):
    """A padding element is the pad value itself: exact and decided."""
    err, undecided = _full(ins[0])
    widths = list(zip(op["low"], op["high"]))
    return np.pad(err, widths), np.pad(undecided, widths)


def _gather_shadows(op, ins, out, dims):
    """An element moved from x keeps its shadow, a fill is exact; an index whose value
    rounding decides (cast from a float) makes its elements undecided."""
    x, indices = ins
    err, undecided = _full(x)
    taken_err, inside = _take(op["axis"], err, indices.value)
    taken_undecided, _ = _take(op["axis"], undecided, indices.value)
    index_undecided = np.broadcast_to(indices.undecided, indices.value.shape)
    axis = op["axis"]
    index_undecided = index_undecided.reshape(
        (1,) * axis + index_undecided.shape + (1,) * (x.value.ndim - axis - 1))
    return np.where(inside, taken_err, 0.0), (inside & taken_undecided) | index_undecided


def _exact(op, ins, out, dims):
    return np.zeros(out.shape), np.zeros(out.shape, bool)


ROUNDING_RULES: dict[str, Callable] = {
    "tensor.concat": _concat_shadows,
    "tensor.pad": _pad_shadows,
    "tensor.gather": _gather_shadows,
    "tensor.iota": _exact,  # integers, converted with one correct rounding everywhere
}
