"""The first stage of a split reduction that reads through tiles (``split_tiles``).

A kernel whose reduce nests read some values permuted along one reduced axis A and the
others along the innermost reduced axis B (``sum(transpose(a) * b)``: a[c, r] and
b[r, c] in a nest over r, c; dialects/reductions.py ``nest_tiles``) is a "split-rows"
kernel with ``split_tiles = [A, B]``. Its first stage is this kernel; the second, the
combine of each point's partials in chunk order and the epilogue, is split-rows' own
(schedule_split.py), and so are the partial buffers and the host's chunk count.

A block per (point, chunk) walks the chunk's squares of TILE x TILE values of levels A
and B, the nest's other levels fixed per square (squares counted over them, then A,
then B: a chunk is a run of neighbouring squares). For each square, as the
transpose-tiles kernel does for a transpose (schedule_tiles.py, whose thread layout it
takes: no shared access conflicts):

1. fill: threads step along A and load the permuted loads into shared tiles
   ``tile[a, b]`` (neighbouring threads read neighbouring addresses: coalesced);
2. a barrier; threads step along B, run the nest's innermost body at each of their
   points (the other loads coalesced along B, the permuted ones read from the tile)
   and combine what it yields into the thread's partial, in the order of the steps;
3. a barrier before the next square refills the tiles.

After the chunk, a block reduction combines the threads' partials into the chunk's
(the same bits on every run: no atomics). Points past the end of A or B load nothing
and add nothing. Under the simulator the square is 8 x 8 (16 threads, 4 steps), so
tests at tiny sizes cover several squares, edges included; the code is the same.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, identity
from mlfuse.codegen.schedule_split import SplitEmitter
from mlfuse.codegen.schedule_tiles import SCALAR, _index_slice, thread_layout, tile_shape
from mlfuse.dialects.reductions import nest_tiles, shared_body_ops

DOC = ("Split reduction over [{space}], first stage: a block per (point, chunk) walks its "
       "chunk's {tile}x{tile} squares of reduced axes {a} and {b}; loads along axis {a} go "
       "through shared memory, so every load coalesces.")
_LOCALS = ("lane_v", "lane_r", "square", "n_squares", "squares_a", "squares_b", "outer",
           "a0", "b0", "row")


class TiledSplitEmitter(SplitEmitter):
    """The first stage of a split-rows kernel with ``split_tiles`` (the module doc)."""

    def __init__(self, op, name, target, helpers, hw, taken=()):
        super().__init__(op, name, "split-rows", target, helpers, hw, taken)
        self.flat_loads = None  # every access indexed by the nest's own indices
        self.tile, self.block_threads, _ = tile_shape(target, hw, SCALAR)
        self.tile_rows = thread_layout(self.tile, self.block_threads, 1)[2]
        self.steps = self.tile // self.tile_rows
        self.launch_bound = str(self.block_threads)
        self.tiled = nest_tiles(op)[2]
        for n in self.nests[1:]:  # walked together: what a later nest repeats of the first's
            levels = {id(k): f for k, f in zip(n.indices, self.nests[0].indices)}
            self.merged.update(shared_body_ops(self.nests[0].inner, n.inner, levels))
        self.tiles: dict[int, str] = {}  # id(load) -> its shared tile
        self.tile_fills: list = []  # the loads that fill a tile (the first of each alike)
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
        filled = {}  # one tile for the same load in several nests (a sum and a max of p)
        for load in self.tiled:
            key = self._tile_key(load)
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
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        w.line(f"{loc['squares_a']} = ({self.extent(extents[a])} + {tile - 1}) // {tile}")
        w.line(f"{loc['squares_b']} = ({self.extent(extents[b])} + {tile - 1}) // {tile}")
        w.line(f"{loc['n_squares']} = {self.points([extents[d] for d in outer])} * "
               f"{loc['squares_a']} * {loc['squares_b']}")
        w.line(f"{loc['chunk']} = ({loc['n_squares']} + {loc['n_split']} - 1) // {loc['n_split']}")
        names = [self.define(k, f"k{d}") for d, k in enumerate(self.nests[0].indices)]
        for n in self.nests[1:]:  # every nest walks the same extents: one set of names
            for k, name in zip(n.indices, names):
                self.namer.bind(k, name)
        with self.each_item(f"{loc['n_points']} * {loc['n_split']}"):
            w.line(f"{loc['point']}, {loc['part']} = divmod({loc['flat']}, {loc['n_split']})")
            self.unravel(loc["point"])
            self.point_values()
            w.line(f"{loc['lo']} = {loc['part']} * {loc['chunk']}")
            w.line(f"{loc['hi']} = min({loc['lo']} + {loc['chunk']}, {loc['n_squares']})")
            parts = []
            for n in self.nests:
                parts.append(self.namer.fresh(f"{n.top.result.name_hint or 'acc'}_part"))
                w.line(f"{parts[-1]} = {identity(n.top['combiner'], n.top.result.type.dtype)}")
            with w.indented(f"for {loc['square']} in range({loc['lo']}, {loc['hi']}):"):
                self.helpers.add("_divmod_index")
                rest = loc["square"]
                if outer:  # the square's other levels, then its place among A and B's
                    w.line(f"{loc['outer']}, {loc['rest']} = _divmod_index({rest}, "
                           f"{loc['squares_a']} * {loc['squares_b']})")
                    self.unravel_into(loc["outer"], [self.nests[0].indices[d] for d in outer],
                                      [extents[d] for d in outer])
                    rest = loc["rest"]
                square_a, square_b = self.namer.fresh("square_a"), self.namer.fresh("square_b")
                w.line(f"{square_a}, {square_b} = _divmod_index({rest}, {loc['squares_b']})")
                w.line(f"{loc['a0']} = {square_a} * {tile}")
                w.line(f"{loc['b0']} = {square_b} * {tile}")
                w.line("# threads along the permuted loads' axis: fill the tiles")
                with self.each_step(names[a], names[b], along_b=False):
                    for n in self.nests:
                        mine = [o for o in self.tile_fills if o.parent is n.inner.body]
                        for o in _index_slice(n.inner.body, mine):
                            self.statement(o, shared=False)
                        for o in mine:
                            w.line(f"{self.tiles[id(o)]}[{loc['lane_v']}, {loc['row']}] = "
                                   f"{self.load_expression(o)}")
                w.line("cuda.syncthreads()")
                w.line("# threads along the innermost axis: every value of the square, in order")
                with self.each_step(names[a], names[b], along_b=True):
                    self.step_nests(parts)
                w.line("cuda.syncthreads()  # before the next square refills the tiles")
            for n, part in zip(self.nests, parts):
                total = self.shared_combine(n.top["combiner"], part, n.top.result.type.dtype)
                w.line(f"{part} = {total}")
            with w.indented(f"if {self.leader()}:"):
                for n, part in zip(self.nests, parts):
                    w.line(f"{self.partial_of[id(n.top)]}[{loc['flat']}] = {part}")

    def _tile_key(self, load) -> tuple:
        """What a load reads: its buffer and each index as the nest level it is (the
        same in every nest), or itself."""
        levels = {id(k): d for n in self.nests for d, k in enumerate(n.indices)}
        return (id(load.operands[0]), load.result.type.dtype) + tuple(
            ("level", levels[id(v)]) if id(v) in levels else id(v)
            for v in load.operands[1:])

    @contextmanager
    def each_step(self, index_a: str, index_b: str, along_b: bool):
        """The thread's steps of the square, ROWS rows apart, at points that exist: its
        row runs along B in phase 1 (its value along A), along A in phase 2."""
        w, loc = self.w, self.local
        a, b = self.op["split_tiles"]
        extents = self.nests[0].extents
        row_index, value_index = (index_a, index_b) if along_b else (index_b, index_a)
        row_base, value_base = ("a0", "b0") if along_b else ("b0", "a0")
        with w.indented(f"for {loc['step']} in range({self.steps}):"):
            w.line(f"{loc['row']} = {loc['lane_r']} + {loc['step']} * {self.tile_rows}")
            w.line(f"{row_index} = {loc[row_base]} + {loc['row']}")
            w.line(f"{value_index} = {loc[value_base]} + {loc['lane_v']}")
            with w.indented(f"if {index_a} < {self.extent(extents[a])} and "
                            f"{index_b} < {self.extent(extents[b])}:"):
                yield

    def load_statement(self, op) -> None:
        if id(op) not in self.tiles:
            super().load_statement(op)
            return
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        self.w.line(f"{name} = {self.tiles[id(op)]}[{self.local['row']}, {self.local['lane_v']}]")


__all__ = ["TiledSplitEmitter"]
