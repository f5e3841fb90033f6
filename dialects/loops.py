"""The loops dialect: buffers and loop nests over them (one nest per tensor op).

    %t = loops.alloc : buf<f32[N]>
    loops.parallel {extents = [N]} (%i: index) {          // iterations independent
      %v = loops.load %x, %i : f32
      %s = loops.reduce %zero {combiner = "add", extent = K} : f32 (%k: index) {
        ...
        loops.yield %e                                     // combined into the result
      }
      loops.store %s, %t, %i
    }

Index operands are SSA values of type ``index`` computed with arith ops, so
broadcasting, reshape and transpose are index arithmetic, not copies.
An extent is an int or a symbolic dim name; ``loops.dim`` reads a symbol's value.
"""
from __future__ import annotations

from mlfuse.ir.core import OPAQUE, Attr, Operation, VerifyError
from mlfuse.ir.registry import Dialect
from mlfuse.ir.traits import MEMORY_READ, MEMORY_WRITE, PURE
from mlfuse.ir.types import BOOL, INDEX, INT_BITS, INT_DTYPES, BufferType, ScalarType

COMBINERS = ("add", "max", "min")


def combiner_identity(combiner: str, dtype: str) -> float | int:
    """The neutral value of ``combiner`` on ``dtype``: what a reduction starts from and
    what a thread with no elements holds (0, or the extreme value of the dtype; integers
    have no infinity, so their extreme integer)."""
    if combiner == "add":
        return 0 if dtype in INT_DTYPES + ("index",) else 0.0
    if dtype in INT_BITS:
        bits = INT_BITS[dtype]
        return -2 ** (bits - 1) if combiner == "max" else 2 ** (bits - 1) - 1
    return float("-inf") if combiner == "max" else float("inf")

DIALECT = Dialect("loops", __doc__)


def _check_indices(op, buf, indices):
    if not isinstance(buf.type, BufferType):
        raise VerifyError(f"{op.name} needs a buffer, got {buf.type}", op.loc)
    if len(indices) != buf.type.rank:
        raise VerifyError(f"{op.name}: {len(indices)} indices for a rank-{buf.type.rank} buffer",
                          op.loc)
    for v in indices:
        if v.type != INDEX:
            raise VerifyError(f"{op.name}: indices must be index, got {v.type}", op.loc)


def _check_extents(op, key="extents"):
    extents = op[key] if isinstance(op[key], list) else [op[key]]
    for e in extents:
        if isinstance(e, int) and e < 0:
            raise VerifyError(f"{op.name}: negative extent {e}", op.loc)


@DIALECT.op
class AllocOp(Operation):
    name = "loops.alloc"
    doc = "A fresh buffer (an intermediate or a function result)."

    def verify_op(self):
        if not isinstance(self.result.type, BufferType):
            raise VerifyError("loops.alloc yields a buffer", self.loc)


@DIALECT.op
class DimOp(Operation):
    name = "loops.dim"
    traits = frozenset({PURE})
    attrs = {"sym": Attr("str")}
    doc = "The runtime size bound to a symbolic dim."

    @classmethod
    def infer_types(cls, types, attributes):
        return [INDEX]


class LoopOp(Operation):
    """A loop whose body block takes its induction variable(s) as index arguments."""

    num_regions = 1
    fusion = OPAQUE

    @property
    def extent_list(self) -> list:
        e = self.attributes["extents" if "extents" in self.attrs else "extent"]
        return e if isinstance(e, list) else [e]

    def verify_op(self):
        _check_extents(self, "extents" if "extents" in self.attrs else "extent")
        n = len(self.extent_list)
        args = self.body.args
        if len(args) < n or any(a.type != INDEX for a in args[:n]):
            raise VerifyError(f"{self.name} body must take {n} index argument(s)", self.loc)


@DIALECT.op
class ParallelOp(LoopOp):
    name = "loops.parallel"
    attrs = {"extents": Attr("dims"), "source": Attr("str", "")}
    doc = ("A nest of independent iterations over extents (maps to GPU threads); ``source`` "
           "names the tensor op it computes, for reports.")

    @classmethod
    def infer_types(cls, types, attributes):
        return []

    def verify_op(self):
        super().verify_op()
        if len(self.body.args) != len(self.extent_list):
            raise VerifyError("loops.parallel takes exactly one index per extent", self.loc)


@DIALECT.op
class ForOp(LoopOp):
    name = "loops.for"
    attrs = {"extent": Attr("dim")}
    doc = "A sequential loop (no loop-carried values: stores only)."

    @classmethod
    def infer_types(cls, types, attributes):
        return []

    def verify_op(self):
        super().verify_op()
        if len(self.body.args) != 1:
            raise VerifyError("loops.for takes one index argument", self.loc)


@DIALECT.op
class ReduceOp(LoopOp):
    name = "loops.reduce"
    operand_names = ("init",)
    attrs = {"extent": Attr("dim"), "combiner": Attr("str")}
    doc = ("Accumulate: result = combine(init, v(0), ..., v(extent-1)) where v(k) is what "
           "the body yields; max/min propagate nan as NumPy does.")

    @classmethod
    def infer_types(cls, types, attributes):
        return [types[0]]

    def verify_op(self):
        super().verify_op()
        if self["combiner"] not in COMBINERS:
            raise VerifyError(f"unknown combiner {self['combiner']!r} (known: {', '.join(COMBINERS)})",
                              self.loc)
        if len(self.body.args) != 1:
            raise VerifyError("loops.reduce takes one index argument", self.loc)
        ops = self.body.ops
        if not ops or not isinstance(ops[-1], YieldOp) or len(ops[-1].operands) != 1:
            raise VerifyError("loops.reduce body must end in loops.yield of one value", self.loc)
        if ops[-1].operands[0].type != self.result.type:
            raise VerifyError("loops.reduce yields a value of another type than its init", self.loc)


@DIALECT.op
class YieldOp(Operation):
    name = "loops.yield"
    operand_names = ("*values",)
    is_terminator = True

    @classmethod
    def infer_types(cls, types, attributes):
        return []


@DIALECT.op
class LoadOp(Operation):
    name = "loops.load"
    traits = frozenset({PURE, MEMORY_READ})  # within a kernel no buffer is both read and written
    operand_names = ("buffer", "*indices")
    doc = "Read one element of a buffer."

    @classmethod
    def infer_types(cls, types, attributes):
        if not isinstance(types[0], BufferType):
            raise VerifyError(f"loops.load needs a buffer, got {types[0]}")
        return [types[0].element]

    def verify_op(self):
        _check_indices(self, self.operands[0], self.operands[1:])


@DIALECT.op
class MaskedLoadOp(Operation):
    name = "loops.masked_load"
    traits = frozenset({PURE, MEMORY_READ})
    operand_names = ("buffer", "mask", "*indices")
    attrs = {"other": Attr("float", 0.0)}
    doc = "Read one element if mask is true, else yield ``other`` (indices may be out of range then)."

    @classmethod
    def infer_types(cls, types, attributes):
        if not isinstance(types[0], BufferType):
            raise VerifyError(f"loops.masked_load needs a buffer, got {types[0]}")
        return [types[0].element]

    def verify_op(self):
        if self.operands[1].type != BOOL:
            raise VerifyError("loops.masked_load mask must be bool", self.loc)
        _check_indices(self, self.operands[0], self.operands[2:])


@DIALECT.op
class StoreOp(Operation):
    name = "loops.store"
    traits = frozenset({MEMORY_WRITE})
    operand_names = ("value", "buffer", "*indices")
    doc = "Write one element of a buffer."

    @classmethod
    def infer_types(cls, types, attributes):
        return []

    def verify_op(self):
        value, buf = self.operands[0], self.operands[1]
        _check_indices(self, buf, self.operands[2:])
        if value.type != ScalarType(buf.type.dtype):
            raise VerifyError(f"loops.store of {value.type} into {buf.type}", self.loc)


ACCESSES = (LoadOp, MaskedLoadOp, StoreOp)


def access_parts(op: Operation) -> tuple:
    """The buffer and the indices (a list) of a load, masked load or store: one place
    that knows where each access keeps them (passes and codegen both read them)."""
    if isinstance(op, LoadOp):
        return op.operands[0], list(op.operands[1:])
    if isinstance(op, MaskedLoadOp):
        return op.operands[0], list(op.operands[2:])
    if isinstance(op, StoreOp):
        return op.operands[1], list(op.operands[2:])
    raise TypeError(f"{op.name} is not a load or a store")
