"""Building loop-nest bodies: an emitter that appends scalar, index and memory ops to
one block, used by every op lowering of ``lower-tensor-to-loops``.

Constants and ``loops.dim`` reads go to the top block of the nest (they depend on
nothing, so they are hoisted out of inner reductions and shared); loads of the
same element in one block are shared too (``x * x`` loads x once).
"""
from __future__ import annotations

from typing import Callable

from mlfuse.dialects.arith import DIALECT as ARITH
from mlfuse.dialects.arith import SCALAR_OPS
from mlfuse.dialects.arith import ConstantOp as ArithConstant
from mlfuse.dialects.loops import DimOp, LoadOp, MaskedLoadOp, ReduceOp, StoreOp, YieldOp
from mlfuse.dialects.tensor import ConstantOp as TensorConstant
from mlfuse.ir.core import Block, Operation, Region, Value
from mlfuse.ir.types import INDEX, Dim, ScalarType, dim_factors, is_quotient, product_dim

# What a tensor value is once lowered: a buffer, or a constant that every reader
# materializes in its own nest.
Source = Value | TensorConstant


class Emitter:
    """Appends ops to ``block``; ``sources`` maps id(tensor value) -> its Source."""

    def __init__(self, block: Block, sources: dict[int, Source], parent: "Emitter | None" = None):
        self.block = block
        self.sources = sources
        self.parent = parent
        self._shared: dict[tuple, Value] = {}  # constants and dims (root) or loads (any block)

    @property
    def root(self) -> "Emitter":
        return self if self.parent is None else self.parent.root

    def emit(self, op: Operation) -> Value | None:
        self.block.append(op)
        return op.results[0] if op.results else None

    def _shared_value(self, key: tuple, make: Callable[[], Operation]) -> Value:
        if key not in self._shared:
            self._shared[key] = self.emit(make())
        return self._shared[key]

    # -- values that depend on nothing (hoisted to the nest's top block) ---------
    def constant(self, value, dtype: str) -> Value:
        value = float(value) if ScalarType(dtype).is_float else int(value)
        return self.root._shared_value(("const", dtype, repr(value)), lambda: ArithConstant(
            result_types=[ScalarType(dtype)], attributes={"value": value}))

    def index(self, n: int) -> Value:
        return self.constant(n, "index")

    def size(self, d: Dim) -> Value:
        """A dim's size as an index: a constant, ``loops.dim`` for a symbol or a
        quotient (C*H*W/8: computed and checked once by the host, mlfuse.ir.dims), the
        product of the symbols' sizes for a product (B*H)."""
        if isinstance(d, int):
            return self.index(d)
        if is_quotient(d):
            return self.root._shared_value(("dim", d), lambda: DimOp(attributes={"sym": d}))
        coefficient, names = dim_factors(d)
        if coefficient != 1 or len(names) > 1:
            return self.size_product([coefficient, *names])
        return self.root._shared_value(("dim", d), lambda: DimOp(attributes={"sym": d},
                                                                 result_names=[d]))

    # -- scalar arithmetic ----------------------------------------------------------
    def arith(self, name: str, *args: Value, **attributes) -> Value:
        """``arith.<name>`` on ``args``: an elementwise-table op, or floordiv/mod/and/or/cast."""
        cls = SCALAR_OPS.get(name) or ARITH.ops[f"arith.{name}"]
        return self.emit(cls(list(args), attributes=attributes))

    def fold(self, name: str, values: list[Value]) -> Value:
        """``arith.<name>`` folded left over ``values`` (a sum, product, conjunction)."""
        out = values[0]
        for v in values[1:]:
            out = self.arith(name, out, v)
        return out

    def size_product(self, dims: list[Dim]) -> Value:
        """The product of sizes as an index, with the constant factors folded."""
        const, factors = 1, []
        for d in dims:
            if is_quotient(d):
                factors.append(self.size(d))
                continue
            coefficient, names = dim_factors(d)
            const *= coefficient
            factors += [self.size(n) for n in names]
        if const != 1 or not factors:
            factors.insert(0, self.index(const))
        return self.fold("mul", factors)

    def linearize(self, indices: list[Value], shape: list[Dim]) -> Value:
        """Row-major position of ``indices`` in ``shape`` (size-1 dims contribute nothing)."""
        flat = None
        for i, d in zip(indices, shape):
            if d == 1:
                continue
            if flat is None:
                flat = i
            else:
                flat = self.arith("add", self.arith("mul", flat, self.size(d)), i)
        return self.index(0) if flat is None else flat

    def unravel(self, flat: Value, shape: list[Dim]) -> list[Value]:
        """The index of row-major position ``flat`` in ``shape``."""
        outermost = next((j for j, d in enumerate(shape) if d != 1), None)
        indices: list[Value] = []
        for j in reversed(range(len(shape))):
            if shape[j] == 1:
                indices.append(self.index(0))
            elif j == outermost:
                indices.append(flat)  # what is left is already below this dim's size
            else:
                size = self.size(shape[j])
                indices.append(self.arith("mod", flat, size))
                flat = self.arith("floordiv", flat, size)
        return indices[::-1]

    def reshape_index(self, idx: list[Value], shape: list[Dim], target: list[Dim]) -> list[Value]:
        """The index in ``target`` of the element at ``idx`` in ``shape`` (a reshape: the
        same row-major position). Dims the two shapes share at the front and at the back
        map index to index; the position of the dims between is linearized and unraveled
        into the target's. Shapes that differ only in dims of 1 map index to index."""
        moving = [i for i, d in zip(idx, shape) if d != 1]
        if len(moving) == sum(d != 1 for d in target) and \
                [d for d in target if d != 1] == [d for d in shape if d != 1]:
            # only axes of one point added or dropped ([R, 1] -> [1, R]): index to index,
            # so fusion sees the operand read at its own point
            indices = iter(moving)
            return [self.index(0) if d == 1 else next(indices) for d in target]
        front = _common_prefix(shape, target)
        back = _common_prefix(shape[front:][::-1], target[front:][::-1])
        end, target_end = len(shape) - back, len(target) - back
        middle, at, target_at = [], front, front
        for a, b in _equal_products(shape[front:end], target[front:target_end]):
            # each group of axes whose sizes multiply to the same on both sides apart:
            # [H*W, G, C/G] -> [H, W, C] is (k // W, k % W) and g * C/G + c, not one
            # position over all three (whose divmods by C mix a point and a step)
            flat = self.linearize(idx[at:at + a], shape[at:at + a])
            middle += self.unravel(flat, target[target_at:target_at + b])
            at, target_at = at + a, target_at + b
        return idx[:front] + middle + idx[end:]

    # -- memory -------------------------------------------------------------------------
    def load(self, buf: Value, indices: list[Value]) -> Value:
        key = ("load", id(buf), *map(id, indices))
        return self._shared_value(key, lambda: LoadOp([buf, *indices]))

    def store(self, value: Value, buf: Value, indices: list[Value]) -> None:
        self.emit(StoreOp([value, buf, *indices]))

    def read(self, tensor_value: Value, indices: list[Value]) -> Value:
        """The element of a lowered tensor value at ``indices`` (its own rank)."""
        source = self.sources[id(tensor_value)]
        if isinstance(source, TensorConstant):
            return self.constant(source["value"], source.result.type.dtype)
        return self.load(source, indices)

    def read_masked(self, tensor_value: Value, mask: Value, indices: list[Value],
                    other: float) -> Value:
        """The element at ``indices`` where ``mask`` holds, else ``other`` (the indices
        may be out of range where it does not)."""
        return self.emit(MaskedLoadOp([self.sources[id(tensor_value)], mask, *indices],
                                      attributes={"other": other}))

    def read_broadcast(self, tensor_value: Value, out_shape: tuple,
                       out_index: list[Value]) -> Value:
        """Read an operand broadcast (NumPy rules, trailing alignment) to ``out_shape``:
        a size-1 dim stretched to a larger one is read at index 0, other dims at the
        matching output index."""
        shape = tensor_value.type.shape
        lead = len(out_shape) - len(shape)
        indices = [self.index(0) if d == 1 and out_shape[lead + j] != 1 else out_index[lead + j]
                   for j, d in enumerate(shape)]
        return self.read(tensor_value, indices)

    # -- loops ------------------------------------------------------------------------------
    def reduce(self, init: Value, extent: Dim, combiner: str, index_name: str,
               body: Callable[["Emitter", Value], Value]) -> Value:
        """``loops.reduce`` over ``extent``: ``body(emitter, k)`` builds the value yielded
        at iteration k, in the reduce's own block."""
        block = Block([INDEX], [index_name])
        inner = Emitter(block, self.sources, parent=self)
        inner.emit(YieldOp([body(inner, block.args[0])]))
        return self.emit(ReduceOp([init], attributes={"extent": extent, "combiner": combiner},
                                  regions=[Region([block])]))


def _equal_products(a: list[Dim], b: list[Dim]) -> list[tuple[int, int]]:
    """``a`` and ``b`` (shapes of one size) cut into the most groups of leading axes
    whose products are equal dims for every size of the symbols: (axes of a, axes of
    b) each, in order. The row-major position within the whole is then the positions
    within the groups, so a reshape maps each group's index on its own."""
    groups, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        cut = next(((x, y) for x in range(i + 1, len(a) + 1) for y in range(j + 1, len(b) + 1)
                    if product_dim(a[i:x]) == product_dim(b[j:y])), None)
        if cut is None:
            break
        groups.append((cut[0] - i, cut[1] - j))
        i, j = cut
    if i < len(a) or j < len(b):  # what is left (or dims of 1 alone) joins the last group
        if groups and (i == len(a) or j == len(b)):
            x, y = groups.pop()
            i, j = i - x, j - y
        groups.append((len(a) - i, len(b) - j))
    return groups


def _common_prefix(a: list, b: list) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
