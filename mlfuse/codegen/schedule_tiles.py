"""Transposes through shared-memory tiles ("transpose-tiles").

The kernel's ``tile_axes`` are (A, B): A the axis its permuted loads step along
(dialects/permute.py), B its innermost axis. A block takes a TILE x TILE square of
points of those two axes (the other axes fixed, from the block index; blocks stride
over squares). Each thread moves WIDTH neighbouring values at a time (a vector: WIDTH
is 1 in the scalar kernel, ``vector_width`` in the vector one) in STEPS steps ROWS
apart:

1. fill: threads step along A (a thread's vector is WIDTH neighbours along A): each
   loads the permuted loads at its points into registers (all steps' loads issued
   before any is used), then writes them into shared tiles ``tile[a, b]``. Neighbouring
   threads read neighbouring addresses (the loads' last index follows A): coalesced.
2. a barrier; then threads step along B (a vector is WIDTH neighbours along B): the
   other loads that take flat offsets are issued for every step first (a store cannot
   pass a load it might alias, so loads between stores would wait in turn), then the
   body runs at each point, reading the permuted loads from ``tile[a, b]``, and stores.
3. a barrier before the next square refills the tiles (only where there is one).

Threads map to the square so that no shared access conflicts (``thread_layout``): a
warp spans 32 values of the vector axis (32 / WIDTH lanes) and WIDTH rows, and a tile
row is TILE + 1 values long (TILE is a multiple of 32 on the GPU): a lane's word is
``(WIDTH * v + k) * (TILE + 1) + r`` in phase 1, ``r * (TILE + 1) + WIDTH * v + k`` in
phase 2 (v the lane's vector, r its row, k the value in the vector), which is
``WIDTH * v + r + k`` mod 32: 32 different banks in either phase (tests check the
formulas). f16 and bf16 values are held in the tile as float32 (their compute type).

Two kernels: the vector kernel (16-byte loads and stores of f32 along both axes, 8 of
f16), which the host launches where ``vector_width`` divides both tiled extents and the
buffers it moves whole are aligned; the scalar kernel elsewhere (ragged extents).
Points past the end of an axis (a square at the edge) load and store nothing.

Addressing: an access whose every index is a loop index or a constant (a transpose, a
broadcast, the store) is an offset into its buffer's flat view (addressing.py), in 64
bits (the 32-bit twin of an earlier version was no leaner: Numba widens uint32 sums to
64 bits and NVVM keeps the truncations as masks; its SASS was 5-6% longer). The block
computes each such offset once per square and thread, for its first point: the
divisions that find the square's outer indices happen once a square, and a thread's
next point is that offset plus a constant multiple of one stride. Other accesses
(indices computed from loop indices, and in the vector kernel accesses along B that
move no vector) index the buffer as usual.

On the simulator the square is small (8 x 8: 16 threads, 4 steps in the scalar kernel;
8 threads, 2 steps in the vector one) so that tests at tiny sizes cover several
squares, edges included; the code is the same.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.index_forms import merged_view
from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, StoreOp
from mlfuse.dialects.permute import load_indices, tiled_loads
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.traits import SCALAR_COMPUTE
from mlfuse.ir.types import INDEX

from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.codegen.vector import half_vectors
from mlfuse.row_groups import VECTOR_DTYPES

_DOC = ("Transpose tiles over [{space}]: a block takes {tile}x{tile} points of axes {a} and "
        "{b}; loads along axis {a} go through shared memory, so loads and stores coalesce. "
        "{how}.")
SCALAR, VECTOR = "transpose-tiles", "transpose-tiles-vector"
SIMULATOR = {SCALAR: (8, 16), VECTOR: (8, 8)}  # (TILE, threads) under the simulator
OFFSET = "numba.uint64"  # the type a flat offset is cast to where it indexes
_LOCALS = ("t", "lane_v", "lane_r", "square", "n_squares", "squares_a",
           "squares_b", "outer", "a0", "b0", "first_b", "k")


def tile_shape(target: str, hw, variant: str = SCALAR, halves: bool = False) -> tuple[int, int, int]:
    """(TILE, threads, WIDTH) of a variant's kernel: the square's side, its block's
    threads, the values a thread moves at a time (``halves``: the vector kernel moves
    16-bit values only, twice as many a vector: the same 16 bytes)."""
    width = (2 if halves else 1) * hw.vector_width if variant == VECTOR else 1
    if target != "cuda":
        return (*SIMULATOR[variant], width)
    if variant == VECTOR:
        return hw.transpose_vector_tile, hw.transpose_vector_threads, width
    return hw.transpose_tile, hw.transpose_tile * hw.transpose_tile_rows, width


def thread_layout(tile: int, threads: int, width: int, t: str = "t") -> tuple[str, str, int]:
    """Thread ``t``'s vector ``v`` (along the vector axis: values WIDTH * v ...) and row
    ``r`` (along the other axis) in a step, as expressions of ``t``, and ROWS, the rows a
    step covers. A warp takes 32 values (32 / WIDTH lanes) of the vector axis in WIDTH
    rows (fewer where the tile is narrower), so each phase's shared accesses fall on 32
    banks (the module doc)."""
    span = min(tile, 32)
    lanes, groups = span // width, tile // span  # lanes along a span; spans across
    if lanes < 1 or tile % span or (threads * width) % tile or \
            tile % (threads * width // tile) or (groups > 1 and threads % (32 * groups)):
        raise ValueError(f"transpose tiles: {threads} threads cannot move a {tile}x{tile} "
                         f"square {width} values at a time")
    rows = threads * width // tile
    if groups == 1:
        return f"{t} % {lanes}", f"{t} // {lanes}", rows
    return (f"{t} % {lanes} + {lanes} * ({t} // 32 % {groups})",
            f"{t} % 32 // {lanes} + {32 // lanes} * ({t} // {32 * groups})", rows)


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


def view_parts(op: Operation) -> tuple[Value, list[Value], list]:
    """The buffer, indices and dims of an access as its merged view: the unravel of one
    index over neighbouring dims (a kernel over axes coalesce-axes merged) as that index
    over their product (dialects/index_forms.merged_view)."""
    buf, indices = access_parts(op)
    return (buf, *merged_view(indices, list(buf.type.shape)))


def _is_value_operand(op: Operation, v: Value) -> bool:
    """Whether ``v`` is a store's value or a masked load's mask (not an index)."""
    return (isinstance(op, StoreOp) and op.operands[0] is v) or \
        (isinstance(op, MaskedLoadOp) and op.operands[1] is v)


def _one_group(text: str) -> bool:
    """Whether ``text`` is one parenthesized expression, ``(H * W)``."""
    depth = 0
    for n, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0 and n < len(text) - 1:
            return False
    return text.startswith("(") and depth == 0


def _grouped(text: str) -> str:
    """``text`` in parentheses where it is a sum (a term of a longer expression)."""
    return f"({text})" if " " in text else text


def _key(buf: Value, indices: list[Value]) -> tuple:
    """An access's key: its buffer and its indices (as the merged view)."""
    return (id(buf),) + tuple(id(v) for v in merged_view(indices, list(buf.type.shape))[0])


def _along(op: Operation, arg: Value) -> bool:
    """Whether ``op`` moves a vector along loop index ``arg`` (the last index of its
    merged view, alone)."""
    if not isinstance(op, (LoadOp, StoreOp)):
        return False
    buf, indices, _ = view_parts(op)
    return buf.type.dtype in VECTOR_DTYPES and bool(indices) and indices[-1] is arg and \
        all(v is not arg for v in indices[:-1])


def vector_accesses(op) -> list[Operation] | None:
    """The accesses a vector kernel of ``op`` moves whole: its tiled loads (along A)
    and the flat loads and stores along B; None where a tiled load cannot move whole
    vectors (then only the scalar kernel exists)."""
    args = list(op.body.args)
    a, b = op["tile_axes"]
    tiled = tiled_loads(op)
    if not all(_along(o, args[a]) and _flat_indices(o, args) for o in tiled):
        return None
    rest = [o for o in op.body.ops if o not in tiled and isinstance(o, (LoadOp, StoreOp))]
    return tiled + [o for o in rest if _along(o, args[b]) and _flat_indices(o, args)]


def _flat_indices(op: Operation, args) -> bool:
    """Whether every index of the access ``op`` (its merged view) is a loop index or a
    constant."""
    indices = view_parts(op)[1]
    return bool(indices) and all(any(v is x for x in args) or
                                 isinstance(getattr(v, "op", None), ConstantOp) for v in indices)


class TilesEmitter(KernelEmitter):
    def __init__(self, op, name, variant, target, helpers, hw, taken=()):
        super().__init__(op, name, variant, target, helpers, hw, taken)
        self.schedule = "pointwise"  # every statement is the thread's own
        moved = vector_accesses(op) if variant == VECTOR else None
        halves = bool(moved) and half_vectors(moved)
        self.tile, self.threads, self.width = tile_shape(target, hw, variant, halves)
        self.vector_moves = ("_load_halves", "_store_halves") if halves else \
            ("_load_vector", "_store_vector")
        self.rows = thread_layout(self.tile, self.threads, self.width)[2]
        self.steps = self.tile // self.rows
        self.launch_bound = str(self.threads)
        self.tiled = tiled_loads(op)
        self.moved = {id(o) for o in moved or []}
        self.tiles: dict[int, str] = {}  # id(load) -> its shared tile
        self.early: dict[int, str] = {}  # id(load) -> the local array it is loaded into
        self.once: set[int] = set()  # early loads taken once a square (the same each step)
        for n in _LOCALS:
            self.local[n] = self.namer.fresh(n)
        self.flat_views: dict[int, str] = {}  # id(buffer) -> its flat view
        # _key(access) -> (the thread's offset at its current point, what it moves by to
        # the next point or None); _key(access) -> the name of that step
        self.offsets: dict[tuple, tuple[str, str | None]] = {}
        self.offset_steps: dict[tuple, str] = {}
        self._addressed: dict[int, bool] = {}  # id(op) -> addressed_only(op)

    def statement(self, op: Operation, shared: bool) -> None:
        if not self.addressed_only(op):
            super().statement(op, shared)

    def addressed_only(self, op: Operation) -> bool:
        """Whether ``op`` is index arithmetic used only in the indices of accesses that
        take flat offsets (the unravel of axes coalesce-axes merged): not computed."""
        key = id(op)
        if key not in self._addressed:
            self._addressed[key] = False  # (while its users are asked)
            self._addressed[key] = bool(op.results) and not isinstance(op, ConstantOp) and \
                op.has_trait(SCALAR_COMPUTE) and all(r.type == INDEX for r in op.results) and \
                all(self.addressed_only(u) or (isinstance(u, (LoadOp, MaskedLoadOp, StoreOp))
                                               and self.flat_access(u) is not None
                                               and not _is_value_operand(u, r))
                    for r in op.results for u in r.users())
        return self._addressed[key]

    # -- flat offsets ------------------------------------------------------------------
    def flat_access(self, op: Operation):
        """(buffer, indices, dims) of an access that takes a flat offset: its indices are
        all loop indices or constants, and in the vector kernel it moves a vector or
        does not follow B (its offset is the same for a vector's values); else None."""
        args = list(self.op.body.args)
        if not _flat_indices(op, args):
            return None
        buf, indices, shape = view_parts(op)
        b = args[self.op["tile_axes"][1]]
        if self.width > 1 and id(op) not in self.moved and any(v is b for v in indices):
            return None
        try:
            dims = [self.extent(d) for d in shape]
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
                if id(buf) not in self.flat_views:
                    name = self.namer(buf)
                    if buf.type.rank > 1:
                        self.helpers.add("_flat")
                        name = self.namer.fresh(f"{name}_flat")
                        self.w.line(f"{name} = _flat({self.namer(buf)})")
                    self.flat_views[id(buf)] = name
        return found

    def thread_offsets(self, accesses: list[Operation], lane_a: str, lane_b: str) -> None:
        """Each access's offset at the thread's first point of the square (lanes: its
        offsets along axes A and B), as the offset type."""
        a, b = self.op["tile_axes"]
        first = {a: f"{self.local['a0']} + {lane_a}", b: f"{self.local['b0']} + {lane_b}"}
        for o in accesses:
            buf, indices, _ = self.flat_access(o)
            key = _key(buf, indices)
            if key in self.offsets:
                continue
            name = self.namer.fresh(f"{self.namer(buf)}_at")
            self.w.line(f"{name} = {OFFSET}({self.flat_offset(o, first)})")
            self.offsets[key] = (name, self.offset_steps.get(key))

    def flat_offset(self, op: Operation, first: dict[int, str]) -> str:
        """The flat offset of the access ``op`` where axis d's index is ``first[d]`` (the
        other loop indices: their names)."""
        args = list(self.op.body.args)
        _, indices, dims = self.flat_access(op)
        terms = []
        for v in indices:
            axis = next((n for n, x in enumerate(args) if x is v), None)
            terms.append(str(int(v.op["value"])) if axis is None else
                         _grouped(first[axis]) if axis in first else self.namer(v))
        text = terms[0]
        for d in range(1, len(terms)):
            text = f"({text}) * {dims[d]} + {terms[d]}" if d > 1 else \
                f"{text} * {dims[d]} + {terms[d]}"
        return text.strip("()") if len(terms) == 1 else text

    def axis_stride(self, op: Operation, axis: int) -> str | None:
        """How far the flat offset of the access ``op`` moves as loop index ``axis``
        steps by one (None where no index follows it)."""
        _, indices, dims = self.flat_access(op)
        arg = self.op.body.args[axis]
        strides = [" * ".join(dims[d + 1:]) or "1" for d, v in enumerate(indices) if v is arg]
        if not strides:
            return None
        total = " + ".join(f"({s})" if len(strides) > 1 else s for s in strides)
        return total if total.isidentifier() or total.isdigit() or _one_group(total) \
            else f"({total})"

    def plan_steps(self, accesses: list[Operation], step: int) -> None:
        """Before the squares: how far each access's offset moves from a thread's point
        to its next, ROWS points along axis ``step`` (none where the access does not
        follow that axis)."""
        for o in accesses:
            buf, indices, _ = self.flat_access(o)
            key, stride = _key(buf, indices), self.axis_stride(o, step)
            if key in self.offset_steps or stride is None:
                continue
            name = self.namer.fresh(f"{self.namer(buf)}_step")
            self.w.line(f"{name} = {OFFSET}({self.rows} * {stride})")
            self.offset_steps[key] = name

    def subscript(self, buf: Value, indices: list[Value]) -> str:
        found = self.offsets.get(_key(buf, indices))
        if found is None:
            return f"{self.namer(buf)}[{self.index(indices)}]"
        return f"{self.flat_views[id(buf)]}[{found[0]}]"

    def vector_move(self, op: Operation, values: str, slot: str) -> str:
        """The vector load or store of ``op`` at its current offset, from or into
        ``values[slot ...]``."""
        buf, indices = access_parts(op)
        move = self.vector_moves[isinstance(op, StoreOp)]
        offset = self.offsets[_key(buf, indices)][0]
        return f"{move}({self.flat_views[id(buf)]}, ({offset},), {values}, {slot})"

    def advance(self) -> None:
        """After a point: each offset that moves to the thread's next point."""
        for name, step in self.offsets.values():
            if step:
                self.w.line(f"{name} = {OFFSET}({name} + {step})")

    # -- the kernel --------------------------------------------------------------------
    def emit(self) -> str:
        w, loc, tile, width = self.w, self.local, self.tile, self.width
        args, extents = self.op.body.args, self.op.extent_list
        a, b = self.op["tile_axes"]
        how = (f"{width} values a vector" if width > 1 else "One value at a time") + \
            f", {self.threads} threads, offsets in 64 bits"
        doc = _DOC.format(space="{space}", tile=tile, a=a, b=b, how=how.capitalize())
        body = [o for o in self.op.body.ops if id(o) not in {id(t) for t in self.tiled}]
        with self.kernel_def(doc=doc):
            for load in self.tiled:
                dtype = COMPUTE_TYPE[load.result.type.dtype]
                self.tiles[id(load)] = self.namer.fresh(f"{self.namer(load.operands[0])}_tile")
                w.line(f"{self.tiles[id(load)]} = cuda.shared.array(({tile}, {tile + 1}), "
                       f"{SHARED_TYPE[dtype]})  # +1: a warp's accesses on 32 banks")
                self.early[id(load)] = self.local_array(
                    f"{self.namer(load.operands[0])}_in", dtype, str(self.steps * width))
            loads_in, accesses = self.plan_offsets(self.tiled), self.plan_offsets(body)
            # loads issued ahead, into local arrays (of a type one holds: not bool)
            early = [o for o in accesses if isinstance(o, LoadOp)
                     and COMPUTE_TYPE[o.result.type.dtype] in SHARED_TYPE]
            later = [o for o in accesses if o not in early]
            for o in early:
                slots = (1 if self.is_once(o) else self.steps) * \
                    (width if id(o) in self.moved else 1)
                self.early[id(o)] = self.local_array(f"{self.namer(o.operands[0])}_vals",
                                                     COMPUTE_TYPE[o.result.type.dtype], str(slots))
            for o in later:
                if isinstance(o, StoreOp) and id(o) in self.moved:
                    buf = o.operands[1]
                    self.staged[id(o)] = self.local_array(f"{self.namer(buf)}_out",
                                                          COMPUTE_TYPE[buf.type.dtype], str(width))
            self.plan_steps(loads_in, b)
            self.plan_steps(accesses, a)
            w.line(f"{loc['t']} = cuda.threadIdx.x")
            lane_v, lane_r, _ = thread_layout(tile, self.threads, width, loc["t"])
            w.line(f"{loc['lane_v']} = {lane_v}  # the thread's vector in a step")
            w.line(f"{loc['lane_r']} = {lane_r}  # and its row (the module doc)")
            size_a, size_b = self.extent(extents[a]), self.extent(extents[b])
            w.line(f"{loc['squares_a']} = ({size_a} + {tile - 1}) // {tile}")
            w.line(f"{loc['squares_b']} = ({size_b} + {tile - 1}) // {tile}")
            outer = [d for d in range(len(extents)) if d not in (a, b)]
            w.line(f"{loc['n_squares']} = {self.points([extents[d] for d in outer])} * "
                   f"{loc['squares_a']} * {loc['squares_b']}")
            w.line(f"{loc['square']} = numba.int64(cuda.blockIdx.x)")
            vec = f"{width} * {loc['lane_v']}" if width > 1 else loc["lane_v"]
            with w.indented(f"while {loc['square']} < {loc['n_squares']}:"):
                self.helpers.add("_divmod_index")
                w.line(f"{loc['outer']}, {loc['rest']} = _divmod_index({loc['square']}, "
                       f"{loc['squares_a']} * {loc['squares_b']})")
                self.unravel_into(loc["outer"], [args[d] for d in outer],
                                  [extents[d] for d in outer])
                square_a, square_b = self.namer.fresh("square_a"), self.namer.fresh("square_b")
                w.line(f"{square_a}, {square_b} = _divmod_index({loc['rest']}, {loc['squares_b']})")
                w.line(f"{loc['a0']} = {square_a} * {tile}")
                w.line(f"{loc['b0']} = {square_b} * {tile}")
                self.fill_tiles(loads_in, vec)
                w.line("cuda.syncthreads()")
                w.line("# threads along the innermost axis: load every step's values, then "
                       "compute and store")
                self.offsets = {}
                self.thread_offsets(early, loc["lane_r"], vec)
                once = [o for o in early if self.is_once(o)]
                if once:  # the same values at every step (a broadcast along A): loaded once
                    self.early_once(once, vec)
                if len(once) < len(early):
                    with self.each_step(along_b=True):
                        for o in early:
                            if o not in once:
                                self.early_load(o)
                self.offsets = {}
                self.thread_offsets(later, loc["lane_r"], vec)
                with self.each_step(along_b=True):
                    if width == 1:
                        self.block(self.op.body, top=False)
                    else:
                        with w.indented(f"for {loc['slot']} in range({width}):"):
                            w.line(f"{self.namer(args[b])} = {loc['first_b']} + {loc['slot']}")
                            self.block(self.op.body, top=False)
                        for o in later:
                            if id(o) in self.staged:
                                w.line(self.vector_move(o, self.staged[id(o)], "0"))
                w.line(f"{loc['square']} += cuda.gridDim.x")
                with w.indented(f"if {loc['square']} < {loc['n_squares']}:"):
                    w.line("cuda.syncthreads()  # the next square refills the tiles")
        return w.text()

    def fill_tiles(self, loads_in: list[Operation], vec: str) -> None:
        """Phase 1: every step's permuted loads into registers, then into the tiles."""
        w, loc, width = self.w, self.local, self.width
        w.line("# threads along the loads' axis: load every step's values, then fill the tiles")
        self.offsets = {}
        self.thread_offsets(loads_in, vec, loc["lane_r"])
        with self.each_step(along_b=False):
            plain = [o for o in self.tiled if o not in loads_in]
            for o in _index_slice(self.op.body, plain):
                self.statement(o, shared=False)
            for o in self.tiled:
                self.early_load(o)
        row = f"{loc['lane_r']} + {loc['step']} * {self.rows}"
        with w.indented(f"for {loc['step']} in range({self.steps}):"):  # (edges: unread)
            for o in self.tiled:
                tile, values = self.tiles[id(o)], self.early[id(o)]
                if width == 1:
                    w.line(f"{tile}[{vec}, {row}] = {values}[{loc['step']}]")
                    continue
                with w.indented(f"for {loc['k']} in range({width}):"):
                    w.line(f"{tile}[{vec} + {loc['k']}, {row}] = "
                           f"{values}[{loc['step']} * {width} + {loc['k']}]")

    def is_once(self, load: Operation) -> bool:
        """Whether a phase-2 early load reads the same values at every step: no index
        follows A."""
        a = self.op.body.args[self.op["tile_axes"][0]]
        return not any(v is a for v in view_parts(load)[1])

    def early_once(self, loads: list[Operation], vec: str) -> None:
        """``loads`` (which do not follow A) for every step at once, where B's index
        exists."""
        w, loc = self.w, self.local
        b = self.op["tile_axes"][1]
        index = loc["first_b"] if self.width > 1 else self.define(self.op.body.args[b], f"i{b}")
        w.line(f"{index} = {loc['b0']} + {vec}")
        with w.indented(f"if {index} < {self.extent(self.op.extent_list[b])}:"):
            for o in loads:
                self.once.add(id(o))
                self.early_load(o, "0")

    def early_load(self, op: Operation, step: str | None = None) -> None:
        """``op`` at the current step into its local array: a whole vector where it
        moves one, else one value."""
        values, step = self.early[id(op)], step or self.local["step"]
        if id(op) in self.moved:
            self.w.line(self.vector_move(op, values, "0" if step == "0" else f"{step} * {self.width}"))
        else:
            self.w.line(f"{values}[{step}] = {self.load_expression(op)}")

    @contextmanager
    def each_step(self, along_b: bool):
        """The thread's steps of the square, ROWS rows apart, at points that exist (a
        vector's first one: whole vectors exist or not); after each step the offsets
        move to the next. ``along_b``: the thread's vector lies along B (phase 2)."""
        w, loc, width = self.w, self.local, self.width
        a, b = self.op["tile_axes"]
        args, extents = self.op.body.args, self.op.extent_list
        ia, ib = self.define(args[a], f"i{a}"), self.define(args[b], f"i{b}")
        vec = f"{width} * {loc['lane_v']}" if width > 1 else loc["lane_v"]
        row = f"{loc['lane_r']} + {loc['step']} * {self.rows}"
        with w.indented(f"for {loc['step']} in range({self.steps}):"):
            if along_b:
                w.line(f"{ia} = {loc['a0']} + {row}")
                if width > 1:
                    ib = loc["first_b"]  # each value's own index: in the lanes' loop
                w.line(f"{ib} = {loc['b0']} + {vec}")
            else:
                w.line(f"{ia} = {loc['a0']} + {vec}")
                w.line(f"{ib} = {loc['b0']} + {row}")
            with w.indented(f"if {ia} < {self.extent(extents[a])} and "
                            f"{ib} < {self.extent(extents[b])}:"):
                yield
            self.advance()

    def load_statement(self, op: Operation) -> None:
        loc = self.local
        if id(op) not in self.early:
            super().load_statement(op)
            return
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        if id(op) in self.tiles:
            col = f"{self.width} * {loc['lane_v']} + {loc['slot']}" if self.width > 1 \
                else loc["lane_v"]
            self.w.line(f"{name} = {self.tiles[id(op)]}"
                        f"[{loc['lane_r']} + {loc['step']} * {self.rows}, {col}]")
            return
        step = "0" if id(op) in self.once else loc["step"]
        slot = step if id(op) not in self.moved else loc["slot"] if step == "0" else \
            f"{step} * {self.width} + {loc['slot']}"
        self.w.line(f"{name} = {self.early[id(op)]}[{slot}]")


__all__ = ["SCALAR", "VECTOR", "TilesEmitter", "thread_layout", "tile_shape", "vector_accesses"]
