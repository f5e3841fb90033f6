"""Tensor-core kernels for f16 and bf16 contractions (``variant = "mma-f16"``,
``"mma-bf16"``): the same sum of
products as emit_contraction.py, C[batch, m, n] = sum_k A[batch, m, k] B[batch, k, n],
multiplied by ``mma.sync.m16n8k16`` with f32 accumulation (helpers: ptx_mma.py).
The TF32 variants of f32 sums (emit_tf32.py) are this kernel with f32 stages and
their own fragments and multiply.

A block computes a BM x BN tile; its warps each a WARP_M x WARP_N part of it, as
MT x NT mma tiles of 16 x 8 (MT * NT * 4 f32 accumulators a lane). K runs STAGE_K
(MMA_BK) at a time through STAGES shared-memory stages (dynamic shared memory, up to
MMA_SHARED bytes, at most MMA_STAGES). A stage holds A as BM rows of K (K contiguous)
and B as STAGE_K rows of N (N contiguous), unpadded but swizzled: the 16-byte chunk c
of row r sits at chunk c ^ (the row's 128-byte line number mod 8), so the 8 rows one
ldmatrix phase reads, and the 8 chunks a quarter warp copies, fall in distinct banks
(``stage_offset``); ``ldmatrix`` (A) and ``ldmatrix.trans`` (B) load the fragments.

**The K loop is software-pipelined** (``tile``, ``pipeline_step``), as CUTLASS's
multistage main loop: the stages first fill with tiles 0 .. STAGES - 1; iteration kt
multiplies tile kt in STAGE_K / 16 mma steps, written out one by one, each on one of
two B fragment buffers while the other loads the next step's B fragments, and each row
of A fragments reloaded for the next step as soon as its mma are issued (the last step
loads the next stage's first ones), so no mma waits on ldmatrix. The iteration's one
barrier sits before those next-stage loads; right after it, tile kt + STAGES is copied
into tile kt's stage (its fragments are all in registers by then), in the same basic
block as the mma (no branch: a copy past K reads nothing and fills zeros), which ptxas
interleaves with them. The mma run serpentine over N (odd rows of mma tiles backwards:
consecutive mma share a B fragment). Stage offsets are counters, not a modulo a stage.
blockIdx.x walks the tiles down groups of GROUP_M rows (``tile_position``), so the
blocks resident together share operand rows and columns in L2.

**Copies are planned once a tile** (``copy_plan``): each thread makes a constant number
of copies a stage (A_COPIES, B_COPIES); where THREADS is a multiple of a row's copies
(S_EVEN) a thread's copies share one column and lie S_ROWS rows apart with one swizzle,
so a copy's source is the first one's flat offset + slot * a step + tile * a stage's
step, its stage offset an immediate and its bounds two compares (``_cp_async_at``: a
flat source offset, no index arithmetic a stage). Else each slot's offsets are kept in
registers. (Before: the positions were recomputed each stage in 64-bit, ~400
instructions per 64 mma a warp and stage; now ~210, 64 of them the mma.)

The stages hold 16-bit values: f16, or bf16 as its bits (uint16, mlfuse/codegen/bf16.py).
An operand that is one plain load of its dtype contiguous along the tile's fast axis (K
for A, N for B) is copied with ``cp.async`` (zero-filled past the sizes), VECTOR_A /
VECTOR_B values at a time: the host picks the widest copy of 16, 8 or 4 bytes that its
rows and start address are aligned to (``_copy_values``; 0: none); any other operand
(a prologue, an im2col gather, a transposed operand, odd sizes) is computed value by
value, rounded to the operand dtype and stored into the stage by the threads (zeros
past the sizes).

The epilogue (the ops after the reduction) runs on the f32 accumulators: half the
tile's rows at a time go through shared memory, then consecutive threads take
consecutive N (coalesced stores), and the single store rounds to the output dtype.
Split-K works as in contraction.py: a block sums its share of K (whole stages) and
writes f32 partial sums; the second kernel adds them and runs the epilogue.
"""
from __future__ import annotations

from mlfuse.codegen.contraction import ContractionEmitter, factory_name
from mlfuse.codegen.mma_copies import StageCopies
from mlfuse.codegen.ptx_mma import MMA_HELPER
from mlfuse.dialects.loops import StoreOp

PAD = 8  # f32 words after each row of the epilogue's staged half tile
# How a stage's 16-bit values are viewed, per operand dtype: bf16 as its bits.
STAGE_VIEW = {"f16": "np.float16", "bf16": "np.uint16"}
STAGE_BYTES = {"f16": 2, "bf16": 2, "f32": 4}  # bytes of one operand value in a stage


_LOCALS = ("tiles32", "lane", "warp", "wm0", "wn0", "k_tiles", "kt", "ahead", "row", "a_at",
           "g0", "b_at", "valid", "rd", "nxt", "jj", "group", "in_group", "rows",
           *(f"{side}_{n}" for side in "ab"
             for n in ("src", "dst", "lim", "src0", "dst0", "lim0", "step", "jump", "own")))


class MmaContractionEmitter(StageCopies, ContractionEmitter):
    """The factory of one tensor-core contraction kernel (see the module doc)."""

    WARP_SKIP = 0  # the warp tiles it may take: MMA_WARPS from this one (helpers._mma_warp)
    TILES = "MMA_TILES"  # the module's table of the block tiles it may take
    EXTRA_WORDS = "0"  # f32 words of shared memory after the stages (emit_tf32's)
    NARROW_TILES = None  # a table of the tiles it takes when copies are under 16 bytes
    # gathered values a thread loads before storing them (in flight together: one at a
    # time, LLVM keeps each global load behind the shared store before it, which may
    # alias); 8 spills (ptxas, sm_90)
    GATHER = 4
    HOST_K_STEP = "MMA_BK"  # STAGE_K as the host module names it (split-K shares)
    MOST_STAGES = "MMA_STAGES"  # the module's most stages of this kernel
    ALIGN = 16  # bytes the stages' shared memory is aligned to (cp.async, ldmatrix)

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, target, helpers, hw, taken)
        self.loc.update({n: self.namer.fresh(n) for n in _LOCALS})
        self.operand = operand = self.c.a.type.dtype
        self.mma = MMA_HELPER.get(operand)  # (the TF32 variants pick their own: emit_tf32)
        self.group = 16 // STAGE_BYTES[operand]  # values of one 16-byte cp.async
        helpers.update({"_mma_intrinsics", "_mma_geometry"})
        self.k_step = "STAGE_K"  # a share of K (split-K) is whole stages

    def schedule_text(self) -> str:
        return ("Tensor cores: a block computes a BM x BN tile, each warp a WARP_M x WARP_N "
                "part as 16 x 8 mma tiles (f32 accumulators), from STAGES cp.async stages "
                "STAGE_K K deep; the epilogue runs on the accumulators, half a tile at a time "
                "through shared memory (coalesced stores).")

    def factory_params(self) -> str:
        return "BM, BN, VECTOR_A, VECTOR_B, SPLIT"

    def factory_result(self) -> str:
        return f"_DynamicShared({self.name}, SHARED * 4)  # its stages' bytes, given at launch"

    def factory_constants(self) -> None:
        w = self.w
        self.warp_constants()
        self.stage_constants()
        w.line("STAGE_SIZE = A_STAGE + B_STAGE  # values of one stage")
        size = STAGE_BYTES[self.operand]
        w.line(f"STAGES = min({self.MOST_STAGES}, (MMA_SHARED - 4 * {self.EXTRA_WORDS}) // "
               f"({size} * (A_STAGE + B_STAGE)))")
        w.line("assert STAGES >= 2, 'a tile too large for two stages in shared memory'")
        w.line("# values a cp.async copies (VECTOR_A / VECTOR_B: 16, 8 or 4 bytes; 0: gathered)")
        w.line("A_VALUES, B_VALUES = max(1, VECTOR_A), max(1, VECTOR_B)")
        w.line(f"A_BYTES, B_BYTES = A_VALUES * {size}, B_VALUES * {size}")
        w.line("A_CHUNKS, B_CHUNKS = BM * STAGE_K // A_VALUES, STAGE_K * BN // B_VALUES  # copies "
               "a stage")
        w.line("# copies a thread makes per stage: a constant count (a thin tile has fewer "
               "chunks than threads)")
        w.line("A_COPIES, B_COPIES = -(-A_CHUNKS // THREADS), -(-B_CHUNKS // THREADS)")
        w.line("WAIT = STAGES - 2  # copy groups still in flight when a stage is used")
        w.line("FILLED = STAGES - 1  # ... when the first is (cp.async.wait_group takes a literal)")
        w.line(f"GATHER = {self.GATHER}  # gathered values a thread loads before it stores them")
        w.line(f"C_STRIDE = BN + {PAD}  # f32 rows of half the tile, for the epilogue")
        w.line(f"SHARED = max(STAGES * (A_STAGE + B_STAGE) * {size} // 4 + {self.EXTRA_WORDS}, "
               "BM // 2 * C_STRIDE)"
               "  # f32 words of dynamic shared memory")
        w.line("assert SHARED * 4 <= MMA_SHARED, 'half the tile, for the epilogue, takes too much "
               "shared memory'")
        w.line("MIN_BLOCKS = 1  # the accumulators and fragments need more than 128 registers")
        w.line("GROUP_M = 8  # rows of tiles blockIdx.x runs down before the next column")
        self.step_constants()

    def warp_constants(self) -> None:
        """A warp's part of the tile (WARP_M x WARP_N, WARPS_N of them across), THREADS,
        and its 16 x 8 mma tiles (MT x NT)."""
        w = self.w
        w.line(f"WARP_M, WARP_N = _mma_warp(BM, BN, {self.WARP_SKIP})")
        w.line("WARPS_N = BN // WARP_N")
        w.line(f"THREADS = _mma_threads(BM, BN, {self.WARP_SKIP})")
        w.line("MT, NT = WARP_M // 16, WARP_N // 8  # 16 x 8 mma tiles of a warp")

    def stage_constants(self) -> None:
        """A lane's registers (A_REGS, B_REGS, ACC), the K of a stage (STAGE_K), its rows'
        strides and sizes in operand values (A_STRIDE, B_STRIDE, A_STAGE, B_STAGE)."""
        w = self.w
        w.line("A_REGS, B_REGS, ACC = MT * 4, NT * 2, MT * NT * 4  # a lane's fragment registers")
        w.line("assert NT % 2 == 0, 'a warp tile N of 16s: ldmatrix.x4.trans loads two n8 B tiles'")
        w.line("STAGE_K = MMA_BK  # K values per stage")
        w.line("A_STRIDE, B_STRIDE = STAGE_K, BN  # 16-bit values a row; rows are swizzled")
        w.line("# swizzle: a row's 16-byte chunks XOR its 128-byte line's number (mod 8)")
        w.line("A_LINE, B_LINE = max(1, 64 // A_STRIDE), max(1, 64 // B_STRIDE)  # rows a line")
        w.line("A_MASK, B_MASK = min(8, A_STRIDE // 8) - 1, min(8, B_STRIDE // 8) - 1")
        w.line("A_STAGE, B_STAGE = BM * A_STRIDE, STAGE_K * B_STRIDE  # 16-bit values")

    def step_constants(self) -> None:
        """The K loop is written out per mma step (``tile``): check the stage has them.
        Two fragment buffers a lane (a local array's size must be a constant). And
        whether a thread's copy slots are evenly spaced (S_EVEN, see ``copy_plan``)."""
        w = self.w
        w.line(f"assert STAGE_K == {self.k_steps()} * 16, 'the K loop is written for "
               f"{self.k_steps()} mma steps a stage'")
        w.line("A_FRAGS, B_FRAGS = A_REGS, 2 * B_REGS  # B: two buffers, one loads while the "
               "other multiplies; A: a row at a time")
        self.copy_constants(swizzled=True)

    def stage_offset(self, side: str, row: str, chunk: str) -> str:
        """The offset in a side's stage of 16-byte chunk ``chunk`` of row ``row``:
        swizzled (see the module doc)."""
        s = side.upper()
        return f"{row} * {s}_STRIDE + ((({chunk}) ^ (({row} // {s}_LINE) & {s}_MASK)) << 3)"

    def body(self) -> None:
        w, L = self.w, self.loc
        align = f", alignment={self.ALIGN}" if self.target == "cuda" else ""
        w.line(f"{L['tiles32']} = cuda.shared.array(0, numba.float32{align})  # dynamic: "
               "SHARED words, given at launch")
        if self.operand in STAGE_VIEW:
            w.line(f"{L['tiles']} = {L['tiles32']}.view({STAGE_VIEW[self.operand]})  # the stages")
        else:
            w.line(f"{L['tiles']} = {L['tiles32']}  # the stages hold {self.operand}")
        self.fragments()
        w.line(f"{L['acc']} = cuda.local.array(ACC, numba.float32)  # registers once "
               "loops unroll")
        self.sizes()
        w.line(f"{L['lane']}, {L['warp']} = {L['tid']} % 32, {L['tid']} // 32")
        w.line(f"{L['wm0']} = ({L['warp']} // WARPS_N) * WARP_M  # this warp's part of the tile")
        w.line(f"{L['wn0']} = ({L['warp']} % WARPS_N) * WARP_N")
        self.tiles_and_batches(f"{L['k_tiles']} = max(0, -(-({L['k_size']} - {L['k_lo']}) "
                               "// STAGE_K))  # stages of this block's share of K")

    def tile_position(self) -> None:
        """This block's tile, in groups of GROUP_M rows of tiles (the last group fewer):
        blockIdx.x runs down a group's column of tiles, then to its next column. The
        blocks resident at once then cover a squarer patch of the output, whose operand
        rows and columns the L2 holds while their K advances together (row by row, a
        wave of 132 blocks at 8192^3 spans 4 rows of tiles and every column of B)."""
        w, L = self.w, self.loc
        w.line(f"{L['group']}, {L['in_group']} = divmod({L['block']}, GROUP_M * {L['n_tiles']})")
        w.line(f"{L['rows']} = min(GROUP_M, {L['m_tiles']} - {L['group']} * GROUP_M)"
               "  # rows of tiles in this group")
        w.line(f"{L['tile_m']} = {L['group']} * GROUP_M + {L['in_group']} % {L['rows']}")
        w.line(f"{L['tile_n']} = {L['in_group']} // {L['rows']}")

    def fragments(self) -> None:
        """A lane's A and B fragment registers."""
        w, L = self.w, self.loc
        w.line(f"{L['a_frag']} = cuda.local.array(A_FRAGS, numba.uint32)  # {self.operand} pairs")
        w.line(f"{L['b_frag']} = cuda.local.array(B_FRAGS, numba.uint32)")

    def tile(self) -> None:
        """The K loop, software-pipelined (see ``pipeline_step``): tiles 0 .. STAGES - 1
        fill the stages first; iteration kt multiplies tile kt in STAGE_K // 16 mma
        steps, each step's fragments loaded (ldmatrix) during the step before it, so no
        mma waits on shared memory. The one barrier an iteration sits before the next
        stage's first fragments; right after it, tile kt + STAGES goes into tile kt's
        stage (its fragments are all in registers by then): STAGES - 1 tiles stay in
        flight while the block multiplies. The stage offset is a counter (no 64-bit
        modulo a stage)."""
        w, L = self.w, self.loc
        steps = self.k_steps()
        with w.indented(f"for {L['slot']} in range(ACC):"):
            w.line(f"{L['acc']}[{L['slot']}] = np.float32(0)")
        self.copy_plans()
        w.line("# tiles 0 .. STAGES - 1 into their stages, one commit group each")
        with w.indented(f"for {L['ahead']} in range(STAGES):"):
            self.fetch_stage(L["ahead"], f"{L['ahead']} * STAGE_SIZE")
            w.line("_cp_async_commit()")
        w.line(f"{L['rd']} = 0  # the stage of tile kt")
        w.line("_cp_async_wait(FILLED)  # this thread's copies of tile 0 landed")
        w.line("cuda.syncthreads()  # and everyone's")
        self.load_fragments(L["rd"], 0)
        with w.indented(f"for {L['kt']} in range({L['k_tiles']}):"):
            for step in range(steps):
                self.pipeline_step(step, steps)
        w.line("_cp_async_wait(0)  # every copy (past K: zeros) landed before the epilogue may "
               "reuse the stages")
        self.epilogue()

    def k_steps(self) -> int:
        """The mma steps (16 K values each) of a stage: MMA_BK // 16 of the target's
        geometry, written out (each step's fragment buffer and stage are constants)."""
        from mlfuse.codegen.helpers import mma_geometry
        return mma_geometry(self.target)["bk"] // 16

    def pipeline_step(self, step: int, steps: int) -> None:
        """Step ``step`` of ``steps`` of iteration kt: its mma on B fragment buffer
        step % 2 and the A fragments, each row of A fragments reloaded for the next step
        as soon as its mma are issued (``mma_step``: one A buffer, the registers two
        would take are what keeps every tile of 64 x 64 warp tiles from spilling). A
        step but the last first loads the next step's B fragments into the other buffer.
        The last: wait for tile kt + 1 (WAIT groups may stay in flight), the barrier,
        the next stage's first B fragments (buffer 0), the copies of tile kt + STAGES
        into tile kt's stage (without a branch: ptxas interleaves them with the mma),
        then its mma. With an odd count of steps the last uses B buffer 0 itself: the
        next stage's B fragments load after its mma."""
        w, L = self.w, self.loc
        last, odd = step == steps - 1, steps % 2 == 1
        w.line(f"# k step {step} of {steps}: mma on B fragment buffer {step % 2}"
               + (", with the next stage's first fragments and copies" if last else
                  f", while buffer {(step + 1) % 2} loads step {step + 1}"))
        if not last:
            self.load_b((step + 1) % 2, L["rd"], step + 1)
            self.mma_step(step % 2, L["rd"], step + 1)
            return
        w.line("_cp_async_wait(WAIT)  # this thread's copies of tile kt + 1 landed")
        w.line("cuda.syncthreads()  # everyone's; and every warp has tile kt's fragments")
        w.line(f"{L['nxt']} = {L['rd']} + STAGE_SIZE if {L['rd']} < (STAGES - 1) * STAGE_SIZE "
               "else 0  # tile kt + 1's stage")
        if not odd:
            self.load_b(0, L["nxt"], 0)
        w.line("# tile kt + STAGES (zeros past K) into tile kt's stage")
        self.fetch_stage(f"{L['kt']} + STAGES", L["rd"])
        w.line("_cp_async_commit()  # (a group each iteration: the wait counts groups)")
        w.line(f"{L['rd']} = {L['nxt']}")
        self.mma_step(step % 2, L["rd"], 0)
        if odd:
            self.load_b(0, L["rd"], 0)

    # -- the math --------------------------------------------------------------------
    def load_fragments(self, stage: str, step: int) -> None:
        """All fragments of mma step ``step`` of the stage at ``stage`` (A, and B into
        buffer 0): the first step, before the K loop."""
        with self.w.indented(f"for {self.loc['i']} in range(MT):"):
            self.load_a(stage, step)
        self.load_b(0, stage, step)

    def load_a(self, stage: str, step: int) -> None:
        """Row i of this warp's A fragments for mma step ``step`` of the stage at
        ``stage``: ldmatrix (lane l gives row l % 16, columns (l // 16) * 8 on, of the
        16 x 16 tile)."""
        w, L = self.w, self.loc
        a_row = f"({L['wm0']} + {L['i']} * 16 + {L['lane']} % 16)"
        a_chunk = f"({step * 16} + ({L['lane']} // 16) * 8) >> 3"
        w.line(f"_ldmatrix_x4({L['a_frag']}, {L['i']} * 4, {L['tiles']}, "
               f"{stage} + {self.stage_offset('a', a_row, a_chunk)})")

    def load_b(self, buffer: int, stage: str, step: int) -> None:
        """B fragment buffer ``buffer`` for mma step ``step`` of the stage at ``stage``:
        ldmatrix.trans of 16 K rows, two n8 tiles a load."""
        w, L = self.w, self.loc
        at = "B_REGS + " if buffer else ""  # the buffer's start
        with w.indented(f"for {L['j']} in range(NT // 2):"):
            b_row = f"({step * 16} + {L['lane']} % 16)"
            b_chunk = f"({L['wn0']} + {L['j']} * 16 + ({L['lane']} // 16) * 8) >> 3"
            w.line(f"_ldmatrix_x4_trans({L['b_frag']}, {at}{L['j']} * 4, "
                   f"{L['tiles']}, {stage} + A_STAGE + {self.stage_offset('b', b_row, b_chunk)})")

    def mma_step(self, buffer: int, stage: str, step: int) -> None:
        """The warp's MT x NT mma on the A fragments and B buffer ``buffer``, serpentine
        over N (odd rows of tiles run N backwards, so consecutive mma share a B
        fragment); after each row's mma, that row's A fragments for step ``step`` of the
        stage at ``stage`` (they land while the other rows multiply)."""
        w, L = self.w, self.loc
        at = "B_REGS + " if buffer else ""
        with w.indented(f"for {L['i']} in range(MT):"):
            with w.indented(f"for {L['jj']} in range(NT):"):
                w.line(f"{L['j']} = {L['jj']} + ({L['i']} % 2) * (NT - 1 - 2 * {L['jj']})")
                w.line(f"{self.mma}({L['acc']}, ({L['i']} * NT + {L['j']}) * 4, {L['a_frag']}, "
                       f"{L['i']} * 4, {L['b_frag']}, {at}{L['j']} * 2)")
            self.load_a(stage, step)

    def subscript(self, buf, indices) -> str:
        """An access at the kernel's own indices (the output point's batch, m and n; a
        gathered operand's K) indexes with them unsigned: they are never negative, and
        Numba checks a signed index for wraparound (a shift, an and and an add each, in
        every element of the epilogue). The 16-bit kernels only: the TF32 ones (emit_tf32,
        f32 operands) sit at the register limit, and ptxas scheduled 3xTF32's 128 x 64
        into a 20-byte spill with them."""
        own = {id(v) for v in (*self.args, *self.k_vals)} if self.operand != "f32" else set()
        if not any(id(v) in own for v in indices):
            return super().subscript(buf, indices)
        index = ", ".join(f"numba.uint64({self.namer(v)})" if id(v) in own else self.namer(v)
                          for v in indices)
        return f"{self.namer(buf)}[{index}]"

    def staged_accumulator(self) -> str:
        """Half tiles are staged in f32 rows of C_STRIDE (padded): element (i, j)."""
        L = self.loc
        return f"{L['tiles32']}[numba.uint32({L['i']} * C_STRIDE + {L['j']})]"

    def epilogue(self) -> None:
        """Half the tile's rows at a time: the accumulators (value q of mma tile (i, j)
        is row 16 i + lane // 4 + 8 (q // 2), column 8 j + 2 (lane % 4) + q % 2 of the
        warp's part) into shared memory, with constant register indices; then the
        fused ops after the reduction and the store, consecutive threads on
        consecutive N."""
        w, L = self.w, self.loc
        for half in (0, 1):
            w.line(f"# epilogue, {('first', 'second')[half]} half of the tile's rows: the fused "
                   "ops after the reduction")
            w.line("cuda.syncthreads()  # the block is done with what the tiles held")
            w.line("# rows g and g + 8 of each mma tile row (q // 2), each checked once for "
                   "the whole row of the warp's tiles; unsigned offsets (no wraparound)")
            with w.indented(f"for {L['i']} in range(MT):"), \
                    w.indented(f"for {L['q']} in range(2):"):
                w.line(f"{L['row']} = {L['wm0']} + {L['i']} * 16 + {L['lane']} // 4 + "
                       f"8 * {L['q']} - {half} * (BM // 2)")
                with w.indented(f"if 0 <= {L['row']} < BM // 2:"), \
                        w.indented(f"for {L['j']} in range(NT):"), \
                        w.indented(f"for {L['slot']} in range(2):"):
                    w.line(f"{L['tiles32']}[numba.uint32({L['row']} * C_STRIDE + {L['wn0']} + "
                           f"{L['j']} * 8 + 2 * ({L['lane']} % 4) + {L['slot']})] = "
                           f"{L['acc']}[({L['i']} * NT + {L['j']}) * 4 + 2 * {L['q']} + "
                           f"{L['slot']}]")
            w.line("cuda.syncthreads()")
            self.epilogue_half(half)
        w.line("cuda.syncthreads()  # all stores read the tiles before they are refilled")


    def epilogue_half(self, half: int, rows: str = "BM // 2") -> None:
        """The staged rows' outputs: where THREADS is a multiple of BN, each thread keeps
        one column (consecutive threads on consecutive N: coalesced) and steps down the
        rows, so nothing of N is recomputed an element (the generic loop divides each
        element's position by BN: ~70 SASS instructions an element, a fifth of a
        4096^3 block's time with the mma done); else the generic loop."""
        w, L = self.w, self.loc
        stores = [o for o in self.op.body.ops if isinstance(o, StoreOp)]
        offset = f" + {rows}" if half else ""
        with w.indented("if THREADS % BN == 0:  # one column a thread"):
            w.line(f"{L['j']} = {L['tid']} % BN")
            w.line(f"{L['n']} = {L['n0']} + {L['j']}")
            with w.indented(f"if {L['n']} < {L['n_size']}:"), \
                    w.indented(f"for {L['slot']} in range({rows} * BN // THREADS):"):
                w.line(f"{L['i']} = {L['tid']} // BN + {L['slot']} * (THREADS // BN)")
                w.line(f"{L['m']} = {L['m0']}{offset} + {L['i']}")
                with w.indented(f"if {L['m']} < {L['m_size']}:"):
                    self.finish_or_partial(stores)
        with w.indented("else:"):
            super().epilogue_half(half, rows)


def emit_mma_contraction(op, name: str, target: str, helpers: set[str], hw, taken,
                         emitter_class=MmaContractionEmitter, plan: str = ""):
    """The factory's source and the operand sides it may copy 16 bytes at a time (side ->
    the buffer the host must find aligned), as emit_contraction. ``emitter_class``: this
    module's emitter or a subclass (emit_tf32's)."""
    emitter = emitter_class(op, name, target, helpers, hw, taken)
    text = emitter.emit()
    threads = ("_mma_threads" if not emitter.WARP_SKIP else
               f"lambda bm, bn: _mma_threads(bm, bn, {emitter.WARP_SKIP})")
    narrow = f", narrow_tiles={emitter.NARROW_TILES}" if emitter.NARROW_TILES else ""
    text += (f"\n\n{name} = _TiledKernel({factory_name(name)}, {emitter.TILES}, {threads}, "
             f"k_step={emitter.HOST_K_STEP}, {plan}{narrow})\n")
    sides = {side: load.operands[0] for side in ("a", "b")
             if (load := emitter.vector_side(side)) is not None}
    return text, sides


__all__ = ["PAD", "MmaContractionEmitter", "emit_mma_contraction"]
