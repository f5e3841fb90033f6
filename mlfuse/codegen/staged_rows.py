"""Row kernels that store along their points through a shared tile ("staged rows").

A layernorm over rows stored transposed (``transpose(layernorm(x))``, x [R, C], the
output [C, R]) writes each row as a column. A block per row would write its values a
column's stride apart: a 32-byte sector a value (H100, rows of 1024: 0.35 ms, against
0.094 ms for the two kernels of a row reduction then transpose tiles). Here a warp takes
a row (the warp-rows schedule with groups of 32) and a block ``STAGED_ROWS``
neighbouring rows (``hw.staged_row_min_blocks`` blocks resident an SM asked). Each row
loop with such a store walks its row in steps of 32 values, the same number of steps in
every warp, and stages S steps between two barriers: a streamed row's tile of loads
(``staged_tile``), a held row's slots as many at a time, fewer where the stage's tiles
would pass STAGED_SHARED_BYTES (``stage_steps``). A stage:

1. for each of its S steps, each lane computes its value of its row (lane l of step j:
   value ``first + j * 32 + l``) and writes it into the block's tile at ``[j][row][l]``;
2. a barrier; then thread t copies cells ``[j][t % STAGED_ROWS][t // STAGED_ROWS]``
   out, for each j. A warp's lanes cover neighbouring rows of one or two of a step's 32
   values, so they write neighbouring elements of the output (the store follows the
   kernel's last point: ``dialects/permute.stores_along_points``);
3. a barrier before the next stage's values overwrite the tile.

Where the store's indices are the row loop's index in one place and values computed
before the loop elsewhere (``out[k, r]``, ``out[b, k, s]``), an element's offset is its
row's start (the offset at k = 0, written by each warp into a tile of STAGED_ROWS
starts) plus k times the stride of k's axis: the copy-out computes it. Otherwise each
value travels with its flat offset, in a second tile (-1: none), so any index expression
works; only its coalescing depends on the store following the points.

A tile row is STAGED_ROW_PITCH values wide, 32 + 32 / STAGED_ROWS: a warp's copy-out
reads STAGED_ROWS rows of 32 / STAGED_ROWS neighbouring cells, at banks row * 32 /
STAGED_ROWS + cell, all 32 distinct (33 left 2-way conflicts at 16 rows). Stores that
do not follow the points are written directly by the lanes, where the row exists. The
reductions are the warp-rows group reductions over the full warp
(shuffles on the GPU; the simulator's twin, a butterfly through shared memory, runs the
same steps).
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

import numpy as np

from mlfuse.dialects.loops import ForOp, StoreOp
from mlfuse.dialects.permute import stores_along_points
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.codegen.schedule_warp_rows import WarpRowsEmitter, _constant_rows
from mlfuse.ir.core import OpResult
from mlfuse.row_groups import WARP

PITCH = "STAGED_ROW_PITCH"  # a tile row: a step's 32 values and a pad (the module's)
STAGED_SHARED_BYTES = 32 * 1024  # a stage's tiles at most (two blocks an SM, under 48 KB)

_DOC = ("Staged rows over [{space}]: a warp per point, a block of STAGED_ROWS neighbouring "
        "points; stores along the points go through a shared tile, {steps} steps of 32 "
        "values between two barriers.")


def staged_tile(hw) -> int:
    """A streamed row's steps a stage: a lane's loads in flight, a quarter of a held
    row's values (ptxas sm_90, layernorm stored transposed, two blocks of 512 an SM: 55
    registers, no spill; before the stages, half of them spilled 20 B)."""
    return max(1, hw.row_values_per_thread // 4)


def tile_type(store: StoreOp) -> str:
    """The compute type a staged store's tile holds (a bool as int32: no shared array of
    bools)."""
    ctype = COMPUTE_TYPE[store.operands[1].type.dtype]
    return "int32" if ctype == "bool_" else ctype


def stage_steps(stores: list, places: dict, most: int, hw) -> int:
    """Steps a stage: at most ``most``, as many as keep the stores' tiles (values, and
    int64 offsets where a store has no row index place: ``places``, by id) within
    STAGED_SHARED_BYTES for blocks of the target's threads (a block's static shared
    memory is at most 48 KB)."""
    rows = max(1, hw.threads_per_block // WARP)
    cells = rows * (WARP + WARP // rows)  # the module's STAGED_ROW_TILE
    per_step = sum(cells * (np.dtype(tile_type(o)).itemsize +
                            (8 if places[id(o)] is None else 0)) for o in stores)
    return max(1, min(most, STAGED_SHARED_BYTES // max(per_step, 1)))


def row_index_place(store: StoreOp) -> int | None:
    """Where the row loop's index is one of ``store``'s indices, alone, and every other
    index is computed before the loop (``out[k, r]``): its position (the copy-out then
    finds an element's offset from its row's start); None otherwise."""
    loop = store.parent.parent_op
    k = loop.body.args[0]
    inside = {id(o) for o in loop.walk()}
    indices = store.operands[2:]
    places = [p for p, v in enumerate(indices) if v is k]
    if len(places) != 1:
        return None
    before = all(v is k or (isinstance(v, OpResult) and id(v.op) not in inside) or
                 (not isinstance(v, OpResult) and v.owner is not loop.body) for v in indices)
    return places[0] if before else None


class StagedRowsEmitter(WarpRowsEmitter):
    launch_bound = "(THREADS_PER_BLOCK, STAGED_ROW_MIN_BLOCKS)"
    flat_rows = True  # a row's values at row_base + k (flat_rows.py): no wraparound checks
    flat_one_axis = True  # gamma[k] too

    def plan_group(self, op, hw) -> None:
        super().plan_group(op, hw)
        self.constant_width = WARP  # a warp a row, whatever the row's length
        row = _constant_rows(op)  # (held rows: constant ones, a slot a step)
        self.row_slots = -(-row // WARP) if row is not None else 1
        # (hw.row_staged_stores off: the same kernel storing directly, scattered)
        self.staged_stores = stores_along_points(op) if hw.row_staged_stores else []
        self.row_stages = {}  # id(store) -> _StagedStore
        self.staged_loops = {id(o.parent.parent_op) for o in self.staged_stores}
        # (a held row's 16 slots in one stage spilled 144 B at 64 registers: its slots
        # take stages of a streamed row's steps too)
        self.places = {id(o): row_index_place(o) for o in self.staged_stores}
        self.steps = stage_steps(self.staged_stores, self.places,
                                 min(self.row_slots, staged_tile(hw)) if self.held_rows
                                 else staged_tile(hw), hw)
        self.DOC = {"warp-rows": _DOC.replace("{steps}", str(self.steps))}

    def declare_scratch(self, row_loops, slots=None) -> None:
        """The group reductions' scratch, then a tile of a stage's values a staged store
        (and of their offsets, or its rows' starts)."""
        super().declare_scratch(row_loops, slots)
        if not self.held_rows:  # a tile of loads a lane in flight, not one (streams_tiles)
            # (sibling reduces walked in one loop: variance's shifted sums with the mean's)
            self.plan_stream_tiles(self.plan_passes(row_loops))
            self.stream_tile = str(self.steps)
        w = self.w
        for o in self.staged_stores:
            buf = self.namer(o.operands[1])
            staged = _StagedStore(o, self.places[id(o)], self.namer.fresh(f"stage_{buf}"),
                                 self.namer.fresh(f"{buf}_flat"))
            w.line(f"{staged.tile} = cuda.shared.array(({self.steps}, STAGED_ROW_TILE), "
                   f"{SHARED_TYPE[tile_type(o)]})  # a stage's values of {buf}, a row a point")
            if staged.place is None:
                staged.offsets = self.namer.fresh(f"stage_at_{buf}")
                w.line(f"{staged.offsets} = cuda.shared.array(({self.steps}, STAGED_ROW_TILE), "
                       "numba.int64)  # and their flat offsets (-1: none)")
            else:
                staged.starts = self.namer.fresh(f"{buf}_row_starts")
                staged.stride = self.namer.fresh(f"{buf}_k_stride")
                staged.row_start = self.namer.fresh(f"{buf}_row_start")
                shape = o.operands[1].type.shape
                stride = " * ".join(f"{buf}.shape[{d}]" for d in range(staged.place + 1, len(shape)))
                w.line(f"{staged.starts} = cuda.shared.array(STAGED_ROWS, numba.int64)  "
                       f"# each row's offset in {buf} at k = 0 (-1: no row)")
                w.line(f"{staged.stride} = numba.int64({stride or '1'})  # and k's stride")
            self.helpers.add("_flat")
            w.line(f"{staged.view} = _flat({buf})")
            self.row_stages[id(o)] = staged
        if not self.row_stages:
            return
        for n in ("cell", "out_cell", "out_row", "out_k", "step", "stage"):
            self.local[n] = self.namer.fresh(n)
        # (unsigned: Numba checks a signed index for wraparound)
        w.line(f"{self.local['cell']} = numba.uint32({self.local['group']} * {PITCH} + "
               f"{self.local['tid']})  # this lane's place in a step's tile")
        w.line(f"{self.local['out_row']} = numba.uint32(cuda.threadIdx.x % STAGED_ROWS)  "
               "# the row it copies out")
        w.line(f"{self.local['out_cell']} = numba.uint32({self.local['out_row']} * {PITCH} + "
               "cuda.threadIdx.x // STAGED_ROWS)  # and its place")

    def keeps_indices(self, access) -> bool:
        """A staged store keeps its index ops: its row's start or its offsets name them."""
        return any(access is o for o in self.staged_stores)

    def streams_tiles(self) -> bool:
        """Rows not held in registers are walked a tile of ``steps`` values a lane at a
        time, the tile's loads issued first (a load a lane in flight would leave a warp's
        row latency-bound)."""
        return not self.held_rows

    @contextmanager
    def loop(self, op, shared: bool):
        if not (shared and id(op) in self.staged_loops):
            with super().loop(op, shared):
                yield
            return
        w, loc = self.w, self.local
        k = self.define(op.body.args[0], "k")
        extent = self.extent(op.extent_list[0])
        slot, step = loc["slot"], loc["step"]
        start, first = loc["tid"], "0"
        for staged in self.staged_in(op):  # each row's start, for the copy-out
            if staged.starts is not None:
                with w.indented(f"if {loc['tid']} == 0:"):
                    w.line(f"{staged.starts}[{loc['group']}] = "
                           f"{self.flat_offset(staged.store, k_at='0')} if {loc['valid']} else -1")
        with ExitStack() as tiles:
            if not self.held_rows:  # a tile of the row's values at a time, a stage each
                start, first = f"{loc['base']} + {loc['tid']}", loc["base"]
                tiles.enter_context(w.indented(
                    f"for {loc['base']} in range(0, {extent}, {self.steps} * {WARP}):"))
            if self.fills[id(op)][1]:  # this loop's own loads, issued first
                with w.indented(f"for {slot} in range({self.held_slots()}):"):
                    w.line(f"{k} = {start} + {slot} * {WARP}")
                    with w.indented(f"if {k} < {extent}:"):
                        self.fill(op)
            if self.held_rows:  # the held slots, a stage of them at a time
                first = f"{loc['stage']} * {WARP}"
                tiles.enter_context(w.indented(
                    f"for {loc['stage']} in range(0, {self.row_slots}, {self.steps}):"))
            # every warp takes every step (the barriers): past the last row, the last
            # row's values again, not stored
            with w.indented(f"for {step} in range({self.steps}):"):
                w.line(f"{slot} = " + (f"{loc['stage']} + {step}" if self.held_rows else step))
                w.line(f"{k} = {start} + {slot} * {WARP}")
                for staged in self.staged_in(op):
                    if staged.offsets is not None:
                        w.line(f"{staged.offsets}[{step}, {loc['cell']}] = -1")
                with w.indented(f"if {k} < {extent}:"):
                    yield
            self.copy_out(op, first, extent)

    def held_slots(self) -> int:
        """The slots a lane fills ahead: a held row's, or a streamed stage's."""
        return self.row_slots if self.held_rows else self.steps

    def staged_in(self, op) -> list:
        """The staged stores of row loop ``op``."""
        return [self.row_stages[id(o)] for o in op.body.ops if id(o) in self.row_stages]

    def copy_out(self, op, first: str, extent: str) -> None:
        """The stage's tiles to memory, a cell of each step a thread (``first``: the
        stage's first value of the row)."""
        w, loc = self.w, self.local
        w.line("cuda.syncthreads()  # the stage's values of the block's rows are in the tiles")
        stores = self.staged_in(op)
        for staged in stores:
            if staged.starts is not None:
                w.line(f"{staged.row_start} = {staged.starts}[{loc['out_row']}]")
        with w.indented(f"for {loc['step']} in range({self.steps}):"):
            w.line(f"{loc['out_k']} = {first} + {loc['step']} * {WARP} + "
                   "cuda.threadIdx.x // STAGED_ROWS")
            for staged in stores:
                at = self.namer.fresh("at")
                if staged.starts is not None:
                    w.line(f"{at} = {staged.row_start} + {loc['out_k']} * {staged.stride}")
                    test = f"{staged.row_start} >= 0 and {loc['out_k']} < {extent}"
                else:
                    w.line(f"{at} = {staged.offsets}[{loc['step']}, {loc['out_cell']}]")
                    test = f"{at} >= 0"
                with w.indented(f"if {test}:"):
                    value = self.stored(f"{staged.tile}[{loc['step']}, {loc['out_cell']}]",
                                        staged.store.operands[1].type.dtype)
                    w.line(f"{staged.view}[numba.uint64({at})] = {value}")
        w.line("cuda.syncthreads()  # copied out before the next stage's values")

    def statement(self, op, shared: bool) -> None:
        if isinstance(op, StoreOp) and id(op) in self.row_stages:
            staged, loc = self.row_stages[id(op)], self.local
            self.w.line(f"{staged.tile}[{loc['step']}, {loc['cell']}] = {self.namer(op.operands[0])}")
            if staged.offsets is not None:
                self.w.line(f"{staged.offsets}[{loc['step']}, {loc['cell']}] = "
                            f"{self.flat_offset(op)} if {loc['valid']} else -1")
            return
        if isinstance(op, StoreOp) and not shared and self.inside_staged(op):
            with self.w.indented(f"if {self.local['valid']}:"):  # (the last row's again)
                super().statement(op, shared)
            return
        super().statement(op, shared)

    def inside_staged(self, op) -> bool:
        parent = op.parent.parent_op if op.parent is not None else None
        return isinstance(parent, ForOp) and id(parent) in self.staged_loops

    def flat_offset(self, store, k_at: str | None = None) -> str:
        """The store's element as one offset of its C-contiguous buffer (Horner's rule
        over its shape); ``k_at``: the row loop's index taken at that value."""
        buf = self.namer(store.operands[1])
        k = store.parent.parent_op.body.args[0]
        indices = [k_at if k_at is not None and v is k else self.namer(v)
                   for v in store.operands[2:]]
        text = indices[0] if indices else "0"
        for d, index in enumerate(indices[1:], start=1):
            text = f"({text}) * {buf}.shape[{d}] + {index}"
        return f"numba.int64({text})"


class _StagedStore:
    """A staged store's names: its tile, its buffer's flat view, and either the tile of
    its values' offsets or its rows' starts with k's stride (``row_index_place``)."""

    def __init__(self, store: StoreOp, place: int | None, tile: str, view: str):
        self.store, self.place, self.tile, self.view = store, place, tile, view
        self.offsets = self.starts = self.stride = self.row_start = None


__all__ = ["StagedRowsEmitter", "row_index_place", "staged_tile"]
