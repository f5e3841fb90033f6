"""The phases of a vector kernel: a thread's values as vectors of VECTOR_WIDTH neighbours.

A mixin of ``emit_kernel.KernelEmitter`` for its "-vector" variants. Each phase runs
over the thread's vectors (``vec``); within a vector, over its lanes (``lane``), whose
``slot`` in the thread's local arrays is ``vec * lanes + lane``, lanes being the
emitter's ``vector_lanes`` (VECTOR_WIDTH, or VECTOR_WIDTH_16 for 16 bytes of 16-bit
values, moved by ``vector_moves``: ``_load_halves``/``_store_halves``). The loops have
constant trip counts, so Numba unrolls them and the local arrays become registers.

The host launches a vector kernel only where VECTOR_WIDTH divides the innermost
extent, so every vector is whole: no lane needs a bounds check. Except where the
emitter's ``ragged_end`` is set (split_stages.py's twins of a kernel over [], launched
on a row of no whole vectors: a whole tensor's sum): the loop's last vector may end past its
limit, so it moves a value at a time where it does, and each lane runs where its index
is below the limit.

- fill: one ``_load_vector`` per vector access; the other early loads value by value
  in the vector's lanes.
- compute: the body in every lane; a store that is a vector access writes its value
  into a local array instead, and the drain then stores the whole vector at once.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from mlfuse.codegen.scalar import COMPUTE_TYPE
from mlfuse.dialects.loops import LoadOp, StoreOp
from mlfuse.ir.core import Operation, Value

VECTOR_WIDTH = "VECTOR_WIDTH"


@dataclass
class Lanes:
    """The innermost loop index of a vector loop: its value, the name its lanes give it,
    the name of its value at the vector's first lane, and its extent."""

    arg: Value
    index: str
    first: str
    limit: str


class VectorPhases:
    """Needs from its host class: w, local, namer, held, fills, staged, vector_loads,
    lanes, reuse, helpers, local_array, statement, fill_line, index, vector_lanes,
    vector_moves, slot_offset (code added to every slot: a batched row's first slot),
    subscript, stored."""

    ragged_end = False  # the loop's last vector may pass its limit (module doc)

    def plan_vectors(self, accesses: list[Operation], size: str) -> None:
        """Record which loads fill a vector at a time, and give each store that is a
        vector access a local array of ``size`` slots to wait in."""
        self.helpers.add("_vector_access")
        self.vector_loads = {id(o) for o in accesses if isinstance(o, LoadOp)}
        for o in accesses:
            if isinstance(o, StoreOp):
                buf = o.operands[1]
                self.staged[id(o)] = self.local_array(
                    f"{self.namer(buf)}_vals", COMPUTE_TYPE[buf.type.dtype], size)

    @contextmanager
    def each_vector(self, count: str, first: str, limit: str):
        """``vec`` over ``count`` vectors, with ``first`` (the innermost or flat index of
        its first value) for each vector that starts before ``limit``."""
        w, loc = self.w, self.local
        with w.indented(f"for {loc['vec']} in range({count}):"):
            w.line(f"{loc['first']} = {first}")
            with w.indented(f"if {loc['first']} < {limit}:"):
                yield

    @contextmanager
    def each_lane(self):
        """``lane`` over the current vector's values, with their ``slot`` and innermost
        loop index (a vector kernel's vectors are whole: the vector's values divide the
        innermost extent)."""
        w, loc, lanes, width = self.w, self.local, self.lanes, self.vector_lanes
        with w.indented(f"for {loc['lane']} in range({width}):"):
            first = self.vector_slot()
            w.line(f"{loc['slot']} = " + (f"{first} + " if first != "0" else "") + loc["lane"])
            w.line(f"{lanes.index} = {lanes.first} + {loc['lane']}")
            if not self.ragged_end:
                yield
                return
            with w.indented(f"if {lanes.index} < {lanes.limit}:"):
                yield

    @contextmanager
    def vector_walk(self, op: Operation, vectors: str, first: str, limit: str, fill: bool,
                    what: str):
        """Loop ``op``'s ``vectors`` of a thread (``each_vector``): where ``fill``, first
        each one's fill phase (its loads in flight at once), then each one's lanes (the
        body goes inside) and drain; ``what`` the vectors are of, for the comment."""
        params = self.parameter_loads(op) if fill else set()
        ahead = fill and any(id(o) not in params for o in self.fills[id(op)][1])
        if ahead:
            self.w.line(f"# this thread's vectors of the {what} first: loads with no use "
                        "between them are in flight at once")
            with self.each_vector(vectors, first, limit):
                self.vector_fill(op, skip=params)
        with self.each_vector(vectors, first, limit):
            if params:  # a vector of each parameter, just before its lanes
                self.vector_fill(op, only=params)
            with self.each_lane():
                yield
            self.vector_drain([o for m in self.passes.get(id(op), [op]) for o in m.body.ops
                               if id(o) in self.staged])

    def parameter_loads(self, op: Operation) -> set[int]:
        """Ids of ``op``'s early vector loads of a parameter every row reads the same
        (layernorm's gamma[k]: indexed by the loop's own index alone), read a vector at a
        time just before its lanes rather than all ahead: they come from L2, and held
        ahead with the row's values they took a register a value (residual + layernorm
        in f16, rows of 4096: gamma's and beta's 32 values a thread, 112 registers)."""
        k = op.body.args[0]
        return {id(o) for o in self.fills[id(op)][1]
                if id(o) in self.vector_loads and all(v is k for v in o.operands[1:])}

    def vector_slot(self) -> str:
        """The slot of the current vector's first lane in the thread's local arrays."""
        return f"{self.slot_offset}{self.local['vec']} * {self.vector_lanes}"

    def vector_index(self, indices: list[Value]) -> str:
        """The index tuple of a vector access's first value."""
        lane = self.namer(self.lanes.arg)  # (a for walked in a reduce's pass: its index too)
        names = [self.namer(v) for v in indices]
        names = [self.lanes.first if n == lane else n for n in names]
        return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"

    def vector_operand(self, buf: Value, indices: list[Value]) -> str:
        """``array, index`` of a vector access's first value, as the intrinsics take them
        (split_stages.py: a flat row's view at ``row_base + first``)."""
        return f"{self.namer(buf)}, {self.vector_index(indices)}"

    def vector_fill(self, owner: Operation, skip: set[int] = frozenset(),
                    only: set[int] | None = None) -> None:
        """The current vector's fill phase of the loads ``owner`` issues early (but
        ``skip``; where ``only`` is given, those alone)."""
        w = self.w
        index_ops, loads = self.fills[id(owner)]
        loads = [o for o in loads if id(o) not in self.reuse.dead  # (only fed kept values)
                 and id(o) not in skip and (only is None or id(o) in only)]
        whole = [o for o in loads if id(o) in self.vector_loads]

        def vectors():
            for o in whole:
                w.line(f"{self.vector_moves[0]}({self.vector_operand(o.operands[0], o.operands[1:])}, "
                       f"{self.held[id(o)]}, {self.vector_slot()})")
        if whole:
            self._whole_or_lanes(vectors, lambda: self._fill_values(index_ops, whole))
        single = [o for o in loads if id(o) not in self.vector_loads]
        if single:
            with self.each_lane():
                self._fill_values(index_ops, single)

    def _fill_values(self, index_ops: list[Operation], loads: list[Operation]) -> None:
        """A lane's values of ``loads`` (their index ops first)."""
        for o in index_ops:
            self.statement(o, shared=False)
        for o in loads:
            self.fill_line(o)

    def vector_drain(self, stores: list[Operation]) -> None:
        """The current vector's stores, once its lanes have computed their values."""
        def vectors():
            for o in stores:
                self.w.line(f"{self.vector_moves[1]}({self.vector_operand(o.operands[1], o.operands[2:])}, "
                            f"{self.staged[id(o)]}, {self.vector_slot()})")

        def values():
            for o in stores:
                buf = o.operands[1]
                self.w.line(f"{self.subscript(buf, list(o.operands[2:]))} = " + self.stored(
                    f"{self.staged[id(o)]}[{self.local['slot']}]", buf.type.dtype))
        if stores:
            self._whole_or_lanes(vectors, values)

    def _whole_or_lanes(self, whole, by_lanes) -> None:
        """Emit the current vector's move whole (``whole()``); where ``ragged_end``, only
        if the vector ends by the loop's limit, else ``by_lanes()`` (a value a lane)."""
        if not self.ragged_end:
            return whole()
        with self.w.indented(f"if {self.lanes.first} + {self.vector_lanes} <= {self.lanes.limit}:"):
            whole()
        with self.w.indented("else:  # the row's last vector passes its end: a value a lane"):
            with self.each_lane():
                by_lanes()
