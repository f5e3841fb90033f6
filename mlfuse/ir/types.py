"""IR types: scalars, tensors (value semantics), buffers (memory) and indices.

A dimension is an ``int`` or a symbolic name (``str``) bound when a function is
called; the same name means the same size everywhere in a function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

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


def shape_problem(shape, dims: dict | None = None) -> str | None:
    """Why ``shape`` (symbolic dims looked up in ``dims`` where bound) is no array
    mlfuse makes, or None: every size is positive (there are no empty arrays, see
    docs/language.md) and the elements fit int64 index arithmetic."""
    elements = 1
    for d in shape:
        size = dims.get(d) if isinstance(d, str) and dims else d
        if isinstance(size, str) or size is None:
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
    return [d for d in shape if isinstance(d, str)]


def num_elements(shape, dims: dict | None = None):
    """Element count; symbolic dims are looked up in ``dims`` (None if unbound)."""
    n = 1
    for d in shape:
        if isinstance(d, str):
            if dims is None or d not in dims:
                return None
            d = dims[d]
        n *= d
    return n
