"""Strips through tiles ("strip-tiles"): reductions that read some values along a
reduced axis and the others along the kernel's innermost point axis.

``sum(transpose(a) + b, axis=1)`` reads a[k, r] and b[r, k] for each point r: a block
per point (the row schedule) reads a a row apart, a block per strip of neighbouring
points (strips over columns) reads b a row apart. Here (``strip_tiles = [P, K]``:
dialects/reductions.py ``strip_tiles``) a block takes a strip of TILE neighbouring
points of axis P (the other point axes fixed per strip) and walks the nest in squares
of TILE values of level K (the other levels fixed per square), each square in
tile_phases.py's two phases: the loads along K into shared tiles with threads along K,
then the nests' innermost bodies with threads along P, every load coalesced. A thread
keeps the point ``p0 + lane`` and combines its values in step order; after the walk
the ROWS threads of a point put their partials in a shared array, and the first of
them combines them in row order (the same bits on every run), then runs the epilogue
(the ops after the reductions) and the stores. A lane past the last point works on the
last point (its loads in bounds), adds nothing and stores nothing: every thread takes
part in every barrier. No loop may follow the reductions (no broadcast-back epilogue):
the planner asks ``why_not_split`` of the kernel first. Under the simulator the square is
8 x 8 (16 threads, 4 steps); the code is the same.
"""
from __future__ import annotations

from mlfuse.codegen.kernel_code import KernelCode, extent_factors, kernel_interface
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, combine
from mlfuse.codegen.schedule_split import SplitEmitter
from mlfuse.codegen.schedule_tiles import SCALAR, tile_shape
from mlfuse.codegen.tile_phases import TiledPhases
from mlfuse.dialects.loops import ReduceOp, StoreOp
from mlfuse.dialects.reductions import strip_tiles

DOC = ("Strips through tiles over [{space}]: a block per strip of {tile} neighbouring points "
       "of axis {p} walks {tile}x{tile} squares of them and reduced axis {k}; loads along "
       "axis {k} go through shared memory, so every load coalesces.")
_LOCALS = ("strip", "n_strips", "strips_p", "square", "n_squares", "squares_k", "p0", "r")


class StripTilesEmitter(TiledPhases, SplitEmitter):
    """The kernel of a "strip-tiles" kernel op (the module doc)."""

    def __init__(self, op, name, target, helpers, hw, taken=()):
        super().__init__(op, name, "split-rows", target, helpers, hw, taken)
        self.setup_tiles(strip_tiles(op)[2])
        for n in _LOCALS:
            self.local[n] = self.namer.fresh(n)

    def emit(self) -> str:
        p, k = self.op["strip_tiles"]
        with self.kernel_def(doc=DOC.format(space="{space}", tile=self.tile, p=p, k=k)):
            self.body()
        return self.w.text()

    def body(self) -> None:
        w, loc, tile = self.w, self.local, self.tile
        p, k = self.op["strip_tiles"]
        points, extents = list(self.op.body.args), self.op.extent_list
        levels = self.nests[0].extents
        other_points = [d for d in range(len(points)) if d != p]
        other_levels = [d for d in range(len(levels)) if d != k]
        w.line(f"{loc['tid']} = cuda.threadIdx.x")
        self.declare_tiles()
        reds = []  # a point's partials, a row of threads each
        for n in self.nests:
            ctype = COMPUTE_TYPE[n.top.result.type.dtype]
            reds.append(self.namer.fresh(f"{n.top.result.name_hint or 'acc'}_rows"))
            w.line(f"{reds[-1]} = cuda.shared.array(({self.tile_rows}, {tile}), "
                   f"{SHARED_TYPE[ctype]})  # each point's partials, a row of threads each")
        size_p, size_k = self.extent(extents[p]), self.extent(levels[k])
        w.line(f"{loc['strips_p']} = ({size_p} + {tile - 1}) // {tile}")
        w.line(f"{loc['n_strips']} = {self.points([extents[d] for d in other_points])} * "
               f"{loc['strips_p']}")
        w.line(f"{loc['squares_k']} = ({size_k} + {tile - 1}) // {tile}")
        w.line(f"{loc['n_squares']} = {self.points([levels[d] for d in other_levels])} * "
               f"{loc['squares_k']}")
        index_p = self.define(points[p], f"i{p}")
        along = (self.namer(self.nests[0].indices[k]), size_k, index_p, size_p)
        self.helpers.add("_divmod_index")
        with w.indented(f"for {loc['strip']} in range(numba.int64(cuda.blockIdx.x), "
                        f"{loc['n_strips']}, cuda.gridDim.x):"):
            rest = self.place(loc["strip"], loc["strips_p"], [points[d] for d in other_points],
                              [extents[d] for d in other_points])
            w.line(f"{loc['p0']} = {rest} * {tile}")
            w.line(f"{loc['b0']} = {loc['p0']}")
            w.line(f"{index_p} = min({loc['p0']} + {loc['lane_v']}, {size_p} - 1)  # (a lane "
                   "past the end: the last point, stored nowhere)")
            self.point_values()
            parts = self.start_parts()
            with w.indented(f"for {loc['square']} in range({loc['n_squares']}):"):
                rest = self.place(loc["square"], loc["squares_k"],
                                  [self.nests[0].indices[d] for d in other_levels],
                                  [levels[d] for d in other_levels])
                w.line(f"{loc['a0']} = {rest} * {tile}")
                self.square_phases(along, parts)
            for part, red in zip(parts, reds):
                w.line(f"{red}[{loc['lane_r']}, {loc['lane_v']}] = {part}")
            w.line("cuda.syncthreads()")
            with w.indented(f"if {loc['lane_r']} == 0 and {loc['p0']} + {loc['lane_v']} < "
                            f"{size_p}:"):
                w.line(f"{index_p} = {loc['p0']} + {loc['lane_v']}")
                self._epilogue(parts, reds)
            w.line("cuda.syncthreads()  # before the next strip writes its partials")

    def _epilogue(self, parts: list[str], reds: list[str]) -> None:
        """A point's result of each nest (its threads' partials in row order, then the
        reduce's initial value), then the ops after the reductions and the stores."""
        w, loc = self.w, self.local
        for n, part, red in zip(self.nests, parts, reds):
            dtype, combiner = n.top.result.type.dtype, n.top["combiner"]
            w.line(f"{part} = {red}[0, {loc['lane_v']}]")
            with w.indented(f"for {loc['r']} in range(1, {self.tile_rows}):"):
                value = f"{red}[{loc['r']}, {loc['lane_v']}]"
                w.line(f"{part} = {combine(combiner, part, value, self.helpers, dtype)}")
            init = self.namer(n.top.operands[0])
            w.line(f"{self.define(n.top.result, 'acc')} = "
                   f"{combine(combiner, init, part, self.helpers, dtype)}")
        for op in self.op.body.ops:
            if not isinstance(op, ReduceOp) and (self.need[id(op)] >= 0 or isinstance(op, StoreOp)):
                self.statement(op, shared=False)


def emit_strip_tiles(op, name: str, target: str, helpers: set[str], names, hw) -> KernelCode:
    text = StripTilesEmitter(op, name, target, helpers, hw, names.taken).emit()
    return KernelCode(op, "strip-tiles", kernel_interface(op), [], {"strip-tiles": name}, text,
                      [], launch={"strip-tiles": tile_shape(target, hw, SCALAR)[:2]})


def strip_tiles_launch(host, kernel, points: str, args: list[str]) -> None:
    """A block per strip of TILE points of axis P, up to MAX_BLOCKS (blocks stride)."""
    op = kernel.op
    p = op["strip_tiles"][0]
    tile, threads = kernel.launch["strip-tiles"]
    others = [f for d, e in enumerate(op.extent_list) if d != p
              for f in extent_factors([e], lambda s: host.dim(s, op))]
    size_p = " * ".join(extent_factors([op.extent_list[p]], lambda s: host.dim(s, op)))
    strips = " * ".join(others + [f"(({size_p} + {tile - 1}) // {tile})"])
    host.guarded(op, points, [host.call(kernel.variants["strip-tiles"],
                                        f"min({strips}, MAX_BLOCKS), {threads}", args)])


__all__ = ["StripTilesEmitter", "emit_strip_tiles", "strip_tiles_launch"]
