"""Lowering of the windowed tensor ops: conv2d (grouped too), pooling, argmax/argmin,
cumsum and dim_size, each one ``loops.parallel`` nest over its result, as every op of
``lower-tensor-to-loops`` (its ``LOWERINGS`` takes ``WINDOW_LOWERINGS``).

conv2d and pooling share :class:`Window`: at an output point (oh, ow) the window starts
at (oh*stride - pad, ow*stride - pad), tap t of an axis reads position
start + t*dilation, and a tap may fall outside the input only where padding (or
ceil_mode's overhang) lets it; only those sides are tested.

Padded taps are read two ways. conv2d's zero padding is a ``loops.masked_load``
(codegen reads memory only where the mask holds). Pooling instead clamps the
position into the input and selects: ``where(inside, x[clamped], other)``. The load
is then a plain load at a valid index, so a pointwise producer (relu before a max
pool) can be inlined there by the fusion pass, which keeps producers of masked loads
in memory; the select drops the clamped tap's value.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.dialects import tensor, tensor_windows
from mlfuse.dialects.loops import combiner_identity
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.types import Dim

from mlfuse.transforms.loop_emitter import Emitter


@dataclass
class Window:
    """The window of one output point over the last two dims of an NCHW input."""

    starts: list[Value]   # oh*stride - pad, ow*stride - pad (index values)
    sizes: list[Dim]      # H, W of the input
    dilation: list[int]
    lower: list[bool]     # whether a tap may fall left of the input, per axis
    upper: list[bool]     # ... or right of it

    @classmethod
    def at(cls, em: Emitter, out_index: list[Value], sizes: list[Dim], out_sizes: list[Dim],
           kernel: list[int], stride: list[int], pads: list[int], dilation: list[int]) -> Window:
        starts, lower, upper = [], [], []
        for a in range(2):
            out = out_index[a]
            pos = out if stride[a] == 1 else em.arith("mul", out, em.index(stride[a]))
            starts.append(em.arith("sub", pos, em.index(pads[a])) if pads[a] else pos)
            lower.append(pads[a] > 0)
            if isinstance(sizes[a], int) and isinstance(out_sizes[a], int):
                last_tap = (out_sizes[a] - 1) * stride[a] - pads[a] + dilation[a] * (kernel[a] - 1)
                upper.append(last_tap >= sizes[a])
            else:  # a symbolic size keeps only 'same' windows: past the end iff padded
                upper.append(pads[a] > 0)
        return cls(starts, list(sizes), list(dilation), lower, upper)

    def tap(self, e: Emitter, tap: Value, axis: int) -> tuple[Value, Value | None]:
        """The input position of ``tap`` and, where it may leave the input, whether it is
        inside (None: always inside)."""
        d = self.dilation[axis]
        step = tap if d == 1 else e.arith("mul", tap, e.index(d))
        pos = e.arith("add", self.starts[axis], step)
        tests = []
        if self.lower[axis]:
            tests.append(e.arith("ge", pos, e.index(0)))
        if self.upper[axis]:
            tests.append(e.arith("lt", pos, e.size(self.sizes[axis])))
        return pos, e.fold("and", tests) if tests else None

    def clamp(self, e: Emitter, pos: Value, axis: int) -> Value:
        """``pos`` moved into the input on the sides a tap may leave it."""
        if self.lower[axis]:
            pos = e.arith("maximum", pos, e.index(0))
        if self.upper[axis]:
            size = self.sizes[axis]
            last = e.index(size - 1) if isinstance(size, int) else \
                e.arith("sub", e.size(size), e.index(1))
            pos = e.arith("minimum", pos, last)
        return pos


def _pool_window(op: Operation, em: Emitter, idx: list[Value]) -> Window:
    x = op.operand("x")
    return Window.at(em, idx[2:], list(x.type.shape[2:]), list(op.result.type.shape[2:]),
                     op["kernel"], op["stride"], op["padding"],
                     op.attributes.get("dilation", [1, 1]))


def _over_window(op: Operation, em: Emitter, idx: list[Value], window: Window, combiner: str,
                 other: float) -> Value:
    """combiner over the window's taps of x[n, c]; a tap outside the input is ``other``
    (read at the clamped position, then replaced)."""
    x = op.operand("x")
    n, c = idx[:2]
    dtype = op.result.type.dtype
    init = em.constant(combiner_identity(combiner, dtype), dtype)
    kh_size, kw_size = op["kernel"]

    def over_kh(e: Emitter, kh: Value) -> Value:
        ih, row_ok = window.tap(e, kh, 0)
        ih_in = window.clamp(e, ih, 0)

        def over_kw(e2: Emitter, kw: Value) -> Value:
            iw, col_ok = window.tap(e2, kw, 1)
            value = e2.read(x, [n, c, ih_in, window.clamp(e2, iw, 1)])
            masks = [m for m in (row_ok, col_ok) if m is not None]
            if not masks:
                return value
            return e2.arith("where", e2.fold("and", masks), value, e2.constant(other, dtype))
        return e.reduce(init, kw_size, combiner, "k1", over_kw)
    return em.reduce(init, kh_size, combiner, "k0", over_kh)


def lower_max_pool2d(op: tensor_windows.MaxPool2dOp, em: Emitter, idx: list[Value]) -> Value:
    window = _pool_window(op, em, idx)
    return _over_window(op, em, idx, window, "max", float("-inf"))  # padded taps never win


def lower_avg_pool2d(op: tensor_windows.AvgPool2dOp, em: Emitter, idx: list[Value]) -> Value:
    """The window's sum over its divisor: kh*kw where every window lies inside the
    counted bounds, else per point min(start + k, hi) - max(start, lo) per axis, with
    bounds [0, size) or, counting padding, [-pad, size + pad)."""
    dtype = op.result.type.dtype
    window = _pool_window(op, em, idx)
    total = _over_window(op, em, idx, window, "add", 0.0)
    x_sizes, out_sizes = op.operand("x").type.shape[2:], op.result.type.shape[2:]
    include = op["count_include_pad"]
    counts, constant = [], 1
    for a in range(2):
        k, s, p = op["kernel"][a], op["stride"][a], op["padding"][a]
        lo_clip = p > 0 and not include  # a window may start left of the counted bounds
        if isinstance(x_sizes[a], int) and isinstance(out_sizes[a], int):
            hi_clip = (out_sizes[a] - 1) * s - p + k > x_sizes[a] + (p if include else 0)
        else:  # 'same' windows: the right padding reached iff padded
            hi_clip = p > 0 and not include
        if not (lo_clip or hi_clip):
            constant *= k
            continue
        start = window.starts[a]
        end = em.arith("add", start, em.index(k))
        if hi_clip:
            bound = em.size(x_sizes[a])
            if include:
                bound = em.arith("add", bound, em.index(p))
            end = em.arith("minimum", end, bound)
        if lo_clip:  # (counting padding, no window starts left of -pad)
            start = em.arith("maximum", start, em.index(0))
        counts.append(em.arith("sub", end, start))
    if not counts:
        return em.arith("div", total, em.constant(constant, dtype))
    if constant != 1:
        counts.append(em.index(constant))
    return em.arith("div", total, em.arith("cast", em.fold("mul", counts), dtype=dtype))


def lower_conv2d(op: tensor.Conv2dOp, em: Emitter, idx: list[Value]) -> Value:
    """Sum over c, kh, kw of x[n, ci, ih, iw] * w[o, c, kh, kw] with ih = oh*stride - pad
    + kh*dilation (iw alike); taps in the zero padding are masked. Input channel
    ci = c, or with groups (o // (O/groups)) * (C/groups) + c: a grouped conv's input
    depends on the output channel, so the contraction analysis never takes it for a
    GEMM and it runs as this loop nest (which suits depthwise convs, C/groups = 1,
    where the channel reduction disappears)."""
    x, w = op.operand("x"), op.operand("w")
    n, o, oh, ow = idx
    groups = op.attributes.get("groups", 1)
    out_channels, per_group, kh_size, kw_size = w.type.shape
    window = Window.at(em, [oh, ow], list(x.type.shape[2:]), list(op.result.type.shape[2:]),
                       [kh_size, kw_size], op["stride"], op["padding"], op["dilation"])
    zero = em.constant(0, op.result.type.dtype)
    base = None  # the first input channel of o's group
    if groups > 1:
        outs_per_group = out_channels // groups
        group = o if outs_per_group == 1 else em.arith("floordiv", o, em.index(outs_per_group))
        base = group if per_group == 1 else em.arith("mul", group, em.index(per_group))

    def taps(e: Emitter, channel: Value, c: Value) -> Value:
        def over_kh(e2: Emitter, kh: Value) -> Value:
            ih, row_ok = window.tap(e2, kh, 0)

            def over_kw(e3: Emitter, kw: Value) -> Value:
                iw, col_ok = window.tap(e3, kw, 1)
                masks = [m for m in (row_ok, col_ok) if m is not None]
                at = [n, channel, ih, iw]
                pixel = e3.read_masked(x, e3.fold("and", masks), at, 0.0) if masks \
                    else e3.read(x, at)
                return e3.arith("mul", pixel, e3.read(w, [o, c, kh, kw]))
            return e2.reduce(zero, kw_size, "add", "k2", over_kw)
        return e.reduce(zero, kh_size, "add", "k1", over_kh)

    if groups > 1 and per_group == 1:  # depthwise: one input channel per output channel
        return taps(em, base, em.index(0))

    def over_c(e: Emitter, c: Value) -> Value:
        return taps(e, c if base is None else e.arith("add", base, c), c)
    return em.reduce(zero, per_group, "add", "k0", over_c)


def _along(idx: list[Value], axis: int, k: Value, keepdims: bool) -> list[Value]:
    """The input index of output point ``idx`` with ``k`` on ``axis`` (which the output
    keeps as a size-1 dim, or drops)."""
    return idx[:axis] + [k] + idx[axis + (1 if keepdims else 0):]


def lower_arg_reduce(op: tensor_windows.ArgReduceOp, em: Emitter, idx: list[Value]) -> Value:
    """Two reductions, no new combiner: the extreme m (max or min, nan if any), then the
    smallest k with x[k] == m or x[k] != x[k] (a nan, when m is nan: the first nan)."""
    x, axis, keepdims = op.operand("x"), op["axis"], op["keepdims"]
    dtype = x.type.dtype
    extent = x.type.shape[axis]
    best = em.reduce(em.constant(combiner_identity(op.combiner, dtype), dtype), extent,
                     op.combiner, "k0", lambda e, k: e.read(x, _along(idx, axis, k, keepdims)))
    none = em.constant(combiner_identity("min", "i32"), "i32")

    def first(e: Emitter, k: Value) -> Value:
        v = e.read(x, _along(idx, axis, k, keepdims))
        hit = e.arith("eq", v, best)
        if x.type.is_float:
            hit = e.arith("or", hit, e.arith("ne", v, v))
        return e.arith("where", hit, e.arith("cast", k, dtype="i32"), none)
    return em.reduce(none, extent, "min", "k1", first)


_KEEP = {(False, False): "le", (True, False): "lt", (False, True): "ge", (True, True): "gt"}


def lower_cumsum(op: tensor_windows.CumsumOp, em: Emitter, idx: list[Value]) -> Value:
    """out[.., i, ..] = sum over k of x[.., k, ..] where k <= i (k < i exclusive; k >= i,
    k > i reversed): a masked reduction over the whole axis, O(n^2) work for n
    elements along it, one kernel that fuses like any reduction. A scan schedule
    (O(n) work) is the next step where long axes matter."""
    x, axis = op.operand("x"), op["axis"]
    dtype = op.result.type.dtype
    zero = em.constant(0, dtype)
    keep = _KEEP[(op["exclusive"], op["reverse"])]

    def term(e: Emitter, k: Value) -> Value:
        value = e.read(x, _along(idx, axis, k, True))
        return e.arith("where", e.arith(keep, k, idx[axis]), value, zero)
    return em.reduce(zero, x.type.shape[axis], "add", "k0", term)


def lower_dim_size(op: tensor_windows.DimSizeOp, em: Emitter, idx: list[Value]) -> Value:
    return em.arith("cast", em.size(op["sym"]), dtype=op.result.type.dtype)


WINDOW_LOWERINGS = [
    ((tensor.Conv2dOp,), lower_conv2d),
    ((tensor_windows.MaxPool2dOp,), lower_max_pool2d),
    ((tensor_windows.AvgPool2dOp,), lower_avg_pool2d),
    ((tensor_windows.ArgReduceOp,), lower_arg_reduce),
    ((tensor_windows.CumsumOp,), lower_cumsum),
    ((tensor_windows.DimSizeOp,), lower_dim_size),
]
