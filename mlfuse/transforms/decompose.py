"""Rewrite composite tensor ops (softmax, layernorm, rmsnorm) into primitive ones.

Later passes (lowering, fusion) only know primitives; fusion then re-forms the
kernels a hand-written softmax or norm would use. Each composite has one small
rewrite pattern, applied by the shared walker to every op with the Composite
trait; new ops take the composite's location and name hints derived from its
result's name (``y_max``, ``y_exp``, ...).
"""
from __future__ import annotations

from mlfuse.dialects import tensor as T
from mlfuse.dialects.shapes import normalize_axes
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.rewrite import PatternRewriteWalker, Rewriter, RewritePattern
from mlfuse.ir.traits import COMPOSITE
from mlfuse.ir.types import TensorType


class Builder:
    """Builds the primitive ops replacing the composite ``anchor``, inserted before it
    with its location and names derived from its result's name."""

    def __init__(self, anchor: Operation, rewriter: Rewriter):
        self.anchor = anchor
        self.rewriter = rewriter
        self.prefix = anchor.result.name_hint or anchor.name.split(".")[1]

    def emit(self, cls, operands, attributes=None, hint: str | None = None,
             result_types=None) -> Value:
        op = cls(list(operands), result_types=result_types, attributes=attributes,
                 loc=self.anchor.loc, result_names=[f"{self.prefix}_{hint}"] if hint else None)
        return self.rewriter.insert(op).result

    def ew(self, name: str, *operands: Value, hint: str | None = None) -> Value:
        return self.emit(T.ELEMENTWISE_OPS[name], operands, hint=hint)

    def reduce(self, kind: str, x: Value, axes: list[int], hint: str) -> Value:
        return self.emit(T.REDUCE_OPS[kind], [x], {"axis": axes, "keepdims": True}, hint)

    def constant(self, value: float, dtype: str, hint: str) -> Value:
        return self.emit(T.ConstantOp, [], {"value": float(value)}, hint,
                         result_types=[TensorType(dtype, ())])


def _softmax(op: T.SoftmaxOp, rw: Builder) -> Value:
    x = op.operand("x")
    axes = normalize_axes(op["axis"], x.type.rank)
    shifted = rw.ew("sub", x, rw.reduce("max", x, axes, "max"), hint="shifted")
    e = rw.ew("exp", shifted, hint="exp")
    return rw.ew("div", e, rw.reduce("sum", e, axes, "sum"))


def _normalize(x: Value, mean_square: Value, eps: float, rw: Builder) -> Value:
    """x * rsqrt(mean_square + eps): the step layernorm and rmsnorm share."""
    var_eps = rw.ew("add", mean_square, rw.constant(eps, x.type.dtype, "eps"))
    return rw.ew("mul", x, rw.ew("rsqrt", var_eps, hint="rstd"), hint="normed")


def _layernorm(op: T.LayernormOp, rw: Builder) -> Value:
    x, gamma, beta = op.operands
    (axis,) = normalize_axes(op["axis"], x.type.rank)
    axes = list(range(axis, x.type.rank))
    centered = rw.ew("sub", x, rw.reduce("mean", x, axes, "mean"), hint="centered")
    var = rw.reduce("mean", rw.ew("mul", centered, centered), axes, "var")
    scaled = rw.ew("mul", _normalize(centered, var, op["eps"], rw), gamma)
    return rw.ew("add", scaled, beta)


def _rmsnorm(op: T.RmsnormOp, rw: Builder) -> Value:
    x, gamma = op.operands
    mean_square = rw.reduce("mean", rw.ew("mul", x, x), [x.type.rank - 1], "ms")
    return rw.ew("mul", _normalize(x, mean_square, op["eps"], rw), gamma)


class DecomposeComposite(RewritePattern):
    """Any op declaring the Composite trait, by the function in ``EXPANSIONS``."""

    traits = frozenset({COMPOSITE})

    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        expand = EXPANSIONS.get(type(op))
        if expand is None:
            return False  # lowering reports a composite it cannot take
        new = expand(op, Builder(op, rewriter))
        new.name_hint = op.result.name_hint
        rewriter.replace_op(op, [new])
        return True


EXPANSIONS = {T.SoftmaxOp: _softmax, T.LayernormOp: _layernorm, T.RmsnormOp: _rmsnorm}


class Decompose(Pass):
    name = "decompose"
    doc = "Rewrite composite tensor ops (softmax, layernorm, rmsnorm) into primitives."

    def run(self, module: ModuleOp) -> None:
        walker = PatternRewriteWalker([DecomposeComposite()])
        for func in module.funcs:
            walker.rewrite_block(func.body)
