"""The table of elementwise operations: one entry per op, shared by the tensor
dialect (on tensors, with broadcasting) and the arith dialect (on scalars).

Each entry gives the arity, which dtypes it accepts, whether it yields bool, and
its NumPy semantics: the oracle every interpreter and every test compares with.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

_erf_objects = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    """math.erf elementwise, as an array of x's dtype (frompyfunc alone gives
    objects, and a bare Python float for 0-d input, which has no astype)."""
    x = np.asarray(x)
    return np.asarray(_erf_objects(x), dtype=object).astype(x.dtype)


def _errstate(fn):
    def wrapped(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return wrapped


def _gelu(x):
    dt = x.dtype
    half, one = dt.type(0.5), dt.type(1.0)
    return half * x * (one + _erf(x / dt.type(math.sqrt(2.0))).astype(dt))


def _sigmoid(x):
    one = x.dtype.type(1.0)
    return one / (one + np.exp(-x))


def _relu(x):
    return np.maximum(x, x.dtype.type(0))


def _opmath(fn):
    """``fn`` computed in f32 for f16 operands and rounded back once, as torch (and
    mlfuse's kernels, which compute f16 values in f32) do: in f16 itself, softplus's
    exp(x) and hardswish's x * 6 overflow long before the result does."""
    def wrapped(x):
        if x.dtype == np.float16:
            return fn(x.astype(np.float32)).astype(np.float16)
        return fn(x)
    return wrapped


def _pow(x, y):
    """x ** y as C's pow, which kernels call. NumPy computes a scalar exponent of 0.5 as
    sqrt (f32, f64), so (-inf) ** 0.5 is nan and (-0) ** 0.5 is -0 there, while an array
    exponent, f16, and C's pow give +inf and +0. Where a 0.5 exponent meets a zero or an
    infinite base, the answer is |x| (C99 F.9.4.4)."""
    out = np.power(x, y)
    x, y = np.asarray(x), np.asarray(y)
    fixed = np.where((y == y.dtype.type(0.5)) & ((x == 0) | np.isinf(x)), np.abs(x), out)
    return fixed.astype(np.asarray(out).dtype, copy=False)


def _relu6_plus3(x):
    dt = x.dtype.type
    return np.minimum(np.maximum(x + dt(3), dt(0)), dt(6))


def _softplus(x):
    # torch's default (beta 1, threshold 20): x itself above the threshold, where
    # log1p(exp(x)) equals x to far below f32 precision; exp never overflows below it
    return np.where(x > x.dtype.type(20), x, np.log1p(np.exp(x)))


@dataclass(frozen=True)
class ElementwiseSpec:
    name: str
    arity: int
    accepts: str  # "float", "number" (float or int), "bool", "any" (bool too), "where"
    numpy: Callable
    doc: str
    result_bool: bool = False
    costly: bool = False  # many instructions (libdevice call, IEEE division): the Costly trait


# Ops that cost many instructions: codegen keeps their values rather than computing them again.
_COSTLY = {"exp", "log", "tanh", "sigmoid", "gelu", "silu", "sin", "cos", "erf", "div", "pow",
           "sqrt", "rsqrt", "log1p", "expm1", "softplus"}


def _spec(name, arity, accepts, fn, doc, result_bool=False):
    return ElementwiseSpec(name, arity, accepts, _errstate(fn), doc, result_bool,
                           costly=name in _COSTLY)


ELEMENTWISE = {s.name: s for s in [
    _spec("neg", 1, "number", np.negative, "-x"),
    _spec("abs", 1, "number", np.abs, "|x|"),
    _spec("exp", 1, "float", np.exp, "e**x"),
    _spec("log", 1, "float", np.log, "natural logarithm; log(0) = -inf, log(x<0) = nan"),
    _spec("sqrt", 1, "float", np.sqrt, "square root; nan below 0"),
    _spec("rsqrt", 1, "float", lambda x: x.dtype.type(1) / np.sqrt(x), "1 / sqrt(x)"),
    _spec("tanh", 1, "float", np.tanh, "hyperbolic tangent"),
    _spec("sigmoid", 1, "float", _sigmoid, "1 / (1 + exp(-x))"),
    _spec("relu", 1, "number", _relu, "maximum(x, 0); nan stays nan"),
    _spec("gelu", 1, "float", _gelu, "x * (1 + erf(x / sqrt(2))) / 2 (exact, as torch's default)"),
    _spec("silu", 1, "float", lambda x: x * _sigmoid(x), "x * sigmoid(x)"),
    _spec("sin", 1, "float", np.sin, "sine"),
    _spec("cos", 1, "float", np.cos, "cosine"),
    _spec("erf", 1, "float", lambda x: _erf(x).astype(x.dtype), "the error function"),
    _spec("floor", 1, "float", np.floor, "largest whole number <= x (a float)"),
    _spec("ceil", 1, "float", np.ceil, "smallest whole number >= x (a float)"),
    _spec("round", 1, "float", np.rint, "nearest whole number, halves to even (np.round)"),
    _spec("log1p", 1, "float", np.log1p, "log(1 + x), accurate near 0"),
    _spec("expm1", 1, "float", np.expm1, "exp(x) - 1, accurate near 0"),
    _spec("softplus", 1, "float", _opmath(_softplus),
          "log(1 + exp(x)); x itself above 20 (torch's default threshold)"),
    _spec("hardswish", 1, "float", _opmath(lambda x: x * _relu6_plus3(x) / x.dtype.type(6)),
          "x * min(max(x + 3, 0), 6) / 6 (torch)"),
    _spec("hardsigmoid", 1, "float", _opmath(lambda x: _relu6_plus3(x) / x.dtype.type(6)),
          "min(max(x + 3, 0), 6) / 6 (torch)"),
    _spec("logical_not", 1, "bool", np.logical_not, "not x (bool); the operator ~x", True),
    _spec("add", 2, "number", np.add, "x + y"),
    _spec("sub", 2, "number", np.subtract, "x - y"),
    _spec("mul", 2, "number", np.multiply, "x * y"),
    _spec("div", 2, "float", np.divide, "x / y (IEEE: x/0 = +-inf, 0/0 = nan)"),
    _spec("pow", 2, "float", _pow, "x ** y (C's pow: (-inf) ** 0.5 is +inf)"),
    _spec("maximum", 2, "number", np.maximum, "larger of x, y; nan if either is nan"),
    _spec("minimum", 2, "number", np.minimum, "smaller of x, y; nan if either is nan"),
    _spec("lt", 2, "number", np.less, "x < y", True),
    _spec("le", 2, "number", np.less_equal, "x <= y", True),
    _spec("gt", 2, "number", np.greater, "x > y", True),
    _spec("ge", 2, "number", np.greater_equal, "x >= y", True),
    _spec("eq", 2, "any", np.equal, "x == y", True),
    _spec("ne", 2, "any", np.not_equal, "x != y", True),
    _spec("logical_and", 2, "bool", np.logical_and, "x and y (bool); the operator x & y", True),
    _spec("logical_or", 2, "bool", np.logical_or, "x or y (bool); the operator x | y", True),
    _spec("where", 3, "where", np.where, "c ? x : y (c is bool)"),
]}

# Source operators of the .fuse language and the ops they stand for.
BINARY_OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow",
                    "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne",
                    "&": "logical_and", "|": "logical_or"}
UNARY_OPERATORS = {"-": "neg", "~": "logical_not"}


def check_dtypes(spec: ElementwiseSpec, dtypes: list[str]) -> str:
    """The result dtype of ``spec`` on operands of ``dtypes``; raises ValueError if not allowed."""
    from mlfuse.ir.types import FLOAT_DTYPES
    data = dtypes[1:] if spec.accepts == "where" else dtypes
    if spec.accepts == "where" and dtypes[0] != "bool":
        raise ValueError(f"where's condition must be bool, got {dtypes[0]}")
    if spec.accepts == "bool" and any(d != "bool" for d in dtypes):
        raise ValueError(f"{spec.name} needs bool operands, got {', '.join(dtypes)} (a comparison "
                         "combined with & or | needs parentheses: (x > 0) & (y < 1))")
    if len(set(data)) != 1:
        raise ValueError(f"{spec.name} operands have different dtypes "
                         f"({', '.join(data)}); cast one explicitly")
    dtype = data[0]
    if spec.accepts == "float" and dtype not in FLOAT_DTYPES:
        raise ValueError(f"{spec.name} needs a float dtype, got {dtype}")
    if spec.accepts == "number" and dtype in ("bool", "index") and not (
            dtype == "index" and spec.name in INDEX_OPS):
        raise ValueError(f"{spec.name} needs a number dtype, got {dtype}")
    return "bool" if spec.result_bool else dtype


# Elementwise ops that also work on loop indices (index arithmetic).
INDEX_OPS = {"add", "sub", "mul", "lt", "le", "gt", "ge", "eq", "ne", "maximum", "minimum"}
