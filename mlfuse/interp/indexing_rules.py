"""NumPy semantics of the index-map ops (dialects/tensor_indexing.py) for the tensor
interpreter, the oracle their lowerings and kernels are compared with."""
from __future__ import annotations

from typing import Callable

import numpy as np

from mlfuse.dialects.tensor_indexing import gather_fill

from mlfuse.interp.common import numpy_dtype, resolve_shape


def _slice(op, x, *, dims):
    sizes = resolve_shape(tuple(op["sizes"]), dims, op)
    window = []
    for start, step, count in zip(op["starts"], op["steps"], sizes):
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
    axis = op["axis"]
    size = x.shape[axis]
    i = indices.astype(np.int64)
    i = np.where(i < 0, i + size, i)
    inside = (i >= 0) & (i < size)
    out = np.take(x, np.clip(i, 0, size - 1), axis=axis)
    # inside has indices' shape; line it up with the result's middle axes
    inside = inside.reshape((1,) * axis + inside.shape + (1,) * (x.ndim - axis - 1))
    fill = np.array(gather_fill(op.result.type.dtype)).astype(x.dtype)
    return np.where(inside, out, fill)


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
