"""The two phases of a reduction kernel that reads some loads through shared tiles
(split_tiles.py, schedule_strip_tiles.py): a mixin of schedule_split.SplitEmitter.

A block takes TILE x TILE squares of two axes: "a", the one the tiled loads step along
(a reduced axis), and "b", the one every other load steps along (a reduced axis, or the
kernel's innermost point axis). In a square:

1. fill: threads step along a (their lane is a's index, their row b's) and load the
   tiled loads into padded shared tiles ``tile[a, b]``: coalesced;
2. a barrier; threads step along b (lane: b's index, row: a's), read the tiled loads
   from the tile and every other load directly: coalesced;
3. a barrier before the next square refills the tiles.

schedule_tiles.py's ``thread_layout`` (a warp along 32 values of one row) puts both
phases' shared accesses on 32 banks. The same load in several nests walked together
fills one tile, and what a later nest's body repeats of the first's is computed once.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.codegen.schedule_tiles import SCALAR, _index_slice, thread_layout, tile_shape
from mlfuse.dialects.reductions import shared_body_ops

_LOCALS = ("lane_v", "lane_r", "a0", "b0", "row", "outer")


class TiledPhases:
    """``setup_tiles`` in __init__ (after the split emitter's), ``declare_tiles`` in the
    kernel, then ``square_phases`` a square."""

    def setup_tiles(self, tiled: list, fors: list = ()) -> None:
        """The tile's shape for this target and ``tiled``, the loads it reads; ``fors``:
        for nests (as ReduceNests) walked with the reduce nests, storing as they go."""
        self.flat_loads = None  # every access indexed by its own indices
        self.tile, self.block_threads, _ = tile_shape(self.target, self.hw, SCALAR)
        self.tile_rows = thread_layout(self.tile, self.block_threads, 1)[2]
        self.steps = self.tile // self.tile_rows
        self.launch_bound = str(self.block_threads)
        self.tiled, self.tile_fors = tiled, list(fors)
        for n in self.nests[1:] + self.tile_fors:  # walked together: what a later nest repeats
            levels = {id(k): f for k, f in zip(n.indices, self.nests[0].indices)}
            self.merged.update(shared_body_ops(self.nests[0].inner, n.inner, levels))
        self.tiles: dict[int, str] = {}  # id(load) -> its shared tile
        self.tile_fills: list = []  # the loads that fill a tile (the first of each alike)
        for n in _LOCALS:
            self.local[n] = self.namer.fresh(n)

    def declare_tiles(self) -> None:
        """A shared tile for each tiled load (one for alike loads), and the thread's lane
        and row; the nests' indices named alike."""
        w, loc, tile = self.w, self.local, self.tile
        filled = {}
        levels = {id(k): d for n in self.nests + self.tile_fors for d, k in enumerate(n.indices)}
        for load in self.tiled:
            key = _tile_key(load, levels)
            if key in filled:
                self.tiles[id(load)] = filled[key]
                continue
            shared = SHARED_TYPE[COMPUTE_TYPE[load.result.type.dtype]]
            self.tiles[id(load)] = filled[key] = \
                self.namer.fresh(f"{self.namer(load.operands[0])}_tile")
            self.tile_fills.append(load)
            w.line(f"{self.tiles[id(load)]} = cuda.shared.array(({tile}, {tile + 1}), "
                   f"{shared})  # +1: a warp's accesses on 32 banks")
        lane_v, lane_r, _ = thread_layout(tile, self.block_threads, 1, loc["tid"])
        w.line(f"{loc['lane_v']} = {lane_v}  # the thread's value in a step's row")
        w.line(f"{loc['lane_r']} = {lane_r}  # and its row")
        names = [self.define(k, f"k{d}") for d, k in enumerate(self.nests[0].indices)]
        for n in self.nests[1:] + self.tile_fors:  # the same extents: one set of names
            for k, name in zip(n.indices, names):
                self.namer.bind(k, name)

    def place(self, flat: str, count: str, outer: list, extents: list) -> str:
        """From ``flat`` (a square or a strip, counted over the ``outer`` indices of
        ``extents``, then ``count`` places within them): the ``outer`` indices named, and
        the name of its place within them."""
        if not outer:
            return flat
        self.helpers.add("_divmod_index")
        self.w.line(f"{self.local['outer']}, {self.local['rest']} = _divmod_index({flat}, {count})")
        self.unravel_into(self.local["outer"], outer, extents)
        return self.local["rest"]

    def square_phases(self, along: tuple, parts: list[str]) -> None:
        """One square: the fill, a barrier, every value combined into ``parts`` (the
        nests' partials) in step order, a barrier. ``along``: (a's index name, a's
        extent, b's index name, b's extent)."""
        w, loc = self.w, self.local
        w.line("# threads along the tiled loads' axis: fill the tiles")
        with self.each_step(along, along_b=False):
            for n in self.nests + self.tile_fors:
                mine = [o for o in self.tile_fills if o.parent is n.inner.body]
                for o in _index_slice(n.inner.body, mine):
                    self.statement(o, shared=False)
                for o in mine:
                    w.line(f"{self.tiles[id(o)]}[{loc['lane_v']}, {loc['row']}] = "
                           f"{self.load_expression(o)}")
        w.line("cuda.syncthreads()")
        w.line("# threads along the other loads' axis: every value of the square, in order")
        with self.each_step(along, along_b=True):
            self.step_nests(parts)
            for f in self.tile_fors:  # the values stored as they are walked
                for level in range(len(f.levels) - 1):
                    for o in f.outer_ops(level):
                        self.statement(o, shared=False)
                self.block(f.inner.body, top=False)
        w.line("cuda.syncthreads()  # before the next square refills the tiles")

    @contextmanager
    def each_step(self, along: tuple, along_b: bool):
        """The thread's steps of the square, ROWS rows apart, at points that exist: its
        row runs along b in phase 1 (its lane along a), along a in phase 2."""
        w, loc = self.w, self.local
        index_a, size_a, index_b, size_b = along
        row_index, value_index = (index_a, index_b) if along_b else (index_b, index_a)
        row_base, value_base = ("a0", "b0") if along_b else ("b0", "a0")
        with w.indented(f"for {loc['step']} in range({self.steps}):"):
            w.line(f"{loc['row']} = {loc['lane_r']} + {loc['step']} * {self.tile_rows}")
            w.line(f"{row_index} = {loc[row_base]} + {loc['row']}")
            w.line(f"{value_index} = {loc[value_base]} + {loc['lane_v']}")
            with w.indented(f"if {index_a} < {size_a} and {index_b} < {size_b}:"):
                yield

    def load_statement(self, op) -> None:
        if id(op) not in self.tiles:
            super().load_statement(op)
            return
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        self.w.line(f"{name} = {self.tiles[id(op)]}[{self.local['row']}, {self.local['lane_v']}]")


def _tile_key(load, levels: dict) -> tuple:
    """What a load reads: its buffer and each index as the nest level it is (``levels``:
    id(index) -> level, the same in every nest), or itself."""
    return (id(load.operands[0]), load.result.type.dtype) + tuple(
        ("level", levels[id(v)]) if id(v) in levels else id(v) for v in load.operands[1:])


__all__ = ["TiledPhases"]
