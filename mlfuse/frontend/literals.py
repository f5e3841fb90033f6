"""Number literals: untyped until they meet a tensor, then a rank-0 ``tensor.constant``.

Rules (docs/language.md, "Literals"):
- a literal takes the dtype of its partner operand (``x * 2`` with x f32 makes an
  f32 constant), never promoting the partner;
- an elementwise op whose operands are all literals folds at compile time in
  float64 with the op's NumPy semantics (the shared table), staying an int when
  all operands are ints and the result is a whole number;
- a literal with no partner at all (``return 1.0``) is an error: write
  ``cast(1.0, dtype=f32)`` to give it a dtype.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from mlfuse.dialects.elementwise import ElementwiseSpec
from mlfuse.dialects.tensor import ConstantOp
from mlfuse.errors import Location, MlfuseError
from mlfuse.dtypes import numpy_dtype
from mlfuse.ir.types import FLOAT_DTYPES, INT_BITS, TensorType

# Ints are folded in float64, which is exact only up to 2**53.
MAX_INT_LITERAL = 2 ** 53


@dataclass(frozen=True)
class Literal:
    """A number in the source that has no dtype yet."""

    value: int | float
    loc: Location

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Deferred:
    """A rank-0 number typed like a literal (by its partner operand, or by ``cast``)
    whose value is known only at run time: a symbolic dim used as a value (``x / D``)
    and elementwise ops over such dims and literals (``x * rsqrt(D)``). ``build(dtype)``
    appends the ops computing it in that dtype and returns the value."""

    text: str
    build: Callable[[str], object]
    loc: Location

    def __str__(self) -> str:
        return self.text


def parse_number(text: str, loc: Location) -> Literal:
    """A NUMBER token: digits only make an int, a '.' or exponent makes a float."""
    if text.isdigit():
        value: int | float = int(text)
        if value > MAX_INT_LITERAL:
            raise MlfuseError(f"integer literal {text} is too large (limit 2**53)", loc)
    else:
        value = float(text)
        if not math.isfinite(value):
            raise MlfuseError(f"literal {text} is out of the float64 range", loc)
    return Literal(value, loc)


def fold(spec: ElementwiseSpec, operands: list[Literal], loc: Location) -> Literal:
    """Evaluate an elementwise op on literals at compile time (NumPy semantics, float64)."""
    if spec.accepts == "where":
        raise MlfuseError("where needs a bool tensor condition, not literals", loc)
    if spec.result_bool or spec.accepts == "bool":
        raise MlfuseError(f"{spec.name} of literals would be a compile-time bool; "
                          "the language has no bool constants", loc)
    args = [np.float64(o.value) for o in operands]
    result = float(spec.numpy(*args))
    all_ints = all(isinstance(o.value, int) for o in operands)
    if all_ints and spec.accepts != "float" and result.is_integer() and abs(result) <= MAX_INT_LITERAL:
        return Literal(int(result), loc)
    return Literal(result, loc)


def constant_op(literal: Literal, dtype: str) -> ConstantOp:
    """The ``tensor.constant`` standing for ``literal`` as a ``dtype`` scalar; refuses a
    value that ``dtype`` cannot hold rather than rounding it silently."""
    value, loc = literal.value, literal.loc
    if dtype == "bool":
        raise MlfuseError(f"number {literal} cannot stand for a bool operand", loc)
    if dtype in FLOAT_DTYPES:
        value = float(value)
        with np.errstate(over="ignore"):
            rounded = numpy_dtype(dtype).type(value)
        if math.isfinite(value) and not np.isfinite(rounded):
            raise MlfuseError(f"literal {literal} overflows {dtype}", loc)
    else:
        if isinstance(value, float) and not value.is_integer():
            raise MlfuseError(f"literal {literal} is not a whole number, but its partner "
                              f"operand is {dtype}", loc)
        value = int(value)
        bits = INT_BITS[dtype]
        if not -2 ** (bits - 1) <= value < 2 ** (bits - 1):
            raise MlfuseError(f"literal {literal} is out of the {dtype} range", loc)
    return ConstantOp(attributes={"value": value}, result_types=[TensorType(dtype, ())], loc=loc)
