"""Small IR builders the converter modules share (ops.py, ops_nn.py, ops_shape.py).

Each takes the importer ``g`` (graph.GraphImporter) first, emits tensor-dialect ops
into the function being built and reports problems with ``g.error``, which names the
node being converted.
"""
from __future__ import annotations

import math

from mlfuse.dialects import tensor as T
from mlfuse.dialects.shapes import normalize_axes
from mlfuse.ir.core import VerifyError

E = T.ELEMENTWISE_OPS


def ew(g, name: str, *operands):
    """The elementwise op ``name`` of the shared table on ``operands``."""
    return g.emit(E[name], list(operands))


def const_like(g, value, like):
    """A rank-0 constant of ``like``'s dtype (broadcasts against it)."""
    return g.scalar(value, like.type.dtype)


def reshape(g, v, shape):
    shape = list(shape)
    if list(v.type.shape) == shape:
        return v
    return g.emit(T.ReshapeOp, [v], {"shape": shape})


def broadcast(g, v, shape):
    shape = list(shape)
    if list(v.type.shape) == shape:
        return v
    return g.emit(T.BroadcastToOp, [v], {"shape": shape})


def norm_axes(g, axes, rank: int) -> list[int]:
    """ONNX axes (negatives count from the end) as the non-negative axes ops take."""
    try:
        return normalize_axes([int(a) for a in axes], rank)
    except VerifyError as e:
        raise g.error(e.message) from None


def norm_axis(g, axis, rank: int, what: str = "axis") -> int:
    """One ONNX axis, normalized; the error names the attribute."""
    if not -rank <= int(axis) < rank:
        raise g.error(f"{what} {axis} is out of range for rank {rank}")
    return int(axis) % rank


def axes_in_order(g, axes, rank: int, what: str = "axes") -> list[int]:
    """ONNX axes normalized but kept in their order (Slice's and Pad's axes pair up
    with other lists), each at most once."""
    out = [norm_axis(g, a, rank, what.removesuffix("s")) for a in axes]
    if len(set(out)) != len(out):
        raise g.error(f"{what} {list(axes)} name an axis twice")
    return out


def product(g, dims):
    """The size of ``dims`` as one dim: an int, or a single symbol times ones."""
    ints = math.prod(d for d in dims if isinstance(d, int))
    symbols = [d for d in dims if isinstance(d, str)]
    if not symbols:
        return ints
    if len(symbols) == 1 and ints == 1:
        return symbols[0]
    raise g.error(f"cannot merge dims {list(dims)} into one: symbolic sizes only merge "
                  "with ones")


def axes_input(g, node, attrs, index: int):
    """Axes from the attribute (older opsets) or from input ``index`` (newer ones)."""
    if "axes" in attrs:
        return list(attrs["axes"])
    return static_ints(g, node, index, "axes")


def static_ints(g, node, index: int, what: str) -> list[int] | None:
    """Input ``index`` as a list of ints known when compiling (None when absent)."""
    array = g.static(node, index, what)
    return None if array is None else [int(a) for a in array.reshape(-1)]


def string_attr(attrs, key: str, default: str) -> str:
    value = attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else value
