"""Lowerings of the index-map ops (dialects/tensor_indexing.py), appended to
``lower_to_loops.LOWERINGS``: each is one loads-and-index-arithmetic body of the
op's loop nest, like reshape and transpose.

Every load here is a plain ``loops.load`` at an index that is in range at every
point, never a masked one: where an operand has no element for a point (concat's
other parts, pad's border, an out-of-range gather index) its index is clamped into
range and ``arith.where`` picks the right value. Clamped reads cost nothing extra
(the fused kernel computes the chosen operand anyway) and keep each operand's
producer fusable: the fusion pass inlines a producer at a plain load's index, and
refuses to at a masked load's (conv2d's padding).
"""
from __future__ import annotations

from typing import Callable

from mlfuse.dialects import tensor_indexing as TI
from mlfuse.dialects.shapes import dim_sum
from mlfuse.ir.core import Operation, Value

from mlfuse.transforms.loop_emitter import Emitter

Lowering = Callable[[Operation, Emitter, list[Value]], Value]


def _clamp(em: Emitter, i: Value, size, low: bool = True, high: bool = True) -> Value:
    """``i`` clamped into [0, size): below (``low``) and above (``high``) as asked."""
    if size == 1:
        return em.index(0)
    if low:
        i = em.arith("maximum", i, em.index(0))
    if high:
        i = em.arith("minimum", i, _last(em, size))
    return i


def _last(em: Emitter, size) -> Value:
    """The last index of an axis of ``size``."""
    if isinstance(size, int):
        return em.index(size - 1)
    return em.arith("sub", em.size(size), em.index(1))


def _start(em: Emitter, start: int, size) -> Value:
    return em.index(start) if start >= 0 else _last(em, size)


def lower_slice(op: TI.SliceOp, em: Emitter, idx: list[Value]) -> Value:
    """x at starts + idx * steps, per axis (a size-1 result axis reads at its start;
    start -1, on a symbolic axis, is its last element)."""
    x = op.operand("x")
    at = []
    for i, size, start, step, count in zip(idx, x.type.shape, op["starts"], op["steps"],
                                           op["sizes"]):
        if count == 1:
            at.append(_start(em, start, size))
            continue
        offset = i if abs(step) == 1 else em.arith("mul", i, em.index(abs(step)))
        if step < 0:
            at.append(em.arith("sub", _start(em, start, size), offset))
        else:
            at.append(em.arith("add", offset, _start(em, start, size)) if start else offset)
    return em.read(x, at)


def lower_concat(op: TI.ConcatOp, em: Emitter, idx: list[Value]) -> Value:
    """The part whose range on ``axis`` holds the output index: every part is read at
    its own (clamped) position and a chain of ``where`` on the running offsets picks."""
    axis, parts = op["axis"], op.operands
    j = idx[axis]
    offsets = [0]
    for x in parts:
        offsets.append(dim_sum([offsets[-1], x.type.shape[axis]]))
    values = []
    for k, x in enumerate(parts):
        local = j if offsets[k] == 0 else em.arith("sub", j, em.size(offsets[k]))
        local = _clamp(em, local, x.type.shape[axis], low=k > 0, high=k < len(parts) - 1)
        values.append(em.read(x, idx[:axis] + [local] + idx[axis + 1:]))
    out = values[-1]
    for k in reversed(range(len(parts) - 1)):
        out = em.arith("where", em.arith("lt", j, em.size(offsets[k + 1])), values[k], out)
    return out


def lower_pad(op: TI.PadOp, em: Emitter, idx: list[Value]) -> Value:
    """x at idx - low where that is inside x on every padded axis, else the value."""
    x = op.operand("x")
    at, inside = [], []
    for i, size, low, high in zip(idx, x.type.shape, op["low"], op["high"]):
        pos = em.arith("sub", i, em.index(low)) if low else i
        if low:
            inside.append(em.arith("ge", pos, em.index(0)))
        if high:
            inside.append(em.arith("lt", pos, em.size(size)))
        at.append(_clamp(em, pos, size, low=bool(low), high=bool(high)) if low or high else pos)
    value = em.read(x, at)
    if not inside:
        return value
    dtype = op.result.type.dtype
    return em.arith("where", em.fold("and", inside), value, em.constant(op["value"], dtype))


def lower_gather(op: TI.GatherOp, em: Emitter, idx: list[Value]) -> Value:
    """x at the index loaded from ``indices`` (cast to index, negatives wrapped once);
    an index still outside the axis reads a clamped element and yields the fill."""
    x, indices = op.operand("x"), op.operand("indices")
    axis, n = op["axis"], indices.type.rank
    size = x.type.shape[axis]
    i = em.arith("cast", em.read(indices, idx[axis:axis + n]), dtype="index")
    zero, extent = em.index(0), em.size(size)
    i = em.arith("where", em.arith("lt", i, zero), em.arith("add", i, extent), i)
    inside = em.arith("and", em.arith("ge", i, zero), em.arith("lt", i, extent))
    value = em.read(x, idx[:axis] + [_clamp(em, i, size)] + idx[axis + n:])
    fill = em.constant(TI.gather_fill(op.result.type.dtype), op.result.type.dtype)
    return em.arith("where", inside, value, fill)


def lower_iota(op: TI.IotaOp, em: Emitter, idx: list[Value]) -> Value:
    return em.arith("cast", idx[op["axis"]], dtype=op["dtype"])


INDEXING_LOWERINGS: list[tuple[tuple, Lowering]] = [
    ((TI.SliceOp,), lower_slice),
    ((TI.ConcatOp,), lower_concat),
    ((TI.PadOp,), lower_pad),
    ((TI.GatherOp,), lower_gather),
    ((TI.IotaOp,), lower_iota),
]
