"""The first stage of a split reduction that reads through tiles (``split_tiles``).

A kernel whose reduce nests read some values permuted along one reduced axis A and the
others along the innermost reduced axis B (``sum(transpose(a) * b)``: a[c, r] and
b[r, c] in a nest over r, c; dialects/reductions.py ``nest_tiles``) is a "split-rows"
kernel with ``split_tiles = [A, B]``. Its first stage is this kernel; the second, the
combine of each point's partials in chunk order and the epilogue, is split-rows' own
(schedule_split.py), and so are the partial buffers and the host's chunk count.

A block per (point, chunk) walks the chunk's squares of TILE x TILE values of levels A
and B, the nest's other levels fixed per square (squares counted over them, then A,
then B: a chunk is a run of neighbouring squares), each square in tile_phases.py's two
phases: the permuted loads into shared tiles with threads along A, then the nests'
innermost bodies with threads along B, combined into the thread's partial in step
order. After the chunk, a block reduction combines the threads' partials into the
chunk's (the same bits on every run: no atomics). Points past the end of A or B load
nothing and add nothing. Under the simulator the square is 8 x 8 (16 threads, 4
steps), so tests at tiny sizes cover several squares, edges included; the code is the
same.
"""
from __future__ import annotations

from mlfuse.codegen.schedule_split import SplitEmitter
from mlfuse.codegen.schedule_tiles import SCALAR, tile_shape
from mlfuse.codegen.tile_phases import TiledPhases
from mlfuse.dialects.loops import ForOp
from mlfuse.dialects.reductions import ReduceNest, for_nest, nest_tiles

DOC = ("Split reduction over [{space}], first stage: a block per (point, chunk) walks its "
       "chunk's {tile}x{tile} squares of reduced axes {a} and {b}; loads along axis {a} go "
       "through shared memory, so every load coalesces.")
_LOCALS = ("square", "n_squares", "squares_a", "squares_b")


class TiledSplitEmitter(TiledPhases, SplitEmitter):
    """The first stage of a split-rows kernel with ``split_tiles`` (the module doc)."""

    def __init__(self, op, name, target, helpers, hw, taken=()):
        super().__init__(op, name, "split-rows", target, helpers, hw, taken)
        fors = [ReduceNest(for_nest(o)) for o in op.body.ops if isinstance(o, ForOp)]
        self.setup_tiles(nest_tiles(op)[2], fors)
        for n in _LOCALS:
            self.local[n] = self.namer.fresh(n)

    def emit(self) -> str:
        a, b = self.op["split_tiles"]
        doc = DOC.format(space="{space}", tile=self.tile, a=a, b=b)
        with self.kernel_def(self.partials + [self.local["n_split"]], doc):
            self.first_stage()
        return self.w.text()

    def first_stage(self) -> None:
        w, loc, tile = self.w, self.local, self.tile
        a, b = self.op["split_tiles"]
        extents = self.nests[0].extents
        outer = [d for d in range(len(extents)) if d not in (a, b)]
        self.threads()
        self.declare_tiles()
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        w.line(f"{loc['squares_a']} = ({self.extent(extents[a])} + {tile - 1}) // {tile}")
        w.line(f"{loc['squares_b']} = ({self.extent(extents[b])} + {tile - 1}) // {tile}")
        w.line(f"{loc['n_squares']} = {self.points([extents[d] for d in outer])} * "
               f"{loc['squares_a']} * {loc['squares_b']}")
        w.line(f"{loc['chunk']} = ({loc['n_squares']} + {loc['n_split']} - 1) // {loc['n_split']}")
        names = [self.namer(k) for k in self.nests[0].indices]
        along = (names[a], self.extent(extents[a]), names[b], self.extent(extents[b]))
        with self.each_item(f"{loc['n_points']} * {loc['n_split']}"):
            w.line(f"{loc['point']}, {loc['part']} = divmod({loc['flat']}, {loc['n_split']})")
            self.unravel(loc["point"])
            self.point_values()
            w.line(f"{loc['lo']} = {loc['part']} * {loc['chunk']}")
            w.line(f"{loc['hi']} = min({loc['lo']} + {loc['chunk']}, {loc['n_squares']})")
            parts = self.start_parts()
            with w.indented(f"for {loc['square']} in range({loc['lo']}, {loc['hi']}):"):
                self.helpers.add("_divmod_index")
                # the square's other levels, then its place among A and B's
                rest = self.place(loc["square"], f"{loc['squares_a']} * {loc['squares_b']}",
                                  [self.nests[0].indices[d] for d in outer],
                                  [extents[d] for d in outer])
                square_a, square_b = self.namer.fresh("square_a"), self.namer.fresh("square_b")
                w.line(f"{square_a}, {square_b} = _divmod_index({rest}, {loc['squares_b']})")
                w.line(f"{loc['a0']} = {square_a} * {tile}")
                w.line(f"{loc['b0']} = {square_b} * {tile}")
                self.square_phases(along, parts)
            for n, part in zip(self.nests, parts):
                total = self.shared_combine(n.top["combiner"], part, n.top.result.type.dtype)
                w.line(f"{part} = {total}")
            with w.indented(f"if {self.leader()}:"):
                for n, part in zip(self.nests, parts):
                    w.line(f"{self.partial_of[id(n.top)]}[{loc['flat']}] = {part}")


def first_stage_launch(target: str, hw) -> dict:
    """The first stage's (square side, threads a block), for the host (split_host.py)."""
    return {"split-rows": tile_shape(target, hw, SCALAR)[:2]}


__all__ = ["TiledSplitEmitter", "first_stage_launch"]
