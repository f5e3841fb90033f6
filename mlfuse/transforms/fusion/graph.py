"""The dataflow graph of loop nests that the fusion pass decides on.

Each ``loops.parallel`` from lowering is a :class:`Nest`: it writes one buffer at
its identity index and reads others. The graph knows, for each buffer, which nest
writes it and which nests read it, and which buffers the function returns.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlfuse.dialects.loops import ParallelOp, ReduceOp, StoreOp
from mlfuse.ir.builtin import FuncOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.types import num_elements
from mlfuse.transforms.fusion.input_check import buffers_loaded, check_nests
from mlfuse.transforms.fusion.spaces import Space, reduction_space
from mlfuse.ir.traits import SCALAR_COMPUTE


@dataclass(eq=False)
class Nest:
    op: ParallelOp
    index: int                      # position in program order
    out: Value | None               # the buffer it writes (None if it is not a simple nest)
    reads: list[Value] = field(default_factory=list)
    reduces: list[ReduceOp] = field(default_factory=list)  # top-level reductions in the body
    space: Space | None = None      # the full space its reductions walk (spaces.py), if any
    n_ops: int = 0                  # scalar ops per point (flops estimate)

    @property
    def extents(self) -> list:
        return list(self.op["extents"])

    @property
    def is_pointwise(self) -> bool:
        """No reduction inside: cheap to recompute at any index (inlinable)."""
        return not self.reduces

    @property
    def name(self) -> str:
        return (self.out.name_hint if self.out is not None and self.out.name_hint else
                f"nest{self.index}")

    @property
    def source(self) -> str:
        return self.op.attributes.get("source") or "loops.parallel"

    def points(self, dims: dict) -> int:
        return num_elements(self.extents, dims) or 0

    def __repr__(self) -> str:
        return f"<Nest {self.index} {self.name}>"


def _identity_store(nest_op: ParallelOp) -> Value | None:
    """The buffer a nest writes if it has one store, at its own indices, at top level."""
    stores = [op for op in nest_op.walk() if isinstance(op, StoreOp)]
    if len(stores) != 1 or stores[0].parent is not nest_op.body:
        return None
    store = stores[0]
    idx = list(store.operands[2:])
    args = list(nest_op.body.args)
    if idx != args:
        return None
    return store.operands[1]


def _count_ops(op: Operation) -> int:
    return sum(1 for inner in op.walk() if inner.has_trait(SCALAR_COMPUTE) and inner.operands)


class NestGraph:
    """Nests of one function with their producer/consumer relations."""

    def __init__(self, func: FuncOp):
        self.func = func
        self.nests: list[Nest] = []
        for op in func.body.ops:
            if isinstance(op, ParallelOp):
                nest = Nest(op, len(self.nests), _identity_store(op))
                nest.reads = [b for b in buffers_loaded(op) if b is not nest.out]
                nest.reduces = [o for o in op.body.ops if isinstance(o, ReduceOp)]
                nest.space = reduction_space(op, nest.reduces)
                nest.n_ops = _count_ops(op)
                self.nests.append(nest)
        self.writer: dict[int, Nest] = {id(n.out): n for n in self.nests if n.out is not None}
        self.returned: set[int] = {id(v) for v in func.return_op.operands}
        check_nests(self.nests, self.writer)  # what the planner assumes, or an error
        # both directions once, in program order: the planner asks them at every move
        self._producers = {n: [self.writer[id(b)] for b in n.reads if id(b) in self.writer]
                           for n in self.nests}
        readers: dict[int, list[Nest]] = {}
        for n in self.nests:
            for b in n.reads:
                readers.setdefault(id(b), []).append(n)
        self._consumers = {n: readers.get(id(n.out), []) if n.out is not None else []
                           for n in self.nests}
        self._consumer_sets = {n: frozenset(c) for n, c in self._consumers.items()}

    def producers(self, nest: Nest) -> list[Nest]:
        return self._producers[nest]

    def consumers(self, nest: Nest) -> list[Nest]:
        return self._consumers[nest]

    def consumer_set(self, nest: Nest) -> frozenset:
        return self._consumer_sets[nest]

    def is_returned(self, nest: Nest) -> bool:
        return nest.out is not None and id(nest.out) in self.returned
