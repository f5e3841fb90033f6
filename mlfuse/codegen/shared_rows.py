"""Rows held in registers and shared memory: a row kernel's "shared-vector" variant.

A row too long for the registers variant (VALUES_PER_THREAD x REGISTER_ROW_THREADS
values) runs, in the streaming variant, every row loop over the row in memory again
(softmax over rows of 65536 f32: x read three times, 47% of copy bandwidth). This
variant reads it once (``mlfuse/row_hold.py`` has the geometry: up to
SHARED_ROW_THREADS threads, the bytes a call takes): thread t takes vectors t,
t + nthreads, ... of the row, as the registers-vector variant does; its first
VALUES_PER_THREAD // lanes vectors are that variant's registers, and its other
vectors of each held buffer (``held_buffers``: the buffers several passes read) live in
dynamic shared memory, an area per buffer, vector ``v`` at
``((v - VALUES_PER_THREAD // lanes) * nthreads + tid) * lanes``, ``lanes`` the values of
a 16-byte vector (VECTOR_WIDTH f32, or VECTOR_WIDTH_16 where every vector access moves
16-bit values: ``emit_kernel.half_row_vectors``). A held buffer's row may be a flat row
(``flat_rows.py``: instance norm's rows over [H, W], a reshape's row): its vectors and
copies at ``row_base + first``, the host testing the row bases as it does for the
registers-vector variant.

Each row loop runs in two parts, the body emitted once for each:

- registers: the registers-vector variant's loop (fill, then the lanes; values that
  later loops compute again kept in registers). The loop that first reads a held
  buffer first issues ``cp.async`` copies of all of the thread's vectors past its
  registers into their places in shared memory (in flight together with the register
  fill: the whole row's loads at once, no registers held for them), and waits for
  them after its register part;
- shared: the thread's vectors past its registers, one at a time, held buffers read
  from shared memory, other loads a vector into a tile, costly values computed again
  (a kept value would need shared memory too).

A thread reads only the places it copied, so no barrier guards them (``cp.async``'s
wait makes a thread's own copies visible to it). Over 48 KB a kernel needs the driver's
leave (``_DynamicShared``, as the tensor-core kernels). The host launches this
variant where the rows pass the registers variant, fit the shared memory at the call's
size and are whole aligned vectors, and the split plan (few rows) does not take them.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from mlfuse.ir.core import Operation, Value
from mlfuse.ir.types import itemsize
from mlfuse.row_hold import held_buffers

from mlfuse.codegen.emit_kernel import VALUES_PER_THREAD, KernelEmitter, _row_loops
from mlfuse.codegen.emit_vector import VECTOR_WIDTH
from mlfuse.codegen.reuse import Reuse, prefetchable_loads, row_held_loads
from mlfuse.codegen.row_plans import PartedRowLoops
from mlfuse.codegen.scalar import COMPUTE_TYPE, STORAGE_TYPE

_DOC = ("Row schedule over [{space}]: one block per point, each thread holds its first "
        "VALUES_PER_THREAD values of a row in registers and the rest in shared memory, in "
        "vectors of 16 bytes (the row is read once).")


@dataclass
class Area:
    """A held buffer's part of the dynamic shared memory: the array (by storage type),
    the name of its first value's offset in it, and the local array a vector of it is
    read into in a loop's shared part."""

    buffer: Value
    array: str
    at: str
    tile: str = ""


class SharedRowsEmitter(PartedRowLoops, KernelEmitter):
    """The "shared-vector" variant of a row kernel (see the module doc)."""

    # a full SM's threads resident (1024 at 64 registers: 2 blocks of 512, where a
    # smaller SHARED_ROW_THREADS lets two rows' loads and reductions overlap)
    launch_bound = "(SHARED_ROW_THREADS, max(1, 1024 // SHARED_ROW_THREADS))"
    base_variant = "registers-vector"  # the registers part's variant
    keep_to_free_loads = False  # (row_plans.py)
    doc = _DOC
    row_loop_parts = ("registers", "shared")

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, self.base_variant, target, helpers, hw, taken)
        helpers.update({"_mma_intrinsics", "_held_access"})  # cp.async; shared vector loads
        self.held_buffers = held_buffers(op)
        self.areas: dict[int, Area] = {}  # id(held load) -> its buffer's area
        self.copied: dict[int, list[Operation]] = {}  # id(loop) -> held loads it copies
        self.tiles: dict[int, str] = {}  # id(unheld load) -> its tile in the shared part
        # the current loop's early vector loads that no other loop reads (layernorm's
        # gamma and beta): in the register part too a vector at a time, into their tiles
        # (all of them ahead, with the row's, took 48 values a thread: spills at 64
        # registers); and whether a fill phase is being emitted
        self.single: set[int] = set()
        self.late: list[Operation] = []
        self.filling = False
        for n in ("place", "n_vectors"):
            self.local[n] = self.namer.fresh(n)
        self.lanes_set()

    def lanes_set(self) -> None:
        """What follows from the kernel's values a vector: a thread's vectors in
        registers, the shared read of a held vector and the bytes of its copy."""
        self.register_vectors = f"{VALUES_PER_THREAD} // {self.vector_lanes}"
        halves = self.vector_lanes != VECTOR_WIDTH
        self.load_held = "_load_held_halves" if halves else "_load_held"
        self.lane_count = self.hw.vector_width * (2 if halves else 1)

    def emit(self) -> str:
        with self.kernel_def(doc=self.doc):
            self.row_body(_row_loops(self.op))
        return self.w.text()

    def plan_held_rows(self, row_loops: list[Operation], reuse: bool = True) -> None:
        """The registers variant's plan, then each held buffer's area (widest values
        first, so every area starts aligned) and the loop that copies it; every other
        early load gets a one-vector tile for the shared part."""
        super().plan_held_rows(row_loops, reuse)
        w, loc = self.w, self.local
        held = sorted(self.held_buffers, key=lambda b: -itemsize(b.type.dtype))
        groups, _ = row_held_loads(row_loops)
        extent = self.extent(row_loops[0].extent_list[0])
        w.line(f"# vectors past a thread's first {self.register_vectors} (registers) are held in "
               "shared memory, an area per buffer")
        w.line(f"{loc['n_vectors']} = -(-{extent} // ({self.vector_lanes} * {loc['nthreads']}))")
        self.hold_areas(row_loops, held, groups, self.register_vectors, vectors=True)
        self.single = {id(o) for g in groups if len({id(x.parent) for x in g.loads}) == 1
                       for o in g.loads}
        for loop in row_loops:
            for o in prefetchable_loads(loop.body)[0]:
                if id(o) not in self.areas:
                    self.tiles[id(o)] = self.local_array(
                        f"{self.namer(o.operands[0])}_tile", COMPUTE_TYPE[o.result.type.dtype],
                        self.vector_lanes)

    def hold_areas(self, row_loops, held, groups, in_registers, vectors: bool) -> None:
        """Each held buffer's area of dynamic shared memory (one array per storage type,
        the areas one after another) and the loop that copies it: the slots past a
        thread's first ``in_registers`` (vectors of ``vector_lanes`` values, or values)."""
        w, loc = self.w, self.local
        offset, arrays = "0", {}
        for buf in held:
            storage = STORAGE_TYPE[buf.type.dtype]
            if storage not in arrays:
                arrays[storage] = self.namer.fresh(f"held_{storage}")
                w.line(f"{arrays[storage]} = cuda.shared.array(0, numba.types.{storage})"
                       "  # dynamic")
            at = self.namer.fresh(f"{self.namer(buf)}_at")
            size = itemsize(buf.type.dtype)
            w.line(f"{at} = {offset if offset == '0' else f'({offset}) // {size}'}  # this "
                   "buffer's area, in its values")
            area = Area(buf, arrays[storage], at)
            if vectors:  # a vector's values on their way between shared memory and the row
                area.tile = self.local_array(f"{self.namer(buf)}_held",
                                             COMPUTE_TYPE[buf.type.dtype], self.vector_lanes)
            loads = [o for g in groups for o in g.loads if o.operands[0] is buf]
            self.areas.update({id(o): area for o in loads})
            filler = next(loop for loop in row_loops if any(o.parent is loop.body for o in loads))
            self.copied.setdefault(id(filler), []).append(loads[0])
            past = f"max(0, {loc['n_vectors']} - {in_registers})"
            lanes = f" * {self.vector_lanes}" if vectors else ""
            # the next area's first byte
            offset = f"{at} * {size} + {past} * {loc['nthreads']}{lanes} * {size}"

    # -- a row loop in two parts (PartedRowLoops) -------------------------------
    @contextmanager
    def loop(self, op, shared: bool):
        if not shared:
            with super().loop(op, shared):
                yield
            return
        if self.part == "registers":
            copies = self.copied.get(id(op), [])
            if copies:
                self.copy_past_registers(op, copies)
            index_ops, loads = self.fills[id(op)]
            self.late = [o for o in loads if id(o) in self.single and id(o) in self.tiles
                         and id(o) in self.vector_loads]
            self.fills[id(op)] = (index_ops, [o for o in loads if o not in self.late])
            with super().loop(op, shared):
                yield
            self.fills[id(op)], self.late = (index_ops, loads), []
            if copies:
                self.w.line("_cp_async_wait(0)  # this thread's copies into shared memory landed")
            return
        with self.shared_part(op):
            yield

    def copy_past_registers(self, op, loads: list[Operation]) -> None:
        """cp.async of each of the thread's vectors past its registers, of ``loads``'
        buffers, into their places in shared memory; a vector past the row's end reads
        nothing (zeros)."""
        w, loc = self.w, self.local
        k = self.define(op.body.args[0], "k")
        extent = self.extent(op.extent_list[0])
        w.line("# this thread's vectors past its registers: copied into shared memory, in "
               "flight with the register loads")
        with w.indented(f"for {loc['vec']} in range({self.register_vectors}, {loc['n_vectors']}):"):
            self.vector_place(extent)
            self.lanes_for(op, k, extent)
            for o in loads:
                area = self.areas[id(o)]
                nbytes = self.lane_count * itemsize(area.buffer.type.dtype)
                w.line(f"_cp_async({area.array}, {area.at} + {loc['place']}, "
                       f"{self.vector_operand(o.operands[0], o.operands[1:])}, "
                       f"{loc['first']} < {self.vectors_end(extent)}, {nbytes})")
        w.line("_cp_async_commit()")

    def vector_place(self, extent: str) -> None:
        """``first`` (the vector's first row index) and ``place`` (its offset in each area)
        of the thread's vector ``vec``."""
        w, loc = self.w, self.local
        lanes = self.vector_lanes
        w.line(f"{loc['first']} = {self.row_vectors()[1]}")
        w.line(f"{loc['place']} = (({loc['vec']} - {self.register_vectors}) * {loc['nthreads']} + "
               f"{loc['tid']}) * {lanes}")

    def lanes_for(self, op, k: str, extent: str) -> None:
        from mlfuse.codegen.emit_vector import Lanes
        self.lanes = Lanes(op.body.args[0], k, self.local["first"], extent)

    @contextmanager
    def shared_part(self, op):
        """The loop over the thread's vectors past its registers: held loads from shared
        memory, others a vector at a time into their tiles, nothing kept for later."""
        w, loc = self.w, self.local
        k = self.define(op.body.args[0], "k")
        extent = self.extent(op.extent_list[0])
        self.lanes_for(op, k, extent)
        saved = self.held, self.fills.get(id(op)), self.reuse, self.kept
        loads, index_ops = prefetchable_loads(op.body)
        self.held = dict(self.tiles)
        self.fills[id(op)] = (index_ops, [o for o in loads if id(o) in self.tiles])
        self.reuse, self.kept = Reuse(dead=set(self.flat_dead)), {}
        w.line("# this thread's vectors past its registers, held in shared memory")
        with w.indented(f"for {loc['vec']} in range({self.register_vectors}, {loc['n_vectors']}):"):
            self.vector_place(extent)
            with w.indented(f"if {loc['first']} < {self.vectors_end(extent)}:"):
                if self.fills[id(op)][1]:
                    self.vector_fill(op)
                read = {id(a.buffer): a for o in op.body.ops if (a := self.areas.get(id(o)))}
                for area in read.values():  # the held vectors: one shared load each
                    w.line(f"{self.load_held}({area.array}, ({area.at} + {loc['place']},), "
                           f"{area.tile}, 0)")
                with self.each_lane():
                    yield
                self.vector_drain([o for o in op.body.ops if id(o) in self.staged])
        self.held, fills, self.reuse, self.kept = saved
        self.fills[id(op)] = fills

    def vector_fill(self, owner: Operation, **which) -> None:
        self.filling = True
        super().vector_fill(owner, **which)
        self.filling = False

    @contextmanager
    def each_lane(self):
        """A vector's lanes; in a register part, after the vector's late loads."""
        if self.late and not self.filling:
            for o in self.late:
                operand = self.vector_operand(o.operands[0], o.operands[1:])
                self.w.line(f"{self.vector_moves[0]}({operand}, {self.tiles[id(o)]}, 0)")
        with super().each_lane():
            yield

    def vector_slot(self) -> str:
        return "0" if self.part == "shared" else super().vector_slot()

    def load_statement(self, op: Operation) -> None:
        if any(o is op for o in self.late):  # loaded with its vector, into its tile
            name = self.define(op.result, self.namer(op.operands[0]) + "_v")
            self.w.line(f"{name} = {self.tiles[id(op)]}[{self.local['lane']}]")
            return
        area = self.areas.get(id(op)) if self.part == "shared" else None
        if area is None:
            return super().load_statement(op)
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        self.w.line(f"{name} = {area.tile}[{self.local['lane']}]")


__all__ = ["Area", "SharedRowsEmitter"]
