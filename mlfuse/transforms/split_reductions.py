"""``split-reductions``: a reduction whose axes a kept axis separates, as two reductions.

Group norm over channels-last reads ``rows = reshape(x, [N, H*W, G, C/G])`` and reduces
axes [1, 3]: the group axis G, kept, lies between them. One loop nest over both walks
each (n, g) in segments of C/G values (40 bytes at C = 320, G = 32), C apart; a block
per (n, g) reads 7-14% of copy bandwidth on an H100 (docs/perf-notes.md, twenty-seventh
session). Reduced first over the outer axes, the nest is a column reduction whose kept
axes [G, C/G] are contiguous (threads own neighbouring channels: coalesced, and the
column schedules of fusion/schedules.py), and its result, [N, 1, G, C/G], is small; the
inner axes are then reduced from that. So ``r(x, A)`` becomes ``r(r(x, A_o), A_i)`` with
A_o the reduced axes before the last kept axis and A_i those after it:

- sum, max, min: associativity; mean: every A_o column counts the same number of
  values, so the mean of the columns' means is the mean.
- the variance ``mean((x - m)^2, A)`` with ``m = mean(x, A)``: the parallel-axis
  identity,

      mean((x - m)^2, A) = mean(mean((x - mc)^2, A_o) + (mc - m)^2, A_i),  mc = mean(x, A_o)

  so the column stage computes each column's mean and variance in one pass over x
  (fusion/moments.py's shifted sums) rather than a second pass over x for the group's
  deviations. 16-bit operands are split in f32 (the columns' statistics are small). The
  identity holds about any centre, but for infinite values only about the mean (an
  infinite x makes every term nan there, as the whole's mean makes it): squares of
  deviations from anything else split as means do.

Which reductions: A_o's extent is at least the target's ``split_reduction_min_ratio``
(16) times A_i's, and A_i's values, one run of the buffer, take fewer bytes than
``split_reduction_max_segment`` (64: two sectors). Group norm over NHWC has ratios of
51-784 (H*W over C/G) and runs of 16-40 bytes, and split it ran 3x faster on an H100
(0.448 -> 0.150 ms at [16, 64, 64, 320]). Batch norm over [0, 2, 3] of NCHW (A_o = [N],
A_i = [H, W]) has ratios of 1.2-10 at 7x7 to 9x9 spatial sizes, runs of 98-196 bytes, and
split it ran 1.3-5.7x slower than as one reduction, which the fusion planner holds or
streams a channel at a time (docs/perf-notes.md, twenty-eighth session). Runs of two
sectors or more are read whole by one reduction, which then needs no second stage nor a
kernel for what follows: a batch norm over [N, C, L] of a sequence, or over NCHW at 4x4
with a large batch, is one kernel where split it was four. A run of one value (NCHW at
1x1) splits: as one reduction over [0, 2, 3] its innermost reduced axes look like a
row's to the planner's layouts, which know no sizes, and a row kernel a channel would
step C apart. Sizes are those in ``dims``; a symbol not bound there takes the target's
default size, as the fusion planner does (C/G against H*W: split), and where a run's
length is not bound, the ratio alone decides.
"""
from __future__ import annotations

import math

from mlfuse.dialects import tensor as T
from mlfuse.hardware import get_target
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.rewrite import PatternRewriteWalker, Rewriter, RewritePattern
from mlfuse.ir.types import HALF_FLOAT_DTYPES, itemsize, symbols_of
from mlfuse.transforms.decompose import Builder
from mlfuse.transforms.fusion.cost import resolve

_SPLITTABLE = (T.SumOp, T.MaxOp, T.MinOp, T.MeanOp)


def split_axes(op: Operation) -> tuple[list[int], list[int]] | None:
    """(A_o, A_i) of a reduction whose axes a kept axis separates, else None."""
    axes = list(op["axis"])
    rank = op.operand("x").type.rank
    kept = [a for a in range(rank) if a not in axes]
    if not kept:
        return None
    outer = [a for a in axes if a < kept[-1]]
    inner = [a for a in axes if a > kept[-1]]
    return (outer, inner) if outer and inner else None


def _mean_of(c: Value, x: Value, axes: list[int]) -> bool:
    """Whether ``c`` is the mean of ``x`` over ``axes`` (kept), whole or already split
    into the mean of its columns' means."""
    op = getattr(c, "op", None)
    if not isinstance(op, T.MeanOp) or not op["keepdims"]:
        return False
    if op.operand("x") is x:
        return list(op["axis"]) == list(axes)
    inner = getattr(op.operand("x"), "op", None)
    return isinstance(inner, T.MeanOp) and inner["keepdims"] and inner.operand("x") is x and \
        sorted(list(inner["axis"]) + list(op["axis"])) == list(axes)


def _variance(op: Operation) -> tuple[Value, Value] | None:
    """(x, m) where ``op`` is a mean of ``(x - m) * (x - m)`` and m the mean of x over the
    same axes, else None. (About any other centre the identity holds for finite values
    only: an infinite x makes (x - c)^2 inf but its column's deviations nan.)"""
    if not isinstance(op, T.MeanOp):
        return None
    square = getattr(op.operand("x"), "op", None)  # None: a function's argument
    if not isinstance(square, T.ELEMENTWISE_OPS["mul"]) or square.operands[0] is not square.operands[1]:
        return None
    diff = getattr(square.operands[0], "op", None)
    if not isinstance(diff, T.ELEMENTWISE_OPS["sub"]):
        return None
    x, m = diff.operands
    return (x, m) if _mean_of(m, x, list(op["axis"])) else None


class SplitInterleavedReduction(RewritePattern):
    """A sum, mean, max or min over axes that a kept axis separates, much longer outside."""

    op_types = _SPLITTABLE

    def __init__(self, dims: dict, target):
        self.dims, self.target = dims, target
        self.remarks: list[str] = []
        self.func = ""  # the function being rewritten (remarks name it)

    def _worth_it(self, op: Operation, outer: list[int], inner: list[int]) -> bool:
        shape = op.operand("x").type.shape
        inner_extent = math.prod(resolve(shape[a], self.dims, self.target) for a in inner)
        outer_extent = math.prod(resolve(shape[a], self.dims, self.target) for a in outer)
        if outer_extent < self.target.split_reduction_min_ratio * inner_extent:
            return False
        if not set(symbols_of([shape[a] for a in inner])) <= set(self.dims):
            return True  # the run's length is known only per call (see the module doc)
        segment = inner_extent * itemsize(op.operand("x").type.dtype)  # one run in memory
        return segment < self.target.split_reduction_max_segment

    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        parts = split_axes(op)
        if parts is None or not self._worth_it(op, *parts):
            return False
        outer, inner = parts
        # keepdims=false drops A_o's axes too, extent 1 after the first stage
        second = inner if op["keepdims"] else list(op["axis"])
        rw = Builder(op, rewriter)
        variance = _variance(op)
        if variance is not None:
            new = self._split_variance(op, rw, *variance, outer, second)
            how = "the columns' variances and means (parallel-axis identity)"
        else:
            first = rw.emit(type(op), [op.operand("x")], {"axis": outer, "keepdims": True}, "cols")
            new = rw.emit(type(op), [first], {"axis": second, "keepdims": op["keepdims"]})
            how = f"the {op.name.split('.')[1]} of the columns' results"
        new.name_hint = op.result.name_hint
        rewriter.replace_op(op, [new])
        self.remarks.append(f"@{self.func}: {rw.prefix}: {op.name} over {list(op['axis'])} "
                            f"as over {outer} (columns, coalesced) then {inner}: {how}")
        return True

    @staticmethod
    def _split_variance(op, rw: Builder, x: Value, m: Value, outer, second) -> Value:
        dtype = op.result.type.dtype
        wide = dtype in HALF_FLOAT_DTYPES  # the columns' statistics in f32

        def f32(v: Value) -> Value:
            return rw.emit(T.CastOp, [v], {"dtype": "f32"}, f"{v.name_hint or 'v'}_f32") \
                if wide else v

        xw, mw = f32(x), f32(m)
        mc = rw.emit(T.MeanOp, [xw], {"axis": outer, "keepdims": True}, "colmean")
        dc = rw.ew("sub", xw, mc, hint="coldev")
        vc = rw.emit(T.MeanOp, [rw.ew("mul", dc, dc)], {"axis": outer, "keepdims": True}, "colvar")
        shift = rw.ew("sub", mc, mw, hint="shift")
        per_column = rw.ew("add", vc, rw.ew("mul", shift, shift), hint="cols")
        new = rw.emit(T.MeanOp, [per_column], {"axis": second, "keepdims": op["keepdims"]},
                      "wide" if wide else None)
        return rw.emit(T.CastOp, [new], {"dtype": dtype}) if wide else new


class SplitReductions(Pass):
    name = "split-reductions"
    doc = ("A reduction whose axes a kept axis separates (group norm over channels-last), "
           "as a column reduction then one over the shorter inner axes.")

    def __init__(self, dims: dict | None = None, target: str | None = None):
        self.dims = dims or {}
        self.target = get_target(target)
        self._remarks: list[str] = []

    def run(self, module: ModuleOp) -> None:
        pattern = SplitInterleavedReduction(self.dims, self.target)
        walker = PatternRewriteWalker([pattern])
        for func in module.funcs:
            pattern.func = func.sym_name
            walker.rewrite_block(func.body)
        self._remarks = pattern.remarks

    def remarks(self) -> list[str]:
        return list(self._remarks)


__all__ = ["SplitReductions", "split_axes"]
