"""Slicing, split, concat, pad, take, arange/iota and NumPy matmul: the builders
behind the .fuse subscript syntax and builtins.

The first section is shared with the ONNX converters (onnx_import/ops.py): each
builder takes ``emit(op class, operands, attributes) -> Value`` (the importer's
``g.emit``, or a .fuse call site's with its location bound) and raises
``VerifyError`` for a mistake its caller reports at its own place (a .fuse
position, an ONNX node). The second section is the .fuse builtins' builders
(calls.py's table), which report at their arguments' positions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from mlfuse.dialects import tensor as T
from mlfuse.dialects import tensor_indexing as TI
from mlfuse.dialects.shapes import broadcast_shapes, fmt_shape, normalize_axes, slice_params
from mlfuse.errors import Location, MlfuseError
from mlfuse.ir.core import Value, VerifyError
from mlfuse.ir.types import Dim, dim_factors, product_dim

from mlfuse.frontend.literals import Literal

Emit = Callable[[type, list, dict], Value]


# -- shared with the ONNX importer ---------------------------------------------------
def slice_windows(emit: Emit, x: Value, windows: list[tuple[int, int, Dim]]) -> Value:
    """``tensor.slice`` of ``x`` taking (start, step, count) on each axis (``slice_params``
    gives them from Python/ONNX bounds); ``x`` itself when every window is its whole axis."""
    shape = x.type.shape
    if all(w == (0, 1, d) for w, d in zip(windows, shape)):
        return x
    for axis, (_, _, count) in enumerate(windows):
        if count == 0:
            raise VerifyError(f"the slice of axis {axis} (size {shape[axis]}) is empty; mlfuse "
                              "has no empty arrays")
    starts, steps, sizes = (list(column) for column in zip(*windows))
    return emit(TI.SliceOp, [x], {"starts": starts, "steps": steps, "sizes": sizes})


def reshape(emit: Emit, x: Value, shape) -> Value:
    shape = [product_dim([d]) for d in shape]
    return x if list(x.type.shape) == shape else emit(T.ReshapeOp, [x], {"shape": shape})


def broadcast_to(emit: Emit, x: Value, shape) -> Value:
    shape = list(shape)
    return x if list(x.type.shape) == shape else emit(T.BroadcastToOp, [x], {"shape": shape})


def split_sizes(size: Dim, count: int) -> list[Dim]:
    """``count`` equal parts of ``size`` (NumPy's split by a count): each is size/count,
    also for a product dim whose coefficient count divides (2*N in 2: N, N)."""
    coefficient, names = dim_factors(size)
    if count < 1 or coefficient % count:
        raise VerifyError(f"cannot split size {size} into {count} equal parts")
    return [product_dim([coefficient // count, *names])] * count


def split(emit: Emit, x: Value, sizes: list[Dim], axis: int) -> list[Value]:
    """``x`` cut along ``axis`` (normalized) into consecutive parts of ``sizes`` (which
    add up to the axis; ONNX Split and NumPy split): one ``tensor.slice`` each."""
    size = x.type.shape[axis]
    if len(sizes) == 1 and sizes[0] == size:
        return [x]
    if any(isinstance(n, str) for n in [size, *sizes]):
        raise VerifyError(f"cannot split symbolic axis {axis} ({size}) into parts: a part's "
                          "start would be symbolic")
    if any(n < 1 for n in sizes) or sum(sizes) != size:
        raise VerifyError(f"split sizes {sizes} must be positive and add up to axis {axis}'s "
                          f"size {size}")
    whole = [(0, 1, d) for d in x.type.shape]
    parts, start = [], 0
    for n in sizes:
        windows = list(whole)
        windows[axis] = (start, 1, n)
        parts.append(slice_windows(emit, x, windows))
        start += n
    return parts


def matmul(emit: Emit, a: Value, b: Value) -> Value:
    """NumPy matmul of operands of any rank >= 1: 1-D operands gain a unit dim (dropped
    from the result), batch dims broadcast; built from the dialect's 2-D, 3-D x 3-D and
    3-D x 2-D ``tensor.matmul`` with reshapes (batch dims merged into one, a product
    dim B*H where symbolic) and broadcasts."""
    if a.type.rank == 0 or b.type.rank == 0:
        raise VerifyError("matmul takes operands of rank 1 or more, not scalars")
    a_rank, b_rank = a.type.rank, b.type.rank
    if a.type.shape[-1] != b.type.shape[-2 if b_rank > 1 else 0]:
        raise VerifyError(f"matmul inner dims differ: {fmt_shape(a.type.shape)} x "
                          f"{fmt_shape(b.type.shape)}")
    if a_rank == 1:
        a = reshape(emit, a, [1, a.type.shape[0]])
    if b_rank == 1:
        b = reshape(emit, b, [b.type.shape[0], 1])
    (m, k), n = a.type.shape[-2:], b.type.shape[-1]
    batch = broadcast_shapes(a.type.shape[:-2], b.type.shape[:-2])
    flat = product_dim(batch)
    if all(d == 1 for d in b.type.shape[:-2]):  # one matrix b: a's batch stays a's
        a = broadcast_to(emit, a, [*batch, m, k])
        a = reshape(emit, a, [m, k] if flat == 1 else [flat, m, k])
        y = emit(T.MatmulOp, [a, reshape(emit, b, [k, n])], {})
    else:
        a = reshape(emit, broadcast_to(emit, a, [*batch, m, k]), [flat, m, k])
        b = reshape(emit, broadcast_to(emit, b, [*batch, k, n]), [flat, k, n])
        y = emit(T.MatmulOp, [a, b], {})
    # the unit dims 1-D operands gained are not in the result
    shape = [*batch] + ([m] if a_rank > 1 else []) + ([n] if b_rank > 1 else [])
    return reshape(emit, y, shape)


# -- .fuse: the subscript syntax ---------------------------------------------------------
@dataclass(frozen=True)
class Index:
    """``x[3]``: one element of an axis, which the result drops."""
    value: int
    loc: Location


@dataclass(frozen=True)
class Window:
    """``x[a:b:c]``: Python slice bounds (None where left out)."""
    start: int | None
    stop: int | None
    step: int | None
    loc: Location
    step_loc: Location


@dataclass(frozen=True)
class Rest:
    """``x[..., 0]``: as many whole axes as the other items leave."""
    loc: Location


def subscript(emit: Emit, x: Value, items: list) -> Value:
    """``x[items]`` with NumPy's basic indexing: a ``tensor.slice`` (if any axis is not
    taken whole) and a ``tensor.reshape`` dropping the integer-indexed axes (if any)."""
    rests = [it for it in items if isinstance(it, Rest)]
    if len(rests) > 1:
        raise MlfuseError("a subscript takes one ... at most", rests[1].loc)
    given = [it for it in items if not isinstance(it, Rest)]
    shape = x.type.shape
    if len(given) > len(shape):
        raise MlfuseError(f"too many indices: {len(given)} for a value of rank {len(shape)} "
                          f"({x.type})", given[len(shape)].loc)
    if rests:
        at = items.index(rests[0])
        items = items[:at] + [None] * (len(shape) - len(given)) + items[at + 1:]
    else:
        items = items + [None] * (len(shape) - len(given))
    windows, kept = [], []
    for axis, (item, size) in enumerate(zip(items, shape)):
        windows.append(_window(item, axis, size))
        if not isinstance(item, Index):
            kept.append(windows[-1][2])
    y = slice_windows(emit, x, windows)
    return reshape(emit, y, kept) if len(kept) < len(shape) else y


def _window(item, axis: int, size) -> tuple[int, int, Dim]:
    if item is None:
        return 0, 1, size
    if isinstance(item, Index):
        if isinstance(size, int) and not -size <= item.value < size:
            raise MlfuseError(f"index {item.value} is out of range for axis {axis} of size {size}",
                              item.loc)
        if isinstance(size, str) and item.value not in (0, -1):
            raise MlfuseError(f"index {item.value} on symbolic axis {axis} ({size}): only 0 and "
                              "-1 are known to exist", item.loc)
        return item.value % size if isinstance(size, int) else item.value, 1, 1
    if item.step == 0:
        raise MlfuseError("slice step cannot be 0", item.step_loc)
    try:
        start, step, count = slice_params(size, item.start, item.stop, item.step)
    except VerifyError as e:
        raise MlfuseError(e.message, item.loc) from None
    if count == 0:
        raise MlfuseError(f"this slice of axis {axis} (size {size}) is empty; mlfuse has no "
                          "empty arrays (docs/language.md)", item.loc)
    return start, step, count


# -- .fuse: builtins (calls.py's table) ---------------------------------------------------
class Values(tuple):
    """Several values from one call (split): only a multiple assignment takes them."""


def _axis(args, rank: int, name: str = "axis") -> int:
    try:
        return normalize_axes(args[name], rank)[0]
    except VerifyError as e:
        raise MlfuseError(e.message, args.loc(name)) from None


def _emit(site, loc: Location) -> Emit:
    return lambda cls, operands, attributes: site.emit(cls, operands, attributes, loc)


def _reported(build):
    """A builder whose VerifyErrors (from the shared builders) point at the call."""
    def wrapped(site, args):
        try:
            return build(site, args)
        except VerifyError as e:
            raise MlfuseError(e.message, args.call_loc) from None
    return wrapped


@_reported
def build_concat(site, args):
    xs = [site.tensor(x, "each concatenated value", args.loc("xs")) for x in args["xs"]]
    if not xs:
        raise MlfuseError("concat needs at least one tensor", args.loc("xs"))
    if len(xs) == 1:
        return xs[0]
    return site.emit(TI.ConcatOp, xs, {"axis": _axis(args, xs[0].type.rank)}, args.call_loc)


@_reported
def build_split(site, args):
    x = site.tensor(args["x"], "x", args.loc("x"))
    axis = _axis(args, x.type.rank)
    parts = args["parts"]
    if isinstance(parts, int):
        try:
            parts = split_sizes(x.type.shape[axis], parts)
        except VerifyError as e:
            raise MlfuseError(e.message, args.loc("parts")) from None
    return Values(split(_emit(site, args.call_loc), x, parts, axis))


@_reported
def build_pad(site, args):
    x = site.tensor(args["x"], "x", args.loc("x"))
    widths = args["widths"]
    if len(widths) != x.type.rank:
        raise MlfuseError(f"pad needs one [low, high] pair per axis: {x.type.rank} for {x.type}, "
                          f"got {len(widths)}", args.loc("widths"))
    low, high = [w[0] for w in widths], [w[1] for w in widths]
    if not any(low + high):
        return x
    return site.emit(TI.PadOp, [x], {"low": low, "high": high, "value": args["value"]},
                     args.call_loc)


@_reported
def build_take(site, args):
    x = site.tensor(args["x"], "x", args.loc("x"))
    indices = args["indices"]
    if isinstance(indices, Literal):  # take(x, 3): a rank-0 i32 index
        if not isinstance(indices.value, int):
            raise MlfuseError(f"an index must be an integer, got {indices.value}",
                              args.loc("indices"))
        indices = site.constant(indices, "i32")
    return site.emit(TI.GatherOp, [x, indices], {"axis": _axis(args, x.type.rank)},
                     args.call_loc)


@_reported
def build_iota(site, args):
    shape = args["shape"]
    try:
        axis = normalize_axes(args["axis"], len(shape))[0]
    except VerifyError as e:
        raise MlfuseError(e.message, args.loc("axis")) from None
    return site.emit(TI.IotaOp, [], {"shape": shape, "axis": axis, "dtype": args["dtype"]},
                     args.call_loc)


@_reported
def build_arange(site, args):
    """start + i*step for i < ceil((stop - start) / step), computed in dtype (i32 when
    every bound is an integer, else f32)."""
    start, stop, step = args["start"], args["stop"], args["step"]
    if stop is None:  # arange(stop)
        start, stop = 0, start
    if step == 0:
        raise MlfuseError("arange step cannot be 0", args.loc("step"))
    whole = all(isinstance(v, int) for v in (start, stop, step))
    dtype = args["dtype"] or ("i32" if whole else "f32")
    count = math.ceil((stop - start) / step)
    if count < 1:
        raise MlfuseError(f"arange({start}, {stop}, {step}) is empty; mlfuse has no empty arrays",
                          args.call_loc)
    y = site.emit(TI.IotaOp, [], {"shape": [count], "axis": 0, "dtype": dtype}, args.call_loc)
    if step != 1:
        y = site.elementwise("mul", [y, Literal(step, args.loc("step"))], args.call_loc)
    if start != 0:
        y = site.elementwise("add", [y, Literal(start, args.call_loc)], args.call_loc)
    return y


@_reported
def build_matmul(site, args):
    a = site.tensor(args["a"], "a", args.loc("a"))
    b = site.tensor(args["b"], "b", args.loc("b"))
    return matmul(_emit(site, args.call_loc), a, b)
