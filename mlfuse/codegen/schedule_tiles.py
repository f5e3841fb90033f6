"""Transposes through shared-memory tiles ("transpose-tiles").

The kernel's ``tile_axes`` are (A, B): A the axis its permuted loads step along
(dialects/permute.py), B its innermost axis. A block takes a TILE x TILE square of
points of those two axes (the other axes fixed, from the block index; blocks stride
over squares) with TILE x ROWS threads, each taking TILE // ROWS points of it:

1. threads step along A (lane ``tx`` is A's offset): each loads the permuted loads at
   its points into shared tiles ``tile[tx, row]``. Neighbouring threads read
   neighbouring addresses (the loads' last index follows A): coalesced.
2. a barrier; then threads step along B (``tx`` is B's offset) and run the kernel's body
   at their points, reading the permuted loads from ``tile[row, tx]`` and everything
   else from memory directly (their last index follows B: coalesced), and store.
3. a barrier before the next square refills the tiles.

A tile row is TILE + 1 values long, so the column that step 1 writes falls on TILE
different shared-memory banks (no bank conflicts), and the row step 2 reads as well.
Points past the end of an axis (a square at the edge) load and store nothing. f16 and
bf16 values are held in the tile as float32 (their compute type).

On the simulator the square is small (8 x 8, 2 rows at once) so that tests at tiny sizes
cover several squares, edges included; the code is the same.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.permute import tiled_loads
from mlfuse.ir.core import Operation

from mlfuse.codegen.emit_kernel import KernelCode, KernelEmitter, kernel_interface
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE

_DOC = ("Transpose tiles over [{space}]: a block takes {tile}x{tile} points of axes {a} and "
        "{b}; loads along axis {a} go through shared memory, so loads and stores coalesce.")
SIMULATOR_TILE, SIMULATOR_ROWS = 8, 2
_LOCALS = ("tx", "ty", "row", "square", "n_squares", "squares_a", "squares_b", "outer")


def tile_shape(target: str, hw) -> tuple[int, int]:
    """(TILE, ROWS): the square's side and the rows its threads take at once."""
    return (hw.transpose_tile, hw.transpose_tile_rows) if target == "cuda" else \
        (SIMULATOR_TILE, SIMULATOR_ROWS)


def _index_slice(body, loads: list[Operation]) -> list[Operation]:
    """The body's ops (in order) that the indices of ``loads`` are computed by."""
    wanted = {id(v) for o in loads for v in o.operands[1:]}
    needed = []
    for op in reversed(body.ops):
        if any(id(r) in wanted for r in op.results):
            needed.append(op)
            wanted.update(id(v) for v in op.operands)
    return needed[::-1]


class TilesEmitter(KernelEmitter):
    def __init__(self, op, name, target, helpers, hw, taken=()):
        super().__init__(op, name, "transpose-tiles", target, helpers, hw, taken)
        self.schedule = "pointwise"  # every statement is the thread's own
        self.tile, self.rows = tile_shape(target, hw)
        self.launch_bound = str(self.tile * self.rows)
        self.tiled = tiled_loads(op)
        self.tiles: dict[int, str] = {}  # id(load) -> its shared tile
        for n in _LOCALS:
            self.local[n] = self.namer.fresh(n)

    def emit(self) -> str:
        w, loc, tile = self.w, self.local, self.tile
        args, extents = self.op.body.args, self.op.extent_list
        a, b = self.op["tile_axes"]
        doc = _DOC.format(space="{space}", tile=tile, a=a, b=b)
        with self.kernel_def(doc=doc):
            for load in self.tiled:
                dtype = SHARED_TYPE[COMPUTE_TYPE[load.result.type.dtype]]
                self.tiles[id(load)] = self.namer.fresh(f"{self.namer(load.operands[0])}_tile")
                w.line(f"{self.tiles[id(load)]} = cuda.shared.array(({tile}, {tile + 1}), {dtype})"
                       "  # +1: a column spans every bank")
            w.line(f"{loc['tx']} = cuda.threadIdx.x % {tile}")
            w.line(f"{loc['ty']} = cuda.threadIdx.x // {tile}")
            size_a, size_b = self.extent(extents[a]), self.extent(extents[b])
            w.line(f"{loc['squares_a']} = ({size_a} + {tile - 1}) // {tile}")
            w.line(f"{loc['squares_b']} = ({size_b} + {tile - 1}) // {tile}")
            outer = [d for d in range(len(extents)) if d not in (a, b)]
            w.line(f"{loc['n_squares']} = {self.points([extents[d] for d in outer])} * "
                   f"{loc['squares_a']} * {loc['squares_b']}")
            with w.indented(f"for {loc['square']} in range(numba.int64(cuda.blockIdx.x), "
                            f"{loc['n_squares']}, cuda.gridDim.x):"):
                w.line(f"{loc['outer']}, {loc['rest']} = divmod({loc['square']}, "
                       f"{loc['squares_a']} * {loc['squares_b']})")
                self.unravel_into(loc["outer"], [args[d] for d in outer],
                                  [extents[d] for d in outer])
                first_a, first_b = self.namer.fresh("first_a"), self.namer.fresh("first_b")
                w.line(f"{first_a}, {first_b} = divmod({loc['rest']}, {loc['squares_b']})")
                w.line("# threads along the loads' axis: each loads its points into the tiles")
                with self.each_point(first_a, first_b, loc["tx"], loc["ty"]):
                    for o in _index_slice(self.op.body, self.tiled):
                        self.statement(o, shared=False)
                    for o in self.tiled:
                        w.line(f"{self.tiles[id(o)]}[{loc['tx']}, {loc['ty']} + {loc['row']}] = "
                               f"{self.load_expression(o)}")
                w.line("cuda.syncthreads()")
                w.line("# threads along the innermost axis: compute and store their points")
                with self.each_point(first_a, first_b, loc["ty"], loc["tx"]):
                    self.block(self.op.body, top=False)
                w.line("cuda.syncthreads()  # the next square refills the tiles")
        return w.text()

    @contextmanager
    def each_point(self, first_a: str, first_b: str, along_a: str, along_b: str):
        """A thread's points of the square that exist, ROWS apart along the axis whose
        offset is ``ty`` (``along_a``/``along_b``: the lane giving each axis's offset)."""
        w, loc, tile = self.w, self.local, self.tile
        a, b = self.op["tile_axes"]
        args, extents = self.op.body.args, self.op.extent_list
        ia, ib = self.define(args[a], f"i{a}"), self.define(args[b], f"i{b}")

        def offset(lane: str) -> str:
            return f"{lane} + {loc['row']}" if lane == loc["ty"] else lane
        with w.indented(f"for {loc['row']} in range(0, {tile}, {self.rows}):"):
            w.line(f"{ia} = {first_a} * {tile} + {offset(along_a)}")
            w.line(f"{ib} = {first_b} * {tile} + {offset(along_b)}")
            with w.indented(f"if {ia} < {self.extent(extents[a])} and "
                            f"{ib} < {self.extent(extents[b])}:"):
                yield

    def load_statement(self, op: Operation) -> None:
        if id(op) not in self.tiles:
            super().load_statement(op)
            return
        loc = self.local
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        self.w.line(f"{name} = {self.tiles[id(op)]}[{loc['ty']} + {loc['row']}, {loc['tx']}]")


def emit_tiles(op, name: str, target: str, helpers: set[str], names, hw) -> KernelCode:
    emitter = TilesEmitter(op, name, target, helpers, hw, names.taken)
    text = emitter.emit()
    return KernelCode(op, "transpose-tiles", kernel_interface(op), [], {"transpose-tiles": name},
                      text, launch={"tile": emitter.tile, "rows": emitter.rows})


def tiles_launch(host, kernel, points: str, args: list[str]) -> None:
    """One block per square of the tiled axes (up to MAX_BLOCKS; blocks stride over the
    rest), TILE x ROWS threads each."""
    op = kernel.op
    tile, rows = kernel.launch["tile"], kernel.launch["rows"]
    a, b = op["tile_axes"]
    extents = op.extent_list
    squares = [f"(({host.dim(extents[d], op)} + {tile - 1}) // {tile})" for d in (a, b)]
    outer = [host.dim(extents[d], op) for d in range(len(extents)) if d not in (a, b)]
    blocks = " * ".join(outer + squares)
    host.guarded(op, points, [host.call(kernel.name, f"min({blocks}, MAX_BLOCKS), {tile * rows}",
                                        args)])


__all__ = ["emit_tiles", "tiles_launch", "tile_shape"]
