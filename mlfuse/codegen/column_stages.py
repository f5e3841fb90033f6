"""Strips over columns whose values fit on chip nowhere: the reduced axis split across
threads in two stages.

A strips kernel over columns (schedule_strips.py) runs a block per strip of neighbouring
points; its loops walk the strip's whole reduced axis. Where a strip's values fit
neither shared memory nor registers, the streaming variant walks it once per loop, its
re-reads from DRAM, and the GPU is short of blocks where the points are few: column
centring ``x - mean(x, axis=0)`` at 16384 x 4096 ran 128 blocks of 512 threads, 25%
occupancy, 0.303 ms against 0.283 for the unfused split-columns sums and pointwise
kernel (H100). Where the schedule choice gives the kernel a split plan (``split_stages``:
every reduction reads none of another, every top-level loop one axis of one extent,
``dialects/reductions.why_not_column_staged``), codegen also emits

- the first stage: split-columns' first kernel (schedule_split.py), and its vector twin
  (split_columns_vector.py): a thread per (chunk, point), a partial of every reduce;
- the combine (``ColumnCombine``): a thread per point combines its partials in chunk
  order into the first chunk's place (the second stage of split-columns, in place);
- over several levels of reductions (a reduction reading another's result is a level
  above it, ``reductions.reduce_levels``: softmax's max 0, its sum of exp(x - max) 1),
  a stage and a combine per level: stage L walks only level L's reductions, after
  reading the lower levels' results where their combines left them (``partials[point]``)
  and computing what it needs of them. Each stage reads x again (softmax over long
  columns: three reads, as the streaming strips kernel's three passes, with the whole
  GPU busy where that kernel had a block per strip); no vector twin for the stages
  then (split_columns_vector.py plans every nest of the kernel);
- the epilogue (``ColumnEpilogue``): a thread per (chunk, point) reads its point's
  combined values, computes what the point needs, then walks its chunk of the loops
  after the reductions a tile at a time (the tile's loads first, cursors along the
  columns as the first stage's). A point's own values (a statistic also returned) are
  stored by its first chunk's thread. Its vector twin (column_epilogue_vector.py) takes
  a vector of points a thread; the lean twin (column_epilogue_lean.py, where
  ``hw.column_lanes_rows`` is "one", or "auto" and ``lean_epilogue_pays``) a vector of
  one row a thread.

x is read twice, as by the two unfused kernels, with every thread of the GPU busy in
both and no intermediate buffer. Each epilogue thread once combined its point's
partials itself: 128 partials a point at 65536 x 1024, 277 MB of L2 reads a call for
a 512 KB buffer. The host runs the plan where a strip's values fit neither shared
memory nor registers (``strips_launch``), with the chunks of split-columns
(``columns_first_stage``).
"""
from __future__ import annotations

from contextlib import nullcontext

from mlfuse.codegen.addressing import ACCESSES
from mlfuse.codegen.column_epilogue_lean import (ColumnLeanEpilogue, lean_call_test,
                                                lean_epilogue_pays)
from mlfuse.codegen.column_epilogue_vector import (
    ColumnVectorEpilogue,
    epilogue_vector_plan,
)
from mlfuse.codegen.emit_kernel import VALUES_PER_THREAD
from mlfuse.codegen.scalar import COMPUTE_TYPE
from mlfuse.codegen.schedule_split import SplitEmitter
from mlfuse.codegen.split_columns_vector import column_vector_plan
from mlfuse.codegen.split_host import columns_first_stage, vector_call_test
from mlfuse.codegen.vector import vector_buffers
from mlfuse.dialects.loops import ForOp, StoreOp
from mlfuse.dialects.reductions import stage_count
from mlfuse.ir.core import Operation

_DOC = ("Strips over [{space}] split in stages, last stage: a thread per (chunk, point) "
        "reads its point's combined partials, then walks its chunk of the loops after them.")
_COMBINE_DOC = ("Strips over [{space}] split in stages, second stage: a thread per point "
                "combines its partials in chunk order into the first chunk's place.")
_COMBINE_BLOCKS_DOC = ("Strips over [{space}] split in stages, second stage: a block per point "
                       "combines its partials (few points, many chunks) into the first "
                       "chunk's place.")


def _feeding(op, values) -> list[Operation]:
    """The top-level ops of kernel ``op`` that ``values`` are computed from, in order."""
    made = {id(r): o for o in op.body.ops for r in o.results}
    needed, todo = set(), list(values)
    while todo:
        producer = made.get(id(todo.pop()))
        if producer is not None and id(producer) not in needed:
            needed.add(id(producer))
            todo += list(producer.operands)
    return [o for o in op.body.ops if id(o) in needed]


class ColumnCombine(SplitEmitter):
    """The combine of a column-stages plan: each point's partials folded in chunk order
    from the reduce's init (as split-columns' second stage) into partials[point]; with
    ``blocks``, a block per point folds them, each thread its chunks tid, tid + nthreads,
    ..., then the block (few points of many chunks: column centring over [100000, 300]
    took 917 chunks a point, a thread each walking them: 73 us of the call's 0.20 ms)."""

    def __init__(self, op, name, target, helpers, hw, taken=(), blocks: bool = False,
                 level: int | None = None):
        super().__init__(op, name, "columns-combine", target, helpers, hw, taken, (None, None),
                         level)
        self.blocks = blocks

    def leader(self) -> str:
        return f"{self.local['tid']} == 0" if self.blocks else "True"

    def emit(self) -> str:
        w, loc = self.w, self.local
        with self.kernel_def(self.partials + [loc["n_split"]],
                             _COMBINE_BLOCKS_DOC if self.blocks else _COMBINE_DOC):
            self.threads()
            vals = [self.local_array(f"{n.top.result.name_hint or 'acc'}_vals",
                                     COMPUTE_TYPE[n.top.result.type.dtype], VALUES_PER_THREAD)
                    for n in self.nests]
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            for o in _feeding(self.op, [n.top.operands[0] for n in self.nests]):
                self.statement(o, shared=False)  # the inits (constants)
            with self.each_item(loc["n_points"]):
                w.line(f"{loc['point']} = {loc['flat']}")
                # a thread's point: every reduce's tile loads at once (their inits are
                # defined above); a block's: each reduce in turn, the block's after
                groups = [list(zip(self.nests, vals))] if not self.blocks else \
                    [[pair] for pair in zip(self.nests, vals)]
                for group in groups:
                    self.combine_partials([n.top for n, _ in group],
                                          [self.partial_of[id(n.top)] for n, _ in group],
                                          [v for _, v in group])
                # (a block's: its leader, after the block reductions: every read of the
                # place done)
                with w.indented(f"if {self.leader()}:") if self.blocks else nullcontext():
                    for n in self.nests:
                        w.line(f"{self.partial_of[id(n.top)]}[{loc['point']}] = "
                               f"{self.namer(n.top.result)}")
        return self.w.text()


class ColumnEpilogue(SplitEmitter):
    """The epilogue of a column-stages plan (see the module doc)."""

    def __init__(self, op, name, target, helpers, hw, taken=()):
        super().__init__(op, name, "columns-epilogue", target, helpers, hw, taken,
                         (None, None))
        self.launch_bound = "(THREADS_PER_BLOCK, 2)"  # (the first stage's registers)
        self.loops = [o for o in op.body.ops if isinstance(o, ForOp)]

    def emit(self) -> str:
        w, loc = self.w, self.local
        with self.kernel_def(self.partials + [loc["n_split"]], _DOC):
            self.threads()
            self.plan_held_rows(self.loops, reuse=False)
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            w.line(f"{loc['n_k']} = {self.points(self.loops[0].extent_list)}")
            w.line(f"{loc['chunk']} = ({loc['n_k']} + {loc['n_split']} - 1) // {loc['n_split']}")
            self.plan_flat_rows([(o, o.body.args[:1], o.extent_list) for o in self.loops])
            partials_of = {id(n.top): p for n, p in zip(self.nests, self.partials)}
            with self.each_item(f"{loc['n_points']} * {loc['n_split']}"):
                w.line(f"{loc['part']}, {loc['point']} = divmod({loc['flat']}, {loc['n_points']})")
                self.unravel(loc["point"])
                self.row_base_lines()
                w.line(f"{loc['lo']} = {loc['part']} * {loc['chunk']}")
                w.line(f"{loc['hi']} = min({loc['lo']} + {loc['chunk']}, {loc['n_k']})")
                for op in self.op.body.ops:
                    if id(op) in partials_of:  # combined in place (ColumnCombine)
                        w.line(f"{self.define(op.result, 'acc')} = "
                               f"{partials_of[id(op)]}[{loc['point']}]")
                    elif isinstance(op, ForOp):
                        self.walk_loop(op)
                    elif isinstance(op, StoreOp):  # a point's own value: one thread's
                        with w.indented(f"if {loc['part']} == 0:"):
                            self.statement(op, shared=False)
                    else:
                        self.statement(op, shared=False)
        return self.w.text()

    def walk_loop(self, op: Operation) -> None:
        """This thread's chunk [lo, hi) of the loop ``op``, a tile of VALUES_PER_THREAD
        values at a time: the tile's loads first (no use between them, so all are in
        flight), then each value's ops and stores in order."""
        w = self.w
        k = self.define(op.body.args[0], "k")
        loads = self.fills[id(op)][1]
        accesses = [o for o in op.walk() if isinstance(o, ACCESSES) and id(o) not in self.held]
        with self.chunk_tiles(VALUES_PER_THREAD) as here:
            if loads:
                w.line("# the tile's loads first: no use between them, so all are in flight")
                self.tile_pass(VALUES_PER_THREAD, here, k, loads, lambda: self.fill(op))
            self.tile_pass(VALUES_PER_THREAD, here, k, accesses,
                           lambda: self.block(op.body, top=False))


def emit_column_stages(op, name: str, target: str, helpers: set[str], names, hw) -> tuple[dict, str]:
    """The column-stages plan's launch entries (``column_stages``: the first stage's
    name; its vector twin's and the epilogue's vector twin's names, lanes and buffers
    where they have one; the scalar epilogue's name; ``levels``: each higher level's
    stage and combines) and the kernels' text."""
    first = names.fresh(f"{name}_stage0")
    count = stage_count(op) - 1  # levels of reductions
    # over several levels, each stage walks its level's nests alone: no vector twin
    # (its plan is of every nest)
    twins = (None, column_vector_plan(op, hw) if count == 1 else None)
    level = 0 if count > 1 else None
    texts = [SplitEmitter(op, first, "split-columns", target, helpers, hw, names.taken,
                          twins, level).emit()]
    vector = None
    if twins[1] is not None:
        vname = names.fresh(f"{name}_stage0_vector")
        texts.append(SplitEmitter(op, vname, "split-columns-vector", target, helpers, hw,
                                  names.taken, twins).emit())
        vector = {"name": vname, "lanes": twins[1].lanes,
                  "buffers": vector_buffers(twins[1].stepped)}
    combine = names.fresh(f"{name}_combine")
    texts.append(ColumnCombine(op, combine, target, helpers, hw, names.taken,
                               level=level).emit())
    combine_blocks = names.fresh(f"{name}_combine_blocks")
    texts.append(ColumnCombine(op, combine_blocks, target, helpers, hw, names.taken,
                               blocks=True, level=level).emit())
    levels = []
    for higher in range(1, count):  # (softmax's sum of exp(x - max): level 1)
        stage = names.fresh(f"{name}_stage{higher}")
        texts.append(SplitEmitter(op, stage, "split-columns", target, helpers, hw, names.taken,
                                  (None, None), higher).emit())
        kernels = {"first": stage}
        for kind, blocks in (("combine", False), ("combine_blocks", True)):
            kernels[kind] = names.fresh(f"{name}_{kind}{higher}")
            texts.append(ColumnCombine(op, kernels[kind], target, helpers, hw, names.taken,
                                       blocks=blocks, level=higher).emit())
        levels.append(kernels)
    epilogue = names.fresh(f"{name}_epilogue")
    texts.append(ColumnEpilogue(op, epilogue, target, helpers, hw, names.taken).emit())
    lanes_plan, lanes = epilogue_vector_plan(op, hw), None
    if lanes_plan is not None:
        lean = hw.column_lanes_rows == "one" or (hw.column_lanes_rows == "auto" and
                                                 lean_epilogue_pays(op))
        ename = names.fresh(f"{name}_epilogue_{'lean' if lean else 'vector'}")
        emitter = ColumnLeanEpilogue if lean else ColumnVectorEpilogue
        texts.append(emitter(op, ename, target, helpers, hw, names.taken, lanes_plan).emit())
        lanes = {"name": ename, "lanes": lanes_plan.lanes,
                 "buffers": vector_buffers(lanes_plan.stepped), "lean": lean}
    return {"column_stages": {"first": first, "vector": vector, "combine": combine,
                              "combine_blocks": combine_blocks, "epilogue": epilogue,
                              "epilogue_vector": lanes, "levels": levels}}, \
        "\n\n".join(texts)


def column_stages_lines(host, kernel, points: str, n_k: str, args: list[str]) -> list[str]:
    """The host lines of the plan: split-columns' first stage (chunks, partials, the
    vector twin where it runs), the combine, then the epilogue: its vector twin (a thread per (chunk
    of its own, vector of points)) where the points' last extent divides into vectors
    and the buffers are aligned, else a thread per (first-stage chunk, point)."""
    plan = kernel.launch["column_stages"]
    lines, stage_args, n_split = columns_first_stage(host, kernel.op, points, n_k, args,
                                                     plan["first"], plan["vector"])
    # a thread combines a point's chunks; a block, where few points took many
    host.helpers.update({"_row_blocks", "_row_threads"})
    blocks = (f"_row_blocks({points}), _row_threads(-(-{n_split} // VALUES_PER_THREAD), "
              "THREADS_PER_BLOCK)")
    unit = host.w.unit
    first_grid = f"_pointwise_blocks({points} * {n_split}, 1), THREADS_PER_BLOCK"
    for level in [plan] + plan["levels"]:  # each level's stage, then its combine
        if level is not plan:  # (level 0's stage: columns_first_stage's lines)
            lines.append(host.call(level["first"], first_grid, stage_args))
        lines += [f"if {n_split} <= THREAD_COMBINE_CHUNKS:",
                  unit + host.call(level["combine"], f"_pointwise_blocks({points}, 1), "
                                   "THREADS_PER_BLOCK", stage_args),
                  "else:", unit + host.call(level["combine_blocks"], blocks, stage_args)]
    scalar = host.call(plan["epilogue"], f"_pointwise_blocks({points} * {n_split}, 1), "
                       "THREADS_PER_BLOCK", stage_args)
    lanes = plan.get("epilogue_vector")
    if lanes is None:
        return lines + [scalar]
    vectors = f"{points} // {lanes['lanes']}"
    if lanes["lean"]:  # a thread per (row, vector), where its 32-bit offsets fit
        return lines + [
            f"if {lean_call_test(host, kernel.op, lanes, points, n_k)}:",
            unit + host.call(lanes["name"], f"_pointwise_blocks({vectors} * ({n_k}), 1), "
                             "THREADS_PER_BLOCK", stage_args),
            "else:", unit + scalar]
    n_chunks = host.namer.fresh("n_chunks")
    # its own chunks: the first stage's are sized for a thread a point (33 at 16384 x
    # 4096, a quarter of a wave as vectors), and capped for the combine's loop (none
    # here: 128 at 65536 x 1024 left a quarter of a wave as vectors)
    return lines + [
        f"if {vector_call_test(host, kernel.op, lanes['lanes'], lanes['buffers'])}:",
        unit + f"{n_chunks} = _split_columns({vectors}, {n_k}, SM_COUNT, VALUES_PER_THREAD, "
        f"{n_k})",
        unit + host.call(lanes["name"], f"_pointwise_blocks({vectors} * {n_chunks}, 1), "
                         "THREADS_PER_BLOCK", stage_args + [n_chunks]),
        "else:", unit + scalar]


__all__ = ["ColumnCombine", "ColumnEpilogue", "emit_column_stages", "column_stages_lines"]
