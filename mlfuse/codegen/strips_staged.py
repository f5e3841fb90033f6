"""Stores along the reduced axis through shared memory (strips over columns).

A strips kernel over columns gives the lanes of a warp neighbouring points and one
reduced index each. Its reads along a middle axis are then coalesced; but a store at
``row_base + r`` (the output's last axis is the reduced one: a layernorm of NCHW read
and stored as NHWC, whose points are NHW) writes each lane's value a row apart: a
warp store touches 32 sectors and uses 4 bytes of each (H100: layernorm over 96
channels of [32, 96, 56, 56] stored NHWC 0.197 ms, 0.077 stored NCHW).

Staged, each thread writes its values into a shared tile, a row a point of ``pitch``
values (the reduced extent padded so that the lanes of a warp, ``32 // width`` reduced
indices of ``width`` points, fall in distinct banks). After a barrier the block's threads
copy the tile out, neighbouring threads on neighbouring elements of a row: where the
points' rows follow one another in memory (the output's leading axes are the points'),
the strip's rows are one contiguous range, written in whole lines.

The registers kernel stages whole rows (its values bound the tile: ``width * n_red <=
min(STRIP_HELD_THREADS, STRIP_BLOCK_THREADS) * VALUES_PER_THREAD``), the streaming one a
tile's part of each row at a time (``per * STREAM_TILE`` values, copied out after each
tile), where its strip has STRIP_STAGE_WIDTH points or more (16; a narrower strip's
warp stores 16 bytes and more a point: cheaper than the tile's barriers). The vector
and shared variants do not stage (a store along the reduced axis is none of their
vector accesses: they are not made for such a kernel). Points past the end (the last
strip's ``valid``) write their tile rows but are not copied out. (A softmax stored
transposed after it, a placed store, stays refused by ``dialects/permute.store_scatters``:
measured as one staged kernel it was slower than its two, perf-notes.)
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.flat_rows import _key as flat_key
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.dialects.loops import ForOp, StoreOp

# the most shared memory the tiles of a kernel take (static shared memory is at most 48 KB,
# the reductions' scratch takes 4 KB): stores past it are not staged
STAGE_BYTES = 40 * 1024


class StagedStores:
    """A mixin of schedule_strips.StripsEmitter: ``plan_staged_stores`` after the flat
    accesses are planned, ``stage_constants`` once ``n_red`` is known, then each
    statement through ``staged_statement`` first."""

    def plan_staged_stores(self, tops, geometry) -> None:
        """The epilogue stores to stage (id(store) -> (tile, rows array, its flat access)),
        and their shared arrays (``geometry``: schedule_strips.strip_geometry's)."""
        self.stage_tiles: dict[int, tuple] = {}
        if not (self.columns and self.variant in ("strips-registers", "strips-streaming")
                and self.hw.strip_staged_stores):
            return
        budget, limit = STAGE_BYTES, stage_values(self.hw, geometry)
        for top in tops:
            if not isinstance(top, ForOp):
                continue
            levels = self.levels[id(top)]
            for o in levels[-1].body.ops:
                if not isinstance(o, StoreOp) or not self._along_row(o, levels):
                    continue
                dtype = o.operands[1].type.dtype
                ctype = COMPUTE_TYPE[dtype]  # (the tile holds values as computed)
                size = limit * np.dtype(ctype).itemsize
                if ctype not in SHARED_TYPE or dtype == "bf16" or size > budget:
                    continue
                budget -= size
                buf = self.namer(o.operands[1])
                tile = self.namer.fresh(f"stage_{buf}")
                rows = self.namer.fresh(f"stage_rows_{buf}")
                self.w.line(f"{tile} = cuda.shared.array(STRIP_STAGE_VALUES, "
                            f"{SHARED_TYPE[ctype]})  # the strip's values of {buf}, a row a point")
                self.w.line(f"{rows} = cuda.shared.array(STRIP_POINTS, numba.int64)  "
                            "# and each point's row base")
                access = self.flat[flat_key(*access_parts(o))]
                self.stage_tiles[id(o)] = (tile, rows, access)

    def _along_row(self, store, levels) -> bool:
        """Whether ``store`` writes at ``row_base + r`` (r: the flat reduced index)."""
        access = self.flat.get(flat_key(*access_parts(store)))
        if access is None or access.axis is not None or access.step is None:
            return False
        return access.step == "flat" or (len(levels) == 1 and
                                         access.step is levels[0].body.args[0])

    def stage_constants(self) -> None:
        """Per kernel: a tile row's values (registers: the reduced extent; streaming: a
        tile's, ``span``) and pitch, and where this thread starts copying out (point,
        value) and steps by (the block's threads, counted in rows)."""
        if not self.stage_tiles:
            return
        w, loc = self.w, self.local
        for n in ("pitch", "out_point", "out_value", "step_points", "step_values", "row_len"):
            loc[n] = self.namer.fresh(n)
        if self.registers:
            w.line(f"{loc['row_len']} = max({loc['n_red']}, 1)")
        else:
            w.line(f"{loc['row_len']} = {loc['per']} * {self.tile}  # a tile's values a point")
            # a warp's direct store writes 32 // width values a point: 16 bytes and
            # more (f32, STRIP_STAGE_WIDTH 16) cost less than the tile's barriers (H100,
            # layernorm stored NHWC over 2048 channels: 0.044 ms direct, 0.055 staged;
            # over 768 channels, strips of 32 points: 0.125 direct, 0.061 staged)
            loc["staging"] = self.namer.fresh("staging")
            w.line(f"{loc['staging']} = {self.width} >= STRIP_STAGE_WIDTH")
        # a warp's lanes are ``width`` points of 32 // width reduced indices: a pitch of
        # 32 // width (mod 32) puts them in 32 distinct banks
        w.line(f"{loc['pitch']} = {loc['row_len']} + (32 // min({self.width}, 32) - "
               f"{loc['row_len']}) % 32")
        w.line(f"{loc['out_point']}, {loc['out_value']} = divmod({loc['nthreads']} * "
               f"{self.width} + {loc['lane']}, {loc['row_len']})")
        w.line(f"{loc['step_points']}, {loc['step_values']} = divmod({self.width} * "
               f"{loc['per']}, {loc['row_len']})")

    def staged_statement(self, op, shared: bool, direct) -> bool:
        """``op``'s lines where staging changes them (True), else nothing (False):
        a staged store (streaming: the direct store, ``direct()``, where the strip is
        narrow), another store of a staged epilogue (where its point is real), and the
        epilogue loop itself: every thread writes its tile rows (past the end too: a
        barrier follows), then the copy-out (streaming: after each tile)."""
        if isinstance(op, StoreOp) and id(op) in self.stage_tiles:
            self.stage_store(op, direct)
            return True
        if isinstance(op, StoreOp) and self.unguarded:
            with self.w.indented(f"if {self.local['valid']}:"):
                direct()
            return True
        staged = self.staged_in(op) if shared and isinstance(op, ForOp) else []
        if not staged:
            return False
        self.stage_rows(staged)
        self.unguarded = True
        if not self.registers:
            self.after_tile = lambda: self.copy_out(staged)
        with self.each_value(op):
            self.block(self.levels[id(op)][-1].body, top=False)
        self.unguarded, self.after_tile = False, None
        if self.registers:
            self.copy_out(staged)
        return True

    def staged_in(self, top) -> list:
        return [o for o in self.levels[id(top)][-1].body.ops if id(o) in self.stage_tiles]

    def stage_store(self, op, direct) -> None:
        """A staged store's line: its tile row, at the flat reduced index (streaming: at
        the tile's part of it, where the strip is wide, ``staging``; elsewhere the direct
        store, ``direct()``, where the point is real)."""
        tile, loc = self.stage_tiles[id(op)][0], self.local
        value = self.stored(self.namer(op.operands[0]), op.operands[1].type.dtype)
        at = loc["r"] if self.registers else f"{loc['r']} - {loc['tile']}"
        with self.staging():
            self.w.line(f"{tile}[{loc['lane']} * {loc['pitch']} + {at}] = {value}")
        if not self.registers:
            with self.w.indented(f"elif {loc['valid']}:"):
                direct()

    def staging(self):
        """The lines of a staged path: as they are (registers), or where the strip is
        wide enough (streaming, ``staging``: the same for every thread of the block)."""
        return nullcontext() if self.registers else \
            self.w.indented(f"if {self.local['staging']}:")

    def stage_rows(self, stores) -> None:
        """Each point's row base, written by its first thread (before the barrier)."""
        with self.w.indented(f"if {self.local['nthreads']} == 0:"):
            for o in stores:
                _, rows, access = self.stage_tiles[id(o)]
                base = self.row_bases[self._base_code(access)]
                self.w.line(f"{rows}[{self.local['lane']}] = {base}")

    def copy_out(self, stores) -> None:
        """After a barrier, the tiles to memory: this thread's (point, value) pairs, the
        block's threads apart, while the point is real. Registers: the whole rows, no
        barrier after (one strip a block: nothing reuses the tiles). Streaming: the
        tile's part of the rows (``tile`` on, its last one short), then a barrier before
        the next tile's values overwrite them."""
        with self.staging():
            self._copy_rows(stores)

    def _copy_rows(self, stores) -> None:
        w, loc = self.w, self.local
        point, value = self.namer.fresh("out_p"), self.namer.fresh("out_v")
        real = self.namer.fresh("n_real")
        w.line("cuda.syncthreads()  # the tiles are whole")
        w.line(f"{real} = min({self.width}, {loc['n_points']} - {loc['strip']} * {self.width}) "
               f"if {loc['n_red']} > 0 else 0")
        start = ""
        if not self.registers:
            chunk = self.namer.fresh("n_chunk")
            w.line(f"{chunk} = min({loc['row_len']}, {loc['n_red']} - {loc['tile']})")
            start = f"{loc['tile']} + "
        w.line(f"{point}, {value} = {loc['out_point']}, {loc['out_value']}")
        with w.indented(f"while {point} < {real}:"):
            with w.indented(f"if {value} < {chunk}:") if not self.registers else nullcontext():
                for o in stores:
                    tile, rows, _ = self.stage_tiles[id(o)]
                    view = self.flat_views[id(o.operands[1])]
                    w.line(f"{view}[numba.uint64({rows}[{point}] + {start}{value})] = "
                           f"{tile}[{point} * {loc['pitch']} + {value}]")
            w.line(f"{value} += {loc['step_values']}")
            w.line(f"{point} += {loc['step_points']}")
            with w.indented(f"if {value} >= {loc['row_len']}:"):
                w.line(f"{value} -= {loc['row_len']}")
                w.line(f"{point} += 1")
        if not self.registers:
            w.line("cuda.syncthreads()  # copied out before the next tile's values")


def stage_values(hw, geometry) -> int:
    """A staged store's tile in values (a module's STRIP_STAGE_VALUES; ``geometry``:
    its strip_geometry): the most the registers kernel holds (its launch condition,
    ``width * n_red <= min(STRIP_HELD_THREADS, STRIP_BLOCK_THREADS) * VALUES_PER_THREAD``)
    or a streaming tile of the most threads, plus a row's padding (at most 31) a point."""
    points, _, block_threads, stream_threads = geometry
    values = hw.row_values_per_thread
    return max(min(hw.strip_held_threads, block_threads) * values,
               stream_threads * max(1, values // 2)) + 31 * points


__all__ = ["StagedStores", "stage_values"]
