"""Which result elements rounding decides, so that no comparison can hold them to one answer.

Every level of mlfuse computes in the program's dtype but in its own order: NumPy
sums pairwise, the loops interpreter sequentially, kernels over threads in a tree,
with fused multiply-adds and CUDA's libm. All are correct, and they differ by a few
ulps. That is harmless, with one exception: an op that jumps at zero. Nine equal
f32 values have a mean that NumPy's pairwise sum hits exactly and a running sum
misses by one ulp, so ``x - mean`` is 0 in one and ±1 ulp in the other; multiplied by
an infinite gamma that is NaN against ±inf. No tolerance can bridge that, and no order
is the right one. The tolerance rule (``mlfuse.tools.checking.compare``: NaN where and only
where the reference has NaN) holds everywhere else; this module finds the elements
where it cannot, by checking the reference computation itself, element by element:

``rounding_decided(func, args)`` runs the tensor-level function (decomposed, with
common subexpressions merged, as the lower levels compute it) beside
the tensor interpreter and carries, for every element of every value,

- ``err``: a first-order bound on how far any admissible evaluation may land from the
  reference value (0 for values every evaluation computes exactly: inputs, constants,
  exact ops on exact operands; 0 where the value is NaN or infinite);
- ``undecided``: whether the element's NaN/inf status, or its bool or integer value,
  depends on the evaluation order.

A value *may be zero* where ``0 < err`` and ``|value| <= err``. New undecided elements
come only from ops that jump at zero, at a tie or at the largest finite value:

- ``mul``: ±inf times a factor that may be zero (NaN or ±inf);
- ``div``: a divisor that may be zero; ``log``, ``sqrt``, ``rsqrt``: an argument that may be
  zero; ``pow``: a base that may be zero, or an exponent that may be zero on a base of 0
  or ±inf; matmul and conv2d: a product of ±inf and a factor that may be zero;
- comparisons: operands whose difference may be zero (a tie); ``where`` then takes
  either branch; casts to bool (may be zero) and from float to i32 (an integer within
  reach);
- any float result within ``err`` of the dtype's largest finite value (it may overflow).

An element computed from an undecided element is undecided (elementwise from any
operand, or from ``where``'s condition and chosen branch; reductions, matmul and conv
from anything they combine). Exact cancellations stay decided: ``inf * (x - x)`` is NaN
in every order, and the analysis says so (``err`` is 0). Overflow from finite operands
beyond the largest value is the overflow property's business (docs/fuzzing.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlfuse.dialects import tensor
from mlfuse.dtypes import BFLOAT16, eps, finfo, ir_dtype, is_float
from mlfuse.ir.builtin import FuncOp, ReturnOp

from mlfuse.interp import tensor_windows as windows
from mlfuse.interp.common import bind_arguments
from mlfuse.interp.indexing_rules import ROUNDING_RULES
from mlfuse.interp.loops_interp import COMPUTED_IN
from mlfuse.interp.tensor_interp import _conv2d, _evaluate

BASIC = 1.0   # ulps two correctly rounded results of one op may differ by
LIBM = 4.0    # ulps for transcendental functions (CUDA's libm: 1-2 ulp each side, and more)


@dataclass
class Shadow:
    value: np.ndarray       # the reference value, in the op's dtype
    err: np.ndarray         # float64, broadcastable to value
    undecided: np.ndarray   # bool, broadcastable to value
    source: int = 0         # the value whose elements these are (through views)...
    index: np.ndarray | None = None  # ...and which of them (flat indices)

    @property
    def mag(self) -> np.ndarray:
        """|value| in float64, non-finite entries as 0 (they carry no rounding error)."""
        v = np.abs(self.value.astype(np.float64))
        return np.where(np.isfinite(v), v, 0.0)

    @property
    def is_inf(self) -> np.ndarray:
        return np.isinf(self.value) if is_float(self.value.dtype) else np.zeros(
            self.value.shape, bool)

    @property
    def may_be_zero(self) -> np.ndarray:
        if not (is_float(self.value.dtype) or self.value.dtype.kind == "i"):
            return np.zeros(self.value.shape, bool)
        v = np.abs(self.value.astype(np.float64))
        return (self.err > 0) & (v <= self.err)


def rounding_decided(func: FuncOp, args: list) -> list[np.ndarray]:
    """For each result of tensor-level ``func`` on ``args``: a bool array, True where the
    element's NaN/inf status (or bool/int value) depends on the evaluation order."""
    func = _as_lowered(func)
    values, dims = bind_arguments(func, args)
    env: dict[int, Shadow] = {}
    for p, v in zip(func.args, values):
        env[id(p)] = Shadow(v, np.zeros(v.shape), np.zeros(v.shape, bool), id(p),
                            np.arange(v.size).reshape(v.shape))
    for op in func.body.ops:
        if isinstance(op, ReturnOp):
            return [np.broadcast_to(env[id(v)].undecided, env[id(v)].value.shape).copy()
                    for v in op.operands]
        ins = [env[id(v)] for v in op.operands]
        with np.errstate(all="ignore"):
            out = _evaluate(op, [s.value for s in ins], dims)
            err, undecided = _propagate(op, ins, out, dims)
            shadow = _finish(out, err, undecided)
        if op.name in _VIEWS:  # the same elements, moved
            shadow.source, shadow.index = ins[0].source, _evaluate(op, [ins[0].index], dims)
        else:
            shadow.source, shadow.index = id(op.result), np.arange(out.size).reshape(out.shape)
        env[id(op.result)] = shadow
    raise ValueError(f"function '{func.sym_name}' does not end in return")


def _as_lowered(func: FuncOp) -> FuncOp:
    """A copy of ``func`` as every lower level computes it: composite ops (softmax,
    layernorm, rmsnorm) spelled out, and common subexpressions computed once (so
    ``m - m`` is one value minus itself, exactly 0 in every order)."""
    from mlfuse.dialects import parse_ir
    from mlfuse.ir.pass_manager import PassManager
    from mlfuse.transforms import get_pass
    from mlfuse.ir.printer import print_ir
    module = parse_ir(print_ir(func))
    PassManager([get_pass("decompose"), get_pass("cse")]).run(module)
    return module.funcs[0]


def _finish(out: np.ndarray, err, undecided) -> Shadow:
    """Zero the error of non-finite values; mark values that may overflow."""
    err = np.broadcast_to(np.nan_to_num(np.asarray(err, np.float64), nan=np.inf), out.shape)
    undecided = np.broadcast_to(undecided, out.shape)
    if is_float(out.dtype):
        finite = np.isfinite(out)
        err = np.where(finite, err, 0.0)
        biggest = float(finfo(out.dtype).max)
        undecided = undecided | (finite & (np.abs(out.astype(np.float64)) + err >= biggest))
    else:
        err = np.zeros(out.shape)
    return Shadow(out, err, undecided)


def _rounding(out: np.ndarray, ulps: float = BASIC) -> np.ndarray:
    """How far two correct roundings of ``out`` may differ."""
    if not is_float(out.dtype):
        return np.zeros(out.shape)
    r = np.abs(out.astype(np.float64))
    return ulps * eps(out.dtype) * np.where(np.isfinite(r), r, 0.0)


def _any(*masks) -> np.ndarray:
    out = masks[0]
    for m in masks[1:]:
        out = out | m
    return out


def _propagate(op, ins: list[Shadow], out: np.ndarray, dims: dict):
    """(err, undecided) of ``op``'s result ``out`` from its operands' shadows."""
    if isinstance(op, tensor.ElementwiseOp):
        err, undecided = _ELEMENTWISE[op.spec.name](ins, out)
        if op.spec.name in _SAME_ELEMENT:
            a, b = ins
            same = (a.source == b.source) & (np.broadcast_to(a.index, out.shape)
                                             == np.broadcast_to(b.index, out.shape))
            err, undecided = _SAME_ELEMENT[op.spec.name](a, b, err, undecided, same)
        return err, undecided
    rule = _RULES.get(op.name)
    if rule is None:
        raise ValueError(f"rounding_decided does not know op '{op.name}'")
    return rule(op, ins, out, dims)


# -- elementwise ops ----------------------------------------------------------------------
def _spread(grad: np.ndarray, x: Shadow) -> np.ndarray:
    """grad * x.err, 0 where x is exact (grad may be infinite there, e.g. sqrt at 0)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(x.err > 0, grad * x.err, 0.0)


def _finite_abs(out: np.ndarray) -> np.ndarray:
    r = np.abs(out.astype(np.float64))
    return np.where(np.isfinite(r), r, 0.0)


def _smooth(slope: float, cancels: bool = False):
    """tanh, sigmoid, sin, cos, erf, gelu, silu: |derivative| <= ``slope``, no jump.
    ``cancels``: gelu and silu round 1 + erf(x) or 1 + exp(-x) near 0 for large
    negative x, an error of about eps * |x| that the result's size does not show."""
    def rule(ins, out):
        (x,) = ins
        err = slope * x.err + _rounding(out, LIBM)
        if cancels:
            err = err + LIBM * _eps(out) * x.mag
        return _exact_at_zero(x, err), x.undecided
    return rule


def _exact_at_zero(x: Shadow, err) -> np.ndarray:
    """exp, cos, sigmoid, ... of an exact 0 are 1, 1, 0.5, 0: exact in every libm."""
    return np.where((x.err == 0) & (x.value == 0), 0.0, err)


def _singular(grad, correctly_rounded: bool = False):
    """log, sqrt, rsqrt: ``grad(lower bound of |x|)`` bounds the derivative; they jump
    (to -inf, or from NaN to 0) where the operand may be zero. sqrt and rsqrt
    (1 / sqrt) are correctly rounded: exact operands give every evaluation one result."""
    def rule(ins, out):
        (x,) = ins
        with np.errstate(divide="ignore"):
            g = grad(np.maximum(x.mag - x.err, 0.0))
        rounding = _inexact_rounding(ins, out) if correctly_rounded else _rounding(out, LIBM)
        return _spread(g, x) + rounding, x.undecided | x.may_be_zero
    return rule


def _exp(ins, out):
    (x,) = ins
    return _exact_at_zero(x, _spread(_finite_abs(out), x) + _rounding(out, LIBM)), x.undecided


def _exact_select(ins, out):
    """neg, abs, relu, maximum, minimum: the result is an operand (or 0), no rounding."""
    return np.maximum.reduce([np.broadcast_to(s.err, out.shape) for s in ins]), \
        _any(*(s.undecided for s in ins))


def _inexact_rounding(ins, out) -> np.ndarray:
    """The rounding of a correctly rounded op (+ - / sqrt): every evaluation rounds
    exact operands to the same result, so only inexact operands add one. Not so for a
    dtype computed in a wider one (bf16 in f32, ``loops_interp.COMPUTED_IN``): a kernel
    holds the result unrounded until a store rounds it, so one level compares 3 - 2**-7
    where another compares its bf16 rounding, 3."""
    if ir_dtype(out.dtype) in COMPUTED_IN:
        return _rounding(out)
    inexact = _any(*((s.err > 0) for s in ins))
    return np.where(inexact, _rounding(out), 0.0)


def _add(ins, out):
    a, b = ins
    return a.err + b.err + _inexact_rounding(ins, out), a.undecided | b.undecided


def _mul(ins, out):
    """A product may also reach an add unrounded (a fused multiply-add): its own rounding
    error counts even on exact operands (0 where the product is exact)."""
    a, b = ins
    err = a.mag * b.err + b.mag * a.err + a.err * b.err + _product_error(a.value, b.value, out)
    new = (a.is_inf & b.may_be_zero) | (b.is_inf & a.may_be_zero)
    return err, a.undecided | b.undecided | new


def _product_error(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """|a * b - out| exactly: for f16, bf16 and f32 the float64 product is exact; for
    f64, Dekker's split (each half has at most 26 significant bits)."""
    if not is_float(out.dtype):
        return np.zeros(out.shape)
    a, b, r = (np.broadcast_to(v, out.shape).astype(np.float64) for v in (a, b, out))
    with np.errstate(all="ignore"):
        if out.dtype != np.float64:
            err = np.abs(a * b - r)
        else:
            def split(x):
                c = 134217729.0 * x
                hi = c - (c - x)
                return hi, x - hi
            (ah, al), (bh, bl) = split(a), split(b)
            err = np.abs(((ah * bh - r) + ah * bl + al * bh) + al * bl)
    # the split overflows beyond 2**996: fall back to the rounding bound there
    return np.where(np.isfinite(err), err, _rounding(out)) * np.isfinite(r)


def _div(ins, out):
    a, b = ins
    room = np.maximum(b.mag - b.err, 0.0)  # the divisor's smallest possible size
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(room > 0, (a.err + _finite_abs(out) * b.err) / room, np.inf)
    err = np.where(b.is_inf | (a.err + b.err == 0), 0.0, err)  # x / inf: 0 or NaN always
    return err + _inexact_rounding(ins, out), a.undecided | b.undecided | b.may_be_zero


def _pow(ins, out):
    a, b = ins
    va = a.value.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        grad_a = np.where(a.mag > 0, b.mag / a.mag, 0.0)
        grad_b = np.abs(np.log(np.where(a.mag > 0, a.mag, 1.0)))
    err = _finite_abs(out) * (_spread(grad_a, a) + _spread(grad_b, b)) + _rounding(out, LIBM)
    vb = b.value.astype(np.float64)
    with np.errstate(invalid="ignore"):  # a negative base: an integer exponent, or NaN
        integer_in_reach = (b.err > 0) & (np.floor(vb + b.err) >= np.ceil(vb - b.err))
    new = (a.may_be_zero | (b.may_be_zero & (np.isinf(va) | (va == 0)))
           | ((va < 0) & integer_in_reach))
    return err, a.undecided | b.undecided | new


def _compare(ins, out):
    a, b = ins
    if a.value.dtype.kind == "b":
        return 0.0, a.undecided | b.undecided
    va, vb = a.value.astype(np.float64), b.value.astype(np.float64)
    spread = a.err + b.err
    with np.errstate(invalid="ignore"):
        tie = (spread > 0) & np.isfinite(va) & np.isfinite(vb) & (np.abs(va - vb) <= spread)
    return 0.0, a.undecided | b.undecided | tie


def _where(ins, out):
    c, x, y = ins
    cond = np.broadcast_to(c.value, out.shape)
    err = np.where(cond, np.broadcast_to(x.err, out.shape), np.broadcast_to(y.err, out.shape))
    chosen = np.where(cond, np.broadcast_to(x.undecided, out.shape),
                      np.broadcast_to(y.undecided, out.shape))
    return err, c.undecided | chosen


def _whole(offset: float):
    """floor, ceil (offset 0) and round (offset 0.5): exact, but the result jumps by 1
    where the operand's error reaches a whole number (a half for round)."""
    def rule(ins, out):
        (x,) = ins
        v = x.value.astype(np.float64) + offset
        with np.errstate(invalid="ignore"):
            jumps = (x.err > 0) & np.isfinite(v) & (np.floor(v - x.err) != np.floor(v + x.err))
        return 0.0, x.undecided | jumps
    return rule


def _log1p(ins, out):
    """log(1 + x): the derivative 1 / (1 + x); a jump to -inf where 1 + x may be zero."""
    (x,) = ins
    room = np.abs(1.0 + x.value.astype(np.float64)) - x.err
    with np.errstate(divide="ignore", invalid="ignore"):
        err = _spread(1.0 / np.maximum(room, 0.0), x) + _rounding(out, LIBM)
    return _exact_at_zero(x, err), x.undecided | ((x.err > 0) & (room <= 0))


def _expm1(ins, out):
    (x,) = ins  # the derivative exp(x) = out + 1
    err = _spread(_finite_abs(out) + 1.0, x) + _rounding(out, LIBM)
    return _exact_at_zero(x, err), x.undecided


def _softplus(ins, out):
    """Slope below 1; the switch to x itself at 20 is a jump of about 2e-9 (an f64 result
    may land on either side)."""
    (x,) = ins
    v = x.value.astype(np.float64)
    switch = (x.err > 0) & (np.abs(v - 20.0) <= x.err)
    err = x.err + _rounding(out, LIBM) + _eps(out) * 4.0 * np.where(np.isfinite(v), np.abs(v), 0)
    return err, x.undecided | (switch & (out.dtype == np.float64))


def _hard(slope: float):
    """hardswish (slope up to 1.5) and hardsigmoid (1/6): piecewise polynomials of x + 3,
    whose rounding is that of x + 3 scaled by the slope, plus the result's own."""
    def rule(ins, out):
        (x,) = ins
        near = np.abs(x.value.astype(np.float64)) + 3.0
        err = slope * (x.err + _eps(out) * np.where(np.isfinite(near), near, 0.0))
        return err + _rounding(out, 2 * BASIC), x.undecided
    return rule


def _logical(ins, out):
    return 0.0, _any(*(s.undecided for s in ins))


# x - x, x / x and x compared with itself (the same element of one value, also through
# reshape, transpose or broadcast_to): no evaluation order can make the two sides differ,
# so x - x is 0 (or NaN) and x / x is 1 (or NaN: still undecided where x may be zero)
def _same_is_exact(a, b, err, undecided, same):
    return np.where(same, 0.0, err), undecided


def _same_is_no_tie(a, b, err, undecided, same):
    return err, np.where(same, a.undecided | b.undecided, undecided)


_SAME_ELEMENT = {"sub": _same_is_exact, "div": _same_is_exact,
                 **{name: _same_is_no_tie for name in ("lt", "le", "gt", "ge", "eq", "ne")}}

_ELEMENTWISE = {
    **{name: _exact_select for name in ("neg", "abs", "relu", "maximum", "minimum")},
    "add": _add, "sub": _add, "mul": _mul, "div": _div, "pow": _pow,
    **{name: _compare for name in ("lt", "le", "gt", "ge", "eq", "ne")},
    "where": _where,
    "exp": _exp,
    "log": _singular(lambda low: 1 / low),
    "sqrt": _singular(lambda low: 0.5 / np.sqrt(low), correctly_rounded=True),
    "rsqrt": _singular(lambda low: 0.5 / low ** 1.5, correctly_rounded=True),
    "tanh": _smooth(1.0), "sigmoid": _smooth(0.25), "sin": _smooth(1.0), "cos": _smooth(1.0),
    "erf": _smooth(1.13), "gelu": _smooth(1.13, cancels=True),
    "silu": _smooth(1.1, cancels=True),
    "floor": _whole(0.0), "ceil": _whole(0.0), "round": _whole(0.5),
    "log1p": _log1p, "expm1": _expm1, "softplus": _softplus,
    "hardswish": _hard(1.5), "hardsigmoid": _hard(1.0 / 6.0),
    **{name: _logical for name in ("logical_and", "logical_or", "logical_not")},
}


# -- other ops -------------------------------------------------------------------------
def _constant(op, ins, out, dims):
    return 0.0, np.zeros(out.shape, bool)


def _cast(op, ins, out, dims):
    (x,) = ins
    if out.dtype.kind == "b":
        return 0.0, x.undecided | x.may_be_zero
    if out.dtype.kind == "i" and is_float(x.value.dtype):
        v = x.value.astype(np.float64)
        with np.errstate(invalid="ignore"):
            straddles = np.trunc(v - x.err) != np.trunc(v + x.err)
        return 0.0, x.undecided | (np.isfinite(v) & straddles)
    return x.err + _inexact_rounding(ins, out), x.undecided  # one correct rounding


def _reduce(op, ins, out, dims):
    (x,) = ins
    axes, keep = tuple(op["axis"]), op["keepdims"]
    shape = x.value.shape
    err = np.broadcast_to(x.err, shape)
    undecided = np.broadcast_to(x.undecided, shape).any(axis=axes, keepdims=keep)
    if op.name in ("tensor.max", "tensor.min"):
        return err.max(axis=axes, keepdims=keep, initial=0.0), undecided
    n = int(np.prod([shape[a] for a in axes]))
    magnitude = np.broadcast_to(x.mag, shape).sum(axis=axes, keepdims=keep)
    total = err.sum(axis=axes, keepdims=keep)
    # any order's rounding: (n - 1) eps sum |x|, unless every partial sum is exact
    exact = (total == 0) & _sums_exactly(x.value, axes, keep)
    # a 16-bit float's mean (and a bf16 sum) adds up in f32 at every level (NumPy's
    # mean of f16, the interpreters' widened bf16, the lowering's cast), then rounds once;
    # an f16 sum may add up in f16 (NumPy's, along a non-contiguous axis)
    wide = out.dtype == BFLOAT16 or op.name == "tensor.mean" and out.dtype == np.float16
    step = eps(np.dtype(np.float32)) if wide else _eps(out)
    total = total + np.where(exact, 0.0, max(n - 1, 0) * step * magnitude)
    if op.name == "tensor.mean":  # sum / n, one correctly rounded division
        total = total / max(n, 1) + np.where(total > 0, _rounding(out), 0.0)
    elif wide:  # the f32 sum rounded to the result's dtype
        total = total + np.where(total > 0, _rounding(out), 0.0)
    return total, undecided


def _sums_exactly(x: np.ndarray, axes, keep) -> np.ndarray:
    """Where every partial sum over ``axes``, in any order, is exact: all terms are
    multiples of one power of two q and their magnitudes add up to at most 2**p q
    (p the dtype's significand bits), e.g. small integers."""
    if not is_float(x.dtype):
        return np.ones(np.sum(x, axis=axes, keepdims=keep).shape, bool)
    p = finfo(x.dtype).nmant + 1
    v = np.abs(x.astype(np.float64))
    v = np.where(np.isfinite(v), v, 0.0)
    m, e = np.frexp(v)
    digits = (m * 2.0 ** p).astype(np.int64)   # the significand as an integer
    lowest = (digits & -digits).astype(np.float64) * np.exp2(e - p)  # its lowest set bit
    quantum = np.where(v > 0, lowest, np.inf).min(axis=axes, keepdims=keep)
    return v.sum(axis=axes, keepdims=keep) <= np.exp2(p) * quantum


def _eps(out: np.ndarray) -> float:
    return eps(out.dtype)


_VIEWS = ("tensor.reshape", "tensor.transpose", "tensor.broadcast_to", "tensor.slice")


def _shape_op(op, ins, out, dims):
    """reshape, transpose, broadcast_to, slice: move the shadows as the values move."""
    (x,) = ins
    full = [np.broadcast_to(a, x.value.shape) for a in (x.err, x.undecided)]
    return tuple(np.asarray(_evaluate(op, [a], dims)) for a in full)


def _contraction(combine):
    """matmul and conv2d: ``combine(a, b)`` contracts two float64 arrays as the op does."""
    def rule(op, ins, out, dims):
        a, b = ins
        f = [np.broadcast_to(s, t.value.shape).astype(np.float64)
             for t in (a, b) for s in (t.mag, t.err, t.is_inf, t.may_be_zero, t.undecided)]
        a_mag, a_err, a_inf, a_zero, a_und, b_mag, b_err, b_inf, b_zero, b_und = f
        terms = _terms(op, a.value.shape, b.value.shape)
        err = (combine(op, a_mag, b_err, dims) + combine(op, a_err, b_mag, dims)
               + combine(op, a_err, b_err, dims)
               + terms * _eps(out) * combine(op, a_mag, b_mag, dims) + _rounding(out))
        new = combine(op, a_inf, b_zero, dims) + combine(op, a_zero, b_inf, dims)
        # an undecided element reaches every output it is combined into, whatever it meets
        reach = combine(op, a_und, np.ones_like(b_und), dims) + _weights_reach(op, b_und, out)
        if op.name == "tensor.matmul":
            reach = reach + combine(op, np.ones_like(a_und), b_und, dims)
        return err, (new > 0) | (reach > 0)
    return rule


def _terms(op, a_shape, b_shape) -> int:
    if op.name == "tensor.matmul":
        return a_shape[-1]
    return int(np.prod(b_shape[1:]))


def _weights_reach(op, w_undecided: np.ndarray, out: np.ndarray) -> np.ndarray:
    """conv2d: every output of channel o combines every weight of o (padding taps too)."""
    if op.name != "tensor.conv2d":
        return np.zeros(out.shape)
    return w_undecided.reshape(w_undecided.shape[0], -1).any(axis=1)[None, :, None, None] * 1.0


def _matmul(op, a, b, dims):
    return np.matmul(a, b)


# -- windowed ops (dialects/tensor_windows.py) ----------------------------------------
def _full(s: Shadow):
    shape = s.value.shape
    return np.broadcast_to(s.err, shape).astype(np.float64), np.broadcast_to(s.undecided, shape)


def _pool(op, ins, out, dims):
    """max: the window's largest error; avg: a mean over the window (its rounding as a
    sum's, then one division)."""
    (x,) = ins
    err, undecided = _full(x)
    undecided = windows.pool_windows(op, undecided, False).any(axis=(-2, -1))
    if op.name == "tensor.max_pool2d":
        return windows.pool_windows(op, err, 0.0).max(axis=(-2, -1)), undecided
    taps = int(np.prod(op["kernel"]))
    divisor = windows.avg_divisor(op, *x.value.shape[2:], np.float64)
    total = windows.pool_windows(op, err, 0.0).sum(axis=(-2, -1))
    magnitude = windows.pool_windows(op, x.mag, 0.0).sum(axis=(-2, -1))
    total = total + max(taps - 1, 0) * _eps(out) * magnitude
    return total / divisor + _rounding(out), undecided


def _arg_reduce(op, ins, out, dims):
    """The index is decided unless another element may tie the extreme (their values
    within their errors) or the extreme's nan status is undecided."""
    (x,) = ins
    err, undecided = _full(x)
    axis, keep = op["axis"], op["keepdims"]
    undecided = undecided.any(axis=axis, keepdims=keep)
    if x.value.dtype.kind != "f":
        return 0.0, undecided
    v = x.value.astype(np.float64)
    best = np.expand_dims(out, axis) if not keep else out
    m, m_err = (np.take_along_axis(a, best.astype(np.int64), axis) for a in (v, err))
    with np.errstate(invalid="ignore"):
        near = (np.abs(v - m) <= err + m_err) & (err + m_err > 0)
    ties = (near.sum(axis=axis, keepdims=keep) > 1) & ~np.isnan(v).any(axis=axis, keepdims=keep)
    return 0.0, undecided | ties


def _cumsum(op, ins, out, dims):
    """A sum of up to n terms for each element (n the axis length)."""
    (x,) = ins
    err, undecided = _full(x)
    n = x.value.shape[op["axis"]]
    carried = [windows.cumsum(op, a, dims=dims) for a in (err, x.mag, undecided.astype(np.int64))]
    return carried[0] + max(n - 1, 0) * _eps(out) * carried[1], carried[2] > 0


_RULES = {
    "tensor.constant": _constant,
    "tensor.cast": _cast,
    **{f"tensor.{name}": _reduce for name in ("sum", "max", "min", "mean")},
    **{name: _shape_op for name in _VIEWS},
    "tensor.matmul": _contraction(_matmul),
    "tensor.conv2d": _contraction(lambda op, x, w, dims: _conv2d(op, x, w, dims=dims)),
    **ROUNDING_RULES,  # concat, pad, gather, iota
    "tensor.max_pool2d": _pool,
    "tensor.avg_pool2d": _pool,
    "tensor.argmax": _arg_reduce,
    "tensor.argmin": _arg_reduce,
    "tensor.cumsum": _cumsum,
    "tensor.dim_size": _constant,
}
