"""Tiled kernels for contractions (``schedule = "contraction"``): matmul, batched
matmul, conv2d as an implicit GEMM, each with its fused prologue and epilogue.

The kernel computes C[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n]
(the kernel's attributes, written by ``schedule-contractions``, say which IR values
A and B are and which kernel indices make m, n and batch: dialects/contraction.py). One block computes a BM x BN tile of outputs; each
thread an 8 x 8 register block of it (rows r..r+3 and BM/2 + r..+3, columns alike,
so a warp's fragment reads are 16-byte and conflict-free). K runs BK = 8 at a time
through two shared-memory stages: while the block multiplies one stage, each thread
already has the next tile's operand values loading into registers (double buffering),
and stores them into the other stage after the math. The epilogue (bias, activation,
residual: the ops after the reduction) runs on the accumulators, then the single
store.

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

from mlfuse.dialects.loops import ReduceOp, StoreOp
from mlfuse.errors import MlfuseError
from mlfuse.ir.core import Operation, Value
from mlfuse.dialects.contraction import TF32_VARIANTS, Contraction, arg_deps, contraction_of
from mlfuse.ir.traits import PURE

from mlfuse.codegen.abi import is_tiled_kernel  # noqa: F401  (its old home; callers import .abi)
from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, literal
from mlfuse.codegen.tile_model import FMA_PER_US, STEP_US

BK = 8  # K values per tile step (one shared-memory stage holds BK x BM and BK x BN)
TILE_SIDE = 8  # each thread computes TILE_SIDE x TILE_SIDE outputs
# Tile shapes (BM, BN) the host chooses from: all give whole groups of 4 per thread
# (BN and BM divide 128). The thin ones are for few rows (decode: M of 1 to 32) or
# few columns; the model (tile_model.py) weighs them against the square ones.
CUDA_TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (32, 128), (16, 128), (128, 32))
SIMULATOR_TILES = ((16, 16),)  # 4 threads a block: the simulator runs each in Python
VECTOR = 4  # operand values a thread loads together (one 16-byte load when VECTOR_*)

_LOCALS = ("tid", "row", "col", "m_size", "n_size", "k_size", "batch_size", "n_tiles",
           "tile_m", "tile_n", "m0", "n0", "batch", "stage", "k0", "kk", "slot", "e",
           "q", "m", "n", "k", "i", "j", "value", "a_base", "b_base",
           "tiles", "a_next", "b_next", "a_frag", "b_frag", "acc", "k_lo", "chunk", "partials")


def factory_name(kernel_name: str) -> str:
    return f"_tiles_{kernel_name}"


class ContractionEmitter(KernelEmitter):
    """The factory of one contraction kernel (see the module doc)."""

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, "pointwise", target, helpers, hw, taken)
        # 16-byte accesses (the module's vector intrinsics move VECTOR_WIDTH values)
        self.vectors = target == "cuda" and hw.vector_width == VECTOR
        self.c: Contraction = contraction_of(op)
        c = self.c
        self.loc = {n: self.namer.fresh(n) for n in _LOCALS}
        self.dtype = COMPUTE_TYPE[c.acc.type.dtype]
        self.args = list(op.body.args)
        self.k_vals = [r.body.args[0] for r in c.reduces]  # the reduction indices
        self.zero = literal(0, c.acc.type.dtype)
        self.k_step = BK  # K values a step of the K loop takes; a share is whole steps
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
        with w.indented(f"def {factory_name(self.name)}(BM, BN, VECTOR_A, VECTOR_B, SPLIT):"):
            self.docstring()
            self.factory_constants()
            bounds = "(launch_bounds=(THREADS, MIN_BLOCKS))" if self.target == "cuda" else ""
            w.line(f"@cuda.jit{bounds}")
            with w.indented(f"def {self.name}({', '.join(params)}):"):
                for v in self.iface.constants:
                    w.line(f"{self.define(v, 'const')} = {literal(v.op['value'], v.type.dtype)}")
                self.body()
            w.line(f"return {self.name}")
        return w.text()

    def factory_constants(self) -> None:
        """The factory's constants, from its tile configuration: THREADS, MIN_BLOCKS and
        what the kernel's shared and local arrays hold."""
        w = self.w
        w.line("THREADS = (BM // 8) * (BN // 8)")
        w.line(f"A_GROUPS = BM * {BK} // {VECTOR} // THREADS  # groups of {VECTOR} A values "
               "a thread loads per K step")
        w.line(f"B_GROUPS = BN * {BK} // {VECTOR} // THREADS")
        w.line(f"A_NEXT, B_NEXT = A_GROUPS * {VECTOR}, B_GROUPS * {VECTOR}  # values in "
               "registers per step")
        w.line(f"A_TILES = 2 * {BK} * BM  # two stages of A, then two of B; later half the "
               "outputs")
        w.line(f"SHARED = max(A_TILES + 2 * {BK} * BN, BM // 2 * BN)")
        w.line()
        w.line("# per SM: 2 blocks of 256 threads (at most 128 registers a thread); 64-thread "
               "tiles would spill under that cap")
        w.line("MIN_BLOCKS = 65536 // (THREADS * 128) if THREADS >= 128 else 1")

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
        return ("A block computes a BM x BN tile, each thread 8 x 8 outputs, from "
                f"double-buffered shared tiles {BK} K deep; the epilogue runs on the "
                "accumulators, half a tile at a time through shared memory (coalesced stores).")

    def body(self) -> None:
        w, L = self.w, self.loc
        shared = SHARED_TYPE[self.dtype]
        align = ", alignment=16" if self.target == "cuda" else ""
        w.line(f"{L['tiles']} = cuda.shared.array(SHARED, {shared}{align})")
        w.line(f"{L['a_next']} = cuda.local.array(A_NEXT, {shared})  "
               "# the next tile's values, loading during the math")
        w.line(f"{L['b_next']} = cuda.local.array(B_NEXT, {shared})")
        w.line(f"{L['a_frag']} = cuda.local.array(8, {shared})")
        w.line(f"{L['b_frag']} = cuda.local.array(8, {shared})")
        w.line(f"{L['acc']} = cuda.local.array(64, {shared})  # registers: every index is a "
               "constant once loops unroll")
        self.sizes()
        w.line(f"{L['row']}, {L['col']} = {L['tid']} // (BN // 8), {L['tid']} % (BN // 8)"
               "  # this thread's 8 x 8 block")
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
        """This block's BM x BN tile (blockIdx.x over the tiles), the lines
        ``before_tile``, then ``tile()`` once per batch index (blockIdx.z strides)."""
        w, L = self.w, self.loc
        b_vals, b_ext = self.dims(self.c.batch_dims)
        w.line(f"{L['n_tiles']} = ({L['n_size']} + BN - 1) // BN")
        w.line(f"{L['tile_m']}, {L['tile_n']} = divmod(numba.int64(cuda.blockIdx.x), "
               f"{L['n_tiles']})")
        w.line(f"{L['m0']}, {L['n0']} = {L['tile_m']} * BM, {L['tile_n']} * BN")
        for line in before_tile:
            w.line(line)
        if b_vals:
            w.line(f"{L['batch_size']} = {self.points(b_ext)}")
            header = (f"for {L['batch']} in range(numba.int64(cuda.blockIdx.z), "
                      f"{L['batch_size']}, cuda.gridDim.z):")
            with w.indented(header):
                self.unravel_into(L["batch"], b_vals, b_ext)
                self.batch_invariants()
                self.tile()
        else:
            self.tile()

    def tile(self) -> None:
        w, L = self.w, self.loc
        with w.indented(f"for {L['slot']} in range(64):"):
            w.line(f"{L['acc']}[{L['slot']}] = {self.zero}")
        w.line(f"{L['stage']} = 0")
        w.line(f"# step k0 fetches the tile at k0 into registers while it multiplies the "
               f"tile at k0 - {BK}")
        with w.indented(f"for {L['k0']} in range({L['k_lo']}, {L['k_size']} + {BK}, {BK}):"):
            w.line(f"{L['a_base']}, {L['b_base']} = {L['stage']} * {BK} * BM, "
                   f"A_TILES + {L['stage']} * {BK} * BN")
            with w.indented(f"if {L['k0']} > {L['k_lo']}:"):
                self.stage_store()
                w.line("cuda.syncthreads()")
            with w.indented(f"if {L['k0']} < {L['k_size']}:"):
                self.fetch("a", L["k0"])
                self.fetch("b", L["k0"])
            with w.indented(f"if {L['k0']} > {L['k_lo']}:"):
                self.multiply()
                w.line(f"{L['stage']} = 1 - {L['stage']}")
        self.epilogue()

    def groups_along_k(self, side: str) -> bool:
        """How a side's tile is split into groups of 4: along K (A always; B when it is
        a gather: consecutive threads then read consecutive N, one N per group) or,
        for a B read 16 bytes at a time, along N."""
        return side == "a" or self.vector_side("b") is None

    def vector_side(self, side: str) -> Operation | None:
        """The operand's plain f32 load when the "cuda" target may read it 16 bytes at
        a time (the host decides per call: VECTOR_A / VECTOR_B)."""
        load = self.c.direct_load(side) if self.vectors else None
        return load if load is not None and load.operands[0].type.dtype == "f32" else None

    def group_position(self, side: str, k_start: str) -> tuple[str, str]:
        """Lines placing this thread's group ``e`` of a side's tile: its own-axis
        position (m or n) and first K, relative (k_start None) or absolute."""
        L = self.loc
        own, width = ("m", "BM") if side == "a" else ("n", "BN")
        origin = "" if k_start is None else f"{L[own + '0']} + "
        k_origin = "" if k_start is None else f"{k_start} + "
        if self.groups_along_k(side):  # 4 consecutive K of one own position
            per_k = f"{BK // VECTOR}" if side == "a" else width
            if side == "a":
                return (f"{origin}{L['e']} // {per_k}", f"{k_origin}({L['e']} % {per_k}) * {VECTOR}")
            return (f"{origin}{L['e']} % {width}", f"{k_origin}({L['e']} // {width}) * {VECTOR}")
        return (f"{origin}({L['e']} % ({width} // {VECTOR})) * {VECTOR}",
                f"{k_origin}{L['e']} // ({width} // {VECTOR})")

    def stage_store(self) -> None:
        """The registers fetched for this step into the current stage, K-major: a
        fragment read is then 4 consecutive M (or N)."""
        w, L = self.w, self.loc
        for side in ("a", "b"):
            own, width = ("m", "BM") if side == "a" else ("n", "BN")
            base, regs = L[f"{side}_base"], L[f"{side}_next"]
            with w.indented(f"for {L['slot']} in range({side.upper()}_GROUPS):"):
                w.line(f"{L['e']} = {L['tid']} + {L['slot']} * THREADS")
                position, k = self.group_position(side, None)
                w.line(f"{L[own]}, {L['k']} = {position}, {k}")
                if self.groups_along_k(side):
                    with w.indented(f"for {L['q']} in range({VECTOR}):"):
                        w.line(f"{L['tiles']}[{base} + ({L['k']} + {L['q']}) * {width} + "
                               f"{L[own]}] = {regs}[{L['slot']} * {VECTOR} + {L['q']}]")
                else:
                    self.copy4(f"{base} + {L['k']} * {width} + {L[own]}", regs,
                               f"{L['slot']} * {VECTOR}")

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

    def fetch(self, side: str, k_start: str) -> None:
        """This thread's groups of the operand's tile at K offset ``k_start`` into
        registers (zeros outside the sizes)."""
        w, L, c = self.w, self.loc, self.c
        own = "m" if side == "a" else "n"
        with w.indented(f"for {L['slot']} in range({side.upper()}_GROUPS):"):
            w.line(f"{L['e']} = {L['tid']} + {L['slot']} * THREADS")
            position, k = self.group_position(side, k_start)
            w.line(f"{L[own]} = {position}")
            w.line(f"{L['k']} = {k}")
            if self.groups_along_k(side):  # one own position for the group's 4 values
                self.unravel_into(L[own], *self.dims(c.m_dims if side == "a" else c.n_dims))
            load = self.vector_side(side)
            if load is not None:
                with w.indented(f"if VECTOR_{side.upper()}:  # the group is 16 contiguous bytes"):
                    self.vector_fetch(side, load)
                with w.indented("else:"):
                    self.scalar_fetch(side)
            else:
                self.scalar_fetch(side)

    def vector_fetch(self, side: str, load: Operation) -> None:
        w, L, c = self.w, self.loc, self.c
        own, regs = ("m", L["a_next"]) if side == "a" else ("n", L["b_next"])
        if not self.groups_along_k(side):  # the group's first N
            self.unravel_into(L["n"], *self.dims(c.n_dims))
        self.unravel_into(L["k"], self.k_vals, c.k_extents)
        with w.indented(f"if {L[own]} < {L[own + '_size']} and {L['k']} < {L['k_size']}:"):
            self.slice_of(list(load.operands[1:]))
            self.helpers.add("_vector_access")
            index = ", ".join(self.namer(v) for v in load.operands[1:])
            w.line(f"_load_vector({self.namer(load.operands[0])}, ({index},), {regs}, "
                   f"{L['slot']} * {VECTOR})")
        with w.indented("else:"):
            with w.indented(f"for {L['q']} in range({VECTOR}):"):
                w.line(f"{regs}[{L['slot']} * {VECTOR} + {L['q']}] = {self.zero}")

    def scalar_fetch(self, side: str) -> None:
        """The group's 4 values one by one: consecutive K (or N) positions. Along K,
        the reduction indices are unravelled once and then counted up (mixed radix),
        not divided out for every value."""
        w, L, c = self.w, self.loc, self.c
        own, regs = ("m", L["a_next"]) if side == "a" else ("n", L["b_next"])
        value = c.a if side == "a" else c.b
        along_k = self.groups_along_k(side)
        if along_k:
            self.unravel_into(L["k"], self.k_vals, c.k_extents)
        with w.indented(f"for {L['q']} in range({VECTOR}):"):
            w.line(f"{L['value']} = {self.zero}")
            if along_k:
                cond = (f"{L[own]} < {L[own + '_size']} and {L['k']} + {L['q']} < "
                        f"{L['k_size']}")
            else:
                w.line(f"{L['j']} = {L['n']} + {L['q']}")
                cond = f"{L['j']} < {L['n_size']} and {L['k']} < {L['k_size']}"
            with w.indented(f"if {cond}:"):
                if not along_k:
                    self.unravel_into(L["j"], *self.dims(c.n_dims))
                    self.unravel_into(L["k"], self.k_vals, c.k_extents)
                self.slice_of([value])
                w.line(f"{L['value']} = {self.namer(value)}")
            w.line(f"{regs}[{L['slot']} * {VECTOR} + {L['q']}] = {L['value']}")
            if along_k:
                self.count_up(self.k_vals, c.k_extents)

    def count_up(self, values: list[Value], extents: list) -> None:
        """The next position of a flat index unravelled into ``values``: the last
        index steps, and carries into the one before it at its extent."""
        names = [self.namer(v) for v in values]
        self.w.line(f"{names[-1]} += 1")

        def carry(d: int) -> None:
            if d > 0:
                with self.w.indented(f"if {names[d]} == {self.extent(extents[d])}:"):
                    self.w.line(f"{names[d]} = 0")
                    self.w.line(f"{names[d - 1]} += 1")
                    carry(d - 1)
        carry(len(names) - 1)

    def multiply(self) -> None:
        """The BK steps of outer products on the current stage."""
        w, L = self.w, self.loc
        with w.indented(f"for {L['kk']} in range({BK}):"):
            a_row = f"{L['a_base']} + {L['kk']} * BM + {L['row']} * 4"
            b_row = f"{L['b_base']} + {L['kk']} * BN + {L['col']} * 4"
            reads = ((L["a_frag"], a_row, "BM"), (L["b_frag"], b_row, "BN"))
            if self.vectors:
                self.helpers.add("_vector_access")
                w.line("# 16-byte fragment reads: 4 rows, 4 more half a tile on; columns alike")
                for frag, at, side in reads:
                    for half, offset in ((0, ""), (4, f" + {side} // 2")):
                        w.line(f"_load_shared({L['tiles']}, ({at}{offset},), {frag}, {half})")
            else:
                with w.indented(f"for {L['q']} in range(4):"):
                    for frag, at, side in reads:
                        w.line(f"{frag}[{L['q']}] = {L['tiles']}[{at} + {L['q']}]")
                        w.line(f"{frag}[4 + {L['q']}] = {L['tiles']}[{at} + {side} // 2 + "
                               f"{L['q']}]")
            with w.indented(f"for {L['i']} in range(8):"):
                with w.indented(f"for {L['j']} in range(8):"):
                    w.line(f"{L['acc']}[{L['i']} * 8 + {L['j']}] += "
                           f"{L['a_frag']}[{L['i']}] * {L['b_frag']}[{L['j']}]")

    def epilogue(self) -> None:
        """Half the tile's accumulators at a time into shared memory (a copy with
        constant register indices), then the block's threads walk that half with
        consecutive threads on consecutive N (coalesced), run the ops after the
        reduction and store. The two halves are written out: a loop over them would
        keep all 64 accumulators live through the first half's stores."""
        w, L = self.w, self.loc
        for half in (0, 1):
            w.line(f"# epilogue, {('first', 'second')[half]} half of the tile's rows: the fused "
                   "ops after the reduction")
            w.line("cuda.syncthreads()  # the block is done with what the tiles held")
            with w.indented(f"for {L['i']} in range(4):"):
                with w.indented(f"for {L['j']} in range(0, 8, 4):"):
                    at = (f"({L['row']} * 4 + {L['i']}) * BN + {L['col']} * 4 + "
                          f"({L['j']} // 4) * (BN // 2)")
                    self.copy4(at, L["acc"], f"({L['i']} + {4 * half}) * 8 + {L['j']}")
            w.line("cuda.syncthreads()")
            self.epilogue_half(half)
        w.line("cuda.syncthreads()  # all stores read the tiles before they are refilled")

    def staged_accumulator(self) -> str:
        """Where the epilogue reads the accumulator of element (i, j) of the staged half
        tile (``e`` = i * BN + j): the SIMT kernel stages it densely."""
        return f"{self.loc['tiles']}[{self.loc['e']}]"

    def epilogue_half(self, half: int) -> None:
        """Each thread takes elements of the staged half tile in turn (coalesced), runs
        the epilogue on the accumulator and stores."""
        w, L, c = self.w, self.loc, self.c
        stores = [o for o in self.op.body.ops if isinstance(o, StoreOp)]
        with w.indented(f"for {L['e']} in range({L['tid']}, BM // 2 * BN, THREADS):"):
            w.line(f"{L['i']}, {L['j']} = divmod({L['e']}, BN)")
            offset = " + BM // 2" if half else ""
            w.line(f"{L['m']} = {L['m0']}{offset} + {L['i']}")
            w.line(f"{L['n']} = {L['n0']} + {L['j']}")
            with w.indented(f"if {L['m']} < {L['m_size']} and {L['n']} < {L['n_size']}:"):
                if self.may_split:
                    with w.indented("if SPLIT:  # a share of K: its partial sum, for the "
                                    "second kernel"):
                        row = (f"({L['batch']} * {L['m_size']} + {L['m']})" if c.batch_dims
                               else L["m"])
                        w.line(f"{L['partials']}[cuda.blockIdx.y, {row} * {L['n_size']} + "
                               f"{L['n']}] = {self.staged_accumulator()}")
                    with w.indented("else:"):
                        self.finish_point(stores)
                else:
                    self.finish_point(stores)

    def finish_point(self, stores: list) -> None:
        """The epilogue of the output at (m, n) (and the batch index): the indices, the
        accumulator from where the tile staged it, the ops after the reduction, stores."""
        w, L, c = self.w, self.loc, self.c
        self.unravel_into(L["m"], *self.dims(c.m_dims))
        self.unravel_into(L["n"], *self.dims(c.n_dims))
        acc = self.define(c.acc, "acc_value")
        w.line(f"{acc} = {self.staged_accumulator()}")
        self.slice_of([v for s in stores for v in s.operands], stop=c.acc)
        for store in stores:
            self.statement(store, shared=False)


def tile_model_inputs(op) -> dict:
    """What the tile model (tile_model.py) reads of a contraction kernel besides the
    sizes, as the "cuda" target's module has them: its tiles, K step, most K shares, the
    kernel kind's FMA rate and the operands' bytes per value."""
    from mlfuse.codegen.helpers import MMA_GEOMETRY
    dtype = contraction_of(op).a.type.dtype
    mma = op["variant"].startswith("mma")
    tf32 = op["variant"] in TF32_VARIANTS  # f32 stages: half the K of a 16-bit stage
    kind = (op["variant"] if tf32 else "mma" if mma else "simt-f64" if dtype == "f64"
            else "simt")
    return {"tiles": MMA_GEOMETRY["cuda"]["tiles"] if mma else CUDA_TILES,
            "k_step": (MMA_GEOMETRY["cuda"]["bk"] // (2 if tf32 else 1)) if mma else BK,
            "max_split": op["split_k"], "fma_per_us": FMA_PER_US[kind],
            "step_us": STEP_US[kind],
            "value_bytes": {"f64": 8, "f16": 2, "bf16": 2}.get(dtype, 4)}


def tiled_kernel_plan(op) -> str:
    """The keyword arguments of a contraction's ``_TiledKernel`` that the tile model
    reads besides the sizes, tiles and K step (``tile_model_inputs``)."""
    model = tile_model_inputs(op)
    return ", ".join(f"{key}={model[key]:g}" for key in ("max_split", "fma_per_us",
                                                        "value_bytes", "step_us"))


def _inside(op: Operation, kernel: Operation) -> bool:
    return any(a is kernel for a in op.ancestors())


def emit_contraction(op, name: str, target: str, helpers: set[str], hw, taken):
    """The factory's source, and the operand sides it can read 16 bytes at a time
    (side -> the buffer the host must find aligned)."""
    emitter = ContractionEmitter(op, name, target, helpers, hw, taken)
    text = emitter.emit()
    sides = {side: load.operands[0] for side in ("a", "b")
             if (load := emitter.vector_side(side)) is not None}
    return text, sides
