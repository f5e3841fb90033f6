"""Row kernels that store along their points through a shared tile ("staged rows").

A layernorm over rows stored transposed (``transpose(layernorm(x))``, x [R, C], the
output [C, R]) writes each row as a column. A block per row would write its values a
column's stride apart: a 32-byte sector a value (H100, rows of 1024: 0.35 ms, against
0.094 ms for the two kernels of a row reduction then transpose tiles). Here a warp takes
a row (the warp-rows schedule with groups of 32) and a block ``STAGED_ROWS``
neighbouring rows (``hw.staged_row_min_blocks`` blocks resident an SM asked). Each row
loop with such a store walks its row in steps of 32 values, the same number of steps in
every warp (rows past registers: STAGED_TILE steps' loads issued first). A step:

1. each lane computes its value of its row (lane l: value ``step * 32 + l``), and writes
   the value and its flat offset into the block's tiles at ``[row][l]``. Lanes past
   the row's end, and warps past the last row, write the offset -1;
2. a barrier; then thread t copies tile ``[t % STAGED_ROWS][t // STAGED_ROWS]`` out. A
   warp's lanes cover neighbouring rows of one or two of the step's 32 values, so they
   write neighbouring elements of the output (the store follows the kernel's last point:
   ``dialects/permute.stores_along_points``);
3. a barrier before the next step's values overwrite the tiles.

The offsets travel with the values, so the copy-out needs no index of its own: any
index expression works, only its coalescing depends on the store following the points.
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

from mlfuse.dialects.loops import ForOp, StoreOp
from mlfuse.dialects.permute import stores_along_points
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.codegen.schedule_warp_rows import WarpRowsEmitter, _constant_rows
from mlfuse.row_groups import WARP

PITCH = "STAGED_ROW_PITCH"  # a tile row: a step's 32 values and a pad (the module's)
STAGED_TILE = "max(1, VALUES_PER_THREAD // 4)"  # a lane's loads in flight (rows past registers)

_DOC = ("Staged rows over [{space}]: a warp per point, a block of STAGED_ROWS neighbouring "
        "points; stores along the points go through a shared tile, a step of 32 values at a "
        "time.")


class StagedRowsEmitter(WarpRowsEmitter):
    DOC = {"warp-rows": _DOC}
    launch_bound = "(THREADS_PER_BLOCK, STAGED_ROW_MIN_BLOCKS)"

    def plan_group(self, op, hw) -> None:
        super().plan_group(op, hw)
        self.constant_width = WARP  # a warp a row, whatever the row's length
        row = _constant_rows(op)  # (held rows: constant ones, a slot a step)
        self.row_slots = -(-row // WARP) if row is not None else 1
        # (hw.row_staged_stores off: the same kernel storing directly, scattered)
        self.staged_stores = stores_along_points(op) if hw.row_staged_stores else []
        self.row_stages = {}  # id(store) -> (tile, offsets, flat view)
        self.staged_loops = {id(o.parent.parent_op) for o in self.staged_stores}

    def declare_scratch(self, row_loops, slots=None) -> None:
        """The group reductions' scratch, then a value tile and an offset tile a staged
        store (the block's STAGED_ROWS rows of a step's 32 values)."""
        super().declare_scratch(row_loops, slots)
        if not self.held_rows:  # a tile of loads a lane in flight, not one (streams_tiles)
            self.plan_stream_tiles(row_loops)
            # a quarter of a register row's values, whatever the loads a value (ptxas
            # sm_90, layernorm stored transposed, two blocks of 512 an SM: 60 registers,
            # no spill; half of them spilled 20 B)
            self.stream_tile = STAGED_TILE
        w = self.w
        for o in self.staged_stores:
            buf = self.namer(o.operands[1])
            ctype = COMPUTE_TYPE[o.operands[1].type.dtype]
            ctype = "int32" if ctype == "bool_" else ctype  # (no shared array of bools)
            tile, offsets = self.namer.fresh(f"stage_{buf}"), self.namer.fresh(f"stage_at_{buf}")
            w.line(f"{tile} = cuda.shared.array(STAGED_ROW_TILE, {SHARED_TYPE[ctype]})  "
                   f"# a step's values of {buf}, a row a point")
            w.line(f"{offsets} = cuda.shared.array(STAGED_ROW_TILE, numba.int64)  "
                   "# and their flat offsets (-1: none)")
            self.helpers.add("_flat")
            view = self.namer.fresh(f"{buf}_flat")
            w.line(f"{view} = _flat({buf})")
            self.row_stages[id(o)] = (tile, offsets, view)
        if not self.row_stages:
            return
        self.local["cell"] = self.namer.fresh("cell")
        self.local["out_cell"] = self.namer.fresh("out_cell")
        w.line(f"{self.local['cell']} = {self.local['group']} * {PITCH} + {self.local['tid']}  "
               "# this lane's place in the tiles")
        w.line(f"{self.local['out_cell']} = cuda.threadIdx.x % STAGED_ROWS * {PITCH} + "
               "cuda.threadIdx.x // STAGED_ROWS  # the place it copies out")

    def streams_tiles(self) -> bool:
        """Rows not held in registers are walked a tile of STAGED_TILE values a lane at a
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
        start = loc["tid"]
        with ExitStack() as tiles:
            if self.held_rows:  # the row's slots (constant)
                slots = str(self.row_slots)
            else:  # a tile of the row's values at a time
                slots, start = self.stream_tile, f"{loc['base']} + {loc['tid']}"
                tiles.enter_context(w.indented(
                    f"for {loc['base']} in range(0, {extent}, {self.stream_tile} * {WARP}):"))
            if self.fills[id(op)][1]:  # this loop's own loads, issued first
                with w.indented(f"for {loc['slot']} in range({slots}):"):
                    w.line(f"{k} = {start} + {loc['slot']} * {WARP}")
                    with w.indented(f"if {k} < {extent}:"):
                        self.fill(op)
            # every warp takes every step (the barriers): past the last row, the last
            # row's values again, their offsets -1
            with w.indented(f"for {loc['slot']} in range({slots}):"):
                w.line(f"{k} = {start} + {loc['slot']} * {WARP}")
                for o in self.staged_in(op):
                    w.line(f"{self.row_stages[id(o)][1]}[{loc['cell']}] = -1")
                with w.indented(f"if {k} < {extent}:"):
                    yield
                self.copy_out(op)

    def staged_in(self, op) -> list:
        """The staged stores of row loop ``op``."""
        return [o for o in op.body.ops if id(o) in self.row_stages]

    def copy_out(self, op) -> None:
        w = self.w
        w.line("cuda.syncthreads()  # the step's values of the block's rows are in the tiles")
        for o in self.staged_in(op):
            tile, offsets, view = self.row_stages[id(o)]
            at = self.namer.fresh("at")
            w.line(f"{at} = {offsets}[{self.local['out_cell']}]")
            with w.indented(f"if {at} >= 0:"):
                value = self.stored(f"{tile}[{self.local['out_cell']}]",
                                    o.operands[1].type.dtype)
                w.line(f"{view}[numba.uint64({at})] = {value}")
        w.line("cuda.syncthreads()  # copied out before the next step's values")

    def statement(self, op, shared: bool) -> None:
        if isinstance(op, StoreOp) and id(op) in self.row_stages:
            tile, offsets, _ = self.row_stages[id(op)]
            cell = self.local["cell"]
            self.w.line(f"{tile}[{cell}] = {self.namer(op.operands[0])}")
            self.w.line(f"{offsets}[{cell}] = {self.flat_offset(op)} if "
                        f"{self.local['valid']} else -1")
            return
        if isinstance(op, StoreOp) and not shared and self.inside_staged(op):
            with self.w.indented(f"if {self.local['valid']}:"):  # (the last row's again)
                super().statement(op, shared)
            return
        super().statement(op, shared)

    def inside_staged(self, op) -> bool:
        parent = op.parent.parent_op if op.parent is not None else None
        return isinstance(parent, ForOp) and id(parent) in self.staged_loops

    def flat_offset(self, store) -> str:
        """The store's element as one offset of its C-contiguous buffer (Horner's rule
        over its shape)."""
        buf = self.namer(store.operands[1])
        indices = [self.namer(v) for v in store.operands[2:]]
        text = indices[0] if indices else "0"
        for d, index in enumerate(indices[1:], start=1):
            text = f"({text}) * {buf}.shape[{d}] + {index}"
        return f"numba.int64({text})"


__all__ = ["StagedRowsEmitter"]
