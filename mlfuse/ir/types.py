"""IR types: scalars, tensors (value semantics), buffers (memory) and indices.

A dimension is an ``int`` or a symbolic name (``str``) bound when a function is
called; the same name means the same size everywhere in a function. A symbolic dim
may also be a product of names, with an integer coefficient: ``"B*H"``, ``"2*N"``
(a reshape's merged dims, a concat of equal symbolic parts). It is kept in one
canonical text (:func:`product_dim`: coefficient first, names sorted), so equal
products compare equal as strings, and everything that needs its size or its names
goes through :func:`dim_factors` / :func:`dim_value`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Union

Dim = Union[int, str]

FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
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
class TensorType(Type):
    """An immutable n-d array value (tensor dialect). Rank 0 prints as ``f32[]``."""

    dtype: str
    shape: tuple[Dim, ...]

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element(self) -> ScalarType:
        return ScalarType(self.dtype)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def with_dtype(self, dtype: str) -> "TensorType":
        return TensorType(dtype, self.shape)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(self.dtype, tuple(shape))


@dataclass(frozen=True)
class BufferType(Type):
    """A region of device memory holding an array (loops and fused dialects)."""

    dtype: str
    shape: tuple[Dim, ...]

    def __str__(self) -> str:
        return f"buf<{self.dtype}[{', '.join(map(str, self.shape))}]>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element(self) -> ScalarType:
        return ScalarType(self.dtype)


# Kernels index with int64: a tensor's element count must leave room for index arithmetic.
MAX_ELEMENTS = 2 ** 62


def dim_factors(d: Dim) -> tuple[int, tuple[str, ...]]:
    """A dim as (integer coefficient, symbol names): 4 -> (4, ()), "N" -> (1, ("N",)),
    "2*B*H" -> (2, ("B", "H"))."""
    if isinstance(d, int):
        return d, ()
    coefficient, names = 1, []
    for part in d.split("*"):
        if part.isdigit():
            coefficient *= int(part)
        else:
            names.append(part)
    return coefficient, tuple(names)


def product_dim(factors: Iterable[Dim]) -> Dim:
    """The dim that is the product of ``factors`` (ints, names or products), in the
    canonical text: an int if there is no symbol, a bare name for one symbol times 1,
    else "coefficient*names" with the coefficient left out when it is 1 and the names
    sorted."""
    coefficient, names = 1, []
    for f in factors:
        c, syms = dim_factors(f)
        coefficient *= c
        names += syms
    if not names:
        return coefficient
    names.sort()
    if coefficient == 1 and len(names) == 1:
        return names[0]
    return "*".join(([str(coefficient)] if coefficient != 1 else []) + names)


def is_dim_text(text: str) -> bool:
    """Whether ``text`` is a symbolic dim: a name, or a canonical product of names."""
    return product_dim([text]) == text and all(
        p.isidentifier() or p.isdigit() for p in text.split("*"))


def dim_value(d: Dim, dims: dict | None, default=None):
    """The size of ``d`` with its symbols looked up in ``dims``; ``default`` stands for
    an unbound symbol (None: the size is unknown, the result is None)."""
    coefficient, names = dim_factors(d)
    sizes = [dims.get(n, default) if dims else default for n in names]
    return None if None in sizes else coefficient * math.prod(sizes)


def shape_problem(shape, dims: dict | None = None) -> str | None:
    """Why ``shape`` (symbolic dims looked up in ``dims`` where bound) is no array
    mlfuse makes, or None: every size is positive (there are no empty arrays, see
    docs/language.md) and the elements fit int64 index arithmetic."""
    elements = 1
    for d in shape:
        size = dim_value(d, dims)
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
    """The symbol names ``shape``'s dims use, each once (a product's factors too)."""
    return list(dict.fromkeys(n for d in shape for n in dim_factors(d)[1]))


def num_elements(shape, dims: dict | None = None):
    """Element count; symbolic dims are looked up in ``dims`` (None if unbound)."""
    return dim_value(product_dim(shape), dims)
