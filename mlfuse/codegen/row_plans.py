"""The row schedule's plans and reductions: a mixin of ``emit_kernel.KernelEmitter``.

"row": one block per point (blocks stride over points). At the top of the body, a
``loops.reduce`` is split over the block's threads (each accumulates a strided part,
then a block reduction hands the result to every thread) and a ``loops.for`` strides
its threads over the extent; other top-level ops run redundantly in every thread
(cheap scalars), and top-level stores are done by thread 0 alone. Two variants:
"registers" (rows of at most VALUES_PER_THREAD * REGISTER_ROW_THREADS values: thread
t takes values t, t + nthreads, ... of a row in VALUES_PER_THREAD slots; each row loop
first issues its loads for every slot, and a row value that several row loops read
is loaded once into a local array, so the row is read from memory once, and a costly
value that several row loops compute, such as softmax's exp(x - max), is computed
once and kept the same way) and
"streaming" (any row length: each row loop re-reads the row, STREAM_TILE values per
thread at a time, that tile's loads issued first). The host picks one by
the row length; a constant row length needs only one. The vector variant
"registers-vector" takes a thread's values as vectors (``emit_vector.py``); the
streaming variant's vector twin is stream_vector.py's.

The schedule modules of the row family (split, strips, warp-rows, shared rows) reuse
these plans and override their hooks (``row_span``, ``row_vectors``, ``accumulate``,
``leader``). ``loop`` and ``sequential_reduce`` also emit the loops that one thread
runs alone, in every schedule.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

from mlfuse.codegen.emit_vector import Lanes
from mlfuse.codegen.flat_rows import row_flat_vectors
from mlfuse.codegen.helpers import SCRATCH_SLOTS, block_reduce_name
from mlfuse.codegen.reuse import prefetchable_loads, row_held_loads, row_reused_values
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, combine, identity
from mlfuse.codegen.vector import row_vector_accesses
from mlfuse.dialects.loops import ACCESSES, ForOp, LoopOp, ReduceOp
from mlfuse.dialects.reductions import shared_body_ops, sibling_passes
from mlfuse.errors import MlfuseError
from mlfuse.hardware import Target
from mlfuse.ir.core import Operation

# Module constants (from mlfuse.hardware) that row kernels read as compile-time constants.
VALUES_PER_THREAD = "VALUES_PER_THREAD"
STREAM_TILE = "max(1, VALUES_PER_THREAD // 2)"  # a streaming loop's values per thread in flight


def stream_tile(loads: int) -> str:
    """A streaming loop's values per thread in flight where it loads ``loads`` buffers a
    value: a tile of each, fewer values of each, so the tiles fit the streaming
    variant's 64 registers (8 of one buffer do)."""
    return STREAM_TILE if loads <= 1 else \
        f"max(1, VALUES_PER_THREAD // {2 * loads if loads <= 2 else 4 * loads})"


def whole_vector_slots(lanes: str) -> str:
    """The host's test that a thread's VALUES_PER_THREAD slots are whole vectors of
    ``lanes`` values. Every vector row kernel (registers, peeled, held) takes
    VALUES_PER_THREAD // lanes of them: a module whose constant was edited below a
    vector would compute nothing, so the host takes the scalar kernel there."""
    return f"VALUES_PER_THREAD % {lanes} == 0"


def _row_loops(op: LoopOp) -> list[Operation]:
    return [o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]


def row_variants(op: LoopOp, hw: Target) -> list[str]:
    """The row kernels ``op`` needs: "registers" unless a constant row extent is too
    long for it, "streaming" unless every row extent is a constant short enough."""
    extents = [o["extent"] for o in _row_loops(op)]
    limit = hw.row_values_per_thread * hw.row_threads
    short = all(isinstance(e, int) and e <= limit for e in extents)
    long = any(isinstance(e, int) and e > limit for e in extents)
    return (["registers"] if not long else []) + (["streaming"] if not short else [])


class RowPlans:
    """Needs from its host class: w, local, namer, op, variant, vector, target, hw,
    helpers, scratch, held, fills, reuse, kept, passes, followers, merged, row_slots,
    held_rows, lanes, prefilled, vector_lanes, define, extent, points, local_array,
    hold, fill, unravel, block, plan_flat_rows, row_base_lines, stream_order,
    plan_vectors, vector_walk."""

    # keep a value several loads feed, where that leaves them unread (reuse.py); the
    # held-rows variants do not: their shared parts compute it again from shared
    # memory, and the kept array was registers on top of the held values' (spills)
    keep_to_free_loads = True

    # -- plans -------------------------------------------------------------------
    def row_body(self, row_loops: list[Operation]) -> None:
        w, loc = self.w, self.local
        w.line(f"{loc['tid']} = cuda.threadIdx.x")
        w.line(f"{loc['nthreads']} = cuda.blockDim.x")
        self.declare_scratch(row_loops)
        if self.variant.startswith("registers"):  # (-vector, -peeled too)
            self.plan_held_rows(row_loops)
        elif self.variant == "streaming":
            row_loops = self.plan_passes(row_loops)
            self.plan_stream_tiles(row_loops)
        flat_vectors = row_flat_vectors(self.op, row_loops)[0] if self.vector else []
        if not self.vector or flat_vectors:  # rows through a reshape or a flattened nest:
            # one contiguous range each (flat_rows.py), in vectors too where they step along it
            self.plan_flat_rows([(o, o.body.args[:1], o.extent_list) for o in row_loops])
            if not self.vector:  # (a vector kernel divides once a vector: no cursors)
                self.plan_segment_steps(loc["nthreads"])
        if self.vector:
            self.plan_vectors(row_vector_accesses(row_loops) + flat_vectors, VALUES_PER_THREAD)
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        with w.indented(f"for {loc['point']} in range(numba.int64(cuda.blockIdx.x), "
                        f"{loc['n_points']}, cuda.gridDim.x):"):
            self.unravel(loc["point"])
            self.row_base_lines()
            self.block(self.op.body, top=True)

    def declare_scratch(self, row_loops: list[Operation], slots: str | None = None) -> None:
        """A shared array per compute type of the reduces among ``row_loops``, for the
        block reductions (``slots`` each, default the target's SCRATCH_SLOTS)."""
        for o in row_loops:
            if isinstance(o, ReduceOp):
                ctype = COMPUTE_TYPE[o.result.type.dtype]
                if ctype not in SHARED_TYPE:
                    raise MlfuseError(f"codegen: no block reduction of {o.result.type}", o.loc)
                if ctype not in self.scratch:
                    self.scratch[ctype] = self.namer.fresh(f"scratch_{ctype}")
                    self.w.line(f"{self.scratch[ctype]} = cuda.shared.array("
                                f"{slots or SCRATCH_SLOTS[self.target]}, {SHARED_TYPE[ctype]})")

    def plan_held_rows(self, row_loops: list[Operation], reuse: bool = True) -> None:
        """The registers variant's local arrays: every load a row loop can issue early
        gets VALUES_PER_THREAD slots (shared by the loops that load the same values),
        filled by the loop's fill phase."""
        groups, index_ops = row_held_loads(row_loops)
        groups = [g for g in groups if self.holds(g.loads[0])]
        first = {id(g.loads[0]) for g in groups}  # the load that fills a group's array
        for group in groups:
            self.hold(group.loads, self.row_slots)
        for loop in row_loops:
            loads = [o for o in loop.body.ops if id(o) in first]
            self.fills[id(loop)] = (index_ops[id(loop)] if loads else [], loads)
        if self.hw.row_reuse and reuse:  # costly values later row loops read again
            self.reuse = row_reused_values(row_loops, self.keep_to_free_loads)
            for o in self.reuse.kept.values():
                self.kept[id(o)] = self.local_array(
                    f"{o.result.name_hint or o.name.split('.')[1]}_vals",
                    COMPUTE_TYPE[o.result.type.dtype], self.row_slots)

    def holds(self, load: Operation) -> bool:
        """Whether the registers variant holds ``load``'s values (every early load does
        here; peeled_rows.py reads some where they are used)."""
        return True

    def plan_stream_tiles(self, row_loops: list[Operation]) -> None:
        """The streaming variant's tiles: each row loop walks the row STREAM_TILE values per
        thread at a time, that tile's loads issued first (in flight together: one load per
        thread at a time cannot hide DRAM's latency). The j-th early loads of every row
        loop share a local array of STREAM_TILE slots; each loop fills it again."""
        arrays: dict[tuple, str] = {}
        most = max((len(prefetchable_loads(loop.body)[0]) for loop in row_loops), default=1)
        self.stream_tile = stream_tile(most)
        for loop in row_loops:
            loads, index_ops = prefetchable_loads(loop.body)
            for j, o in enumerate(loads):
                key = (j, COMPUTE_TYPE[o.result.type.dtype])
                if key not in arrays:  # (a local array's size must be a plain constant)
                    self.hold([o], VALUES_PER_THREAD)
                    arrays[key] = self.held[id(o)]
                self.held[id(o)] = arrays[key]
            self.fills[id(loop)] = (index_ops if loads else [], loads)

    def plan_passes(self, row_loops: list[Operation]) -> list[Operation]:
        """Sibling reduces walked in one loop (``sibling_passes``: variance's shifted
        sums with the mean's): returns the loops that walk the row, one per pass."""
        walked = {id(o) for o in row_loops}
        for group in self.pass_groups():
            # (a for in a walked reduce's pass comes with it: split_stages.py's)
            group = [o for o in group if id(o) in walked or
                     (isinstance(o, ForOp) and id(group[0]) in walked)]
            if not group:
                continue
            self.passes[id(group[0])] = group
            for op in group[1:]:
                self.followers.add(id(op))
                self.merged.update(shared_body_ops(group[0], op))
        return [o for o in row_loops if id(o) not in self.followers]

    def pass_groups(self) -> list[list[Operation]]:
        """The kernel's top-level loops grouped into passes (``sibling_passes``)."""
        return sibling_passes(self.op.body.ops)

    def leader(self) -> str:
        """The condition of the one thread that stores a value the block shares."""
        return f"{self.local['tid']} == 0"

    # -- reductions and the loops of a row ---------------------------------------
    def sequential_reduce(self, op: ReduceOp) -> None:
        acc = self.define(op.result, "acc")
        self.w.line(f"{acc} = {self.namer(op.operands[0])}")
        self.accumulate(op, acc, shared=False)

    def block_reduce(self, op: ReduceOp) -> None:
        if id(op) in self.followers:  # walked with its pass's first reduce
            return
        group = self.passes.get(id(op), [op])
        parts = self.parts(group)
        if len(group) == 1:  # (a schedule module's own accumulate: strips)
            self.accumulate(op, parts[0], shared=True)
        else:
            self.walk_together(group, parts, shared=True)
        for o, part in zip(group, parts):
            dtype, combiner = o.result.type.dtype, o["combiner"]
            total = self.shared_combine(combiner, part, dtype)
            init = self.namer(o.operands[0])
            acc = self.define(o.result, "acc")
            self.w.line(f"{acc} = {combine(combiner, init, total, self.helpers, dtype)}")

    def parts(self, group: list[ReduceOp]) -> list[str]:
        """Each reduce's per-thread part of a shared loop, at its identity."""
        names = []
        for op in group:
            dtype, combiner = op.result.type.dtype, op["combiner"]
            names.append(self.namer.fresh(f"{self.define(op.result, 'acc')}_part"))
            self.w.line(f"# {combiner} over {op['extent']}: each thread takes a strided part, "
                        "then the block combines the parts")
            self.w.line(f"{names[-1]} = {identity(combiner, dtype)}")
        return names

    def shared_combine(self, combiner: str, part: str, dtype: str) -> str:
        """The expression combining every sharing thread's ``part`` (the block's)."""
        helper = block_reduce_name(combiner)
        self.helpers.add(helper)
        return (f"{helper}({part}, {identity(combiner, dtype)}, "
                f"{self.scratch[COMPUTE_TYPE[dtype]]})")

    @contextmanager
    def loop(self, op: LoopOp, shared: bool):
        """The loop over a reduce's or for's extent. Not ``shared``: one thread runs all
        of it. ``shared``: the block's threads stride over it; in the registers variant
        as VALUES_PER_THREAD slots (a constant trip count, so Numba unrolls it and the
        slots of the local arrays become registers)."""
        w, loc = self.w, self.local
        k = self.define(op.body.args[0], "k")
        extent = self.extent(op.extent_list[0])
        row_start = "0"
        if shared:  # a block's part of the row (split_stages.py: a chunk of it)
            row_start, extent = self.row_span(op)
        if not shared:
            with w.indented(f"for {k} in range({extent}):"):
                yield
        elif self.vector:  # a row's vectors: registers-vector, warp-rows-vector
            self.lanes = Lanes(op.body.args[0], k, loc["first"], extent)
            vectors, first = self.row_vectors()
            fill = bool(self.fills[id(op)][1]) and id(op) not in self.prefilled
            with self.vector_walk(op, vectors, first, self.vectors_end(extent), fill, "row"):
                yield
        elif self.held_rows or (self.streams_tiles() and self.fills[id(op)][1]):
            slots, start = self.row_slots, loc["tid"]
            with ExitStack() as tiles:
                if not self.held_rows:  # streaming: a tile of the row at a time
                    slots, start = self.stream_tile, f"{loc['base']} + {loc['tid']}"
                    span = f"{self.stream_tile} * {loc['nthreads']}"
                    tiles.enter_context(w.indented(
                        f"for {loc['base']} in {self.stream_order(extent, span, row_start)}:"))

                walked = self.passes.get(id(op), [op])  # (a pass's reduces: one loop)
                # stream_narrow.py: where k only bounds the slot and every index fits 31
                # bits, 32-bit, each operand cast (ptxas, batch norm: 47 registers; 64 and
                # 168 B spilled where only the sum was cast)
                narrow = self.narrow_divisions and not self.held_rows and \
                    self.index_unused(walked)

                def each_slot():
                    if narrow:
                        base, tid, slot, threads = (f"numba.uint32({loc[n]})" for n in
                                                    ("base", "tid", "slot", "nthreads"))
                        w.line(f"{k} = numba.uint32({base} + {tid} + {slot} * {threads})")
                        return w.indented(f"if {k} < numba.uint32({extent}):")
                    w.line(f"{k} = {start} + {loc['slot']} * {loc['nthreads']}")
                    return w.indented(f"if {k} < {extent}:")
                emitted = [o for top in walked for o in top.walk()
                           if isinstance(o, ACCESSES) and id(o) not in self.held]
                if self.fills[id(op)][1]:
                    w.line("# this thread's values of the row first: loads with no use "
                           "between them are in flight at once")
                    self.start_segment_cursors(self.fills[id(op)][1], k, start, loc["nthreads"])
                    with w.indented(f"for {loc['slot']} in range({slots}):"):
                        with each_slot():
                            self.fill(op)
                        self.step_segment_cursors()
                self.start_segment_cursors(emitted, k, start, loc["nthreads"])
                with w.indented(f"for {loc['slot']} in range({slots}):"):
                    with each_slot():
                        yield
                    self.step_segment_cursors()
                self.stop_segment_cursors()
        else:
            first = loc["tid"] if row_start == "0" else f"{row_start} + {loc['tid']}"
            with w.indented(f"for {k} in range({first}, {extent}, {loc['nthreads']}):"):
                yield

    def streams_tiles(self) -> bool:
        """Whether a row loop walks its row a tile of loads at a time (plan_stream_tiles)."""
        return self.variant == "streaming"

    def index_unused(self, loops: list[LoopOp]) -> bool:
        """Whether nothing emitted in ``loops`` reads their index: its every user is
        dead (flat_rows' cursors and row offsets stand in for the indices it fed), or
        merged with a dead op of the pass's first loop."""
        dead = self.reuse.dead
        return all(id(o) in dead or id(self.merged.get(id(o))) in dead
                   for loop in loops for o in loop.walk()
                   if o is not loop and any(v is loop.body.args[0] for v in o.operands))

    def row_span(self, op: LoopOp) -> tuple[str, str]:
        """(start, end) of the values of a shared loop's row that this block walks:
        the whole row here; a chunk of it in split_stages.py."""
        return "0", self.extent(op.extent_list[0])

    def row_vectors(self) -> tuple[str, str]:
        """A row kernel's vector loop: how many vectors a thread takes of a row, and the
        index of the first value of its ``vec``-th (vectors ``tid``, ``tid + nthreads``, ...)."""
        loc, lanes = self.local, self.vector_lanes
        return (f"{self.row_slots} // {lanes}",
                f"({loc['tid']} + {loc['vec']} * {loc['nthreads']}) * {lanes}")

    def vectors_end(self, extent: str) -> str:
        """Where a row's whole vectors end: its end (the host launches a vector kernel
        on rows of whole vectors; peeled_rows.py's stop at the last whole one)."""
        return extent

    def accumulate(self, op: ReduceOp, acc: str, shared: bool) -> None:
        """The reduce's loop: its body, then ``acc = combine(acc, yielded)``."""
        self.walk_together([op], [acc], shared)

    def walk_together(self, group: list[ReduceOp], accs: list[str], shared: bool) -> None:
        """One loop for the reduces of a pass (the first's loop index for all): each
        body, then ``acc = combine(acc, yielded)`` per reduce (``accs``: one a reduce).
        A for in the pass (``sibling_passes(stores=True)``) runs its body only."""
        accs = iter(accs)
        with self.loop(group[0], shared):
            for op in group:
                if op is not group[0]:
                    self.namer.bind(op.body.args[0], self.namer(group[0].body.args[0]))
                self.block(op.body, top=False)
                if not isinstance(op, ReduceOp):
                    continue
                yielded = self.namer(op.body.ops[-1].operands[0])
                acc = next(accs)
                step = combine(op["combiner"], acc, yielded, self.helpers, op.result.type.dtype)
                self.w.line(f"{acc} = {step}")


class PartedRowLoops:
    """A mixin (before ``KernelEmitter``) for row kernels that emit each row loop once per
    part of the row, ``part`` naming the current one to their ``loop``: shared_rows.py's
    "registers" then "shared" (values past registers), peeled_rows.py's "vectors" then
    "ends" (a row's head and tail). A reduce's part accumulates into the same part sum."""

    row_loop_parts: tuple[str, ...] = ()
    part = ""  # the part being emitted ("": outside a row loop)

    def walk_together(self, group: list[ReduceOp], accs: list[str], shared: bool) -> None:
        if not shared:
            return super().walk_together(group, accs, shared)
        for self.part in self.row_loop_parts:
            super().walk_together(group, accs, shared)
        self.part = ""

    def statement(self, op: Operation, shared: bool) -> None:
        if not (shared and isinstance(op, ForOp)):
            return super().statement(op, shared)
        for self.part in self.row_loop_parts:
            super().statement(op, shared)
        self.part = ""
