"""Traits: facts about an op kind, declared once on its class (``traits = {...}``) and
read by every pass and by codegen, which never test an op's name or dialect prefix.

    class ExpOp(Operation):
        traits = frozenset({PURE, SCALAR_COMPUTE, COSTLY})

``op.has_trait(PURE)`` (or ``cls.has_trait``) asks. The fusion kind (``fusion``) and
a reduction's combiner stay plain class attributes, as they carry a value.
"""
from __future__ import annotations


class Trait:
    """A named, documented fact an op kind may declare."""

    def __init__(self, name: str, doc: str):
        self.name = name
        self.doc = doc

    def __repr__(self) -> str:
        return self.name


PURE = Trait("Pure", "No side effects; its results depend only on its operands and attributes "
             "(and, for a load, on memory no op of the same kernel writes): CSE may merge two "
             "identical ones and an unused one may be dropped.")
SCALAR_COMPUTE = Trait("ScalarCompute", "Computes a register value from scalar operands: one "
                       "instruction (or libdevice call) per point, counted as a flop by the cost "
                       "model, written as an expression by codegen.")
COSTLY = Trait("Costly", "A scalar op that costs many instructions (libdevice calls, IEEE "
               "division): worth a register to compute once and reuse.")
COMPOSITE = Trait("Composite", "Exists only until the decompose pass rewrites it into primitive "
                  "ops; nothing below the tensor level accepts it.")
MEMORY_READ = Trait("MemoryRead", "Reads one element of a buffer.")
MEMORY_WRITE = Trait("MemoryWrite", "Writes one element of a buffer.")
