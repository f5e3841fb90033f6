"""Stores along the reduced axis through shared memory (strips over columns).

A strips kernel over columns gives the lanes of a warp neighbouring points and one
reduced index each. Its reads along a middle axis are then coalesced; but a store at
``row_base + r`` (the output's last axis is the reduced one: layernorm of NCHW stored
NHWC, a channel softmax stored channels-last) writes each lane's value a row apart: a
warp store touches 32 sectors and uses 4 bytes of each (H100: layernorm over 96
channels of [32, 96, 56, 56] stored NHWC 0.197 ms, 0.077 stored NCHW).

Staged, each thread writes its values into a shared tile, a row a point of ``pitch``
values (the reduced extent padded so that the lanes of a warp, ``32 // width`` reduced
indices of ``width`` points, fall in distinct banks). After a barrier the block's threads
copy the tile out, neighbouring threads on neighbouring elements of a row: where the
points' rows follow one another in memory (the output's leading axes are the points'),
the strip's rows are one contiguous range, written in whole lines.

Only the registers variant stages (its values bound the tile: ``width * n_red <=
min(STRIP_HELD_THREADS, STRIP_BLOCK_THREADS) * VALUES_PER_THREAD``); the streaming one
stores as before. Points past the end (the last strip's ``valid``) write their tile rows
but are not copied out.
"""
from __future__ import annotations

from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.flat_rows import _key as flat_key
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.dialects.loops import ForOp, StoreOp
from mlfuse.ir.types import itemsize

# the most shared memory the tiles of a kernel take (static shared memory is at most 48 KB,
# the reductions' scratch takes 4 KB): stores past it are not staged
STAGE_BYTES = 40 * 1024


class StagedStores:
    """A mixin of schedule_strips.StripsEmitter: ``plan_staged_stores`` after the flat
    accesses are planned, ``stage_constants`` once ``n_red`` is known, then the
    epilogue loops through ``staged_epilogue``."""

    def plan_staged_stores(self, tops, points: int, block_threads: int) -> None:
        """The epilogue stores to stage (id(store) -> (tile, rows array, its flat access)),
        and their shared arrays."""
        self.stage_tiles: dict[int, tuple] = {}
        if not (self.columns and self.registers and not self.vectors and
                self.hw.strip_staged_stores):
            return
        budget = STAGE_BYTES
        # (STRIP_STAGE_VALUES of the target's module: the strip's points and threads)
        limit = min(self.hw.strip_held_threads, block_threads) * \
            self.hw.row_values_per_thread + 31 * points
        for top in tops[1:]:
            if not isinstance(top, ForOp):
                continue
            levels = self.levels[id(top)]
            for o in levels[-1].body.ops:
                if not isinstance(o, StoreOp) or not self._along_row(o, levels):
                    continue
                ctype = COMPUTE_TYPE[o.operands[1].type.dtype]
                size = limit * itemsize(_DTYPE_OF[ctype]) if ctype in _DTYPE_OF else None
                if size is None or size > budget or o.operands[1].type.dtype == "bf16":
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
        """Per kernel: a tile row's pitch, and where this thread starts copying out
        (point, value) and steps by (the block's threads, counted in rows)."""
        if not self.stage_tiles:
            return
        w, loc = self.w, self.local
        for n in ("pitch", "out_point", "out_value", "step_points", "step_values", "rows_red"):
            loc[n] = self.namer.fresh(n)
        # a warp's lanes are ``width`` points of 32 // width reduced indices: a pitch of
        # 32 // width (mod 32) puts them in 32 distinct banks
        w.line(f"{loc['pitch']} = {loc['n_red']} + (32 // min({self.width}, 32) - "
               f"{loc['n_red']}) % 32")
        w.line(f"{loc['rows_red']} = max({loc['n_red']}, 1)")
        w.line(f"{loc['out_point']}, {loc['out_value']} = divmod({loc['nthreads']} * "
               f"{self.width} + {loc['lane']}, {loc['rows_red']})")
        w.line(f"{loc['step_points']}, {loc['step_values']} = divmod({self.width} * "
               f"{loc['per']}, {loc['rows_red']})")

    def staged_in(self, top) -> list:
        return [o for o in self.levels[id(top)][-1].body.ops if id(o) in self.stage_tiles]

    def stage_store(self, op) -> bool:
        """A staged store's line (its tile row, at the flat reduced index): True if
        ``op`` is one."""
        if id(op) not in self.stage_tiles:
            return False
        tile = self.stage_tiles[id(op)][0]
        value = self.stored(self.namer(op.operands[0]), op.operands[1].type.dtype)
        self.w.line(f"{tile}[{self.local['lane']} * {self.local['pitch']} + "
                    f"{self.local['r']}] = {value}")
        return True

    def stage_rows(self, stores) -> None:
        """Each point's row base, written by its first thread (before the barrier)."""
        with self.w.indented(f"if {self.local['nthreads']} == 0:"):
            for o in stores:
                _, rows, access = self.stage_tiles[id(o)]
                base = self.row_bases[self._base_code(access)]
                self.w.line(f"{rows}[{self.local['lane']}] = {base}")

    def copy_out(self, stores) -> None:
        """After a barrier, the tiles to memory: this thread's (point, value) pairs, the
        block's threads apart, while the point is real (one strip a block: no barrier
        after, no later strip reuses the tiles)."""
        w, loc = self.w, self.local
        point, value = self.namer.fresh("out_p"), self.namer.fresh("out_v")
        real = self.namer.fresh("n_real")
        w.line("cuda.syncthreads()  # the tiles are whole")
        w.line(f"{real} = min({self.width}, {loc['n_points']} - {loc['strip']} * {self.width}) "
               f"if {loc['n_red']} > 0 else 0")
        w.line(f"{point}, {value} = {loc['out_point']}, {loc['out_value']}")
        with w.indented(f"while {point} < {real}:"):
            for o in stores:
                tile, rows, _ = self.stage_tiles[id(o)]
                view = self.flat_views[id(o.operands[1])]
                w.line(f"{view}[numba.uint64({rows}[{point}] + {value})] = "
                       f"{tile}[{point} * {loc['pitch']} + {value}]")
            w.line(f"{value} += {loc['step_values']}")
            w.line(f"{point} += {loc['step_points']}")
            with w.indented(f"if {value} >= {loc['n_red']}:"):
                w.line(f"{value} -= {loc['n_red']}")
                w.line(f"{point} += 1")


_DTYPE_OF = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}


__all__ = ["StagedStores"]
