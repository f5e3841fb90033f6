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

Addressing: an access whose every index is a loop index or a constant (a transpose, a
broadcast, the store) is an offset into its buffer's flat view (addressing.py). The
block computes each such offset once per square and thread, for its first point: the
divisions that find the square's outer indices happen once a square, and a thread's
next point is that offset plus a constant multiple of one stride. Other accesses
(indices computed from loop indices) index the buffer as usual. Two kernels differ in
the offsets' width: the host launches the one with 32-bit offsets where every flat
buffer has fewer than 2**31 elements, the 64-bit one elsewhere.

On the simulator the square is small (8 x 8, 2 rows at once) so that tests at tiny sizes
cover several squares, edges included; the code is the same.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, StoreOp
from mlfuse.dialects.permute import load_indices, tiled_loads
from mlfuse.ir.core import Operation, Value

from mlfuse.codegen.emit_kernel import KernelCode, KernelEmitter, kernel_interface
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE

_DOC = ("Transpose tiles over [{space}]: a block takes {tile}x{tile} points of axes {a} and "
        "{b}; loads along axis {a} go through shared memory, so loads and stores coalesce. "
        "Offsets in {bits} bits.")
SIMULATOR_TILE, SIMULATOR_ROWS = 8, 2
_LOCALS = ("tx", "ty", "row", "square", "n_squares", "squares_a", "squares_b", "outer",
           "a0", "b0", "ia", "ib")
# variant -> the type a flat offset is cast to where it indexes (unsigned: no wraparound)
OFFSET_TYPES = {"transpose-tiles": "numba.uint32", "transpose-tiles-wide": "numba.uint64"}


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


def access_parts(op: Operation) -> tuple[Value, list[Value]]:
    """The buffer and the indices of a load, masked load or store."""
    if isinstance(op, StoreOp):
        return op.operands[1], list(op.operands[2:])
    return op.operands[0], load_indices(op)


def _key(buf: Value, indices: list[Value]) -> tuple:
    return (id(buf),) + tuple(id(v) for v in indices)


class TilesEmitter(KernelEmitter):
    def __init__(self, op, name, variant, target, helpers, hw, taken=()):
        super().__init__(op, name, variant, target, helpers, hw, taken)
        self.schedule = "pointwise"  # every statement is the thread's own
        self.tile, self.rows = tile_shape(target, hw)
        self.launch_bound = str(self.tile * self.rows)
        self.offset_type = OFFSET_TYPES[variant]
        self.tiled = tiled_loads(op)
        self.tiles: dict[int, str] = {}  # id(load) -> its shared tile
        for n in _LOCALS:
            self.local[n] = self.namer.fresh(n)
        self.flat: dict[int, str] = {}  # id(buffer) -> its flat view
        # _key(access) -> (the thread's offset at its current point, what it moves by to
        # the next point or None); _key(access) -> the name of that step
        self.offsets: dict[tuple, tuple[str, str | None]] = {}
        self.steps: dict[tuple, str] = {}

    # -- flat offsets ------------------------------------------------------------------
    def flat_access(self, op: Operation):
        """(buffer, indices, dims) of an access whose indices are all loop indices or
        constants, with its buffer's extents as code (dims); None for other accesses."""
        buf, indices = access_parts(op)
        if not indices:
            return None
        args = list(self.op.body.args)
        for v in indices:
            if not (any(v is a for a in args) or isinstance(getattr(v, "op", None), ConstantOp)):
                return None
        try:
            dims = [self.extent(d) for d in buf.type.shape]
        except KeyError:  # an extent the kernel does not take
            return None
        return buf, indices, dims

    def plan_offsets(self, ops: list[Operation]) -> list[Operation]:
        """Flat views for the accesses among ``ops`` that take offsets; those accesses."""
        found = []
        for o in ops:
            if isinstance(o, (LoadOp, MaskedLoadOp, StoreOp)) and self.flat_access(o):
                found.append(o)
                buf = access_parts(o)[0]
                if id(buf) not in self.flat:
                    name = self.namer(buf)
                    if buf.type.rank > 1:
                        self.helpers.add("_flat")
                        name = self.namer.fresh(f"{name}_flat")
                        self.w.line(f"{name} = _flat({self.namer(buf)})")
                    self.flat[id(buf)] = name
        return found

    def thread_offsets(self, accesses: list[Operation], lane_a: str, lane_b: str) -> None:
        """Each access's offset at the thread's first point of the square (lanes: its
        offsets along axes A and B), as the offset type."""
        a, b = self.op["tile_axes"]
        args = list(self.op.body.args)
        first = {a: f"{self.local['a0']} + {lane_a}", b: f"{self.local['b0']} + {lane_b}"}
        for o in accesses:
            buf, indices, dims = self.flat_access(o)
            key = _key(buf, indices)
            if key in self.offsets:
                continue
            terms = []
            for v in indices:
                axis = next((n for n, x in enumerate(args) if x is v), None)
                terms.append(str(int(v.op["value"])) if axis is None else
                             f"({first[axis]})" if axis in first else self.namer(v))
            text = terms[0]
            for d in range(1, len(terms)):
                text = f"({text}) * {dims[d]} + {terms[d]}" if d > 1 else \
                    f"{text} * {dims[d]} + {terms[d]}"
            name = self.namer.fresh(f"{self.namer(buf)}_at")
            self.w.line(f"{name} = {self.offset_type}({text.strip('()') if len(terms) == 1 else text})")
            self.offsets[key] = (name, self.steps.get(key))

    def plan_steps(self, accesses: list[Operation], step: int) -> None:
        """Before the squares: how far each access's offset moves from a thread's point
        to its next, ROWS points along axis ``step`` (none where the access does not
        follow that axis)."""
        args = list(self.op.body.args)
        for o in accesses:
            buf, indices, dims = self.flat_access(o)
            key = _key(buf, indices)
            strides = [" * ".join(dims[d + 1:]) or "1" for d, v in enumerate(indices)
                       if v is args[step]]
            if key in self.steps or not strides:
                continue
            name = self.namer.fresh(f"{self.namer(buf)}_step")
            total = " + ".join(f"({s})" if len(strides) > 1 else s for s in strides)
            self.w.line(f"{name} = {self.offset_type}({self.rows} * "
                        f"{total if total.isidentifier() or total.isdigit() else f'({total})'})")
            self.steps[key] = name

    def subscript(self, buf: Value, indices: list[Value]) -> str:
        found = self.offsets.get(_key(buf, indices))
        if found is None:
            return super().subscript(buf, indices)
        return f"{self.flat[id(buf)]}[{found[0]}]"

    def advance(self) -> None:
        """After a point: each offset that moves to the thread's next point."""
        for name, step in self.offsets.values():
            if step:
                self.w.line(f"{name} = {self.offset_type}({name} + {step})")

    # -- the kernel --------------------------------------------------------------------
    def emit(self) -> str:
        w, loc, tile = self.w, self.local, self.tile
        args, extents = self.op.body.args, self.op.extent_list
        a, b = self.op["tile_axes"]
        bits = "32" if self.offset_type == "numba.uint32" else "64"
        doc = _DOC.format(space="{space}", tile=tile, a=a, b=b, bits=bits)
        body = [o for o in self.op.body.ops if id(o) not in {id(t) for t in self.tiled}]
        with self.kernel_def(doc=doc):
            for load in self.tiled:
                dtype = SHARED_TYPE[COMPUTE_TYPE[load.result.type.dtype]]
                self.tiles[id(load)] = self.namer.fresh(f"{self.namer(load.operands[0])}_tile")
                w.line(f"{self.tiles[id(load)]} = cuda.shared.array(({tile}, {tile + 1}), {dtype})"
                       "  # +1: a column spans every bank")
            loads_in, accesses = self.plan_offsets(self.tiled), self.plan_offsets(body)
            self.plan_steps(loads_in, b)
            self.plan_steps(accesses, a)
            w.line(f"{loc['tx']} = cuda.threadIdx.x % {tile}")
            w.line(f"{loc['ty']} = cuda.threadIdx.x // {tile}")
            size_a, size_b = self.extent(extents[a]), self.extent(extents[b])
            w.line(f"{loc['squares_a']} = ({size_a} + {tile - 1}) // {tile}")
            w.line(f"{loc['squares_b']} = ({size_b} + {tile - 1}) // {tile}")
            outer = [d for d in range(len(extents)) if d not in (a, b)]
            w.line(f"{loc['n_squares']} = {self.points([extents[d] for d in outer])} * "
                   f"{loc['squares_a']} * {loc['squares_b']}")
            w.line(f"{loc['square']} = numba.int64(cuda.blockIdx.x)")
            with w.indented(f"while {loc['square']} < {loc['n_squares']}:"):
                self.helpers.add("_divmod_index")
                w.line(f"{loc['outer']}, {loc['rest']} = _divmod_index({loc['square']}, "
                       f"{loc['squares_a']} * {loc['squares_b']})")
                self.unravel_into(loc["outer"], [args[d] for d in outer],
                                  [extents[d] for d in outer])
                first_a, first_b = self.namer.fresh("first_a"), self.namer.fresh("first_b")
                w.line(f"{first_a}, {first_b} = _divmod_index({loc['rest']}, {loc['squares_b']})")
                w.line(f"{loc['a0']} = {first_a} * {tile}")
                w.line(f"{loc['b0']} = {first_b} * {tile}")
                w.line("# threads along the loads' axis: each loads its points into the tiles")
                self.offsets = {}
                self.thread_offsets(loads_in, loc["tx"], loc["ty"])
                with self.each_point(loc["tx"], loc["ty"]):
                    plain = [o for o in self.tiled if o not in loads_in]
                    for o in _index_slice(self.op.body, plain):
                        self.statement(o, shared=False)
                    for o in self.tiled:
                        w.line(f"{self.tiles[id(o)]}[{loc['tx']}, {loc['ty']} + {loc['row']}] = "
                               f"{self.load_expression(o)}")
                w.line("cuda.syncthreads()")
                w.line("# threads along the innermost axis: compute and store their points")
                self.offsets = {}
                self.thread_offsets(accesses, loc["ty"], loc["tx"])
                with self.each_point(loc["ty"], loc["tx"]):
                    self.block(self.op.body, top=False)
                w.line("cuda.syncthreads()  # the next square refills the tiles")
                w.line(f"{loc['square']} += cuda.gridDim.x")
        return w.text()

    @contextmanager
    def each_point(self, along_a: str, along_b: str):
        """A thread's points of the square that exist, ROWS apart along the axis whose
        offset is ``ty`` (``along_a``/``along_b``: the lane giving each axis's offset);
        after each point, the offsets move to the next."""
        w, loc, tile = self.w, self.local, self.tile
        a, b = self.op["tile_axes"]
        args, extents = self.op.body.args, self.op.extent_list
        ia, ib = self.define(args[a], f"i{a}"), self.define(args[b], f"i{b}")

        def offset(lane: str) -> str:
            return f"{lane} + {loc['row']}" if lane == loc["ty"] else lane
        with w.indented(f"for {loc['row']} in range(0, {tile}, {self.rows}):"):
            w.line(f"{ia} = {loc['a0']} + {offset(along_a)}")
            w.line(f"{ib} = {loc['b0']} + {offset(along_b)}")
            with w.indented(f"if {ia} < {self.extent(extents[a])} and "
                            f"{ib} < {self.extent(extents[b])}:"):
                yield
            self.advance()

    def load_statement(self, op: Operation) -> None:
        if id(op) not in self.tiles:
            super().load_statement(op)
            return
        loc = self.local
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        self.w.line(f"{name} = {self.tiles[id(op)]}[{loc['ty']} + {loc['row']}, {loc['tx']}]")


def emit_tiles(op, name: str, target: str, helpers: set[str], names, hw) -> KernelCode:
    """The 32-bit kernel (named ``name``) and its 64-bit twin."""
    variants = {"transpose-tiles": name, "transpose-tiles-wide": names.fresh(f"{name}_wide")}
    emitters = [TilesEmitter(op, kname, kind, target, helpers, hw, names.taken)
                for kind, kname in variants.items()]
    text = "\n\n".join(e.emit() for e in emitters)
    flat = [b for b in kernel_interface(op).buffers if id(b) in emitters[0].flat]
    return KernelCode(op, "transpose-tiles", kernel_interface(op), [], variants, text,
                      launch={"tile": emitters[0].tile, "rows": emitters[0].rows, "flat": flat})


def tiles_launch(host, kernel, points: str, args: list[str]) -> None:
    """One block per square of the tiled axes (up to MAX_BLOCKS; blocks stride over the
    rest), TILE x ROWS threads each; the 32-bit kernel where every buffer it indexes
    flat has fewer than 2**31 elements."""
    op = kernel.op
    tile, rows = kernel.launch["tile"], kernel.launch["rows"]
    a, b = op["tile_axes"]
    extents = op.extent_list
    squares = [f"(({host.dim(extents[d], op)} + {tile - 1}) // {tile})" for d in (a, b)]
    outer = [host.dim(extents[d], op) for d in range(len(extents)) if d not in (a, b)]
    grid = f"min({' * '.join(outer + squares)}, MAX_BLOCKS), {tile * rows}"
    narrow, wide = (host.call(kernel.variants[v], grid, args) for v in OFFSET_TYPES)
    sizes = [f"{host.namer(buf)}.size" for buf in kernel.launch["flat"]]
    test = " and ".join(f"{s} < 2**31" for s in sizes) or "True"
    unit = host.w.unit
    host.guarded(op, points, [f"if {test}:  # offsets in 32 bits", unit + narrow, "else:",
                              unit + wide])


__all__ = ["emit_tiles", "tiles_launch", "tile_shape"]
