"""Index arithmetic that undoes itself, simplified as a kernel is built.

A kernel that stores an output at a reshaped index (group norm: the kernel's points
are rows of ``reshape(x, [N, G, C/G*H*W])``, its output is ``[N, C, H, W]``) computes
the output's index from its own by linearizing and unraveling (``Emitter.reshape_index``);
the output's producers then read the row values back through the inverse reshape,
which linearizes and unravels again. Folded here, the round trip gives the kernel's own
indices back, so a reduction read there is the value the kernel already holds for its
point (rather than "read at another index"), and no division is left to compute twice.

The rules hold for every integer index, given a bound where one is named:

- ``(x // s) * s + x % s == x`` (floor division; any x, s > 0);
- ``(q * s + r) // s == q`` and ``(q * s + r) % s == r`` where ``0 <= r < s``;
- ``r % s == r`` where ``0 <= r < s``; ``x // 1 == x``, ``x * 1 == x``, ``x + 0 == x``;
- ``0 <= x // t < s`` where ``0 <= x < t * s`` (a head index ``n // D`` of a point
  ``n < H*D``: the head split stored by the QKV projection, placement.py).

Sizes are compared as dims: a constant, a ``loops.dim`` of a symbol or quotient, and
products of those, each with its dim text (``size_of``). Bounds come from the loops
(a kernel point or loop index is below its extent) and from ``x % s`` (below s).
"""
from __future__ import annotations

from mlfuse.dialects.arith import ConstantOp, FloorDivOp, ModOp
from mlfuse.dialects.index_forms import ADD as _ADD, MUL as _MUL, op_of as _op, row_step, size_of
from mlfuse.dialects.index_forms import same_size as _same_size, unraveled
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.types import INDEX, Dim, product_dim


class IndexAlgebra:
    """The bounds known in one kernel, and the simplification of its index ops."""

    def __init__(self):
        self.bounds: dict[int, Dim] = {}  # id(index value) -> extent: 0 <= v < extent

    def bound(self, v: Value, extent: Dim) -> None:
        self.bounds[id(v)] = extent

    def below(self, r: Value, s: Value) -> bool:
        """Whether ``0 <= r < s`` is known."""
        size = size_of(s)
        if size is None:
            return False
        op = _op(r)
        if isinstance(op, ModOp) and _same_size(op.operands[1], s):
            return True
        if isinstance(op, ConstantOp) and isinstance(size, int):
            return 0 <= op["value"] < size
        if isinstance(op, FloorDivOp):  # x // t < s where 0 <= x < t * s
            x, t = op.operands
            bound, t_size = self.bounds.get(id(x)), size_of(t)
            if bound is not None and t_size is not None and product_dim([t_size, size]) == bound:
                return True
        return self.bounds.get(id(r)) == size

    @staticmethod
    def _times(v: Value, s: Value) -> Value | None:
        """``q`` where ``v`` is ``q * s`` (either order)."""
        op = _op(v)
        if isinstance(op, _MUL):
            a, b = op.operands
            if _same_size(b, s):
                return a
            if _same_size(a, s):
                return b
        return None

    def _split(self, v: Value, s: Value) -> tuple[Value, Value] | None:
        """``(q, r)`` where ``v`` is ``q * s + r`` with ``0 <= r < s`` (either order)."""
        op = _op(v)
        if isinstance(op, _ADD):
            for a, b in (op.operands, op.operands[::-1]):
                q = self._times(a, s)
                if q is not None and self.below(b, s):
                    return q, b
        return None

    def simplify(self, op: Operation, operands: list[Value]) -> Value | None:
        """An existing value equal to ``op`` applied to ``operands``, or None."""
        if len(operands) != 2 or any(v.type != INDEX for v in operands):
            return None
        a, b = operands
        if isinstance(op, FloorDivOp):
            if size_of(b) == 1:
                return a
            split = self._split(a, b)
            return split[0] if split else self._times(a, b)
        if isinstance(op, ModOp):
            if self.below(a, b):
                return a
            split = self._split(a, b)
            return split[1] if split else None
        if isinstance(op, _MUL):
            return a if size_of(b) == 1 else b if size_of(a) == 1 else None
        if isinstance(op, _ADD):
            if size_of(b) == 0:
                return a
            if size_of(a) == 0:
                return b
            for x, y in ((a, b), (b, a)):  # (v // s) * s + v % s
                div, mod = _op(self._inner(x)), _op(y)
                if isinstance(div, FloorDivOp) and isinstance(mod, ModOp) and \
                        div.operands[0] is mod.operands[0] and \
                        _same_size(div.operands[1], mod.operands[1]) and \
                        self._times(x, mod.operands[1]) is not None:
                    return div.operands[0]
        return None

    @staticmethod
    def _inner(x: Value) -> Value:
        """The factor of a product ``x`` that is not a size (``q`` of ``q * s``)."""
        op = _op(x)
        if isinstance(op, _MUL):
            a, b = op.operands
            return a if size_of(a) is None else b
        return x


__all__ = ["IndexAlgebra", "row_step", "size_of", "unraveled"]
