"""Converters of ONNX's data-movement operators: Concat, Split, Slice, Pad, Gather,
Expand, Tile, ConstantOfShape, Range.

They become the tensor dialect's index-map ops (dialects/tensor_indexing.py: slice,
concat, pad, gather), reshapes and broadcasts, which fuse with their producers and
consumers. Sizes, starts, pads and repeats must be known when compiling (initializers,
Constants, folded shape arithmetic or static inputs); data may come at run time.
Gather's indices may be either: known evenly spaced indices become a slice, other
known INT64 indices an INT32 parameter when every value fits (docs/onnx.md).

mlfuse has no empty tensors, but exported graphs make them on the way (a Split part or
Slice of size 0 that a Concat then joins to nothing). Such a result is a known empty
NumPy array; Concat leaves known empty inputs out, and any other use of one is the
importer's "constant is empty" error.
"""
from __future__ import annotations

import numpy as np

from mlfuse.dialects.shapes import broadcast_shapes, slice_params
from mlfuse.dtypes import numpy_dtype
from mlfuse.dialects.tensor_indexing import ConcatOp, GatherOp, PadOp, SliceOp
from mlfuse.ir.core import VerifyError
from mlfuse.ir.types import INT_DTYPES

from mlfuse.frontend.onnx_import.builders import (axes_in_order, broadcast, ew, norm_axis,
                                                  product, reshape, static_ints, string_attr)


def slice_value(g, x, axis: int, start: int, step: int, count: int):
    """``count`` elements of ``x`` along ``axis`` from ``start`` by ``step``; the other
    axes whole. No op when that is all of ``x``."""
    shape = x.type.shape
    if start == 0 and step == 1 and count == shape[axis]:
        return x
    if count < 1:
        raise g.error(f"the result would be empty along axis {axis} (mlfuse has no empty "
                      "tensors)")
    starts, steps, sizes = [0] * len(shape), [1] * len(shape), list(shape)
    starts[axis], steps[axis], sizes[axis] = start, step, count
    return g.emit(SliceOp, [x], {"starts": starts, "steps": steps, "sizes": sizes})


def empty(g, x, shape) -> np.ndarray:
    """A known empty result of x's dtype; its shape must be concrete."""
    if any(isinstance(d, str) for d in shape):
        raise g.error(f"the result of shape {list(shape)} is empty (mlfuse has no empty "
                      "tensors)")
    return np.empty(shape, numpy_dtype(x.type.dtype))


def _is_empty(g, name: str) -> bool:
    return name in g.known and g.known[name].size == 0


# -- Concat and Split ----------------------------------------------------------------
def _concat(g, node, attrs):
    if "axis" not in attrs:
        raise g.error("attribute 'axis' is required")
    names = [name for name in node.input if name]
    kept = [name for name in names if not _is_empty(g, name)]
    if not kept:
        raise g.error("every input is empty (mlfuse has no empty tensors)")
    values = [g.value(name) for name in kept]
    axis = norm_axis(g, attrs["axis"], values[0].type.rank)
    if len(values) == 1:
        return values
    return [g.emit(ConcatOp, values, {"axis": axis})]


def split_sizes(g, node, attrs, size) -> list[int]:
    """The part sizes of a Split: from the 'split' input (opset 13+) or attribute
    (before), else equal parts, one per output; opset 18's num_outputs makes the last
    part smaller when the size does not divide (ceil-sized parts)."""
    outputs = len(node.output)
    sizes = list(attrs["split"]) if "split" in attrs else static_ints(g, node, 1, "split")
    if sizes is not None:
        if "num_outputs" in attrs:
            raise g.error("give either the 'split' input or the 'num_outputs' attribute, "
                          "not both")
        if len(sizes) != outputs:
            raise g.error(f"split {sizes} has {len(sizes)} parts for {outputs} outputs")
        if isinstance(size, int) and sum(sizes) != size:
            raise g.error(f"split {sizes} sums to {sum(sizes)}, not the axis size {size}")
        return [int(s) for s in sizes]
    if isinstance(size, str):
        raise g.error(f"cannot split symbolic size {size} without explicit sizes")
    if "num_outputs" in attrs:
        parts = int(attrs["num_outputs"])
        if parts != outputs:
            raise g.error(f"num_outputs={parts} but the node has {outputs} outputs")
        chunk = -(-size // parts)
        sizes = [min(chunk, size - i * chunk) for i in range(parts)]
    else:
        if size % outputs:
            raise g.error(f"axis size {size} does not split into {outputs} equal parts")
        sizes = [size // outputs] * outputs
    return sizes


def _split(g, node, attrs):
    x = g.input(node, 0)
    axis = norm_axis(g, attrs.get("axis", 0), x.type.rank)
    sizes = split_sizes(g, node, attrs, x.type.shape[axis])
    if any(s < 0 for s in sizes):
        raise g.error(f"split sizes {sizes} include a negative one")
    parts, offset = [], 0
    for s in sizes:
        if s == 0:
            shape = list(x.type.shape)
            shape[axis] = 0
            parts.append(empty(g, x, shape))
        else:
            parts.append(slice_value(g, x, axis, offset, 1, s))
        offset += s
    return parts


# -- Slice and Pad -------------------------------------------------------------------
def _slice(g, node, attrs):
    x = g.input(node, 0)
    if g.opset < 10:  # starts, ends and axes were attributes, without steps
        starts, ends, axes = attrs.get("starts"), attrs.get("ends"), attrs.get("axes")
        steps = None
    else:
        starts, ends = static_ints(g, node, 1, "starts"), static_ints(g, node, 2, "ends")
        axes, steps = static_ints(g, node, 3, "axes"), static_ints(g, node, 4, "steps")
    if starts is None or ends is None:
        raise g.error("starts and ends are required")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise g.error(f"starts {list(starts)}, ends {list(ends)}, axes {axes} and steps "
                      f"{steps} differ in length")
    axes = axes_in_order(g, axes, x.type.rank)
    shape = list(x.type.shape)
    params = []
    for axis, start, end, step in zip(axes, starts, ends, steps):
        try:
            params.append((axis, *slice_params(shape[axis], int(start), int(end), int(step))))
        except VerifyError as e:
            raise g.error(f"axis {axis}: {e.message}") from None
        shape[axis] = params[-1][-1]
    if 0 in shape:
        return [empty(g, x, shape)]
    for axis, first, step, count in params:
        x = slice_value(g, x, axis, first, step, count)
    return [x]


def _pad(g, node, attrs):
    x = g.input(node, 0)
    mode = string_attr(attrs, "mode", "constant")
    if mode != "constant":
        raise g.error(f"mode='{mode}' is not supported (only mode='constant')")
    rank = x.type.rank
    if g.opset < 11:
        pads, value, axes = list(attrs.get("pads", [])), float(attrs.get("value", 0.0)), None
    else:
        pads = static_ints(g, node, 1, "pads")
        value = _pad_value(g, node, x)
        axes = static_ints(g, node, 3, "axes")
    axes = list(range(rank)) if axes is None else axes_in_order(g, axes, rank)
    if pads is None or len(pads) != 2 * len(axes):
        raise g.error(f"pads {pads} must hold a begin and an end for each of the "
                      f"{len(axes)} axes")
    low, high = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        low[axis], high[axis] = pads[i], pads[i + len(axes)]
    # negative pads remove elements: a slice first, then the (non-negative) padding
    for axis in range(rank):
        if low[axis] < 0 or high[axis] < 0:
            size = x.type.shape[axis]
            if isinstance(size, str):
                raise g.error(f"cannot crop symbolic axis {axis} ({size})")
            start, stop = max(-low[axis], 0), size - max(-high[axis], 0)
            x = slice_value(g, x, axis, start, 1, stop - start)
    low, high = [max(p, 0) for p in low], [max(p, 0) for p in high]
    if not any(low) and not any(high):
        return [x]
    if not isinstance(value, (int, float)):  # known only at run time
        return [_pad_with_value(g, x, low, high, value)]
    if x.type.dtype in INT_DTYPES + ("bool",) and value != int(value):
        raise g.error(f"constant_value {value} is not a {x.type.dtype}")
    return [g.emit(PadOp, [x], {"low": low, "high": high, "value": float(value)})]


def _pad_value(g, node, x):
    """Pad's constant_value: a number when known, else its rank-0 IR value."""
    if not g.has_input(node, 2):
        return 0.0
    name = node.input[2]
    if name not in g.known:
        value = g.value(name)
        if value.type.rank != 0 or value.type.dtype != x.type.dtype:
            raise g.error(f"constant_value must be a scalar of the data's type, got {value.type}")
        return value
    value = g.known[name]
    if value.size != 1:
        raise g.error(f"constant_value has {value.size} elements; it must be one")
    return value.reshape(-1)[0].item()


def _pad_with_value(g, x, low, high, value):
    """Padding with a value known only at run time: pad with 0, and choose the value
    where a padded marker of ones is 0 (the marker is a fusable splat)."""
    ones = broadcast(g, g.scalar(1, "i32"), x.type.shape)
    marker = g.emit(PadOp, [ones], {"low": low, "high": high, "value": 0.0})
    inside = ew(g, "ne", marker, g.scalar(0, "i32"))
    padded = g.emit(PadOp, [x], {"low": low, "high": high, "value": 0.0})
    return ew(g, "where", inside, padded, value)


# -- Gather --------------------------------------------------------------------------
def known_indices(g, indices: np.ndarray, size) -> np.ndarray:
    """Known indices as INT32, checked against the axis size: an INT64 array whose
    values all fit is narrowed (mlfuse indexes with 32 bits), out-of-range indices are
    an error here rather than the nan gather yields at run time."""
    indices = np.asarray(indices)
    if indices.dtype.kind not in "iu":
        raise g.error(f"indices have dtype {indices.dtype}; Gather needs integers")
    if isinstance(size, int) and indices.size and (
            indices.min() < -size or indices.max() >= size):
        raise g.error(f"index {int(indices.max() if indices.max() >= size else indices.min())} "
                      f"is out of range for an axis of size {size}")
    if indices.size and (indices.min() < -2 ** 31 or indices.max() >= 2 ** 31):
        raise g.error("indices do not fit in 32 bits")
    return indices.astype(np.int32)


def progression(indices: np.ndarray, size: int) -> tuple[int, int] | None:
    """(start, step) when the known indices, flattened and with negatives counted from
    the end, are start, start + step, ... (one index, or a non-zero step); else None."""
    flat = indices.reshape(-1).astype(np.int64) % size
    if flat.size == 1:
        return int(flat[0]), 1
    steps = np.diff(flat)
    if steps[0] != 0 and np.all(steps == steps[0]):
        return int(flat[0]), int(steps[0])
    return None


def _gather(g, node, attrs):
    x = g.input(node, 0)
    axis = norm_axis(g, attrs.get("axis", 0), x.type.rank)
    name = node.input[1]
    if name not in g.known:
        return [g.emit(GatherOp, [x, g.input(node, 1)], {"axis": axis})]
    size = x.type.shape[axis]
    indices = known_indices(g, g.known[name], size)
    taken = progression(indices, size) if isinstance(size, int) else None
    if taken is not None:
        # evenly spaced known indices (one index, positions 0..S-1, every other row) are a
        # strided slice: no index array to pass and no data-dependent load
        start, step = taken
        picked = slice_value(g, x, axis, start, step, indices.size)
        shape = x.type.shape
        return [reshape(g, picked, [*shape[:axis], *indices.shape, *shape[axis + 1:]])]
    index_value = g.value(name, "i32")  # known_indices checked that the values fit
    return [g.emit(GatherOp, [x, index_value], {"axis": axis})]


# -- shapes from known sizes ---------------------------------------------------------
def _expand(g, node, attrs):
    x = g.input(node, 0)
    target = static_ints(g, node, 1, "shape")
    try:  # ONNX Expand broadcasts both ways: a 1 in shape keeps the input's size
        shape = broadcast_shapes(tuple(x.type.shape), tuple(target))
    except VerifyError as e:
        raise g.error(f"cannot expand {list(x.type.shape)} to {target}: {e.message}") from None
    if any(isinstance(d, int) and d < 1 for d in shape):
        raise g.error(f"the expanded shape {list(shape)} is empty")
    if len(shape) > x.type.rank:
        x = reshape(g, x, [1] * (len(shape) - x.type.rank) + list(x.type.shape))
    return [broadcast(g, x, shape)]


def _tile(g, node, attrs):
    """tile(x, r) = reshape(broadcast(x as [1, d0, 1, d1, ...] to [r0, d0, r1, d1, ...])):
    the repeats become outer axes of each axis."""
    x = g.input(node, 0)
    repeats = static_ints(g, node, 1, "repeats")
    shape = list(x.type.shape)
    if repeats is None or len(repeats) != len(shape):
        raise g.error(f"repeats {repeats} needs one entry per axis of the rank-{len(shape)} "
                      "input")
    if any(r < 1 for r in repeats):
        raise g.error(f"repeats {repeats} must be positive (mlfuse has no empty tensors)")
    if all(r == 1 for r in repeats):
        return [x]
    interleaved = [d for size in shape for d in (1, size)]
    expanded = [d for r, size in zip(repeats, shape) for d in (r, size)]
    wide = broadcast(g, reshape(g, x, interleaved), expanded)
    return [reshape(g, wide, [product(g, [r, size]) for r, size in zip(repeats, shape)])]


def _constant_of_shape(g, node, attrs):
    shape = static_ints(g, node, 0, "the shape")
    value = attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else _tensor_array(value)
    if fill.size != 1:
        raise g.error(f"value has {fill.size} elements; it must be one")
    return [np.full(shape, fill.reshape(-1)[0], dtype=fill.dtype)]


def _tensor_array(proto) -> np.ndarray:
    from onnx import numpy_helper
    return numpy_helper.to_array(proto)


def _range(g, node, attrs):
    start, limit, delta = (g.static(node, i, what) for i, what in
                           enumerate(("start", "limit", "delta")))
    return [np.arange(start, limit, delta, dtype=np.asarray(start).dtype)]


CONVERTERS = {
    "Concat": _concat, "Split": _split, "Slice": _slice, "Pad": _pad, "Gather": _gather,
    "Expand": _expand, "Tile": _tile, "ConstantOfShape": _constant_of_shape, "Range": _range,
}
