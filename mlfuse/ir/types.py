"""IR types: scalars, tensors (value semantics), buffers (memory) and indices.

A dimension is an ``int`` or a symbolic name (``str``) bound when a function is
called; the same name means the same size everywhere in a function. A symbolic dim
may also be a product of names, with an integer coefficient: ``"B*H"``, ``"2*N"``
(a reshape's merged dims, a concat of equal symbolic parts), and a quotient of such
products, exact by definition: ``"C*H*W/8"``, ``"C/G"`` (group norm's rows; a size
that does not divide is an error where the sizes are known, see
:class:`IndivisibleDim`). It is kept in one canonical text (:func:`product_dim`:
coefficient first, names sorted, then each divisor after a ``/``), so equal dims
compare equal as strings, and everything that needs its size or its names goes
through :func:`dim_monomial` / :func:`dim_factors` / :func:`dim_value`.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Union

Dim = Union[int, str]

FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
# the 16-bit floats: kernels compute them in f32, and their means add up there
HALF_FLOAT_DTYPES = ("f16", "bf16")
INT_DTYPES = ("i32", "i64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)
# NumPy's name for each; "bfloat16" is ml_dtypes' (mlfuse.dtypes imports it, which
# registers the name: use mlfuse.dtypes.numpy_dtype rather than np.dtype on these)
NUMPY_DTYPE = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
               "i32": "int32", "i64": "int64", "bool": "bool"}
INT_BITS = {"i32": 32, "i64": 64}  # two's complement: wraps around on overflow, as NumPy


class Type:
    """Base of all IR types. Types are immutable and compare by value."""


@dataclass(frozen=True)
class ScalarType(Type):
    dtype: str  # one of DTYPES, or "index" for loop indices

    def __str__(self) -> str:
        return self.dtype

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES


@dataclass(frozen=True)
class ShapedType(Type):
    """What a tensor and a buffer type share: an element dtype and a shape."""

    dtype: str
    shape: tuple[Dim, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element(self) -> ScalarType:
        return ScalarType(self.dtype)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def _dims_text(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class TensorType(ShapedType):
    """An immutable n-d array value (tensor dialect). Rank 0 prints as ``f32[]``."""

    def __str__(self) -> str:
        return self._dims_text()

    def with_dtype(self, dtype: str) -> "TensorType":
        return TensorType(dtype, self.shape)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(self.dtype, tuple(shape))


@dataclass(frozen=True)
class BufferType(ShapedType):
    """A region of device memory holding an array (loops and fused dialects)."""

    def __str__(self) -> str:
        return f"buf<{self._dims_text()}>"


# Kernels index with int64: a tensor's element count must leave room for index arithmetic.
MAX_ELEMENTS = 2 ** 62


class IndivisibleDim(ValueError):
    """A quotient dim whose sizes do not divide (``C*H*W/8`` with C*H*W = 300)."""


def dim_monomial(d: Dim) -> tuple[Fraction, Counter]:
    """A dim as (rational coefficient, exponent of each symbol): 4 -> (4, {}),
    "2*B*H" -> (2, {B: 1, H: 1}), "C*H*W/8" -> (1/8, {C: 1, H: 1, W: 1}),
    "C/G" -> (1, {C: 1, G: -1})."""
    if isinstance(d, int):
        return Fraction(d), Counter()
    coefficient, exponents = Fraction(1), Counter()
    sign = 1
    for part in re.split(r"([*/])", d):
        if part in ("*", "/"):
            sign = 1 if part == "*" else -1
        elif part.isdigit():
            coefficient = coefficient * int(part) if sign > 0 else coefficient / int(part)
        else:
            exponents[part] += sign
    return coefficient, Counter({n: e for n, e in exponents.items() if e})


def _render(coefficient: Fraction, exponents: Counter) -> Dim:
    """The canonical dim of a monomial (see :func:`product_dim`)."""
    up = sorted(n for n, e in exponents.items() if e > 0 for _ in range(e))
    down = sorted(n for n, e in exponents.items() if e < 0 for _ in range(-e))
    num, den = coefficient.numerator, coefficient.denominator
    if not up and not down:
        if den != 1:
            raise IndivisibleDim(f"{num}/{den} is not a whole number")
        return num
    if num == 1 and den == 1 and len(up) == 1 and not down:
        return up[0]
    text = "*".join(([str(num)] if num != 1 or not up else []) + up)
    return text + "".join(f"/{f}" for f in ([str(den)] if den != 1 else []) + down)


def is_quotient(d: Dim) -> bool:
    """Whether ``d`` divides (``C*H*W/8``), so that its size must be checked."""
    return isinstance(d, str) and "/" in d


def dim_factors(d: Dim) -> tuple[int, tuple[str, ...]]:
    """A product dim as (integer coefficient, symbol names): 4 -> (4, ()), "N" -> (1,
    ("N",)), "2*B*H" -> (2, ("B", "H")). A quotient has no such form: callers that can
    meet one use :func:`dim_monomial` (ValueError here, never a wrong size)."""
    if is_quotient(d):
        raise ValueError(f"dim {d} is a quotient, not a product of factors")
    coefficient, exponents = dim_monomial(d)
    return int(coefficient), tuple(sorted(exponents.elements()))


def product_dim(factors: Iterable[Dim]) -> Dim:
    """The dim that is the product of ``factors`` (ints, names, products or quotients),
    in the canonical text: an int if there is no symbol, a bare name for one symbol
    times 1, else "coefficient*names" with the coefficient left out when it is 1 and
    the names sorted, then "/divisor" for each divisor (the integer first, then names
    sorted): ``C*H*W/8``, ``2*N/G``. Read left to right, the text computes the size.
    A product of integers that is not whole raises IndivisibleDim."""
    coefficient, exponents = Fraction(1), Counter()
    for f in factors:
        c, e = dim_monomial(f)
        coefficient *= c
        exponents.update(e)
    return _render(coefficient, exponents)


def quotient_dim(a: Dim, b: Dim) -> Dim:
    """``a / b`` as a dim (IndivisibleDim where both are integers that do not divide)."""
    ca, ea = dim_monomial(a)
    cb, eb = dim_monomial(b)
    exponents = Counter(ea)
    exponents.subtract(eb)
    return _render(ca / cb, exponents)


def is_dim_text(text: str) -> bool:
    """Whether ``text`` is a symbolic dim: a name, or a canonical product or quotient."""
    if not all(p.isidentifier() or p.isdigit() for p in re.split(r"[*/]", text)):
        return False
    try:
        return product_dim([text]) == text
    except (IndivisibleDim, ZeroDivisionError):
        return False


def dim_value(d: Dim, dims: dict | None, default=None, exact: bool = True):
    """The size of ``d`` with its symbols looked up in ``dims``; ``default`` stands for
    an unbound symbol (None: the size is unknown, the result is None). A quotient that
    does not divide raises IndivisibleDim, naming the dims and their sizes (rounds down
    where not ``exact``: estimates only)."""
    coefficient, exponents = dim_monomial(d)
    sizes = {n: dims.get(n, default) if dims else default for n in exponents}
    if None in sizes.values():
        return None
    up = coefficient.numerator * math.prod(sizes[n] ** e for n, e in exponents.items() if e > 0)
    down = coefficient.denominator * math.prod(sizes[n] ** -e for n, e in exponents.items()
                                               if e < 0)
    if up % down and exact:
        bound = ", ".join(f"{n}={sizes[n]}" for n in sorted(sizes))
        numerator = product_dim([coefficient.numerator, *(n for n, e in exponents.items()
                                                           for _ in range(max(e, 0)))])
        raise IndivisibleDim(f"dim {d} is not a whole number: {numerator} = {up} is not "
                             f"divisible by {down} ({bound})")
    return up // down


def shape_problem(shape, dims: dict | None = None) -> str | None:
    """Why ``shape`` (symbolic dims looked up in ``dims`` where bound) is no array
    mlfuse makes, or None: every size is positive (there are no empty arrays, see
    docs/language.md) and the elements fit int64 index arithmetic."""
    elements = 1
    for d in shape:
        try:
            size = dim_value(d, dims)
        except IndivisibleDim as e:
            return str(e)
        if size is None:
            continue
        if size < 1:
            return f"sizes must be positive, got {size}" + (f" for {d}" if isinstance(d, str) else "")
        elements *= size
        if elements > MAX_ELEMENTS:
            return f"more than 2**62 elements ({elements} by here) is too large to index"
    return None


INDEX = ScalarType("index")
BOOL = ScalarType("bool")


def itemsize(dtype: str) -> int:
    return {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i32": 4, "i64": 8, "bool": 1,
            "index": 8}[dtype]


def symbols_of(shape) -> list[str]:
    """The symbol names ``shape``'s dims use, each once (a product's factors and a
    quotient's divisors too)."""
    return list(dict.fromkeys(n for d in shape for n in sorted(dim_monomial(d)[1])))


def num_elements(shape, dims: dict | None = None):
    """Element count; symbolic dims are looked up in ``dims`` (None if unbound)."""
    return dim_value(product_dim(shape), dims)
