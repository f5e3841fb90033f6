"""Split reductions ("split-rows", "split-columns"): two kernels per fused kernel.

The first kernel cuts every point's reduction (a nest of reduces walked as one flat
loop over the product of its extents) into ``n_split`` contiguous chunks and writes
one partial per point, chunk and reduce into a buffer of its own; the second combines
a point's partials in chunk order, then runs the rest of the body (the epilogue and
the stores). No atomics: the result is the same bits on every run of the same sizes.
The host picks ``n_split`` from the sizes of the call (``_split_rows`` /
``_split_columns``), so one chunk is as right as a thousand.

- "split-rows": a block per (point, chunk); the block's threads stride over the chunk
  (coalesced when the reduced values are contiguous) and a block reduction makes the
  partial. Partial of (point, chunk) at ``point * n_split + chunk``. The combining
  kernel takes a block per point.
- "split-columns": a thread per (chunk, point) with neighbouring threads on
  neighbouring points (coalesced when the points are the innermost axis); each thread
  walks its chunk alone. Partial at ``chunk * n_points + point``; the combining kernel
  takes a thread per point.

Either way a thread walks its part of a chunk in tiles of VALUES_PER_THREAD values:
it issues the tile's loads first (into local arrays, registers once unrolled), then
computes and accumulates them in order, so many loads are in flight at once.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import DimOp, ForOp, LoadOp, ReduceOp, StoreOp
from mlfuse.ir.core import Operation
from mlfuse.dialects.reductions import (defined_before, reduce_levels, reduce_nests,
                                        shared_body_ops)

from mlfuse.codegen.addressing import access_parts, split_offsets, suffix_of
from mlfuse.codegen.flat_rows import _key as flat_key
from mlfuse.codegen.emit_kernel import VALUES_PER_THREAD, KernelEmitter
from mlfuse.codegen.kernel_code import KernelCode, extent_factors, kernel_interface
from mlfuse.codegen.vector import HALF_DTYPES, VECTOR_DTYPES, vector_buffers
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, combine, identity
from mlfuse.codegen.split_columns_vector import ColumnVectorStage, column_vector_plan

_DOC = {
    "split-rows": "Split reduction over [{space}], first stage: a block per (point, chunk) "
                  "reduces its chunk into a partial.",
    "split-rows-vector": "Split reduction over [{space}], first stage: a block per (point, "
                         "chunk) reduces its chunk into a partial, its threads loading "
                         "vectors of neighbouring values at flat offsets.",
    "split-columns": "Split reduction over [{space}], first stage: a thread per (chunk, point) "
                     "walks its chunk into a partial.",
    "split-columns-vector": "Split reduction over [{space}], first stage: a thread per (chunk, "
                            "vector of neighbouring points) walks its chunk into a partial a "
                            "point, loading a vector a value.",
    "combine-rows": "Split reduction over [{space}], second stage: a block per point combines "
                    "its partials in order, then the epilogue.",
    "combine-columns": "Split reduction over [{space}], second stage: a thread per point "
                       "combines its partials in order, then the epilogue.",
    "combine-columns-blocks": "Split reduction over [{space}], second stage: a block per point "
                              "combines its partials (few points, many chunks), then the "
                              "epilogue.",
}
# The second kernel of each split schedule.
COMBINE = {"split-rows": "combine-rows", "split-columns": "combine-columns"}
FIRST_STAGES = ("split-rows", "split-rows-vector", "split-columns")


def split_vector_loads(op, hw) -> tuple[list, str] | None:
    """The loads a "split-rows-vector" first stage moves a vector at a time, and its
    values per vector (VECTOR_WIDTH, or VECTOR_WIDTH_16 where every load is 16-bit);
    None where it has none: its loads must all read at flat offsets (``split_offsets``),
    plain and of a vector dtype, and its nests' outer levels compute nothing."""
    if op["schedule"] != "split-rows" or hw.vector_width == 1 or "split_tiles" in op.attributes:
        return None
    nests = reduce_nests(op)
    offsets = split_offsets(op)
    if not offsets or not all(_clean_outer_levels(n) for n in nests):
        return None
    loads = [o for n in nests for o in n.inner.body.ops if id(o) in offsets]
    if not all(o.result.type.dtype in VECTOR_DTYPES for o in loads):
        return None
    halves = all(o.result.type.dtype in HALF_DTYPES for o in loads)
    return loads, "VECTOR_WIDTH_16" if halves else "VECTOR_WIDTH"


def _clean_outer_levels(nest) -> bool:
    """Whether a nest's outer levels compute nothing but constants (then the innermost
    body's loads may be issued early for a whole tile)."""
    return all(isinstance(o, (ConstantOp, DimOp)) for lvl in range(len(nest.levels) - 1)
               for o in nest.outer_ops(lvl))


class SplitEmitter(ColumnVectorStage, KernelEmitter):
    """One of the two kernels of a split reduction (``variant``: a key of _DOC)."""

    def __init__(self, op, name, variant, target, helpers, hw, taken=(), twins=(None, None),
                 level: int | None = None):
        """``twins``: the vector twins' plans (``split_vector_loads``,
        ``column_vector_plan``), found once per kernel op by ``emit_split``. ``level``:
        a stage of column stages over several levels of reductions (column_stages.py):
        its first stage walks that level's nests only, after reading the lower levels'
        results, combined in place; its combine combines that level's."""
        super().__init__(op, name, variant, target, helpers, hw, taken)
        every = reduce_nests(op)
        # a partial buffer per reduce, named alike in every kernel of the plan
        self.partials = [self.namer.fresh(f"{n.top.result.name_hint or 'acc'}_partials")
                         for n in every]
        self.partial_of = {id(n.top): p for n, p in zip(every, self.partials)}
        self.level = level
        self.levels, self.need = reduce_levels(op)
        self.nests = every if level is None else \
            [n for n in every if self.levels[id(n.top)] == level]
        self.rows = "rows" in variant  # the partials' layout: a point's chunks together
        # a block per point (split-rows; a columns' combine of many chunks), not a thread
        self.blocks = self.rows or variant == "combine-columns-blocks"
        for n in self.nests[1:]:  # walked in one loop: what a nest repeats of the first's
            if len(n.levels) == 1 and len(self.nests[0].levels) == 1:
                self.merged.update(shared_body_ops(self.nests[0].top, n.top))
        self.column_plan = None
        if variant == "split-columns-vector":  # the scalar machinery, lanes of its own
            self.vector, self.index_type = False, "numba.uint64"
            self.column_plan = twins[1]
            self.launch_bound = "(THREADS_PER_BLOCK, 2)"
        if self.vector:
            self.vector_loads_of, self.vector_lanes = twins[0]
            self.offsets = split_offsets(op)
            self.index_type = "numba.uint32"
        # the scalar first stage reads at flat offsets too where every load allows it
        # (no unravel of each value's index: 130 instructions a value before)
        self.flat_loads = None
        if variant in ("split-rows", "split-columns") and all(
                _clean_outer_levels(n) for n in self.nests):
            offsets = split_offsets(op)
            self.flat_loads = offsets or None
        if self.vector or self.flat_loads:
            # at least 2 blocks of THREADS_PER_BLOCK resident per SM: registers capped
            # at 64 (72-90 before: one block, 25% occupancy). The first stage that
            # unravels each value's index keeps its registers (capped, it spilled).
            self.launch_bound = "(THREADS_PER_BLOCK, 2)"
        for n in ("part", "chunk", "lo", "hi", "n_k", "n_split", "tile", "kf", "s", "kbase"):
            self.local[n] = self.namer.fresh(n)
        self.cursors: dict = {}  # (row base, stride) -> the cursor a phase's values step

    def emit(self) -> str:
        doc = _DOC[self.variant]
        if self.level and self.variant in FIRST_STAGES:  # (column stages over levels)
            doc = (f"Split reduction over [{{space}}], stage {self.level} of its levels: a thread "
                   "per (chunk, point) reads the lower levels' combined results, then walks "
                   f"its chunk into a partial of each level-{self.level} reduction.")
        with self.kernel_def(self.partials + [self.local["n_split"]], doc):
            if self.column_plan is not None:
                self.column_vector_stage(self.column_plan)
            elif self.variant in FIRST_STAGES:
                self.first_stage()
            else:
                self.second_stage()
        return self.w.text()

    # -- pieces shared by both stages ----------------------------------------------
    def threads(self) -> None:
        w, loc = self.w, self.local
        w.line(f"{loc['tid']} = cuda.threadIdx.x")
        w.line(f"{loc['nthreads']} = cuda.blockDim.x")
        if self.blocks:
            self.declare_scratch([n.top for n in self.nests])

    @contextmanager
    def each_item(self, count: str):
        """``flat`` over ``count`` items: a block per item (rows) or a thread per item
        (columns), striding over the rest."""
        w, loc = self.w, self.local
        if self.blocks:
            header = (f"for {loc['flat']} in range(numba.int64(cuda.blockIdx.x), {count}, "
                      "cuda.gridDim.x):")
        else:
            w.line(f"{loc['start']} = numba.int64(cuda.blockIdx.x) * cuda.blockDim.x "
                   "+ cuda.threadIdx.x")
            w.line(f"{loc['stride']} = numba.int64(cuda.gridDim.x) * cuda.blockDim.x")
            header = f"for {loc['flat']} in range({loc['start']}, {count}, {loc['stride']}):"
        with w.indented(header):
            yield

    def partial_index(self) -> str:
        """Where the partial of (point, chunk) ``s`` lies."""
        loc = self.local
        if self.rows:
            return f"{loc['point']} * {loc['n_split']} + {loc['s']}"
        return f"{loc['s']} * {loc['n_points']} + {loc['point']}"

    # -- first stage ----------------------------------------------------------------
    def first_stage(self) -> None:
        w, loc = self.w, self.local
        self.threads()
        inner = [n.inner for n in self.nests]
        if all(_clean_outer_levels(n) for n in self.nests):
            self.plan_held_rows(inner, reuse=False)
        if self.vector:
            self.vector_prologue()
        else:
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            w.line(f"{loc['n_k']} = {self.points(self.nests[0].extents)}")
            w.line(f"{loc['chunk']} = ({loc['n_k']} + {loc['n_split']} - 1) // {loc['n_split']}")
            if self.flat_loads:
                self.flat_views([o for n in self.nests for o in n.inner.body.ops
                                 if id(o) in self.flat_loads])
            elif self.variant in ("split-rows", "split-columns") and all(
                    _clean_outer_levels(n) for n in self.nests):
                # a column's values at row_base + k * stride (flat_rows.py), walked by
                # cursors (colsum's x[k, i]: two 64-bit indices, their wraparound checks
                # and a multiply per value kept the ALU pipe at 58%, FMA at 17%); a row's
                # read through a reshape at row_base + kf (group statistics of a view:
                # flatten-row-nests), no unravel of each value's index
                self.plan_flat_rows([(n.top, n.indices, n.extents) for n in self.nests])
        items = self.vector_items() if self.vector else \
            self.each_item(f"{loc['n_points']} * {loc['n_split']}")
        with items:
            if self.vector:
                T, n_split = self.index_type, loc["n_split"]
                w.line(f"{loc['point']}, {loc['part']} = {T}({loc['flat']} // {n_split}), "
                       f"{T}({loc['flat']} % {n_split})")
            elif self.rows:
                w.line(f"{loc['point']}, {loc['part']} = divmod({loc['flat']}, {loc['n_split']})")
            else:
                w.line(f"{loc['part']}, {loc['point']} = divmod({loc['flat']}, {loc['n_points']})")
            self.unravel(loc["point"])
            self.row_base_lines()
            self.point_values()
            if self.vector:
                T = self.index_type
                w.line(f"{loc['lo']} = {T}({loc['part']} * {loc['chunk']})")
                w.line(f"{loc['hi']} = {T}(min({loc['lo']} + {loc['chunk']}, {loc['n_k']}))")
            else:
                w.line(f"{loc['lo']} = {loc['part']} * {loc['chunk']}")
                w.line(f"{loc['hi']} = min({loc['lo']} + {loc['chunk']}, {loc['n_k']})")
            parts = self.start_parts()
            if self.vector:
                self.walk_chunk_vectors(parts)
            else:
                self.walk_chunk(parts)
            for n, part in zip(self.nests, parts):
                if self.rows:
                    total = self.shared_combine(n.top["combiner"], part, n.top.result.type.dtype)
                    w.line(f"{part} = {total}")
            with w.indented(f"if {self.leader()}:") if self.rows else nullcontext():
                for n, part in zip(self.nests, parts):
                    w.line(f"{self.partial_of[id(n.top)]}[{loc['flat']}] = {part}")

    def start_parts(self) -> list[str]:
        """A partial of each walked nest, at its combiner's identity; their names."""
        parts = [self.namer.fresh(f"{n.top.result.name_hint or 'acc'}_part") for n in self.nests]
        for n, part in zip(self.nests, parts):
            self.w.line(f"{part} = {identity(n.top['combiner'], n.top.result.type.dtype)}")
        return parts

    def point_values(self) -> None:
        """What the walked reductions need of the point: the top-level ops that need no
        reduction's result of this level or above (``reduce_levels``' need: at level 0,
        none at all), the lower levels' results read where their combines left them
        (``partials[point]``). A higher level's stage leaves every loop to the epilogue."""
        level = self.level or 0
        for op in self.op.body.ops:
            if isinstance(op, ReduceOp):
                if self.levels[id(op)] < level:
                    self.w.line(f"{self.define(op.result, 'acc')} = "
                                f"{self.partial_of[id(op)]}[{self.local['point']}]")
            elif isinstance(op, StoreOp) or isinstance(op, ForOp) and (
                    level or "split_tiles" in self.op.attributes):
                continue  # the epilogue's (a split through tiles walks its fors itself)
            elif self.need[id(op)] < level:
                self.statement(op, shared=False)

    def walk_chunk(self, parts: list[str]) -> None:
        """This thread's values of the chunk [lo, hi), a tile of VALUES_PER_THREAD at a
        time: the tile's loads first, then each value accumulated in order."""
        w, loc = self.w, self.local
        first, step = (loc["tid"], loc["nthreads"]) if self.rows else ("0", "1")
        tile_step = f"{step} * {VALUES_PER_THREAD}" if self.rows else VALUES_PER_THREAD
        if self.flat_loads:
            if 0 in self.flat_loads.values() and self.op.extent_list:
                w.line(f"{loc['kbase']} = {loc['point']} * {loc['n_k']}  # the point's values")
        names = None
        for n in self.nests:  # every nest walks the same extents: one set of index names
            if names is None:
                names = [self.define(a, f"k{d}") for d, a in enumerate(n.indices)]
            else:
                for a, name in zip(n.indices, names):
                    self.namer.bind(a, name)

        @contextmanager
        def each_value(accesses):
            slot = loc["slot"]
            self.start_cursors(f"{loc['tile']}{' + ' + first if first != '0' else ''}", accesses)
            with w.indented(f"for {slot} in range({VALUES_PER_THREAD}):"):
                offset = f" + {first}" if first != "0" else ""
                scaled = f"{slot} * {step}" if step != "1" else slot
                w.line(f"{loc['kf']} = {loc['tile']}{offset} + {scaled}")
                guard = f"{slot} < {here}" if here else f"{loc['kf']} < {loc['hi']}"
                with w.indented(f"if {guard}:"):
                    if not self.flat_loads:  # the loads read at kf itself otherwise
                        self.unravel_into(loc["kf"], self.nests[0].indices,
                                          self.nests[0].extents)
                    yield
                for (_, stride), cursor in self.cursors.items():
                    w.line(f"{cursor} += {stride if step == '1' else f'{step} * {stride}'}")

        here = None if self.rows else self.namer.fresh("n_here")
        with w.indented(f"for {loc['tile']} in range({loc['lo']}, {loc['hi']}, {tile_step}):"):
            if here:  # the tile's values: one 32-bit compare a slot (a 64-bit kf < hi was 4)
                w.line(f"{here} = numba.int32(min({loc['hi']} - {loc['tile']}, "
                       f"{VALUES_PER_THREAD}))")
            if any(self.fills.get(id(n.inner), ((), ()))[1] for n in self.nests):
                w.line("# the tile's loads first: no use between them, so all are in flight")
                with each_value([o for n in self.nests
                                 for o in self.fills.get(id(n.inner), ((), ()))[1]]):
                    for n in self.nests:
                        if id(n.inner) in self.fills:
                            self.fill(n.inner)
            with each_value([o for n in self.nests for o in n.top.walk()
                             if isinstance(o, LoadOp) and id(o) not in self.held]):
                self.step_nests(parts)

    def step_nests(self, parts: list[str]) -> None:
        """One value's step of every nest: its outer levels' ops, its inner body, and the
        partial ``parts[i]`` combined with what the body yields (both first stages)."""
        for n, part in zip(self.nests, parts):
            for level in range(len(n.levels) - 1):
                for o in n.outer_ops(level):
                    self.statement(o, shared=False)
            self.block(n.inner.body, top=False)
            yielded = self.namer(n.inner.body.ops[-1].operands[0])
            step_text = combine(n.top["combiner"], part, yielded, self.helpers,
                                n.top.result.type.dtype)
            self.w.line(f"{part} = {step_text}")

    # -- the vector first stage --------------------------------------------------------
    def vector_prologue(self) -> None:
        """The sizes in uint32 (the host launches the vector kernel under 2**31 values):
        a thread's few divisions are 32-bit ones, not 64-bit subroutine calls."""
        w, loc, T = self.w, self.local, self.index_type
        lanes, n_split = self.vector_lanes, loc["n_split"]

        def product(extents):
            factors = [f"{T}({f})" for f in extent_factors(extents, self.sym.get)]
            return T + "(" + " * ".join(factors) + ")" if len(factors) > 1 else factors[0]
        w.line(f"{loc['n_points']} = {product(self.op.extent_list)}")
        w.line(f"{loc['n_k']} = {product(self.nests[0].extents)}")
        w.line(f"{n_split} = {T}({n_split})")
        w.line(f"{loc['chunk']} = {T}({T}({loc['n_k']} + {n_split} - {T}(1)) // {n_split})")
        # whole vectors in every chunk (the host checked that they divide n_k)
        w.line(f"{loc['chunk']} = {T}(({loc['chunk']} + {T}({lanes} - 1)) // {T}({lanes}) "
               f"* {T}({lanes}))")
        self.flat_views()

    @contextmanager
    def vector_items(self):
        """each_item for the vector kernel: a block per item, in uint32, a while loop
        (range's trip count would cost a division)."""
        w, loc, T = self.w, self.local, self.index_type
        w.line(f"{loc['flat']} = {T}(cuda.blockIdx.x)")
        with w.indented(f"while {loc['flat']} < {T}({loc['n_points']} * {loc['n_split']}):"):
            yield
            w.line(f"{loc['flat']} = {T}({loc['flat']} + {T}(cuda.gridDim.x))")

    @contextmanager
    def chunk_tiles(self, tile: str, apart: str | None = None):
        """This thread's chunk [lo, hi), a tile of ``tile`` values at a time (one column
        per thread: split-columns' vector twin, the column stages' epilogues); yields the
        name of the current tile's count of values. ``apart``: the chunk's values are
        that many apart (lo, lo + apart, ... below hi), not consecutive."""
        w, loc = self.w, self.local
        here = self.namer.fresh("n_here")
        span = f"{tile} * {apart}" if apart else tile
        with w.indented(f"for {loc['tile']} in range({loc['lo']}, {loc['hi']}, {span}):"):
            left = (f"({loc['hi']} - {loc['tile']} + {apart} - 1) // {apart}" if apart
                    else f"{loc['hi']} - {loc['tile']}")
            w.line(f"{here} = numba.int32(min({left}, {tile}))")
            yield here

    def tile_pass(self, tile: str, here: str, k: str, accesses, emit,
                  apart: str | None = None) -> None:
        """One pass over the current tile's values (``chunk_tiles``): the cursors of
        ``accesses`` started at the tile, each value's index ``k`` named, ``emit()`` for
        it, then the cursors stepped (by ``apart`` values where the chunk's are apart)."""
        w, loc = self.w, self.local
        self.start_cursors(loc["tile"], accesses)
        with w.indented(f"for {loc['slot']} in range({tile}):"):
            with w.indented(f"if {loc['slot']} < {here}:"):
                w.line(f"{k} = {loc['tile']} + {loc['slot']}" + (f" * {apart}" if apart else ""))
                emit()
            for (_, stride), cursor in self.cursors.items():
                w.line(f"{cursor} += {stride}" + (f" * {apart}" if apart else ""))

    def start_cursors(self, first: str, loads: list[Operation]) -> None:
        """The cursors of a phase that emits ``loads``: each strided flat access's
        offset at value ``first`` of the chunk, stepped by its stride a value
        (``row_base + k * stride`` per value was a 64-bit multiply and its carries)."""
        self.cursors = {}
        for o in loads:
            access = self.flat.get(flat_key(*access_parts(o)))
            if access is not None and access.axis is not None and access.step != "flat":
                base = self.row_bases[self._base_code(access)]
                stride = self.flat_strides[(id(access.buf), access.axis)]
                if (base, stride) not in self.cursors:
                    self.cursors[(base, stride)] = cursor = self.namer.fresh("cursor")
                    offset = f"{base} + {first} * {stride}"
                    if self.offset_type != "numba.int64":  # (a 32-bit multiply and add)
                        offset = f"{self.offset_type}({offset})"
                    self.w.line(f"{cursor} = {offset}")

    def flat_subscript(self, buf, indices, flat_index: str) -> str | None:
        """A flat access of the split-columns first stage: at its cursor where it steps
        by a stride, else at row_base + kf (a nest's flat index is the chunk's kf)."""
        access = self.flat.get(flat_key(buf, indices))
        if access is None:  # (a segmented access, flat_rows.py, or none)
            return super().flat_subscript(buf, indices, self.local["kf"])
        if access.axis is not None and access.step != "flat":
            stride = self.flat_strides[(id(buf), access.axis)]
            cursor = self.cursors[(self.row_bases[self._base_code(access)], stride)]
            return f"{self.flat_views[id(buf)]}[numba.uint64({cursor})]"
        return super().flat_subscript(buf, indices, self.local["kf"])

    def subscript(self, buf, indices) -> str:
        """A load of the scalar first stage at its flat offset, where it has one."""
        if self.flat_loads and id(buf) in getattr(self, "flat_of", {}):
            points = list(self.op.body.args)
            for n in self.nests:
                j = suffix_of(buf, indices, points + n.indices,
                              list(self.op.extent_list) + n.extents)
                if j == len(points) or (j == 0 and not points):
                    return f"{self.flat_of[id(buf)]}[numba.uint64({self.local['kf']})]"
                if j == 0:
                    offset = f"{self.local['kbase']} + {self.local['kf']}"
                    return f"{self.flat_of[id(buf)]}[numba.uint64({offset})]"
        return super().subscript(buf, indices)

    def flat_views(self, loads=None) -> None:
        """A flat view of each buffer ``loads`` read (default: the vector loads)."""
        self.flat_of = {}
        for o in self.vector_loads_of if loads is None else loads:
            buf = o.operands[0]
            if id(buf) not in self.flat_of:
                name = self.namer(buf)
                if buf.type.rank > 1:
                    self.helpers.add("_flat")
                    flat = self.namer.fresh(f"{name}_flat")
                    self.w.line(f"{flat} = _flat({name})")
                    name = flat
                self.flat_of[id(buf)] = name

    def walk_chunk_vectors(self, parts: list[str]) -> None:
        """walk_chunk with each thread's values of a tile as vectors of neighbours: a
        tile's vector loads first, at flat offsets (uint32: the host launches this
        kernel under 2**31 values), then each value accumulated in order."""
        w, loc, T = self.w, self.local, self.index_type
        lanes, held = self.vector_lanes, {id(o) for o in self.vector_loads_of}
        vectors = f"{VALUES_PER_THREAD} // {lanes}"
        moves = ("_load_halves" if lanes == "VECTOR_WIDTH_16" else "_load_vector")
        self.helpers.add("_vector_access")
        kbase = None
        if any(j == 0 for j in self.offsets.values()) and self.op.extent_list:
            kbase = self.namer.fresh("kbase")
            w.line(f"{kbase} = {T}({loc['point']} * {loc['n_k']})  # the point's values")
        tile, hi = loc["tile"], loc["hi"]
        w.line(f"{tile} = {loc['lo']}")

        @contextmanager
        def each_vector():
            with w.indented(f"for {loc['vec']} in range({vectors}):"):
                w.line(f"{loc['kf']} = {T}({tile} + {T}({T}({loc['tid']} + {T}({loc['vec']}) "
                       f"* {T}({loc['nthreads']})) * {T}({lanes})))")
                with w.indented(f"if {loc['kf']} < {hi}:"):
                    yield

        with w.indented(f"while {tile} < {hi}:"):
            w.line("# the tile's vector loads first: no use between them, so all are in flight")
            with each_vector():
                for n in self.nests:
                    for o in self.fills.get(id(n.inner), ((), ()))[1]:
                        offset = loc["kf"] if self.offsets[id(o)] or kbase is None else \
                            f"{T}({kbase} + {loc['kf']})"
                        w.line(f"{moves}({self.flat_of[id(o.operands[0])]}, ({offset},), "
                               f"{self.held[id(o)]}, {loc['vec']} * {lanes})")
            with each_vector():
                with w.indented(f"for {loc['lane']} in range({lanes}):"):
                    w.line(f"{loc['slot']} = {loc['vec']} * {lanes} + {loc['lane']}")
                    self.step_nests(parts)
            w.line(f"{tile} = {T}({tile} + {T}({loc['nthreads']} * {VALUES_PER_THREAD}))")
        assert held  # every load of the nests is held and filled a vector at a time

    # -- second stage ---------------------------------------------------------------
    def second_stage(self) -> None:
        w, loc = self.w, self.local
        self.threads()
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        vals = {}  # a thread reads its partials a tile at a time
        for n in self.nests:
            ctype = COMPUTE_TYPE[n.top.result.type.dtype]
            vals[id(n.top)] = self.local_array(f"{n.top.result.name_hint or 'acc'}_vals",
                                               ctype, VALUES_PER_THREAD)
        with self.each_item(loc["n_points"]):
            w.line(f"{loc['point']} = {loc['flat']}")
            self.unravel(loc["point"])
            nest_of = {id(n.top): self.partial_of[id(n.top)] for n in self.nests}
            together = self._combined_together(nest_of)
            for op in self.op.body.ops:
                if isinstance(op, ForOp) and "split_tiles" in self.op.attributes:
                    continue  # (stored by the first stage's walk: split_tiles.py)
                if id(op) not in nest_of:
                    self.statement(op, shared=self.blocks)
                elif together and op is together[0]:
                    self.combine_partials(together, [nest_of[id(o)] for o in together],
                                          [vals[id(o)] for o in together])
                elif not together:
                    self.combine_partials([op], [nest_of[id(op)]], [vals[id(op)]])

    def _combined_together(self, nest_of: dict) -> list[ReduceOp]:
        """Every reduce of a thread-per-point combine, where each one's initial value is
        defined before the first of them: one walk, a tile's loads of all in flight at
        once (column statistics: one round trip a tile where a walk each took three)."""
        ops = [o for o in self.op.body.ops if id(o) in nest_of]
        if self.blocks or len(ops) < 2:
            return []
        before = defined_before(self.op.body, ops[0])
        return ops if all(id(o.operands[0]) in before for o in ops) else []

    def combine_partials(self, ops: list[ReduceOp], partials: list[str], vals: list[str]) -> None:
        """``ops``' partials combined, a tile at a time with every load first (several
        ops only where a thread combines a point's: ``_combined_together``)."""
        w, loc = self.w, self.local
        accs, parts = [], []
        combiners = ", ".join(op["combiner"] for op in ops)
        w.line(f"# {combiners} of the point's n_split partials, in chunk order" if not self.blocks
               else f"# {combiners} of the point's n_split partials: each thread's in order, "
               "then the block's")
        for op in ops:
            dtype, combiner = op.result.type.dtype, op["combiner"]
            acc = self.define(op.result, "acc")
            part = self.namer.fresh(f"{acc}_part") if self.blocks else acc
            w.line(f"{part} = {identity(combiner, dtype) if self.blocks else self.namer(op.operands[0])}")
            accs.append(acc)
            parts.append(part)
        # a thread's partials a tile at a time, its loads first: chunks tid, tid + step, ...
        # of the block's (a block per point), or all of the point's in order
        first, step = (loc["tid"], loc["nthreads"]) if self.blocks else ("0", "1")
        tiles = f"{step} * {VALUES_PER_THREAD}" if self.blocks else str(VALUES_PER_THREAD)
        with w.indented(f"for {loc['tile']} in range({first}, {loc['n_split']}, {tiles}):"):
            for phase in ("load", "combine"):
                with w.indented(f"for {loc['slot']} in range({VALUES_PER_THREAD}):"):
                    slot = f"{loc['slot']} * {step}" if self.blocks else loc["slot"]
                    w.line(f"{loc['s']} = {loc['tile']} + {slot}")
                    with w.indented(f"if {loc['s']} < {loc['n_split']}:"):
                        for op, part, partial, held in zip(ops, parts, partials, vals):
                            if phase == "load":
                                w.line(f"{held}[{loc['slot']}] = {partial}[{self.partial_index()}]")
                            else:
                                value = f"{held}[{loc['slot']}]"
                                w.line(f"{part} = {combine(op['combiner'], part, value, self.helpers, op.result.type.dtype)}")
        if self.blocks:
            for op, acc, part in zip(ops, accs, parts):
                total = self.shared_combine(op["combiner"], part, op.result.type.dtype)
                init = self.namer(op.operands[0])
                w.line(f"{acc} = {combine(op['combiner'], init, total, self.helpers, op.result.type.dtype)}")


def split_variants(op, name: str, names, twins) -> dict[str, str]:
    """The kernels' variants and names: the first stage (which keeps ``name``), its
    vector twin where it has one (``twins``: as SplitEmitter's), and the second stage."""
    first = op["schedule"]
    variants = {first: name}
    if twins[0]:
        variants["split-rows-vector"] = names.fresh(f"{name}_vector")
    if twins[1]:
        variants["split-columns-vector"] = names.fresh(f"{name}_vector")
    variants[COMBINE[first]] = names.fresh(f"{name}_combine")
    if first == "split-columns":  # few points, many chunks: a block combines a point's
        variants["combine-columns-blocks"] = names.fresh(f"{name}_combine_blocks")
    return variants


def emit_split(op, name: str, target: str, helpers: set[str], names, hw):
    """The KernelCode of a split reduction: both kernels, first stage first."""
    from mlfuse.codegen.split_tiles import TiledSplitEmitter, first_stage_launch
    tiled = "split_tiles" in op.attributes  # its first stage through tiles (split_tiles.py)
    rows, columns = twins = split_vector_loads(op, hw), column_vector_plan(op, hw)
    variants = split_variants(op, name, names, twins)
    texts = [SplitEmitter(op, kname, kind, target, helpers, hw, names.taken, twins).emit()
             if not (tiled and kind == "split-rows") else
             TiledSplitEmitter(op, kname, target, helpers, hw, names.taken).emit()
             for kind, kname in variants.items()]
    loads, lanes = (columns.stepped, columns.lanes) if columns else rows or ([], "VECTOR_WIDTH")
    launch = first_stage_launch(target, hw) if tiled else {}
    return KernelCode(op, op["schedule"], kernel_interface(op), [], variants, "\n\n".join(texts),
                      vector_buffers(loads), vector_lanes=lanes, launch=launch)


def partial_dtypes(op) -> list[str]:
    """The NumPy dtype of each reduce's partial buffer (its compute type)."""
    dtypes = [COMPUTE_TYPE[n.top.result.type.dtype] for n in reduce_nests(op)]
    assert all(ctype in SHARED_TYPE for ctype in dtypes), dtypes
    return dtypes
