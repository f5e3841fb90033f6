"""Tiled kernels for contractions (``schedule = "contraction"``): matmul, batched
matmul, conv2d as an implicit GEMM, each with its fused prologue and epilogue.

Here: the SIMT tile kernel's emitter (stages, fragments, the written-out K steps) and
the factory that the tensor-core emitters share with it (tiles, split-K, launch
geometry). Its operand fetches are simt_fetch.py (and gather.py), its epilogue
contraction_epilogue.py; the tensor-core pipelines live in emit_mma.py and emit_tf32.py.

The kernel computes C[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n]
(the kernel's attributes, written by ``schedule-contractions``, say which IR values
A and B are and which kernel indices make m, n and batch: dialects/contraction.py). One block computes a BM x BN tile of outputs; each
thread a TM x TN register block of it (8 x 8, 8 x 4, 4 x 8 or 4 x 4: ``_simt_shape``
in tile_model.py gives a tile 256 threads where it can): groups of 4 rows A_SPAN =
4 BM / TM apart (rows r..r+3, and BM/2 + r..+3 for TM = 8), columns alike, so a warp's
fragment reads are 16-byte and conflict-free. K runs BK (8 for 8 x 8 threads, else 16)
at a time through two shared-memory stages: while the block multiplies one stage, each
thread already has the next tile's operand values loading into registers (double
buffering), and stores them into the other stage after the math, one barrier a step.
The loop counts steps in 32 bits, its stage offsets move by +-STAGE a step, and plain
operands are read at flat offsets planned once a tile, the partial K step first, so the
loop is one basic block (simt_fetch.py).
A stage's BK outer products are written out as calls of an inlined device function
(NVVM does not unroll a loop of 8 x 64 FMAs; unrolled, the fragment reads take constant
offsets and ptxas issues the next K value's reads among this one's FMAs). The
epilogue (bias, activation, residual: the ops after the reduction) runs on the
accumulators, then the single store.

Operands are gathered value by value through the IR (an im2col gather for conv, a
fused prologue, broadcasts), 4 consecutive K (A side) or N (B side) positions per
thread. Where the operand is one plain load contiguous along that axis, the "cuda"
target reads those 4 as one 16-byte load when the host finds the sizes and the
address allow it (VECTOR_A / VECTOR_B); the simulator runs the scalar code.

Split-K (SPLIT): the blocks of a tile share K, blockIdx.y taking the share
[y * chunk, (y + 1) * chunk) (chunk: whole K steps); each writes its accumulators,
without the epilogue, to ``partials[y, point]``, and a second kernel (split_k.py) adds
the shares in order and runs the epilogue. Small M (decode), small N and few tiles
thus still fill the GPU; the host picks the split per call (tile_model.py).

The module gets one factory per contraction, ``_tiles_<kernel>(BM, BN, VECTOR_A,
VECTOR_B, SPLIT)``, and a ``_TiledKernel`` that compiles each configuration on first
use; the host picks the configuration from the sizes (``_contraction_geometry``). The
kernel's last parameter is the partial sums' workspace; a launch that does not split
passes any array there (the kernel then never touches it).
"""
from __future__ import annotations

import textwrap
from contextlib import contextmanager

from mlfuse.codegen.abi import is_tiled_kernel  # noqa: F401  (its old home; callers import .abi)
from mlfuse.codegen.contraction_epilogue import TileEpilogue
from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.gather import GatheredOperands
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, literal
from mlfuse.codegen.simt_fetch import VECTOR, IndexedOperands, SteppedOperands
from mlfuse.codegen.tile_model import (
    FMA_PER_US,
    GATHER_INSTRUCTIONS,
    STEP_US,
    _simt_shape,
    wgmma_tile_rates,
)
from mlfuse.dialects.contraction import (
    TF32_VARIANTS,
    Contraction,
    arg_deps,
    contraction_of,
)
from mlfuse.dialects.loops import ReduceOp
from mlfuse.errors import MlfuseError
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.traits import PURE

BK = 8  # a share of K (split-K) is whole multiples of this: every tile's K step is one
# Tile shapes (BM, BN) the host chooses from (each thread's TM x TN from _simt_shape). The
# thin ones are for few rows (decode: M of 1 to 32) or few columns; the model
# (tile_model.py) weighs them against the square ones.
CUDA_TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (32, 128), (16, 128), (128, 32))
# f64: 128 x 128 and 64 x 128 would stage 64 KB of outputs (more than a block's 48 KB
# of static shared memory) and their 8-byte accumulators would spill.
F64_TILES = tuple(t for t in CUDA_TILES if t not in ((128, 128), (64, 128)))
SIMULATOR_TILES = ((16, 16),)  # 4 threads a block: the simulator runs each in Python
SIMULATOR_THREADS = 4  # SIMT_THREADS under the simulator: 16 x 16 takes 8 x 8 a thread

_LOCALS = ("tid", "row", "col", "m_size", "n_size", "k_size", "n_tiles",
           "tile_m", "tile_n", "m0", "n0", "batch", "m_tiles", "block", "stage", "k0", "kk", "slot", "e",
           "q", "m", "n", "k", "i", "j", "value", "a_base", "b_base",
           "tiles", "a_next", "b_next", "a_frag", "b_frag", "acc", "k_lo", "chunk", "partials",
           "products", "a_at", "b_at", "a_store", "b_store", "a_read", "b_read", "steps", "full",
           "step", "nxt", "span", "left")


# The factory's own names (its parameters and constants): IR values must not take them.
FACTORY_NAMES = ("BM", "BN", "VECTOR_A", "VECTOR_B", "SPLIT", "TM", "TN", "BK", "MIN_BLOCKS",
                 "THREADS", "ACC", "A_STRIDE", "A_SPAN", "B_SPAN", "A_COUNT", "B_COUNT",
                 "A_GROUPS", "B_GROUPS", "A_NEXT", "B_NEXT", "A_TILES", "SHARED", "WIDE", "OFFSET", "STAGE",
                 "A_SLOT", "B_SLOT")


def factory_name(kernel_name: str) -> str:
    return f"_tiles_{kernel_name}"


class ContractionEmitter(SteppedOperands, IndexedOperands, GatheredOperands, TileEpilogue,
                         KernelEmitter):
    """The factory of one contraction kernel (see the module doc)."""

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, "pointwise", target, helpers, hw,
                         tuple(taken) + FACTORY_NAMES)
        self.c: Contraction = contraction_of(op)
        c = self.c
        self.loc = {n: self.namer.fresh(n) for n in _LOCALS}
        self.dtype = COMPUTE_TYPE[c.acc.type.dtype]
        # 16-byte accesses (the module's vector intrinsics move VECTOR_WIDTH values of 4
        # bytes: f64 tiles read and write shared memory value by value)
        self.vectors = (target == "cuda" and hw.vector_width == VECTOR
                        and self.dtype == "float32")
        self.args = list(op.body.args)
        self.k_vals = [r.body.args[0] for r in c.reduces]  # the reduction indices
        self.zero = literal(0, c.acc.type.dtype)
        self.k_step = BK  # a share of K (split-K) is whole multiples of this
        self.may_split = op["split_k"] > 1  # else SPLIT is never set (no second kernel)
        self.per_batch: set[int] = set()  # ops computed once per batch index (named)

    # -- pieces -------------------------------------------------------------------
    def dims(self, positions: list[int]) -> tuple[list[Value], list]:
        extents = self.op.extent_list
        return [self.args[p] for p in positions], [extents[p] for p in positions]

    def slice_of(self, targets: list[Value], stop: Value | None = None) -> set[int]:
        """The ops (in program order) that compute ``targets`` from the indices in
        scope; ``stop``: a value already named (the accumulator). Returns their ids."""
        needed: set[int] = set()

        def need(v: Value) -> None:
            op = getattr(v, "op", None)
            if op is None or v is stop or id(op) in needed or op.parent is None or \
                    id(op) in self.per_batch:
                return
            if not _inside(op, self.op):
                return  # a kernel input or constant, named at the kernel's top
            if isinstance(op, ReduceOp):
                raise MlfuseError("codegen: a contraction's operand uses another reduction",
                                  op.loc)
            needed.add(id(op))
            for operand in op.operands:
                need(operand)

        for t in targets:
            need(t)
        for op in self.op.walk():
            if id(op) in needed:
                self.statement(op, shared=False)
        return needed

    def batch_invariants(self) -> None:
        """The index ops that read only batch indices (a batched matmul over a reshaped
        [B, H] batch: b = i0 // H, h = i0 % H), computed once per batch index: else
        every operand fetch and epilogue element repeats them, and a 64-bit division is
        dozens of instructions the compiler cannot hoist out of the guarded fetches."""
        batch = {id(self.args[d]) for d in self.c.batch_dims}
        memo: dict = {}
        targets = [r for op in self.op.body.ops if not op.regions and op.has_trait(PURE)
                   for r in op.results
                   if (deps := arg_deps(r, memo)) and {id(a) for a in deps} <= batch]
        if targets:
            self.per_batch |= self.slice_of(targets)

    # -- the factory ----------------------------------------------------------------
    def emit(self) -> str:
        w = self.w
        params = [self.define(b, "buf") for b in self.iface.buffers]
        self.sym = {s: self.namer.fresh(s) for s in self.iface.symbols}
        params += list(self.sym.values()) + [self.loc["partials"]]
        sources = list(self.op["sources"])
        for line in textwrap.wrap(f"sources: {', '.join(sources)}", 92) if sources else []:
            w.line(f"# {line}")
        with w.indented(f"def {self.factory_name()}({self.factory_params()}):"):
            self.docstring()
            self.factory_constants()
            bounds = "(launch_bounds=(THREADS, MIN_BLOCKS))" if self.target == "cuda" else ""
            w.line(f"@cuda.jit{bounds}")
            with w.indented(f"def {self.name}({', '.join(params)}):"):
                for v in self.iface.constants:
                    w.line(f"{self.define(v, 'const')} = {literal(v.op['value'], v.type.dtype)}")
                self.body()
            w.line(f"return {self.factory_result()}")
        return w.text()

    def factory_name(self) -> str:
        """The factory's name (emit_wgmma's has its own beside mma.sync's)."""
        return factory_name(self.name)

    def factory_params(self) -> str:
        """The factory's parameters: a tile configuration (WIDE: 64-bit flat offsets for
        the stepped operands, simt_fetch.py; the host sets it where one reaches 2**31)."""
        return "BM, BN, VECTOR_A, VECTOR_B, SPLIT, WIDE=False"

    def factory_result(self) -> str:
        """What the factory returns: the kernel (a tensor-core one wraps it)."""
        return self.name

    def factory_constants(self) -> None:
        """The factory's constants, from its tile configuration: THREADS, MIN_BLOCKS and
        what the kernel's shared and local arrays hold; then its device functions."""
        w = self.w
        self.helpers.add("_contraction_plan")  # _simt_shape
        w.line("# a thread's TM x TN outputs, K values a step, blocks per SM asked of ptxas")
        w.line("TM, TN, BK, MIN_BLOCKS = _simt_shape(BM, BN)")
        w.line("assert BK in (8, 16), 'multiply() writes out 8 or 16 K values a step'")
        w.line("THREADS, ACC = (BM // TM) * (BN // TN), TM * TN  # ACC: a thread's outputs")
        w.line(f"A_SPAN, B_SPAN = {VECTOR} * BM // TM, {VECTOR} * BN // TN  # a thread's groups "
               f"of {VECTOR} rows (columns) lie this far apart")
        w.line(f"A_COUNT, B_COUNT = BM * BK // {VECTOR}, BN * BK // {VECTOR}  # groups of "
               f"{VECTOR} values a K step loads")
        w.line("A_GROUPS, B_GROUPS = -(-A_COUNT // THREADS), -(-B_COUNT // THREADS)  # a "
               "thread's (a thin tile leaves the last threads fewer)")
        w.line(f"A_NEXT, B_NEXT = A_GROUPS * {VECTOR}, B_GROUPS * {VECTOR}  # values in "
               "registers per step")
        if self.dtype == "float32":  # (f64 tiles fill the 48 KB exactly: unpadded)
            w.line("# an A stage row: padded for BK 16, where a warp's transposed stores of its "
                   "groups (8 rows x 4) hit 4-way bank conflicts unpadded, 2-way padded (BK 8: "
                   "2-way; padded, 128 x 128 spills)")
            w.line(f"A_STRIDE = BM + ({VECTOR} if BK == 16 else 0)")
        else:
            w.line("A_STRIDE = BM  # an A stage row")
        w.line("A_TILES, STAGE = BK * A_STRIDE, BK * (A_STRIDE + BN)  # a stage: A, then B; "
               "two stages, later the staged outputs")
        w.line("SHARED = max(2 * STAGE, A_SPAN * BN)")
        w.line("OFFSET = numba.uint64 if WIDE else numba.uint32  # flat offsets (simt_fetch.py)")
        b_per = "BN" if self.groups_along_k("b") else f"(BN // {VECTOR})"  # a stage row's groups
        b_rows = f"{VECTOR} * BN" if self.groups_along_k("b") else "BN"  # ... a row of them
        w.line("# a thread's next group slot stores this far on in a stage where THREADS is a "
               "multiple of a stage row's groups (else 0: placed one by one)")
        w.line(f"A_SLOT = THREADS // (BK // {VECTOR}) if THREADS % (BK // {VECTOR}) == 0 else 0")
        w.line(f"B_SLOT = THREADS // {b_per} * {b_rows} if THREADS % {b_per} == 0 else 0")
        self.device_functions()

    def docstring(self) -> None:
        c, ext = self.c, self.op.extent_list
        side = lambda dims: "[" + ", ".join(str(ext[d]) for d in dims) + "]"  # noqa: E731
        k = " x ".join(map(str, c.k_extents))
        text = (f"Contraction over [{', '.join(map(str, ext))}]: M = {side(c.m_dims)}, "
                f"N = {side(c.n_dims)}, batch = {side(c.batch_dims)}, K = {k}. "
                + self.schedule_text())
        lines = textwrap.wrap(text, 84)
        self.w.line(f'"""{lines[0]}')
        for line in lines[1:]:
            self.w.line(line)
        self.w.line('"""')

    def schedule_text(self) -> str:
        return ("A block computes a BM x BN tile, each thread TM x TN outputs, from "
                "double-buffered shared tiles BK K deep; the epilogue runs on the "
                "accumulators, A_SPAN rows at a time through shared memory (coalesced stores).")

    def body(self) -> None:
        w, L = self.w, self.loc
        shared = SHARED_TYPE[self.dtype]
        align = ", alignment=16" if self.target == "cuda" else ""
        w.line(f"{L['tiles']} = cuda.shared.array(SHARED, {shared}{align})")
        w.line(f"{L['a_next']} = cuda.local.array(A_NEXT, {shared})  "
               "# the next tile's values, loading during the math")
        w.line(f"{L['b_next']} = cuda.local.array(B_NEXT, {shared})")
        w.line(f"{L['a_frag']} = cuda.local.array(TM, {shared})")
        w.line(f"{L['b_frag']} = cuda.local.array(TN, {shared})")
        w.line(f"{L['acc']} = cuda.local.array(ACC, {shared})  # registers: every index is "
               "a constant once loops unroll")
        self.sizes()
        w.line(f"{L['row']}, {L['col']} = {L['tid']} // (BN // TN), {L['tid']} % (BN // TN)"
               "  # this thread's TM x TN block")
        self.tiles_and_batches()

    def sizes(self) -> None:
        """The M, N and K sizes of this call and the thread index."""
        w, L, c = self.w, self.loc, self.c
        m_ext, n_ext = self.dims(c.m_dims)[1], self.dims(c.n_dims)[1]
        w.line(f"{L['m_size']} = {self.points(m_ext)}")
        w.line(f"{L['n_size']} = {self.points(n_ext)}")
        w.line(f"{L['k_size']} = {self.points(c.k_extents)}")
        w.line(f"{L['tid']} = cuda.threadIdx.x")
        self.k_share()

    def k_share(self) -> None:
        """This block's share of K, [k_lo, k_size): all of it, or with SPLIT the
        blockIdx.y-th chunk of whole K steps (k_size then ends the share)."""
        w, L = self.w, self.loc
        if not self.may_split:  # K too short to split (the kernel's split_k is 1)
            L["k_lo"] = "0"
            return
        w.line(f"{L['k_lo']} = 0")
        with w.indented("if SPLIT:  # split-K: this block sums one share of K"):
            w.line(f"{L['chunk']} = -(-{L['k_size']} // cuda.gridDim.y)")
            w.line(f"{L['chunk']} = -(-{L['chunk']} // {self.k_step}) * {self.k_step}  "
                   "# whole K steps")
            w.line(f"{L['k_lo']} = numba.int64(cuda.blockIdx.y) * {L['chunk']}")
            w.line(f"{L['k_size']} = min({L['k_size']}, {L['k_lo']} + {L['chunk']})")

    def tiles_and_batches(self, *before_tile: str) -> None:
        """This block's BM x BN tile and batch index (blockIdx.x over the batches' tiles,
        batch by batch: no loop over batch indices, whose invariants LLVM would hoist out
        and keep live through the whole tile: the batched 128 x 256 wgmma tile took 255
        registers and spilled 464 bytes in a loop, 184 and none without), the lines
        ``before_tile``, then ``tile()``."""
        w, L = self.w, self.loc
        b_vals, b_ext = self.dims(self.c.batch_dims)
        w.line(f"{L['n_tiles']} = ({L['n_size']} + BN - 1) // BN")
        w.line(f"{L['m_tiles']} = ({L['m_size']} + BM - 1) // BM")
        if b_vals:
            w.line(f"{L['batch']}, {L['block']} = divmod(numba.int64(cuda.blockIdx.x), "
                   f"{L['m_tiles']} * {L['n_tiles']})  # the batch index, the tile in it")
        else:
            w.line(f"{L['block']} = numba.int64(cuda.blockIdx.x)")
        self.tile_position()
        w.line(f"{L['m0']}, {L['n0']} = {L['tile_m']} * BM, {L['tile_n']} * BN")
        for line in before_tile:
            w.line(line)
        if b_vals:
            self.unravel_into(L["batch"], b_vals, b_ext)
            self.batch_invariants()
        self.tile()

    def tile_position(self) -> None:
        """This block's tile (tile_m, tile_n): its tile index in the batch, row by row."""
        w, L = self.w, self.loc
        w.line(f"{L['tile_m']}, {L['tile_n']} = divmod({L['block']}, {L['n_tiles']})")

    def tile(self) -> None:
        """The K loop: 32-bit step counts; the first tile fetched before it, then each
        step stores the fetched tile into a stage, fetches the next, multiplies the stage
        and moves its stage offsets (no branch around the store or the products). The
        last, partial K step (K or a share of it no multiple of BK) runs first, so the
        loop's fetches check no K (with the checks in it, 128 x 128 spilled)."""
        w, L = self.w, self.loc
        with w.indented(f"for {L['slot']} in range(ACC):"):
            w.line(f"{L['acc']}[{L['slot']}] = {self.zero}")
        self.gather_setup()
        self.step_setup()
        self.stage_setup()
        span = L["span"]
        w.line(f"{span} = numba.int32(max({L['k_size']} - {L['k_lo']}, 0))  # this block's K "
               "(a share past K has none)")
        w.line(f"{L['steps']} = numba.int32(-(-{span} // BK))  # its K steps")
        w.line(f"{L['full']} = numba.int32({span} // BK)  # those wholly inside K")
        self.first_tile()
        w.line(f"{L['step']} = numba.int32(0)")
        with w.indented(f"while {L['step']} < {L['steps']}:"):
            self.stage_store()
            w.line("cuda.syncthreads()")
            w.line(f"{L['nxt']} = numba.int32({L['step']} + 1)")
            self.next_tile()
            self.multiply()
            w.line("# the other stage for the next step")
            for side in ("a", "b"):
                for place in ("store", "read"):
                    w.line(f"{L[side + '_' + place]} += {L['stage']}")
            w.line(f"{L['stage']} = -{L['stage']}")
            w.line(f"{L['step']} = {L['nxt']}")
        self.epilogue()

    def stage_setup(self) -> None:
        """Where in the first stage this thread stores its first group of each side and
        reads its fragments; each step moves them by ``stage`` (STAGE, then -STAGE, ...)
        to the other stage. (A stage offset added to each where used instead: the same
        registers, a 128 x 128 matmul step 576 SASS instructions against 572.)"""
        w, L = self.w, self.loc
        w.line("# where in the first stage this thread stores its groups and reads its fragments")
        for side, base, at in (("a", "", f"{L['row']} * 4"), ("b", "A_TILES + ", f"{L['col']} * 4")):
            w.line(f"{L[side + '_store']} = numba.int64({base}{self.stage_place(side, L['tid'])})")
            w.line(f"{L[side + '_read']} = numba.int64({base}{at})")
        w.line(f"{L['stage']} = numba.int64(STAGE)  # to the other stage")

    def stage_place(self, side: str, e: str) -> str:
        """Where group ``e`` of a side's step starts in a stage (its first value)."""
        own, k = self.group_position(side, None, e)
        return f"({k}) * {'A_STRIDE' if side == 'a' else 'BN'} + {own}"

    def groups_along_k(self, side: str) -> bool:
        """How a side's tile is split into groups of 4: along K (A always; B when it is
        a gather or stored K-major, [N, K]: consecutive threads then read consecutive N,
        one N per group) or, for a B read 16 bytes at a time along N, along N."""
        if side == "a":
            return True
        load = self.vector_side("b")
        return load is None or load is not self.c.direct_load("b")

    def vector_side(self, side: str) -> Operation | None:
        """The operand's plain f32 load when the "cuda" target may read it 16 bytes at
        a time (the host decides per call: VECTOR_A / VECTOR_B): A along K; B along N,
        else along K where its buffer is K-major (a Linear's [N, K] weight: a group's 4
        consecutive K are then one 16-byte load instead of 4 scalar ones)."""
        if not self.vectors:
            return None
        load = self.c.direct_load(side) or self.c.k_major_load(side)
        return load if load is not None and load.operands[0].type.dtype == "f32" else None

    def group_position(self, side: str, k_start: str, e: str | None = None) -> tuple[str, str]:
        """Lines placing this thread's group ``e`` (default: the name ``e``) of a side's
        tile: its own-axis position (m or n) and first K, relative (k_start None) or
        absolute."""
        L, e = self.loc, e or self.loc["e"]
        own, width = ("m", "BM") if side == "a" else ("n", "BN")
        origin = "" if k_start is None else f"{L[own + '0']} + "
        k_origin = "" if k_start is None else f"{k_start} + "
        if self.groups_along_k(side):  # 4 consecutive K of one own position
            if side == "a":
                per_k = f"(BK // {VECTOR})"
                return (f"{origin}{e} // {per_k}", f"{k_origin}({e} % {per_k}) * {VECTOR}")
            return (f"{origin}{e} % {width}", f"{k_origin}({e} // {width}) * {VECTOR}")
        return (f"{origin}({e} % ({width} // {VECTOR})) * {VECTOR}",
                f"{k_origin}{e} // ({width} // {VECTOR})")

    def stage_store(self) -> None:
        """The registers fetched for this step into the current stage, K-major: a
        fragment read is then 4 consecutive M (or N). A slot's place is the first one's
        plus a constant (S_SLOT; else computed), so its stores take immediate offsets."""
        w, L = self.w, self.loc
        for side in ("a", "b"):
            s, width = side.upper(), ("A_STRIDE" if side == "a" else "BN")  # stage rows
            regs, at = L[f"{side}_next"], L["i"]
            with self.each_group(side):
                with w.indented(f"if {s}_SLOT:"):
                    w.line(f"{at} = {L[side + '_store']} + {L['slot']} * {s}_SLOT")
                with w.indented("else:"):
                    w.line(f"{at} = {L[side + '_store']} + {self.stage_place(side, L['e'])} - "
                           f"({self.stage_place(side, L['tid'])})")
                if self.groups_along_k(side):  # an unsigned index: no wraparound code
                    with w.indented(f"for {L['q']} in range({VECTOR}):"):
                        w.line(f"{L['tiles']}[numba.uint64({at} + {L['q']} * {width})] = "
                               f"{regs}[{L['slot']} * {VECTOR} + {L['q']}]")
                else:
                    self.copy4(at, regs, f"{L['slot']} * {VECTOR}")

    @contextmanager
    def each_group(self, side: str):
        """The body runs once for each of this thread's groups ``e`` of a side's tile
        (a thin tile has fewer groups than A_GROUPS * THREADS: the last threads skip)."""
        w, L, s = self.w, self.loc, side.upper()
        with w.indented(f"for {L['slot']} in range({s}_GROUPS):"):
            w.line(f"{L['e']} = {L['tid']} + {L['slot']} * THREADS")
            with w.indented(f"if {s}_GROUPS * THREADS == {s}_COUNT or {L['e']} < {s}_COUNT:"):
                yield

    def copy4(self, at: str, regs: str, first: str) -> None:
        """Four registers ``regs[first..]`` into the shared tiles at ``at`` (16-byte
        aligned): one 16-byte store on the GPU."""
        w, L = self.w, self.loc
        if self.vectors:
            self.helpers.add("_vector_access")
            w.line(f"_store_shared({L['tiles']}, ({at},), {regs}, {first})")
        else:
            with w.indented(f"for {L['q']} in range({VECTOR}):"):
                w.line(f"{L['tiles']}[{at} + {L['q']}] = {regs}[{first} + {L['q']}]")

    def device_functions(self) -> None:
        """``products``: one K value's outer product into the accumulators, inlined
        where the kernel calls it (see ``multiply``)."""
        w, L = self.w, self.loc
        w.line()
        # inlined by NVVM (alwaysinline): Numba's own inline="always" gave the same machine
        # code but compiled 2-5x slower (16 calls re-typed); the simulator has no such option
        w.line("@cuda.jit(device=True, forceinline=True)" if self.target == "cuda"
               else "@cuda.jit(device=True)")
        with w.indented(f"def {L['products']}(tiles, a_at, b_at, a_frag, b_frag, acc):"):
            w.line('"""acc += the outer product of one K value\'s TM values of A (groups of 4 '
                   'rows A_SPAN')
            w.line('apart from tiles[a_at]) and its TN values of B (groups of 4 columns '
                   'B_SPAN apart')
            w.line('from tiles[b_at])."""')
            for frag, at, count, span in (("a_frag", "a_at", "TM", "A_SPAN"),
                                          ("b_frag", "b_at", "TN", "B_SPAN")):
                with w.indented(f"for h in range({count} // 4):"):
                    if self.vectors:  # one 16-byte read a group
                        self.helpers.add("_vector_access")
                        w.line(f"_load_shared(tiles, ({at} + h * {span},), {frag}, h * 4)")
                    else:
                        with w.indented("for q in range(4):"):
                            w.line(f"{frag}[h * 4 + q] = tiles[{at} + h * {span} + q]")
            with w.indented("for i in range(TM):"):
                with w.indented("for j in range(TN):"):
                    w.line("acc[i * TN + j] += a_frag[i] * b_frag[j]")
        w.line()

    def multiply(self) -> None:
        """The BK outer products of the current stage, written out (NVVM does not unroll
        a loop of them): 8, then 8 more where BK is 16."""
        w, L = self.w, self.loc
        w.line(f"{L['a_at']}, {L['b_at']} = {L['a_read']}, {L['b_read']}  # this thread's A "
               "and B fragments' first values")

        def products(first: int) -> None:
            for kk in range(first, first + 8):
                w.line(f"{L['products']}({L['tiles']}, {L['a_at']} + {kk} * A_STRIDE, "
                       f"{L['b_at']} + {kk} * BN, {L['a_frag']}, {L['b_frag']}, {L['acc']})")
        w.line("# the stage's outer products, written out: NVVM does not unroll a loop of them")
        products(0)
        with w.indented("if BK == 16:"):
            products(8)


def tile_model_inputs(op) -> dict:
    """What the tile model (tile_model.py) reads of a contraction kernel besides the
    sizes, as the "cuda" target's module has them: its tiles, K step, most K shares, the
    kernel kind's FMA rate, the operands' bytes per value and (SIMT) its tiles' thread
    shapes and the instructions a gathered value of A and of B costs (an operand that is
    not one plain load: conv's im2col, a prologue), and the rates of the tiles another
    kernel runs (a 16-bit contraction's wgmma tiles)."""
    from mlfuse.codegen.helpers import mma_geometry
    c = contraction_of(op)
    dtype = c.a.type.dtype
    mma = op["variant"].startswith("mma")
    tf32 = op["variant"] in TF32_VARIANTS  # f32 stages: half the K of a 16-bit stage
    kind = (op["variant"] if tf32 else "mma" if mma else "simt-f64" if dtype == "f64"
            else "simt")
    geometry = mma_geometry("cuda")
    # a 16-bit contraction's wgmma tiles (emit_wgmma.py: the module's MMA16_TILES) at
    # their own rate
    wgmma = geometry["wgmma_tiles"] if mma and not tf32 else ()
    tiles = (geometry["tf32_tiles" if tf32 else "tiles"] if mma else
             F64_TILES if kind == "simt-f64" else CUDA_TILES)
    return {"tiles": wgmma + tuple(t for t in tiles if t not in wgmma),
            "tile_rates": wgmma_tile_rates(wgmma),
            "k_step": (geometry["bk"] // (2 if tf32 else 1)) if mma else BK,
            "max_split": op["split_k"], "fma_per_us": FMA_PER_US[kind],
            "step_us": STEP_US[kind],
            "value_bytes": {"f64": 8, "f16": 2, "bf16": 2}.get(dtype, 4),
            "shape": None if mma else _simt_shape,
            "gather": (0, 0) if mma else tuple(
                0 if (c.direct_load(side) or c.k_major_load(side)) is not None
                else GATHER_INSTRUCTIONS
                for side in ("a", "b"))}


def tiled_kernel_plan(op) -> str:
    """The keyword arguments of a contraction's ``_TiledKernel`` that the tile model
    reads besides the sizes, tiles and K step (``tile_model_inputs``)."""
    model = tile_model_inputs(op)
    return ", ".join([f"{key}={model[key]:g}" for key in ("max_split", "fma_per_us",
                                                         "value_bytes", "step_us")]
                     + [f"gather={model['gather']}"])


def _inside(op: Operation, kernel: Operation) -> bool:
    return any(a is kernel for a in op.ancestors())


def emit_contraction(op, name: str, target: str, helpers: set[str], hw, taken):
    """The factory's source, the operand sides it can read 16 bytes at a time (side ->
    the buffer the host must find aligned) and the buffers whose size decides WIDE."""
    emitter = ContractionEmitter(op, name, target, helpers, hw, taken)
    text = emitter.emit()
    sides = {side: load.operands[0] for side in ("a", "b")
             if (load := emitter.vector_side(side)) is not None}
    return text, sides, emitter.wide_buffers()
