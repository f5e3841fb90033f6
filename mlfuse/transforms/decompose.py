"""Rewrite composite tensor ops (softmax, layernorm, rmsnorm) into primitive ones.

Later passes (lowering, fusion) only know primitives; fusion then re-forms the
kernels a hand-written softmax or norm would use. Each composite has one small
pattern function in ``PATTERNS``; new ops take the composite's location and
name hints derived from its result's name (``y_max``, ``y_exp``, ...).
"""
from __future__ import annotations

from mlfuse.dialects import tensor as T
from mlfuse.dialects.shapes import normalize_axes
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.types import TensorType


class Rewriter:
    """Inserts new ops before the composite ``anchor``, with its location and name."""

    def __init__(self, anchor: Operation):
        self.anchor = anchor
        self.prefix = anchor.result.name_hint or anchor.name.split(".")[1]

    def emit(self, cls, operands, attributes=None, hint: str | None = None,
             result_types=None) -> Value:
        op = cls(list(operands), result_types=result_types, attributes=attributes,
                 loc=self.anchor.loc, result_names=[f"{self.prefix}_{hint}"] if hint else None)
        self.anchor.parent.insert_before(self.anchor, op)
        return op.result

    def ew(self, name: str, *operands: Value, hint: str | None = None) -> Value:
        return self.emit(T.ELEMENTWISE_OPS[name], operands, hint=hint)

    def reduce(self, kind: str, x: Value, axes: list[int], hint: str) -> Value:
        return self.emit(T.REDUCE_OPS[kind], [x], {"axis": axes, "keepdims": True}, hint)

    def constant(self, value: float, dtype: str, hint: str) -> Value:
        return self.emit(T.ConstantOp, [], {"value": float(value)}, hint,
                         result_types=[TensorType(dtype, ())])


def _softmax(op: T.SoftmaxOp, rw: Rewriter) -> Value:
    x = op.operand("x")
    axes = normalize_axes(op["axis"], x.type.rank)
    shifted = rw.ew("sub", x, rw.reduce("max", x, axes, "max"), hint="shifted")
    e = rw.ew("exp", shifted, hint="exp")
    return rw.ew("div", e, rw.reduce("sum", e, axes, "sum"))


def _normalize(x: Value, mean_square: Value, eps: float, rw: Rewriter) -> Value:
    """x * rsqrt(mean_square + eps): the step layernorm and rmsnorm share."""
    var_eps = rw.ew("add", mean_square, rw.constant(eps, x.type.dtype, "eps"))
    return rw.ew("mul", x, rw.ew("rsqrt", var_eps, hint="rstd"), hint="normed")


def _layernorm(op: T.LayernormOp, rw: Rewriter) -> Value:
    x, gamma, beta = op.operands
    (axis,) = normalize_axes(op["axis"], x.type.rank)
    axes = list(range(axis, x.type.rank))
    centered = rw.ew("sub", x, rw.reduce("mean", x, axes, "mean"), hint="centered")
    var = rw.reduce("mean", rw.ew("mul", centered, centered), axes, "var")
    scaled = rw.ew("mul", _normalize(centered, var, op["eps"], rw), gamma)
    return rw.ew("add", scaled, beta)


def _rmsnorm(op: T.RmsnormOp, rw: Rewriter) -> Value:
    x, gamma = op.operands
    mean_square = rw.reduce("mean", rw.ew("mul", x, x), [x.type.rank - 1], "ms")
    return rw.ew("mul", _normalize(x, mean_square, op["eps"], rw), gamma)


PATTERNS = {T.SoftmaxOp: _softmax, T.LayernormOp: _layernorm, T.RmsnormOp: _rmsnorm}


class Decompose(Pass):
    name = "decompose"
    doc = "Rewrite composite tensor ops (softmax, layernorm, rmsnorm) into primitives."

    def run(self, module: ModuleOp) -> None:
        for func in module.funcs:
            for op in list(func.body.ops):
                pattern = PATTERNS.get(type(op))
                if pattern is None:
                    continue
                new = pattern(op, Rewriter(op))
                new.name_hint = op.result.name_hint
                op.replace_with([new])
