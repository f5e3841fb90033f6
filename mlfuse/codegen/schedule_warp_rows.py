"""Several short rows per warp ("warp-rows"): a group of ``width`` threads per point.

For rows shorter than a warp (softmax over rows of 16) one block per row leaves most
of its threads idle, and one thread per row reads memory with a row's stride between
neighbouring threads. Here ``width`` threads (a power of two up to 32, the host's
``_row_group`` of the row length) share a row: the row schedule's body with the
group in place of the block (lane ``threadIdx.x % width`` in place of the thread
index, ``width`` in place of the block's threads) and a group reduction (xor shuffles
on the GPU, the same butterfly through shared memory on the simulator) in place of
the block reduction. Neighbouring groups take neighbouring rows, so a warp reads
32 neighbouring values of consecutive rows in one go.

Every thread of a block runs every group reduction (the shuffles name the whole
warp), so a group past the last row works on the last row again with its loads in
bounds, and stores nothing (``valid``).

"warp-rows-vector" (rows of one constant length that whole vectors fill): the same
group, each thread's values of a row taken as 16-byte vectors (``emit_vector.py``;
16-bit values 8 a vector where every vector access moves them). ``mlfuse/row_groups.py``
picks the group from the row's vectors: lane l of a group of ``width`` takes vectors l,
l + width, ... of its row, at most ``Target.short_row_values`` values, and a group has
at least ``Target.short_row_lanes`` lanes where the row has that many vectors, so a
warp's vector load reads whole 128-byte lines, or whole neighbouring rows (rows of 16
f32: 4 lanes, 8 rows a load). A group of one (short_row_lanes 1) is a thread per row
with its reductions in registers, no shuffles. The host launches it where the buffers'
rows are aligned (``_vector_ready``), the scalar kernel elsewhere. With
``Target.short_row_batch`` above 1 a group takes that many rows a step (``group_rows``
apart): the first row loop's vector loads of all of them are issued before any is
reduced, each row's values in slots of their own (``slot_offset``).
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import DimOp, ForOp, LoadOp, ReduceOp
from mlfuse.row_groups import WARP, RowGroup, target_row_group

from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.flat_rows import row_flat_vectors
from mlfuse.codegen.kernel_code import KernelCode, kernel_interface
from mlfuse.codegen.helpers import group_reduce_name
from mlfuse.codegen.scalar import COMPUTE_TYPE
from mlfuse.codegen.vector import row_vector_accesses, vector_buffers
from mlfuse.codegen.emit_vector import VECTOR_WIDTH, Lanes

_DOC = {"warp-rows": "Warp-rows schedule over [{space}]: a group of `width` threads per point, "
                     "several points per warp; group reductions by shuffles.",
        "warp-rows-vector": "Warp-rows schedule over [{space}]: a group of `width` threads per "
                            "point (1: a thread per point, no shuffles), lane l taking vectors "
                            "l, l + width, ... of its row, each loaded and stored whole."}
_MOST_WIDTH = 32


def group_width(extent: int) -> int:
    """Threads per row for rows of ``extent`` values: the least power of two >= extent,
    at most a warp (what the host's ``_row_group`` computes at run time)."""
    return min(_MOST_WIDTH, 1 << max(0, extent - 1).bit_length())


def _constant_rows(op) -> int | None:
    """The longest row loop's extent when every row loop's extent is a constant."""
    extents = [o["extent"] for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if extents and all(isinstance(e, int) for e in extents):
        return max(extents)
    return None


def vector_rows(op, hw) -> RowGroup | None:
    """The group of the vector variant (threads per row, vectors each holds; row_groups.py)
    for rows of one constant length that whole vectors fill (None: no such variant)."""
    extents = {o["extent"] for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))}
    accesses = row_vector_accesses([o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))])
    if len(extents) != 1 or not accesses:
        return None
    dtypes = [(o.operands[0] if isinstance(o, LoadOp) else o.operands[1]).type.dtype
              for o in accesses]
    return target_row_group(extents.pop(), dtypes, hw)


def _held(op, hw) -> bool:
    """Whether every row fits in VALUES_PER_THREAD slots of the widest group (constant
    rows): then each thread keeps its values of a row in registers."""
    most = hw.row_values_per_thread * _MOST_WIDTH
    loops = [o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]
    return all(isinstance(o["extent"], int) and o["extent"] <= most for o in loops)


class WarpRowsEmitter(KernelEmitter):
    DOC = _DOC  # each variant's docstring
    flat_rows = False  # whether the scalar kernel reads a row at row_base + k (flat_rows.py)
    flat_one_axis = False  # ... and a 1-D operand of the row's axis (gamma[k]) at k

    def __init__(self, op, name, variant, target, helpers, hw, taken=()):
        super().__init__(op, name, variant, target, helpers, hw, taken)
        self.schedule = "row"  # top-level reduces and fors are shared (by the group)
        self.batch = 1  # rows a group takes a step (the vector variant may take several)
        self.plan_group(op, hw)
        for n in ("width", "group", "row", "valid", "row_base", "rows_per_block", "group_rows"):
            self.local[n] = self.namer.fresh(n)

    def plan_group(self, op, hw) -> None:
        """The group's geometry known at compile time: whether rows are held, the
        group's width where constant, a thread's slots, the vector lanes (short_rows.py:
        rows whose length the host learns per call)."""
        self.held_rows = _held(op, hw)
        row = _constant_rows(op)
        # rows of a constant length: the group's width is known here, so `%` and `//` by
        # it are shifts and each thread holds only the slots its rows need
        self.constant_width = group_width(row) if row is not None else None
        if self.constant_width is not None:
            self.row_slots = -(-row // self.constant_width)
        if self.vector:
            group = vector_rows(op, hw)
            self.constant_width, self.row_slots = group.width, group.slots
            self.batch = _batch(op, hw)
            if group.lanes != hw.vector_width:  # 16 bytes of 16-bit values a vector
                self.vector_lanes = "VECTOR_WIDTH_16"
                self.vector_moves = ("_load_halves", "_store_halves")

    def emit(self) -> str:
        w, loc = self.w, self.local
        with self.kernel_def([loc["width"]], self.DOC[self.variant]):
            if self.constant_width is not None:
                w.line(f"{loc['width']} = {self.constant_width}  # rows of constant length: the "
                       "host passes the same")
            row_loops = [o for o in self.op.body.ops if isinstance(o, (ReduceOp, ForOp))]
            if self.constant_width is not None:  # a power of two: a mask and a shift
                # (`%` and `//` of a signed index would round toward -inf: extra fix-ups)
                shift = self.constant_width.bit_length() - 1
                w.line(f"{loc['tid']} = cuda.threadIdx.x & {self.constant_width - 1}  "
                       "# lane in the row's group")
                w.line(f"{loc['group']} = cuda.threadIdx.x >> {shift}")
                w.line(f"{loc['rows_per_block']} = cuda.blockDim.x >> {shift}")
            else:  # a power of two known per call: its shift by a count of leading zeros
                # (`%` and `//` by a run-time int64 were a 64-bit division routine each)
                shift = self.namer.fresh("shift")
                w.line(f"{shift} = 31 - cuda.clz(numba.int32({loc['width']}))  # log2(width)")
                w.line(f"{loc['tid']} = cuda.threadIdx.x & ({loc['width']} - 1)  "
                       "# lane in the row's group")
                w.line(f"{loc['group']} = cuda.threadIdx.x >> {shift}")
                w.line(f"{loc['rows_per_block']} = cuda.blockDim.x >> {shift}")
            w.line(f"{loc['nthreads']} = {loc['width']}")
            # the GPU's shuffles need no scratch; the simulator's twin a slot per thread
            self.declare_scratch(row_loops, "1" if self.target == "cuda" else None)
            slots, self.row_slots = self.row_slots, self.row_slots * self.batch
            if self.held_rows:  # (local arrays: a row's slots for each row of a batch)
                self.plan_held_rows(row_loops)
            # (a batch of rows a step issues several rows' loads before their bases: plain
            # vector accesses only)
            flat = row_flat_vectors(self.op, row_loops)[0] if self.vector and self.batch == 1 \
                else []
            if self.flat_rows and (flat or not self.vector):  # at row_base + k (flat_rows.py)
                self.plan_flat_rows([(o, o.body.args[:1], o.extent_list) for o in row_loops],
                                    one_axis=self.flat_one_axis)
            if self.vector:
                self.plan_vectors(row_vector_accesses(row_loops) + flat, self.row_slots)
            self.row_slots = slots
            if self.batch > 1:
                w.line(f"{loc['group_rows']} = {loc['rows_per_block']}")
                w.line(f"{loc['rows_per_block']} = {self.batch} * {loc['group_rows']}  "
                       f"# a thread's group takes {self.batch} rows a step")
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            # a while loop, not range(): range's trip count is a 64-bit division per thread,
            # and the host launches enough blocks that each thread mostly runs one step
            w.line(f"{loc['row_base']} = numba.int64(cuda.blockIdx.x) * {loc['rows_per_block']}")
            with w.indented(f"while {loc['row_base']} < {loc['n_points']}:"):
                if self.batch > 1:
                    self.batched_rows(row_loops[0])
                else:
                    self.row_point("")
                    self.block(self.op.body, top=True)
                w.line(f"{loc['row_base']} += numba.int64(cuda.gridDim.x) * {loc['rows_per_block']}")
        return w.text()

    def row_point(self, band: str) -> None:
        """The group's row (``band``: the offset of a batch's row, e.g. "2 * group_rows + "),
        whether it exists, and its point's indices."""
        w, loc = self.w, self.local
        w.line(f"{loc['row']} = {loc['row_base']} + {band}{loc['group']}")
        w.line(f"{loc['valid']} = {loc['row']} < {loc['n_points']}")
        w.line(f"{loc['point']} = min({loc['row']}, {loc['n_points']} - 1)  "
               "# past the end: the last row again, not stored")
        self.unravel(loc["point"])
        if self.flat or self.segments:  # rows at row_base + k (flat_rows.py), planned above
            self.row_base_lines()

    def batched_rows(self, first_loop) -> None:
        """``batch`` rows a step (rows ``group_rows`` apart): the first row loop's vector
        loads of all of them first, so that they are in flight together, then each row's
        body, its values in slots ``b * row_slots`` on of the local arrays."""
        w, loc = self.w, self.local
        bands = [f"{b} * {loc['group_rows']} + " if b else "" for b in range(self.batch)]
        extent = self.extent(first_loop.extent_list[0])
        self.lanes = Lanes(first_loop.body.args[0], self.define(first_loop.body.args[0], "k"),
                           loc["first"], extent)
        w.line(f"# the first row loop's vectors of all {self.batch} rows first: in flight at once")
        for b, band in enumerate(bands if self.fills[id(first_loop)][1] else []):
            self.row_point(band)
            self.slot_offset = f"{b * self.row_slots} + " if b else ""
            with w.indented(f"if {loc['valid']}:"), self.each_vector(*self.row_vectors(), extent):
                self.vector_fill(first_loop)
        self.prefilled.add(id(first_loop))
        for b, band in enumerate(bands):
            w.line(f"# row {b + 1} of the step's {self.batch}")
            self.row_point(band)
            self.slot_offset = f"{b * self.row_slots} + " if b else ""
            self.block(self.op.body, top=True)
        self.slot_offset = ""

    def leader(self) -> str:
        return f"{self.local['tid']} == 0 and {self.local['valid']}"

    def shared_combine(self, combiner: str, part: str, dtype: str) -> str:
        if self.constant_width == 1:  # a thread per row: its part is the row's
            return part
        helper = group_reduce_name(combiner)
        self.helpers.add(helper)
        return f"{helper}({part}, {self.local['width']}, {self.scratch[COMPUTE_TYPE[dtype]]})"

    @contextmanager
    def loop(self, op, shared: bool):
        if not shared:
            with super().loop(op, shared):
                yield
            return
        with self.w.indented(f"if {self.local['valid']}:"):  # the group reduction is outside
            with super().loop(op, shared):
                yield


def _batch(op, hw) -> int:
    """Rows a vector group takes a step (``Target.short_row_batch``), where its first row
    loop's loads depend on nothing the body computes before it (they are issued for all
    of the step's rows first); 1 elsewhere."""
    first = next((o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))), None)
    before = op.body.ops[:op.body.ops.index(first)] if first is not None else []
    if hw.short_row_batch <= 1 or any(not isinstance(o, (ConstantOp, DimOp)) for o in before):
        return 1
    loops = [o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if row_flat_vectors(op, loops)[0]:  # vectors along flat rows: a row's base first
        return 1
    return hw.short_row_batch


def emit_warp_rows(op, name: str, target: str, helpers: set[str], names, hw) -> KernelCode:
    if op.attributes.get("staged_rows"):  # a warp a row, stores along the points staged
        from mlfuse.codegen.staged_rows import StagedRowsEmitter
        text = StagedRowsEmitter(op, name, "warp-rows", target, helpers, hw, names.taken).emit()
        extents = [o["extent"] for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]
        return KernelCode(op, "warp-rows", kernel_interface(op), extents, {"warp-rows": name},
                          text, [], launch={"staged": True})
    variants = {"warp-rows": name}
    accesses = row_vector_accesses([o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))])
    shape = vector_rows(op, hw)
    if shape is not None:
        variants["warp-rows-vector"] = names.fresh(f"{name}_vector")
    texts = [WarpRowsEmitter(op, kname, kind, target, helpers, hw, names.taken).emit()
             for kind, kname in variants.items()]
    extents = [o["extent"] for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]
    return KernelCode(op, "warp-rows", kernel_interface(op), extents, variants,
                      "\n\n".join(texts), vector_buffers(accesses) if shape else [],
                      launch={"vector_width": shape.width, "batch": _batch(op, hw)}
                      if shape else {},
                      vector_lanes=VECTOR_WIDTH if shape is None or shape.lanes == hw.vector_width
                      else "VECTOR_WIDTH_16")


def warp_rows_launch(host, kernel, points: str, args: list[str]) -> None:
    """Threads per row from the row length of the call (the vector variant's: fixed by
    its constant rows); rows fill blocks of THREADS_PER_BLOCK threads."""
    op = kernel.op
    extents = list(dict.fromkeys(host.dim(e, op) for e in kernel.row_extents)) or ["1"]
    row = extents[0] if len(extents) == 1 else f"max({', '.join(extents)})"
    width = host.namer.fresh("width")
    host.helpers.update({"_row_group", "_pointwise_blocks"})

    def call(kind: str, threads: str, batch: int = 1) -> str:
        return host.call(kernel.variants[kind], f"_pointwise_blocks({points} * {threads}, "
                         f"{batch}), THREADS_PER_BLOCK", args + [threads])
    if kernel.launch.get("staged"):  # staged_rows.py: a warp a row, whatever its length
        host.guarded(op, points, [call("warp-rows", str(WARP))])
        return
    calls = {"warp-rows": call("warp-rows", width)}
    if "warp-rows-vector" in kernel.variants:
        calls["warp-rows-vector"] = call("warp-rows-vector", str(kernel.launch["vector_width"]),
                                         kernel.launch["batch"])
    host.guarded(op, points, [f"{width} = _row_group({row})"] +
                 host.vector_choice(kernel, calls, "warp-rows-vector"))


__all__ = ["emit_warp_rows", "warp_rows_launch"]
