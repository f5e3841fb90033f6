"""Few long rows split across blocks: a row kernel's twin for calls with few rows.

A "row" kernel runs a block per point; its top-level reduces and fors walk the point's
row. Where a call has few long rows (fewer than SPLIT_STAGE_ROWS, rows past what a
block holds in registers: group norm's 256 rows of 131072, softmax over 64 rows of
262144), a block per row leaves most of the GPU idle and its streaming variant, whose
blocks an SM hold 1024 threads (mlfuse/row_stream.py), re-reads each row for every
loop. The kernel op then also gets these kernels (``fused.kernel``'s ``split_stages``,
set by the schedule choice), and the host launches them instead (``_split_stages``):

- every top-level reduce has a level: 0 when it reads no other reduce's result, else
  one more than the highest level it reads (softmax: max 0, sum 1; layernorm: mean 0,
  var 1). Stage L is one kernel with a block per (point, chunk), the chunks fixed per
  call (``_split_rows``): each thread first combines the partials of the lower levels
  in chunk order (the same bits in every block of the point), computes the top-level
  values those give, then the block walks its chunk for the level-L reduces, and one
  partial per (point, chunk) and reduce goes to memory (a block reduction, as the
  split-rows first stage's; no atomics);
- the last kernel, the epilogue, combines every reduce's partials the same way and
  runs the top-level fors over its chunk (normalise and affine, softmax's exp and
  divide): the broadcast-back writes of the whole tensor with every block busy. A
  top-level store of a point's value (a statistic also returned) is written by the
  first chunk's block;
- a for that reads no result of a level-L reduce nor anything after it, and whose
  loads the reduce makes too, is walked in that reduce's pass of stage L instead
  (``staged_fors``: a prologue value also returned, ``y = x * 2 + 1; return y,
  mean(y)``, stored as its chunk is reduced): x is read once, and an epilogue left
  with no for only combines the partials into the point's values.

x is read once per stage (as torch.compile's split reductions read it twice), each
pass with the whole GPU busy. The emitter is the row kernel's streaming one (tiles of
loads issued first, flat row accesses through a reshape: ``flat_rows.py``), walking
``[lo, hi)`` of the row instead of all of it.

Each kernel has a vector twin (``vectors=True``): a thread's tile as vectors of
VECTOR_WIDTH neighbours (``emit_vector.py``), its flat row accesses along contiguous
memory and its plain row accesses moved 16 bytes at a time, chunks of whole vectors, and
the divisions a vector's lanes share done once per vector (``lane_uniform.py``). The host
runs the twins where VECTOR_WIDTH divides the row extents and the row bases and the
buffers they move whole are aligned (``vector_tests``), the scalar kernels elsewhere.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.emit_kernel import VALUES_PER_THREAD, KernelEmitter, emit_kernel
from mlfuse.codegen.emit_vector import VECTOR_WIDTH, Lanes
from mlfuse.codegen.flat_rows import _key
from mlfuse.codegen.held_rows import shared_rows_code
from mlfuse.codegen.kernel_code import KernelCode, narrow_index_tests
from mlfuse.codegen.peeled_rows import peeled_rows_code
from mlfuse.codegen.lane_uniform import agree_test, lane_chains
from mlfuse.dialects.reductions import (defined_before, defined_inside, reduce_levels,
                                        sibling_passes, stage_count, staged_fors)
from mlfuse.codegen.row_plans import stream_tile
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, combine, identity
from mlfuse.codegen.vector import VECTOR_DTYPES, vector_buffers, vectorizable
from mlfuse.dialects.loops import ForOp, LoadOp, ReduceOp, StoreOp
from mlfuse.ir.core import Operation

def epilogue_walks(op) -> list[Operation]:
    """The top-level loops the split plan's epilogue walks over its chunks: the fors
    not walked in a reduce's pass (``staged_fors``)."""
    staged = staged_fors(op)
    return [o for o in op.body.ops if isinstance(o, ForOp) and id(o) not in staged]


def plan_min_blocks(op) -> str:
    """The module constant naming the split plan's blocks resident per SM (the stages'
    launch bounds; the host's chunks fill a wave of them). An epilogue that only combines
    lets the stages ask more blocks of fewer registers (hw.split_combine_plan_min_blocks:
    stage 0 latency-bound at 50% occupancy, ncu); one that walks the rows again spills
    at 32 registers (group norm), so those plans keep hw.split_stage_min_blocks."""
    return "SPLIT_STAGE_MIN_BLOCKS" if epilogue_walks(op) else "SPLIT_COMBINE_PLAN_MIN_BLOCKS"


_DOC = {"stage": "Row schedule over [{space}] split across blocks, stage {level}: a block per "
                 "(point, chunk) writes the partials of the level-{level} reductions.",
        "epilogue": "Row schedule over [{space}] split across blocks, last stage: a block per "
                    "(point, chunk) combines the partials, then runs the loops over its chunk.",
        "combine": "Row schedule over [{space}] split across blocks, last stage: a block per "
                   "point combines the partials (its loops stored in the stages)."}


class StageEmitter(KernelEmitter):
    """One kernel of the split plan: stage ``level`` (the last: the epilogue)."""

    def __init__(self, op, name, level: int, target, helpers, hw, taken=(), vectors=False):
        super().__init__(op, name, "streaming", target, helpers, hw, taken)
        self.level = level
        # the vector twin: a thread's values of its chunk as vectors of VECTOR_WIDTH
        # neighbours, its vector accesses (``stage_vector_accesses``) moved whole
        self.vectors = vectors
        # a kernel over [] (a whole tensor's reduction): its host runs it for a row of no
        # whole vectors too (emit_vector.py); the others' lanes keep no bounds test
        self.ragged_end = vectors and not op.extent_list
        # the twin runs only where every index fits 31 bits (the host's vector_tests)
        self.narrow_divisions = vectors
        self.vector_accesses: list[Operation] = []
        self.multiples: list[list] = []  # what the host checks of the flat row bases
        # the current vector loop's divisions its lanes share (lane_uniform.py), the ops
        # computing them, and while its lanes are emitted: those ops' ids and the flag
        self.chains, self.chain_ops, self.lane_ops = [], [], set()
        # the fill's loads at those values, each loaded once a vector into a name
        self.chain_loads: list[Operation] = []
        self.lane_loads: dict[int, str] = {}
        self.filling = False
        self.levels, self.need = reduce_levels(op)
        self.last = level == stage_count(op) - 1
        self.reduces = [o for o in op.body.ops if isinstance(o, ReduceOp)]
        self.staged_fors = staged_fors(op)
        self.launch_bound = f"(THREADS_PER_BLOCK, {plan_min_blocks(op)})"
        for n in ("part", "chunk", "lo", "hi", "n_k", "n_split", "s"):
            self.local[n] = self.namer.fresh(n)
        self.partials = [self.namer.fresh(f"{o.result.name_hint or 'acc'}_partials")
                         for o in self.reduces]
        self.combined: set[int] = set()  # the reduces whose partials are combined
        # an epilogue left with no loop to walk (its fors stored in a reduce's pass:
        # ``y = p - t; return y, mean(y * y)``) only combines: a block per point, its
        # threads the partials (a block per (point, chunk), each thread combining all
        # n_split partials alone, took 42 us of 0.35 ms at 2**26 values, H100 ncu)
        self.combine_only = self.last and not epilogue_walks(op)

    def walked(self) -> list[Operation]:
        """The top-level loops this kernel's blocks walk over their chunk."""
        if self.last:
            return epilogue_walks(self.op)
        return [o for o in self.reduces if self.levels[id(o)] == self.level]

    def pass_groups(self) -> list[list[Operation]]:
        """Passes as ``sibling_passes``, and a for walked in its pass's stage
        (``staged_fors``) a member of that pass; any other for a pass of its own."""
        groups = []
        for group in sibling_passes(self.op.body.ops, stores=True):
            kept = [o for o in group if not isinstance(o, ForOp) or id(o) in self.staged_fors]
            groups += [kept] + [[o] for o in group if o not in kept]
        return groups

    def emit(self) -> str:
        w, loc = self.w, self.local
        kind = "combine" if self.combine_only else "epilogue" if self.last else "stage"
        doc = _DOC[kind].replace("{level}", str(self.level))
        with self.kernel_def(self.partials + [loc["n_split"]], doc):
            self.plan_walk()
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            loops = [o for o in self.op.body.ops if isinstance(o, (ReduceOp, ForOp))]
            w.line(f"{loc['n_k']} = {self.points(loops[0].extent_list)}")
            if self.vectors:  # chunks of whole vectors (VECTOR_WIDTH divides n_k: the host)
                w.line(f"{loc['chunk']} = -(-{loc['n_k']} // ({loc['n_split']} * {VECTOR_WIDTH})) "
                       f"* {VECTOR_WIDTH}")
            else:
                w.line(f"{loc['chunk']} = ({loc['n_k']} + {loc['n_split']} - 1) // {loc['n_split']}")
            items = loc["n_points"] if self.combine_only else \
                f"{loc['n_points']} * {loc['n_split']}"
            with w.indented(f"for {loc['flat']} in range(numba.int64(cuda.blockIdx.x), "
                            f"{items}, cuda.gridDim.x):"):
                if self.combine_only:  # a block per point
                    w.line(f"{loc['point']}, {loc['part']} = {loc['flat']}, 0")
                else:
                    w.line(f"{loc['point']}, {loc['part']} = divmod({loc['flat']}, {loc['n_split']})")
                self.unravel(loc["point"])
                self.row_base_lines()
                w.line(f"{loc['lo']} = {loc['part']} * {loc['chunk']}")
                w.line(f"{loc['hi']} = min({loc['lo']} + {loc['chunk']}, {loc['n_k']})")
                self.block(self.op.body, top=True)
        return self.w.text()

    def plan_walk(self) -> list[Operation]:
        """The kernel's plans before its point loop (shared with stream_vector.py): the
        loops it walks, a pass each, their tiles, flat rows and vector accesses."""
        w, loc = self.w, self.local
        walked = self.plan_passes(self.walked())
        w.line(f"{loc['tid']} = cuda.threadIdx.x")
        w.line(f"{loc['nthreads']} = cuda.blockDim.x")
        # (a pass's followers too: a sum walked in an argmax's pass reduces by its block
        # in its own type, which the pass's first loop need not have)
        self.declare_scratch(self.reduces if self.combine_only else
                             [m for o in walked for m in self.passes.get(id(o), [o])])
        self.plan_stream_tiles(walked)
        # (a staged for's stores too: its loads are its pass's first loop's)
        self.plan_flat_rows([(m, m.body.args[:1], m.extent_list) for o in walked
                             for m in self.passes.get(id(o), [o])
                             if m is o or id(m) in self.staged_fors])
        if not self.vectors:
            self.plan_segment_steps(loc["nthreads"])
        self.vector_accesses = self.stage_vector_accesses(walked)
        if self.vectors:
            self.plan_vectors(self.vector_accesses, VALUES_PER_THREAD)
        return walked

    def stage_vector_accesses(self, walked: list[Operation]) -> list[Operation]:
        """The loads a walked loop issues early and the stores of its body that vectors
        of neighbouring chunk values may share: a flat row's step along contiguous
        memory (group norm's rows through the reshape), a segmented access (batch norm's
        statistics over [N, H, W]: whole vectors where the segment, H*W, is whole
        vectors), or a plain row access whose last
        index is the loop's (``vector.vectorizable``). Also records what the host must
        check of the flat accesses' row bases (``base_multiples``)."""
        inside = defined_inside(walked)
        accesses = []
        for loop in walked:
            members = self.passes.get(id(loop), [loop])
            for o in self.fills[id(loop)][1] + [o for m in members for o in m.body.ops
                                                if isinstance(o, StoreOp)]:
                if not isinstance(o, (LoadOp, StoreOp)):
                    continue
                k = o.parent.parent_op.body.args[0] if isinstance(o, StoreOp) else loop.body.args[0]
                buf, idx = access_parts(o)
                flat = self.flat.get(_key(buf, idx))
                segmented = self.segments.get(_key(buf, idx))
                if segmented is not None:  # a vector within a segment: the host checks it
                    if buf.type.dtype in VECTOR_DTYPES:
                        accesses.append(o)
                        self.multiples += self.base_multiples(segmented)
                elif flat is not None:
                    if buf.type.dtype in VECTOR_DTYPES and flat.step is k and flat.axis is None:
                        accesses.append(o)
                        self.multiples += self.base_multiples(flat)
                elif vectorizable(o, k, lambda v: id(v) not in inside):
                    accesses.append(o)
        return accesses

    @contextmanager
    def loop(self, op, shared: bool):
        """The vector twin's walk of a chunk: tiles of a thread's vectors, loads of a
        tile's vectors first, then the lanes of each vector and its vector stores."""
        if not (self.vectors and shared):
            with super().loop(op, shared):
                yield
            return
        w, loc = self.w, self.local
        k = self.define(op.body.args[0], "k")
        lo, hi = self.row_span(op)
        self.lanes = Lanes(op.body.args[0], k, loc["first"], hi)
        self.chains, self.chain_ops = lane_chains(op, {id(a) for a in self.op.body.args},
                                                   self.reuse.dead)
        if self.chains and "agree" not in loc:
            loc["agree"] = self.namer.fresh("lanes_agree")
        # the single loads the fill issues at shared divisions' values (gamma[channel])
        inside = {id(r) for o in op.walk() for r in o.results} | {id(op.body.args[0])}
        ends = {id(c.end) for c in self.chains}
        self.chain_loads = [
            o for o in self.fills[id(op)][1] if isinstance(o, LoadOp) and
            id(o) not in self.vector_loads and any(id(v) in ends for v in o.operands[1:]) and
            all(id(v) in ends or id(v) not in inside for v in o.operands[1:])]
        # the tile counts the loads that stream along the row: a load at a shared
        # division's value (group norm's gamma[channel]) is one scalar a vector, held a
        # slot each but cheap; counted as a stream, group norm's epilogue had one vector
        # a thread in flight, latency-bound at 45% occupancy (ncu)
        chained = {id(o) for o in self.chain_loads}
        streams = [o for o in self.fills[id(op)][1] if id(o) not in chained]
        vectors = str(self.hw.split_tile_vectors) if self.hw.split_tile_vectors else \
            f"max(1, {stream_tile(len(streams))} // {VECTOR_WIDTH})"
        span = f"{vectors} * {VECTOR_WIDTH} * {loc['nthreads']}"
        first = f"{loc['base']} + ({loc['tid']} + {loc['vec']} * {loc['nthreads']}) * {VECTOR_WIDTH}"
        with w.indented(f"for {loc['base']} in {self.stream_order(hi, span, lo)}:"):
            with self.vector_walk(op, vectors, first, hi, bool(self.fills[id(op)][1]), "tile"):
                yield

    def row_span(self, op) -> tuple[str, str]:
        return self.local["lo"], self.local["hi"]

    def backward_pass(self) -> bool:
        """Stage L's passes over the chunk continue the alternation of the stages before
        it (one pass each): the epilogue of a one-level plan walks its chunk from the
        end, first over the values stage 0 read last (in L2 where the row set fits it).
        Group norm at 16x512x32x32 with the partials' loop above: 0.048 -> 0.042 ms; the
        suite's shape (512 MB) 0.155 -> 0.151."""
        return super().backward_pass() != (self.level % 2 == 1)

    def leader(self) -> str:
        """A point's value is stored once: by the first thread of its first chunk's block."""
        return f"{self.local['tid']} == 0 and {self.local['part']} == 0"

    @contextmanager
    def each_lane(self):
        """A vector's lanes, after its shared divisions (lane_uniform.py) at its first
        lane; in the lanes, those divisions again only where the lanes do not agree."""
        if not self.chains:
            with super().each_lane():
                yield
            return
        w, loc = self.w, self.local
        w.line(f"{self.lanes.index} = {self.lanes.first}  # the divisions the lanes share, "
               "at the first lane")
        for o in self.chain_ops:
            super().statement(o, shared=False)
        tests = [agree_test(c, self.namer) for c in self.chains]
        w.line(f"{loc['agree']} = {' and '.join(tests)}")
        if self.filling:  # loads at the shared values: once a vector where the lanes agree
            for o in self.chain_loads:  # (at the first lane's channel: in bounds either way)
                self.lane_loads[id(o)] = self.namer.fresh(f"{self.namer(o.operands[0])}_lanes")
                w.line(f"{self.lane_loads[id(o)]} = {self.load_expression(o)}")
        self.lane_ops = {id(o) for o in self.chain_ops}
        with super().each_lane():
            yield
        self.lane_ops, self.lane_loads = set(), {}

    def vector_fill(self, owner: Operation, **which) -> None:
        self.filling = True
        super().vector_fill(owner, **which)
        self.filling = False

    def fill_line(self, load: Operation) -> None:
        if id(load) not in self.lane_loads:
            return super().fill_line(load)
        self.w.line(f"{self.held[id(load)]}[{self.local['slot']}] = {self.lane_loads[id(load)]} "
                    f"if {self.local['agree']} else {self.load_expression(load)}")

    def statement(self, op: Operation, shared: bool) -> None:
        if id(op) in self.lane_ops:  # a shared division's op, in a lane: all of them once
            if op is self.chain_ops[0]:
                with self.w.indented(f"if not {self.local['agree']}:  # across a boundary"):
                    for o in self.chain_ops:
                        super().statement(o, shared=False)
            return
        if not shared:
            return super().statement(op, shared)
        if isinstance(op, (ForOp, StoreOp)) and not self.last or id(op) in self.staged_fors:
            return  # the epilogue's (a for in a reduce's pass: walked with it, in its stage)
        if isinstance(op, ReduceOp):
            level = self.levels[id(op)]
            if level < self.level:
                self.combine_partials(op)
            elif level == self.level and not self.last:
                self.partial(op)
            return
        if self.need[id(op)] < self.level:
            super().statement(op, shared)

    def combine_partials(self, op: ReduceOp) -> None:
        """The results of ``op`` and of the other reduces of its level whose inits are
        defined by then: each its init combined with its point's partials in chunk
        order, by every thread alike (n_split values: a handful), in one loop. A loop a
        reduce had each block wait n_split round trips a reduce before its chunk; in one
        loop a step's loads are in flight together (group norm's epilogue at 16x512x32x32:
        0.031 -> 0.030 ms)."""
        if id(op) in self.combined:
            return
        w, loc = self.w, self.local
        earlier = defined_before(self.op.body, op)
        group = [o for o in self.reduces if self.levels[id(o)] == self.levels[id(op)]
                 and id(o) not in self.combined and
                 (o is op or id(o.operands[0]) in earlier)]
        accs = []
        for o in group:
            self.combined.add(id(o))
            accs.append(self.define(o.result, "acc"))
            if self.combine_only:  # each thread's partials tid, tid + nthreads, ...
                w.line(f"{accs[-1]} = {identity(o['combiner'], o.result.type.dtype)}")
            else:
                w.line(f"{accs[-1]} = {self.namer(o.operands[0])}  # then the partials, "
                       "in chunk order")
        span = f"{loc['tid']}, {loc['n_split']}, {loc['nthreads']}" if self.combine_only \
            else loc["n_split"]
        with w.indented(f"for {loc['s']} in range({span}):"):
            for o, acc in zip(group, accs):
                partials = self.partials[self.reduces.index(o)]
                value = f"{partials}[{loc['point']} * {loc['n_split']} + {loc['s']}]"
                dtype = o.result.type.dtype
                w.line(f"{acc} = {combine(o['combiner'], acc, value, self.helpers, dtype)}")
        if self.combine_only:  # then the block's, and the init (the same bits every run)
            for o, acc in zip(group, accs):
                dtype = o.result.type.dtype
                total = self.shared_combine(o["combiner"], acc, dtype)
                init = self.namer(o.operands[0])
                w.line(f"{acc} = {combine(o['combiner'], init, total, self.helpers, dtype)}")

    def partial(self, op: ReduceOp) -> None:
        """The block's partial of ``op`` over its chunk, to memory (with the reduces of
        its pass, in one walk of the chunk)."""
        if id(op) in self.followers:
            return
        w, loc = self.w, self.local
        members = self.passes.get(id(op), [op])
        group = [o for o in members if isinstance(o, ReduceOp)]
        w.line("# over this block's chunk [lo, hi) of the row" +
               (" (storing as it goes)" if len(members) > len(group) else ""))
        parts = self.parts(group)
        self.walk_together(members, parts, shared=True)
        for o, part in zip(group, parts):
            w.line(f"{part} = {self.shared_combine(o['combiner'], part, o.result.type.dtype)}")
        with w.indented(f"if {loc['tid']} == 0:"):
            for o, part in zip(group, parts):
                w.line(f"{self.partials[self.reduces.index(o)]}[{loc['flat']}] = {part}")


def partial_dtypes(op) -> list[str]:
    """The NumPy dtype of each top-level reduce's partial buffer (its compute type)."""
    dtypes = [COMPUTE_TYPE[o.result.type.dtype] for o in op.body.ops if isinstance(o, ReduceOp)]
    assert all(d in SHARED_TYPE for d in dtypes), dtypes
    return dtypes


def emit_stages(op, name: str, target: str, helpers: set[str], names, hw) -> tuple[dict, str]:
    """The split plan's launch entries (``stages``: the kernel names in launch order; with
    a vector twin, ``stage_vectors``: its names, the buffers it moves whole and what the
    host checks of its row bases) and the kernels' text."""
    kernels = [names.fresh(f"{name}_stage{level}") for level in range(stage_count(op) - 1)]
    kernels.append(names.fresh(f"{name}_epilogue"))
    emitters = [StageEmitter(op, kname, level, target, helpers, hw, names.taken)
                for level, kname in enumerate(kernels)]
    texts = [e.emit() for e in emitters]
    launch = {"stages": kernels, "combine_only": emitters[-1].combine_only}
    accesses = [o for e in emitters for o in e.vector_accesses]
    if hw.vector_width > 1 and accesses:
        # a stage moving no whole vectors (its rows' dtypes have no vector: bf16, i64)
        # keeps its scalar kernel in the vector plan: a twin would only stage scalars
        twins = [names.fresh(f"{kname}_vector") if e.vector_accesses else kname
                 for kname, e in zip(kernels, emitters)]
        texts += [StageEmitter(op, vname, level, target, helpers, hw, names.taken, vectors=True).emit()
                  for level, (vname, e) in enumerate(zip(twins, emitters)) if e.vector_accesses]
        multiples = [m for e in emitters for m in e.multiples]
        launch["stage_vectors"] = {"names": twins, "buffers": vector_buffers(accesses),
                                   "multiples": list({repr(m): m for m in multiples}.values())}
    return launch, "\n\n".join(texts)


def stages_launch(host, kernel, points: str, row: str, args: list[str]) -> list[str]:
    """The host lines of the split plan: chunks per point from the sizes, a partial
    buffer per reduce, then the stages in order (run where ``_split_stages`` says)."""
    n_split = host.namer.fresh("n_split")
    host.helpers.update({"_split_stage_rows", "_row_blocks", "_row_threads"})
    lines = [f"{n_split} = _split_stage_rows({points}, {row}, {plan_min_blocks(kernel.op)})"]
    partials = []
    for k, dtype in enumerate(partial_dtypes(kernel.op)):
        partials.append(host.namer.fresh(f"partials_{k}"))
        lines.append(f"{partials[-1]} = cuda.device_array({points} * {n_split}, dtype=np.{dtype})")
    per_thread = f"-(-({row}) // ({n_split} * VALUES_PER_THREAD))"
    grid = f"_row_blocks({points} * {n_split}), _row_threads({per_thread}, THREADS_PER_BLOCK)"
    # an epilogue that only combines: a block per point, a thread per few partials
    last = (f"_row_blocks({points}), _row_threads(-(-{n_split} // VALUES_PER_THREAD), "
            "THREADS_PER_BLOCK)") if kernel.launch.get("combine_only") else grid
    grids = [grid] * (len(kernel.launch["stages"]) - 1) + [last]
    calls = [host.call(name, g, args + partials + [n_split])
             for name, g in zip(kernel.launch["stages"], grids)]
    twin = kernel.launch.get("stage_vectors")
    if twin is None:
        return lines + calls
    unit = host.w.unit
    vectors = [host.call(name, g, args + partials + [n_split])
               for name, g in zip(twin["names"], grids)]
    tests = vector_tests(host, kernel, twin, points, row, ragged_point=not kernel.op.extent_list)
    return lines + [f"if {' and '.join(tests)}:  # whole vectors, aligned"] + \
        [unit + c for c in vectors] + ["else:"] + [unit + c for c in calls]


def vector_tests(host, kernel, twin: dict, points: str, row: str,
                 ragged_point: bool = False) -> list[str]:
    """The host's conditions for the vector twin: VECTOR_WIDTH divides every row extent
    (chunks of whole vectors; ``ragged_point``: or the kernel is over [], its one row
    starting at a flat row base, the twin's last vector moved a value a lane:
    ``ragged_end``) and
    every flat row base (each monomial's dims and constants, ``FlatRows.base_multiples``),
    each buffer it moves whole starts on a vector, and every index fits 31 bits (its
    divisions are 32-bit only)."""
    host.helpers.add("_vector_ready")  # (brings _address)
    tests = [] if ragged_point else \
        [f"{d} % VECTOR_WIDTH == 0"
         for d in dict.fromkeys(host.dim(e, kernel.op) for e in kernel.row_extents)]
    tests += host.multiple_tests(twin["multiples"], kernel.op)
    # its index divisions are 32-bit only (flat_rows.index_division)
    tests += narrow_index_tests(host, kernel.op, points, row)
    for buf in twin["buffers"]:
        name = host.namer(buf)
        tests.append(f"_address({name}) % (VECTOR_WIDTH * {name}.dtype.itemsize) == 0")
    return list(dict.fromkeys(tests))


def emit_row(op, name: str, target: str, helpers: set[str], names, hw) -> KernelCode:
    """A row kernel's KernelCode, with its twins where they apply (each an entry of the
    launch and its kernels' text, empty elsewhere), the split plan's kernels where the
    schedule choice asked for them (``split_stages``), and the short-row plan's
    (``warp_rows``)."""
    from mlfuse.codegen.stream_narrow import stream_narrow_code
    from mlfuse.codegen.stream_vector import stream_vector_code  # (it builds on StageEmitter)
    code = emit_kernel(op, name, target, helpers, names, hw)
    args = (op, name, target, helpers, names, hw)
    parts = [peeled_rows_code(*args, code.variants),  # rows of no whole vectors: ends peeled
             shared_rows_code(*args),  # long rows held in registers and shared memory
             stream_vector_code(*args, code.variants),  # streamed rows of whole vectors
             stream_narrow_code(*args, code.variants)]  # ... of segments, indices < 2**31
    if op.attributes.get("split_stages"):
        parts.append(emit_stages(*args))
    if op.attributes.get("warp_rows"):  # calls with short rows: a group of lanes per row
        from mlfuse.codegen.short_rows import emit_short_rows
        parts.append(emit_short_rows(*args))
    for launch, text in parts:
        if launch:
            code.launch.update(launch)
            code.text += "\n\n" + text
    return code


__all__ = ["emit_row", "StageEmitter", "emit_stages", "epilogue_walks", "plan_min_blocks",
           "stages_launch"]
