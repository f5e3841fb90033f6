"""One ``@cuda.jit`` kernel per ``loops.parallel`` / ``fused.kernel``.

The kernel emitter that every schedule shares (statements, loads and stores, held
rows' fill phases, reuse, the hooks the schedule modules override), the pointwise
schedule, and the kernels of the row schedule, whose plans and reductions are the
mixin ``row_plans.RowPlans`` (the "row" schedule's variants are described there). The
other schedules have modules of their own (``SCHEDULE_MODULES``).

"pointwise": a 1-D grid-stride loop over the flat index of the iteration space
(int64, so spaces past 2**31 points do not overflow), unravelled into the loop
indices with divmod; inner reduces and fors run sequentially in the thread. A
loop-free body takes POINTS_PER_THREAD points per thread, one block width apart
(coalesced): it first issues the loads of all of them into local arrays (registers
once Numba unrolls the constant-trip loop), then computes and stores each point, so
several loads per thread are in flight at once.

Vector variants ("pointwise-vector", "registers-vector"; see ``vector.py``): the same
schedules with each thread's values taken as vectors of VECTOR_WIDTH neighbours, so
that the accesses ``vector.py`` finds move a whole vector in one 16-byte load or
store. A pointwise thread takes POINTS_PER_THREAD // VECTOR_WIDTH vectors one block
width apart; a row thread takes vectors t, t + nthreads, ... of its row. The host
launches one where VECTOR_WIDTH divides the innermost extent and the buffers' rows
are aligned for it, and the scalar kernel elsewhere.

On the GPU each kernel declares the most threads it is launched with (launch_bounds),
so that the compiler keeps its registers within what a block of them may use.
"""
from __future__ import annotations

import textwrap
from contextlib import contextmanager

from mlfuse.codegen.addressing import lean_divisors
from mlfuse.codegen.bf16 import BF16_HELPER, bf16_load, bf16_store
from mlfuse.codegen.emit_lean import LeanPointwise
from mlfuse.codegen.emit_vector import VECTOR_WIDTH, Lanes, VectorPhases
from mlfuse.codegen.flat_rows import (
    FlatRows,
    _key,
    row_flat_vectors,
    split_vector_buffers,
)
from mlfuse.codegen.kernel_code import (
    KernelCode,
    dim_code,
    extent_factors,
    kernel_interface,
)
from mlfuse.codegen.names import Namer
from mlfuse.codegen.reuse import Reuse, prefetchable_loads

# the row schedule's plans (row_plans.py); STREAM_TILE, VALUES_PER_THREAD and _row_loops
# are also imported from here by the schedule modules
from mlfuse.codegen.row_plans import STREAM_TILE as STREAM_TILE
from mlfuse.codegen.row_plans import (
    VALUES_PER_THREAD,
    RowPlans,
    _row_loops,
    row_variants,
)
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, literal, scalar_expression
from mlfuse.codegen.vector import (
    half_vectors,
    pointwise_vector_accesses,
    row_vector_accesses,
)
from mlfuse.codegen.writer import Writer
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import (
    DimOp,
    ForOp,
    LoadOp,
    LoopOp,
    MaskedLoadOp,
    ReduceOp,
    StoreOp,
    YieldOp,
)
from mlfuse.errors import MlfuseError
from mlfuse.hardware import Target
from mlfuse.ir.core import Block, Operation, Value
from mlfuse.ir.traits import SCALAR_COMPUTE

# Locals every kernel may define; IR names are kept off them.
_KERNEL_LOCALS = ("n_points", "n_vectors", "start", "stride", "step", "base", "flat", "point",
                  "rest", "tid", "nthreads", "slot", "vec", "lane", "first")

# Module constants (from mlfuse.hardware) that kernels read as compile-time constants.
POINTS_PER_THREAD = "POINTS_PER_THREAD"
MAX_THREADS = 1024  # per block, on every CUDA GPU

# The most threads per block each variant is launched with (module constants or ints).
_LAUNCH_BOUND = {"pointwise": "THREADS_PER_BLOCK", "pointwise-prefetch": "THREADS_PER_BLOCK",
                 "pointwise-vector": "THREADS_PER_BLOCK", "streaming": str(MAX_THREADS),
                 "registers": "REGISTER_ROW_THREADS", "registers-vector": "REGISTER_ROW_THREADS",
                 "registers-peeled": "REGISTER_ROW_THREADS",
                 "strips-registers": "STRIP_HELD_THREADS", "strips-streaming": "(512, 1)"}  # one block per SM asked: no spills

_SCHEDULE_DOC = {
    "pointwise": "Pointwise over [{space}]: one thread per point (grid-stride).",
    "pointwise-prefetch": "Pointwise over [{space}]: POINTS_PER_THREAD points per thread, "
                          "their loads issued first.",
    "streaming": "Row schedule over [{space}]: one block per point, its threads share the "
                 "rows; each row loop re-reads the row.",
    "registers": "Row schedule over [{space}]: one block per point, each thread holds "
                 "its VALUES_PER_THREAD values of a row.",
    "pointwise-vector": "Pointwise over [{space}]: POINTS_PER_THREAD points per thread, in "
                        "vectors of VECTOR_WIDTH neighbours loaded and stored whole.",
    "registers-vector": "Row schedule over [{space}]: one block per point, each thread holds "
                        "its VALUES_PER_THREAD values of a row, in vectors of VECTOR_WIDTH "
                        "neighbours loaded and stored whole.",
    "registers-peeled": "Row schedule over [{space}]: one block per point, each thread holds "
                        "its VALUES_PER_THREAD values of a row in vectors loaded and stored "
                        "whole from the row's first aligned one, and the first threads a "
                        "value each of the row's ends (peeled_rows.py).",
}


def _sources(op: LoopOp) -> list[str]:
    if isinstance(op, KernelOp):
        return list(op["sources"])
    source = op.attributes.get("source")
    return [source] if source else []


class KernelEmitter(RowPlans, VectorPhases, LeanPointwise, FlatRows):
    """One kernel of ``op`` in one variant (see _SCHEDULE_DOC)."""

    launch_bound: str | None = None  # threads per block, where a schedule module fixes them

    def __init__(self, op: LoopOp, name: str, variant: str, target: str, helpers: set[str],
                 hw: Target, taken=()):
        self.op, self.name, self.variant = op, name, variant
        self.target, self.helpers, self.hw = target, helpers, hw
        self.vector = variant.endswith("-vector")
        # loop-free pointwise kernels address their buffers leanly (emit_lean.py): in
        # uint32 in the vector variant (the host launches it under 2**31 points only)
        self.lean = variant in ("pointwise-prefetch", "pointwise-vector")
        self.index_type = "numba.uint32" if self.vector else "numba.uint64"
        self.lane: str | None = None  # the lane of a vector kernel's lane loop
        # a vector's values, a thread's points and the intrinsics moving a vector: a
        # pointwise kernel moving 16-bit values only takes twice as many (16 bytes)
        self.vector_lanes, self.vector_points = VECTOR_WIDTH, POINTS_PER_THREAD
        self.vector_moves = ("_load_vector", "_store_vector")
        # a batch of rows a step (warp-rows): the current row's first slot (code + " "),
        # and the row loops whose vector loads the batch issued ahead already
        self.slot_offset, self.prefilled = "", set()
        if variant == "pointwise-vector" and half_pointwise_vectors(op, hw) \
                or variant == "registers-vector" and half_row_vectors(op, hw):
            self.vector_lanes, self.vector_points = "VECTOR_WIDTH_16", "POINTS_PER_THREAD_16"
            self.vector_moves = ("_load_halves", "_store_halves")
        self.held_rows = variant == "registers"  # shared loops take VALUES_PER_THREAD slots
        # slots of a held row per thread: a schedule that knows its rows' length at
        # compile time asks for fewer (each slot is a register and an unrolled step)
        self.row_slots = VALUES_PER_THREAD
        self.schedule = op["schedule"] if isinstance(op, KernelOp) else "pointwise"
        self.iface = kernel_interface(op)
        self.namer = Namer(taken)
        self.local = {n: self.namer.fresh(n) for n in _KERNEL_LOCALS}
        self.w = Writer()
        self.scratch: dict[str, str] = {}  # compute type -> shared array name
        # id(load) -> the local array its values are loaded into ahead of use, per slot
        self.held: dict[int, str] = {}
        # id(loop op) -> (index ops, loads) its fill phase runs: the loads it issues early
        self.fills: dict[int, tuple[list[Operation], list[Operation]]] = {}
        # vector variants: the loads filled a vector at a time; id(store) -> the local
        # array its values wait in until the whole vector is stored; the current loop
        self.vector_loads: set[int] = set()
        self.staged: dict[int, str] = {}
        self.lanes: Lanes | None = None
        # register-held rows: values kept for later row loops (id(op) -> local array)
        self.reuse, self.kept = Reuse(), {}
        # reduces walked in one loop with an earlier one (plan_passes): id(head) -> its
        # pass, the later reduces, and their ops that an op of the head computes already
        self.passes: dict[int, list[Operation]] = {}
        self.followers: set[int] = set()
        self.merged: dict[int, Operation] = {}

    # -- small pieces ------------------------------------------------------------
    def extent(self, e) -> str:
        return dim_code(e, self.sym.__getitem__)

    def points(self, extents) -> str:
        """int64 product of ``extents``: flat indices stay exact past 2**31."""
        factors = extent_factors(extents, self.sym.get)
        return " * ".join([f"numba.int64({factors[0]})"] + factors[1:])

    def index(self, values) -> str:
        return ", ".join(self.namer(v) for v in values) if values else "()"

    def define(self, value: Value, fallback: str) -> str:
        return self.namer.define(value, fallback)

    def local_array(self, base: str, dtype: str, size: str) -> str:
        name = self.namer.fresh(base)
        self.w.line(f"{name} = cuda.local.array({size}, {SHARED_TYPE[dtype]})")
        return name

    # -- the kernel --------------------------------------------------------------
    def emit(self) -> str:
        with self.kernel_def(self.lean_params() if self.lean else ()):
            if self.schedule == "row":
                self.row_body(_row_loops(self.op))
            elif self.lean:
                self.lean_prefetch_body()
            else:
                self.pointwise_body()
        return self.w.text()

    @contextmanager
    def kernel_def(self, extra_params=(), doc: str | None = None):
        """The kernel's decorator, signature (buffers, dim symbols, then ``extra_params``),
        docstring (``doc``, else the variant's) and outer constants; the body goes inside."""
        iface, w = self.iface, self.w
        params = [self.define(b, "buf") for b in iface.buffers]
        self.sym = {s: self.namer.fresh(s) for s in iface.symbols}
        params += list(self.sym.values()) + list(extra_params)
        sources = _sources(self.op)
        for line in textwrap.wrap(f"sources: {', '.join(sources)}", 92) if sources else []:
            w.line(f"# {line}")
        bound = self.launch_bound or _LAUNCH_BOUND.get(self.variant, "THREADS_PER_BLOCK")
        if self.schedule == "row" and self.hw.row_min_blocks and bound != str(MAX_THREADS) \
                and not bound.startswith("("):  # (a schedule's own resident blocks kept)
            bound = f"({bound}, ROW_MIN_BLOCKS)"  # so many blocks resident per SM, at least
        elif self.variant == "registers" and self.launch_bound is None:
            # the scalar fallback of a vector row kernel (odd or misaligned rows) keeps an
            # address per value: left to itself ptxas took 146-166 registers, one block of
            # 256 threads an SM, each row's loads, reductions and stores in turn. Two
            # blocks asked cap it at 128 and spill a little (64-72 B), yet on the H100
            # f16 residual + layernorm 16384 x 4094 ran 1.351 -> 0.762 ms, f16 layernorm
            # 0.570 -> 0.326, f32 layernorm 16384 x 2047 0.159 -> 0.141 (three blocks: 0.850,
            # 0.299, 0.146, with 180-648 B spilled)
            bound = f"({bound}, 2)"
        w.line(f"@cuda.jit(launch_bounds={bound})"
               if self.target == "cuda" else "@cuda.jit")  # the simulator takes no bounds
        with w.indented(f"def {self.name}({', '.join(params)}):"):
            space = ", ".join(map(str, self.op.extent_list))
            w.line(f'"""{(doc or _SCHEDULE_DOC[self.variant]).format(space=space)}"""')
            for c in iface.constants:
                w.line(f"{self.define(c, 'const')} = {literal(c.op['value'], c.type.dtype)}")
            yield

    def pointwise_body(self) -> None:
        w, loc = self.w, self.local
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        w.line(f"{loc['start']} = numba.int64(cuda.blockIdx.x) * cuda.blockDim.x "
               "+ cuda.threadIdx.x")
        w.line(f"{loc['stride']} = numba.int64(cuda.gridDim.x) * cuda.blockDim.x")
        with w.indented(f"for {loc['flat']} in range({loc['start']}, {loc['n_points']}, "
                        f"{loc['stride']}):"):
            self.unravel(loc["flat"])
            self.block(self.op.body, top=False)

    def hold(self, loads: list[Operation], size: str) -> None:
        """A local array of ``size`` slots for ``loads`` (all of the same value)."""
        array = self.local_array(f"{self.namer(loads[0].operands[0])}_vals",
                                 COMPUTE_TYPE[loads[0].result.type.dtype], size)
        self.held.update({id(o): array for o in loads})

    def fill_line(self, load: Operation) -> None:
        """``load`` into its slot of its local array."""
        self.w.line(f"{self.held[id(load)]}[{self.local['slot']}] = {self.load_expression(load)}")

    def fill(self, owner: Operation) -> None:
        """The body of a fill phase: the loads ``owner`` issues early, into their slots."""
        index_ops, loads = self.fills[id(owner)]
        for o in index_ops:
            self.statement(o, shared=False)
        for o in loads:
            if id(o) not in self.reuse.dead:  # only fed values a kept array now holds
                self.fill_line(o)

    def vector_operand(self, buf: Value, indices: list[Value]) -> str:
        """A vector access's first value: a flat row's view at ``row_base + first``
        (flat_rows.py), else as the vector phases address it."""
        segmented = self.segments.get(_key(buf, indices))
        if segmented is not None:  # (the host checked that a vector lies in one segment)
            offset = self.segment_offset(segmented, self.lanes.first)
            return f"{self.flat_views[id(buf)]}, (numba.uint64({offset}),)"
        access = self.flat.get(_key(buf, indices))
        if access is None:
            return super().vector_operand(buf, indices)
        base = self.row_bases[self._base_code(access)]
        return f"{self.flat_views[id(buf)]}, (numba.uint64({base} + {self.lanes.first}),)"

    def unravel(self, flat: str, last: str | None = None, narrow: bool = False) -> None:
        """Loop indices from the flat index: divmod by the extents, last dim fastest
        (the last index into ``last`` instead, when given; ``narrow``: the host checked
        that the space has fewer than 2**31 points, so divisions are 32-bit only)."""
        self.unravel_into(flat, self.op.body.args, self.op.extent_list, last, narrow)

    def unravel_into(self, flat: str, values, extents, last: str | None = None,
                     narrow: bool = False) -> None:
        """Name each of ``values`` (loop indices) from the flat index ``flat`` over
        ``extents``, last fastest (the last into ``last`` instead, when given)."""
        names = [self.define(a, f"i{d}") for d, a in enumerate(values)]
        if last and names:
            names[-1] = last
        if len(names) == 1 and names[0] != flat:
            self.w.line(f"{names[0]} = {flat}")
        rest = flat
        for d in range(len(names) - 1, 0, -1):
            quotient = names[0] if d == 1 else self.local["rest"]
            size = self.extent(extents[d])
            if isinstance(extents[d], int):
                divide = f"divmod({rest}, {size})"  # by a constant: a multiply and shifts
            else:
                helper = "_divmod_index32" if narrow else "_divmod_index"
                self.helpers.add(helper)
                divide = f"{helper}({rest}, {size})"
            self.w.line(f"{quotient}, {names[d]} = {divide}")
            rest = quotient

    # -- statements --------------------------------------------------------------
    def block(self, block: Block, top: bool) -> None:
        for op in block.ops:
            if not isinstance(op, YieldOp):
                self.statement(op, top and self.schedule == "row")

    def kept_place(self, op: Operation) -> str:
        """Where the value of ``op``, kept by the first loop computing it
        (reuse.row_reused_values), is this slot: its local array (row_plans.py)."""
        return f"{self.kept[id(op)]}[{self.local['slot']}]"

    def statement(self, op: Operation, shared: bool) -> None:
        """One op; ``shared``: it is at the top of a row kernel (the block shares it)."""
        w = self.w
        if id(op) in self.reuse.dead:  # fed only values that a kept array holds
            return
        if id(op) in self.merged:  # the same value as an op of its pass's first reduce
            for r, same in zip(op.results, self.merged[id(op)].results):
                if same in self.namer:  # (else not emitted there either: flat rows)
                    self.namer.bind(r, self.namer(same))
            return
        if op.has_trait(SCALAR_COMPUTE):
            kind = op.name.split(".", 1)[1]
            if id(op) in self.reuse.again:  # computed by an earlier row loop
                text = self.kept_place(self.reuse.again[id(op)])
            else:
                operands = [self.namer(v) for v in op.operands]
                text = self.index_division(op, operands) or \
                    scalar_expression(op, operands, self.target, self.helpers)
            w.line(f"{self.define(op.result, kind)} = {text}")
            if id(op) in self.kept:  # later row loops read it here
                w.line(f"{self.kept_place(op)} = {self.namer(op.result)}")
        elif isinstance(op, (LoadOp, MaskedLoadOp)):
            self.load_statement(op)
        elif isinstance(op, StoreOp) and id(op) in self.staged:  # stored with its vector
            w.line(f"{self.staged[id(op)]}[{self.local['slot']}] = {self.namer(op.operands[0])}")
        elif isinstance(op, StoreOp):
            value, buf = op.operands[0], op.operands[1]
            line = f"{self.subscript(buf, list(op.operands[2:]))} = " + \
                self.stored(self.namer(value), buf.type.dtype)
            if shared:  # one value per point: one thread writes it
                with w.indented(f"if {self.leader()}:"):
                    w.line(line)
            else:
                w.line(line)
        elif isinstance(op, DimOp):
            self.namer.bind(op.result, self.sym[op["sym"]])
        elif isinstance(op, ReduceOp) and shared:
            self.block_reduce(op)
        elif isinstance(op, ReduceOp):
            self.sequential_reduce(op)
        elif isinstance(op, ForOp):
            with self.loop(op, shared):
                self.block(op.body, top=False)
        else:
            raise MlfuseError(f"codegen: {op.name} cannot appear inside a kernel", op.loc)

    def load_expression(self, op: Operation) -> str:
        buf = op.operands[0]
        indices = op.operands[2:] if isinstance(op, MaskedLoadOp) else op.operands[1:]
        text = self.subscript(buf, list(indices))
        if buf.type.dtype == "f16":
            text = f"np.float32({text})"
        elif buf.type.dtype == "bf16":
            self.helpers.add(BF16_HELPER)
            text = bf16_load(text)
        if isinstance(op, MaskedLoadOp):
            # the conditional expression reads memory only where the mask holds
            other = literal(op["other"], buf.type.dtype)
            text = f"{text} if {self.namer(op.operands[1])} else {other}"
        return text

    def subscript(self, buf: Value, indices: list[Value]) -> str:
        """``buffer[index]`` of an access at ``indices`` (lean kernels: a flat offset
        where the access collapses, unsigned indices otherwise)."""
        if self.lean:
            return self.lean_subscript(buf, indices, self.lane)
        if self.flat or self.segments:  # a row-family kernel's row at row_base + step (flat_rows.py)
            flat = self.flat_subscript(buf, indices, self.local.get("r", ""))
            if flat is not None:
                return flat
        return f"{self.namer(buf)}[{self.index(indices)}]"

    def stored(self, text: str, dtype: str) -> str:
        """What a store of value ``text`` into a ``dtype`` buffer writes (the buffer's
        element type converts the compute type, except bf16's 16-bit words)."""
        if dtype == "bf16":
            self.helpers.add(BF16_HELPER)
            return bf16_store(text)
        return text

    def load_statement(self, op: Operation) -> None:
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        if id(op) in self.held:  # loaded ahead by a fill phase
            self.w.line(f"{name} = {self.held[id(op)]}[{self.local['slot']}]")
        else:
            self.w.line(f"{name} = {self.load_expression(op)}")


def pointwise_variant(op: LoopOp) -> str:
    """"pointwise-prefetch" for a loop-free body with loads to issue early (memory
    bound: several points per thread pay); plain "pointwise" (one point per thread,
    most threads) when the body loops, e.g. over a matmul's K."""
    looped = any(isinstance(o, (ReduceOp, ForOp)) for o in op.body.ops)
    return "pointwise" if looped or not prefetchable_loads(op.body)[0] else "pointwise-prefetch"


def _vector_variant(op: LoopOp, kinds: list[str], hw: Target) -> tuple[list, list, list[str], list]:
    """The accesses a vector variant of ``op`` would move whole, plain and along flat
    rows (none: no such variant),
    the symbols VECTOR_WIDTH must divide for the host to launch it (the innermost
    extents: a vector never crosses a row of the space, nor ends past a row's end) and
    the products it must divide for flat rows' bases (``flat_rows.base_multiples``)."""
    rows = kinds[0] == "registers"
    if hw.vector_width == 1 or not (rows or kinds[0] == "pointwise-prefetch" and op.extent_list):
        return [], [], [], []
    row_loops = _row_loops(op)
    innermost = [o["extent"] for o in row_loops] if rows else op.extent_list[-1:]
    if any(isinstance(e, int) and e % hw.vector_width for e in innermost):
        return [], [], [], []
    flat, multiples = [], []
    if rows:  # plain row accesses, and those along a flat row (flat_rows.py)
        flat, multiples = row_flat_vectors(op, row_loops)
        accesses = row_vector_accesses(row_loops)
    else:
        accesses = pointwise_vector_accesses(op.body)
    return accesses, flat, list(dict.fromkeys(e for e in innermost if isinstance(e, str))), \
        multiples


def half_pointwise_vectors(op: LoopOp, hw: Target) -> bool:
    """Whether a pointwise kernel's vector variant moves 16 bytes of 16-bit values a
    vector (2 * VECTOR_WIDTH of them): its vector accesses are all 16-bit and a constant
    innermost extent is a multiple of such a vector (the host tests a symbolic one). A
    constant extent of whole 8-byte vectors only (f16[100]) keeps VECTOR_WIDTH lanes: the
    16-byte kernel, launched without a test, left its last 4 values unwritten."""
    extent = op.extent_list[-1] if op.extent_list else None
    return half_vectors(pointwise_vector_accesses(op.body)) and not (
        isinstance(extent, int) and extent % (2 * hw.vector_width))


def half_row_vectors(op: LoopOp, hw: Target) -> bool:
    """Whether a row kernel's registers-vector variant moves 16 bytes of 16-bit values a
    vector (2 * VECTOR_WIDTH of them): its vector accesses are all 16-bit and plain (a
    flat row's bases are tested against VECTOR_WIDTH), every constant row extent a
    multiple of such a vector (the host tests the symbolic ones), and a thread's held
    values whole such vectors. A thread holds as many values as before, in half as many
    loads (f16 layernorm rows of 1024 moved 8 bytes a load)."""
    row_loops = _row_loops(op)
    accesses = row_vector_accesses(row_loops)
    if hw.row_values_per_thread % (2 * hw.vector_width):
        return False
    return half_vectors(accesses) and not row_flat_vectors(op, row_loops)[0] and all(
        o["extent"] % (2 * hw.vector_width) == 0 for o in row_loops
        if isinstance(o["extent"], int))


# Schedules emitted by their own modules (generate in codegen/__init__.py picks them).
SCHEDULE_MODULES = {"contraction": "contraction", "split-rows": "schedule_split",
                    "split-columns": "schedule_split", "warp-rows": "schedule_warp_rows",
                    "transpose-tiles": "transpose_tiles",
                    "strips": "schedule_strips", "strip-tiles": "schedule_strip_tiles"}


def emit_kernel(op: LoopOp, name: str, target: str, helpers: set[str], names: Namer,
                hw: Target) -> KernelCode:
    """The kernel(s) of ``op`` and what their launch must pass; records the helpers they
    call. ``names``: the module's namer (kernel names; locals must not shadow them)."""
    schedule = op["schedule"] if isinstance(op, KernelOp) else "pointwise"
    assert schedule not in SCHEDULE_MODULES, f"{schedule} kernels: codegen.{SCHEDULE_MODULES[schedule]}"
    kinds = row_variants(op, hw) if schedule == "row" else [pointwise_variant(op)]
    accesses, flat, vector_extents, multiples = _vector_variant(op, kinds, hw)
    plain_buffers, flat_buffers = split_vector_buffers(accesses, flat)
    accesses = accesses + flat
    if accesses:  # right after the scalar kernel it stands in for
        kinds.insert(1, kinds[0].split("-")[0] + "-vector")
    # the first variant keeps the op's name; a second is named after what it is for
    variants = {kind: name if n == 0 else names.fresh(f"{name}_{kind.split('-')[-1]}")
                for n, kind in enumerate(kinds)}
    texts = [KernelEmitter(op, kname, kind, target, helpers, hw, names.taken).emit()
             for kind, kname in variants.items()]
    divisors = lean_divisors(op) if kinds[0] == "pointwise-prefetch" else []
    halves = kinds[0] == "pointwise-prefetch" and bool(accesses) and half_pointwise_vectors(op, hw) or \
        kinds[0] == "registers" and bool(accesses) and half_row_vectors(op, hw)
    return KernelCode(op, schedule, kernel_interface(op), [o["extent"] for o in _row_loops(op)],
                      variants, "\n\n".join(texts), plain_buffers, vector_extents,
                      divisors=divisors, vector_lanes="VECTOR_WIDTH_16" if halves else VECTOR_WIDTH,
                      launch={"vector_multiples": multiples, "flat_vector_buffers": flat_buffers}
                      if flat else {})
