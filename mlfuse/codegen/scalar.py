"""Scalar code: each arith op as one Python expression, literals and combiners.

The table :data:`SCALAR_EXPRESSIONS` is the only place that says what an arith op
means in generated code; its semantics follow ``dialects/elementwise.py`` (NumPy).

Types: every value is computed in its *compute type* (:data:`COMPUTE_TYPE`). f32
code stays f32 because every literal is a typed ``np.float32(...)`` and Numba CUDA
keeps float32 for ``math`` functions of float32 arguments; f16 values are loaded
into f32, computed in f32 and rounded back to f16 by the store (an f16 cast rounds
through ``np.float16`` so the value matches NumPy's); bf16 likewise, stored as its
16 bits (mlfuse/codegen/bf16.py). i32 arithmetic is wrapped in ``np.int32(...)``
because Numba widens int32 + int32 to int64; i64 is Numba's own int64, which wraps
around on overflow as NumPy's does. Loop indices are int64, so flat indices do not
overflow past 2**31 elements. Float literals are rounded to their dtype first, so
an f16 or bf16 constant has the value the interpreters give it.
"""
from __future__ import annotations

import math
from typing import Callable


from mlfuse.codegen.bf16 import BF16_HELPER, bf16_round
from mlfuse.dtypes import numpy_dtype
from mlfuse.errors import MlfuseError
from mlfuse.ir.core import Operation
from mlfuse.ir.types import INT_DTYPES
from mlfuse.dialects.loops import combiner_identity

COMPUTE_TYPE = {"f16": "float32", "bf16": "float32", "f32": "float32", "f64": "float64",
                "i32": "int32", "i64": "int64", "bool": "bool_", "index": "int64"}
# The NumPy dtype of a buffer's elements on the device (bf16: its 16 bits, see bf16.py).
STORAGE_TYPE = {"f16": "float16", "bf16": "uint16", "f32": "float32", "f64": "float64",
                "i32": "int32", "i64": "int64", "bool": "bool_"}
SHARED_TYPE = {"float32": "numba.float32", "float64": "numba.float64", "int32": "numba.int32",
               "int64": "numba.int64"}

SQRT_HALF = math.sqrt(0.5)


def literal(value: float, dtype: str) -> str:
    """``value`` as a typed constant of ``dtype``'s compute type."""
    if dtype == "bool":
        return "True" if value else "False"
    if dtype == "index":
        return str(int(value))
    if dtype in INT_DTYPES:
        return f"np.{COMPUTE_TYPE[dtype]}({int(value)})"
    value = float(numpy_dtype(dtype).type(value))  # as the dtype holds it
    if math.isnan(value):
        text = "math.nan"
    elif math.isinf(value):
        text = "math.inf" if value > 0 else "-math.inf"
    else:
        text = repr(float(value))
    return f"np.{COMPUTE_TYPE[dtype]}({text})"


class ScalarContext:
    """What an expression template may ask for: typed literals, math functions for
    the target, and helper device functions (recorded so the module defines them)."""

    def __init__(self, dtype: str, target: str, helpers: set[str]):
        self.dtype = dtype
        self.target = target
        self.helpers = helpers

    def lit(self, value: float) -> str:
        return literal(value, self.dtype)

    def call(self, fn: str, arg: str) -> str:
        # The simulator runs kernels as Python, where math.log(0) or math.sqrt(-1)
        # raise; NumPy's functions give the device's IEEE results (inf, nan) instead.
        if self.target == "cuda":
            return f"math.{fn}({arg})"
        if fn == "erf":  # NumPy has no erf; math.erf never raises
            return f"np.{COMPUTE_TYPE[self.dtype]}(math.erf({arg}))"
        return f"np.{fn}({arg})"

    def helper(self, name: str) -> str:
        self.helpers.add(name)
        return name

    def rounding(self, fn: str, arg: str) -> str:
        """floor, ceil or rint of a float, staying a float: Python's math.floor and
        math.ceil return ints (in Numba too, so an f32 value would go through int64 and
        lose inf and nan), so the GPU calls libdevice's float function directly
        (``floorf`` for f32 compute, ``floor`` for f64); the simulator NumPy's."""
        if self.target != "cuda":
            return f"np.{fn}({arg})"
        suffix = "f" if COMPUTE_TYPE[self.dtype] == "float32" else ""
        return f"cuda.libdevice.{fn}{suffix}({arg})"


Template = Callable[..., str]


def _unary(fn: str) -> Template:
    return lambda k, x: k.call(fn, x)


def _binary(symbol: str) -> Template:
    return lambda k, x, y: f"{x} {symbol} {y}"


def _helper(name: str) -> Template:
    return lambda k, x, y: f"{k.helper(name)}({x}, {y})"


def _sigmoid(k, x):
    return f"{k.lit(1)} / ({k.lit(1)} + {k.call('exp', f'-{x}')})"


def _relu6_plus3(k, x):  # min(max(x + 3, 0), 6), nan staying nan
    return (f"{k.helper('_minimum')}({k.helper('_maximum')}({x} + {k.lit(3)}, {k.lit(0)}), "
            f"{k.lit(6)})")


def _softplus(k, x):  # torch's threshold: x itself above 20 (exp is evaluated only below)
    return f"{x} if {x} > {k.lit(20)} else {k.call('log1p', k.call('exp', x))}"


SCALAR_EXPRESSIONS: dict[str, Template] = {
    "neg": lambda k, x: f"-{x}",
    "abs": lambda k, x: f"abs({x})",
    "exp": _unary("exp"),
    "log": _unary("log"),
    "sqrt": _unary("sqrt"),
    "rsqrt": lambda k, x: f"{k.lit(1)} / {k.call('sqrt', x)}",
    "tanh": _unary("tanh"),
    "sigmoid": _sigmoid,
    "relu": lambda k, x: f"{k.helper('_maximum')}({x}, {k.lit(0)})",
    "gelu": lambda k, x: (f"{k.lit(0.5)} * {x} * ({k.lit(1)} + "
                          f"{k.call('erf', f'{x} * {k.lit(SQRT_HALF)}')})"),
    "silu": lambda k, x: f"{x} * ({_sigmoid(k, x)})",
    "sin": _unary("sin"),
    "cos": _unary("cos"),
    "erf": _unary("erf"),
    "floor": lambda k, x: k.rounding("floor", x),
    "ceil": lambda k, x: k.rounding("ceil", x),
    "round": lambda k, x: k.rounding("rint", x),  # halves to even, as np.round
    "log1p": _unary("log1p"),
    "expm1": _unary("expm1"),
    "softplus": _softplus,
    "hardswish": lambda k, x: f"{x} * {_relu6_plus3(k, x)} / {k.lit(6)}",
    "hardsigmoid": lambda k, x: f"{_relu6_plus3(k, x)} / {k.lit(6)}",
    "logical_not": lambda k, x: f"not {x}",
    "logical_and": _binary("&"),  # on bools: no short circuit, no branch
    "logical_or": _binary("|"),
    "add": _binary("+"),
    "sub": _binary("-"),
    "mul": _binary("*"),
    "div": _binary("/"),
    "pow": _binary("**"),
    "maximum": _helper("_maximum"),
    "minimum": _helper("_minimum"),
    "lt": _binary("<"),
    "le": _binary("<="),
    "gt": _binary(">"),
    "ge": _binary(">="),
    "eq": _binary("=="),
    "ne": _binary("!="),
    "where": lambda k, c, x, y: f"{x} if {c} else {y}",
    "floordiv": _binary("//"),  # index operands are non-negative: // and % are exact
    "mod": _binary("%"),
    "and": _binary("and"),
    "or": _binary("or"),
}

# Numba widens these on int32 operands to int64; the result is wrapped back to int32
# (which wraps around on overflow, as NumPy's int32 does).
_WIDENING = {"neg", "abs", "add", "sub", "mul"}


def _cast(x: str, src: str, dst: str) -> str:
    if dst == src:
        return x
    if dst == "bool":
        return f"{x} != {literal(0, src)}"
    if dst == "f16":  # round to half precision, keep computing in f32
        return f"np.float32(np.float16({x}))"
    if dst == "bf16":
        return bf16_round(x if COMPUTE_TYPE[src] == "float32" else f"np.float32({x})")
    return f"np.{COMPUTE_TYPE[dst]}({x})"


def scalar_expression(op: Operation, operands: list[str], target: str, helpers: set[str]) -> str:
    """The expression computing ``op``'s result from its operands' names."""
    kind = op.name.split(".", 1)[1]
    result = op.result.type.dtype
    if kind == "constant":
        return literal(op["value"], result)
    if kind == "cast":
        if result == "bf16":
            helpers.add(BF16_HELPER)
        return _cast(operands[0], op.operands[0].type.dtype, result)
    template = SCALAR_EXPRESSIONS.get(kind)
    if template is None:
        raise MlfuseError(f"codegen: no code for {op.name}", op.loc)
    data = op.operands[1] if kind == "where" else op.operands[0]
    text = template(ScalarContext(data.type.dtype, target, helpers), *operands)
    if result == "i32" and kind in _WIDENING:
        text = f"np.int32({text})"
    return text


# -- reductions ------------------------------------------------------------------

COMBINER_HELPERS = {"max": "_maximum", "min": "_minimum"}


def combine(combiner: str, a: str, b: str, helpers: set[str], dtype: str = "f32") -> str:
    """``a`` and ``b`` combined; max and min propagate nan like NumPy."""
    if combiner == "add":
        return f"np.int32({a} + {b})" if dtype == "i32" else f"{a} + {b}"
    helpers.add(COMBINER_HELPERS[combiner])
    return f"{COMBINER_HELPERS[combiner]}({a}, {b})"


def identity(combiner: str, dtype: str) -> str:
    """The neutral value of ``combiner`` on ``dtype`` (what a thread with no elements holds)."""
    return literal(combiner_identity(combiner, dtype), dtype)
