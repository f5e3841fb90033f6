"""Tensor-core kernels for f32 contractions at a lower matmul precision
(mlfuse/matmul_precision.py): ``variant = "mma-tf32x3"`` (3xTF32, precision "high") and
``"mma-tf32"`` (TF32, "medium"), multiplied by ``mma.sync.m16n8k8`` .tf32 with f32
accumulation (helpers: ptx_tf32.py).

The kernel is emit_mma's (block and warp tiles, cp.async stages, the epilogue through
shared memory) with f32 stages: a stage holds STAGE_K = MMA_BK / 2 K values (the same
bytes as a 16-bit stage of MMA_BK), A as BM rows of K (unpadded: the conversion reads
16-byte chunks of them) and B as STAGE_K rows of N padded by 8 (the conversion's reads
below are then free of bank conflicts). Operands are copied by cp.async (16, 8 or 4 bytes) or gathered value by
value as f32: the stages hold the exact operands.

**Converted once per stage.** When stage kt has landed, the block converts it once into
the converted area after the stages (CV_*): TF32 rounds each value to 10 mantissa bits
(``_tf32_round``); 3xTF32 splits each into a TF32 high part and the TF32-rounded
residual (``_tf32_split``). A goes in as rows of K, B transposed (rows of N, K
contiguous), high parts then residuals, each row's 16-byte chunks swizzled (chunk c of
row r at c ^ ((r // CV_LINE) & CV_MASK)), four values a thread in one ``st.shared.v4``.
Then the warps read their fragments with ``ldmatrix`` (a 32-bit value is a pair of
16-bit ones: an 8 x 8 b16 matrix is 8 rows of 4 f32, and lane l receives row l // 4,
value l % 4: the m16n8k8 .tf32 fragment of A, and of B from its transposed rows),
instead of reading and converting each value at each use. The K loop runs two stages an
iteration, and the next stage's conversion sits among the mma (``tile``, ``multiply``).

**Split accumulator** (3xTF32): two stages' products (lo*hi, hi*lo, then hi*hi per k8
step) sum from zero on the tensor cores, whose mma truncates its sum, and that sum is
then added to the f32 accumulator by an FADD, which rounds to nearest. One
accumulator on the tensor cores for the whole K drifts with K (the truncations all go
one way): mlfuse/tools/tf32_emulation.py models both, docs/perf-notes.md has the numbers.
"""
from __future__ import annotations

from mlfuse.codegen.emit_mma import MmaContractionEmitter
from mlfuse.codegen.ptx_tf32 import TF32_HELPER

# f32 values after each row of a stage: A's conversion reads 16-byte chunks of whole rows
# (unpadded: 8 threads a phase read 128 consecutive bytes); B's reads columns
A_PAD, B_PAD = 0, 8

_LOCALS = ("a_lo", "b_lo", "part", "cv", "cv16", "src", "b_row", "b_k", "cvat", "cvto",
           *(f"{v}{q}" for v in ("x", "h", "l") for q in range(4)))


class Tf32ContractionEmitter(MmaContractionEmitter):
    """The factory of one TF32 or 3xTF32 contraction kernel (see the module doc)."""

    WARP_SKIP = 1  # 64 x 64 warp tiles would spill (3xTF32 holds two fragments a value)
    HOST_K_STEP = "MMA_BK // 2"  # STAGE_K (below) as the host module names it
    TILES = "MMA_TF32_TILES"  # no wide tiles: their 512 threads would not fit the registers
    EXTRA_WORDS = "2 * CV_WORDS"  # two converted areas, after the stages
    NARROW_TILES = "MMA_TF32_NARROW_TILES"  # 128 x 128 spills with 4x the copies a thread
    GATHER = 2  # 4 spills at 64 x 64 (ptxas)

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, target, helpers, hw, taken)
        self.loc.update({n: self.namer.fresh(n) for n in _LOCALS})
        self.split = self.c.variant == "mma-tf32x3"
        self.convert = TF32_HELPER[self.c.variant]
        helpers.add("_tf32_intrinsics")

    def schedule_text(self) -> str:
        how = ("3xTF32: each operand split into a TF32 high part and residual, lo*hi + "
               "hi*lo + hi*hi summed per stage on the tensor cores, then added in f32"
               if self.split else "TF32: operands rounded to 10 mantissa bits, f32 sums")
        return ("Tensor cores (m16n8k8 .tf32), " + how + ": a block computes a BM x BN "
                "tile, each warp a WARP_M x WARP_N part as 16 x 8 mma tiles, from STAGES "
                "cp.async stages of f32 STAGE_K K deep, each converted once (ldmatrix "
                "fragments); the epilogue runs on the accumulators, half a tile at a time "
                "through shared memory.")

    def stage_constants(self) -> None:
        w = self.w
        w.line("A_REGS, B_REGS, ACC = MT * 4, NT * 2, MT * NT * 4  # one TF32 value a register")
        w.line("assert NT % 2 == 0, 'a warp tile N of 16s: ldmatrix.x4 loads two n8 B tiles'")
        w.line("STAGE_K = MMA_BK // 2  # f32 values: the bytes of MMA_BK 16-bit ones")
        w.line(f"A_STRIDE, B_STRIDE = STAGE_K + {A_PAD}, BN + {B_PAD}  # padded rows: "
               "conflict-free conversion reads")
        w.line("A_STAGE, B_STAGE = BM * A_STRIDE, STAGE_K * B_STRIDE  # f32 values")
        parts = 2 if self.split else 1
        w.line("# the converted stage: A's rows of K, B's rows of N (transposed), "
               + ("high parts then residuals" if self.split else "TF32 values"))
        w.line("CV_A, CV_B = BM * STAGE_K, BN * STAGE_K  # words of one part")
        w.line(f"CV_WORDS = {parts} * (CV_A + CV_B)  # a converted area (two: one converts "
               "while the other multiplies)")
        w.line("CV_LINE, CV_MASK = max(1, 32 // STAGE_K), min(8, STAGE_K // 4) - 1  # swizzle")

    def step_constants(self) -> None:
        """(The stage-at-a-time K loop below takes any STAGE_K.) Copy slots as
        emit_mma's, in padded rows (no swizzle)."""
        self.w.line("CV_BASE = STAGES * STAGE_SIZE  # the first converted area, after the stages")
        self.w.line(f"assert STAGE_K == {self.k_steps()} * 8, 'the multiply is written for "
                    f"{self.k_steps()} k8 steps a stage'")
        self.copy_constants(swizzled=False)
        self.w.line("# the next stage's conversion before the fragment loads, not among the mma, "
                    "where copies under 16 bytes (up to 4x the copies, their positions in "
                    "registers) leave too few registers: ptxas spilled 64 x 64 (see multiply)")
        self.w.line("CONVERT_EARLY = A_VALUES < 4 or B_VALUES < 4")

    def tile(self) -> None:
        """The K loop, pipelined a stage deep and written out two stages an iteration:
        the stages first fill with tiles 0 .. STAGES - 1 and tile 0 is converted; the
        iteration for tile kt waits for tile kt + 1, then (one barrier) copies tile
        kt + STAGES into tile kt's raw stage (converted the iteration before), converts
        tile kt + 1 into the other converted area and multiplies tile kt from its own:
        one basic block, which ptxas interleaves (``multiply``). Two stages an
        iteration: each its own converted area (constant offsets) and, for 3xTF32, the
        split accumulator added to acc once per two stages (an odd count of stages runs
        one more, of zeros past K: copies past the block's share of K fill zeros)."""
        w, L = self.w, self.loc
        with w.indented(f"for {L['slot']} in range(ACC):"):
            w.line(f"{L['acc']}[{L['slot']}] = np.float32(0)")
        self.copy_plans()
        w.line("# tiles 0 .. STAGES - 1 into their stages, one commit group each")
        with w.indented(f"for {L['ahead']} in range(STAGES):"):
            self.fetch_stage(L["ahead"], f"{L['ahead']} * STAGE_SIZE")
            w.line("_cp_async_commit()")
        w.line("_cp_async_wait(FILLED)  # this thread's copies of tile 0 landed")
        w.line("cuda.syncthreads()  # and everyone's")
        w.line(f"{L['rd']} = 0  # the raw stage of tile kt")
        self.landed("0", "CV_BASE")
        self.fragment_bases()
        with w.indented(f"for {L['kt']} in range(0, {L['k_tiles']}, 2):  # tiles kt, kt + 1"):
            bases = [L[f"f{side}{step}"] for step in range(self.k_steps()) for side in "ab"]
            w.line(f"{', '.join(bases)} = {', '.join(f'_kept({b})' for b in bases)}"
                   "  # loop-variant: each fragment's row an immediate from them")
            for parity in (0, 1):
                self.iteration(parity)
        w.line("_cp_async_wait(0)  # the copies past K landed before the epilogue reuses "
               "their shared memory")
        self.epilogue()

    def fragment_bases(self) -> None:
        """Each lane's ldmatrix rows in the first converted area, per k8 step and operand
        (uint32 words): a fragment's row is its base + a constant (the area, the part, 16
        rows a tile: the swizzle of a row, (row // CV_LINE) & CV_MASK, repeats every 8
        rows). ``_kept`` each iteration keeps them loop-variant: LLVM hoisted every
        fragment's address out of the loop (48 registers at 128 x 128) where ptxas folds
        base + constant into the ldmatrix."""
        w, L = self.w, self.loc
        w.line(f"{L['row']} = {L['lane']} % 16  # the A row this lane addresses")
        w.line(f"{L['q']} = ({L['lane']} // 16) * 4  # and its K offset")
        w.line(f"{L['b_row']} = ({L['lane']} // 16) * 8 + {L['lane']} % 8  # the B row (an N)")
        w.line(f"{L['b_k']} = (({L['lane']} // 8) % 2) * 4  # and its K offset")
        for step in range(self.k_steps()):
            for side in "ab":
                L[f"f{side}{step}"] = self.namer.fresh(f"f{side}{step}")
            a_at = self.converted_offset(f"({L['wm0']} + {L['row']})",
                                         f"({8 * step} + {L['q']}) >> 2")
            b_at = self.converted_offset(f"({L['wn0']} + {L['b_row']})",
                                         f"({8 * step} + {L['b_k']}) >> 2")
            w.line(f"{L[f'fa{step}']} = numba.uint32(CV_BASE + {a_at})  # k8 step {step}")
            w.line(f"{L[f'fb{step}']} = numba.uint32(CV_BASE + CV_A + {b_at})")

    def iteration(self, parity: int) -> None:
        """Tile kt + ``parity``: it multiplies from converted area ``parity`` while tile
        kt + parity + 1 converts into the other (see ``tile``)."""
        w, L = self.w, self.loc
        kt = f"{L['kt']} + 1" if parity else L["kt"]
        w.line(f"# tile {kt}: multiplied from converted area {parity}, tile {kt} + 1 converted "
               f"into area {1 - parity}")
        w.line("_cp_async_wait(WAIT)  # this thread's copies of the next tile landed")
        w.line("cuda.syncthreads()  # everyone's; this tile converted; the other converted "
               "area and this tile's raw stage read by every warp")
        w.line(f"{L['nxt']} = {L['rd']} + STAGE_SIZE if {L['rd']} < (STAGES - 1) * "
               "STAGE_SIZE else 0  # the next tile's raw stage")
        w.line(f"# tile {kt} + STAGES (zeros past K) into this tile's raw stage")
        self.fetch_stage(f"{kt} + STAGES", L["rd"])
        w.line("_cp_async_commit()  # (a group each stage: the wait counts groups)")
        self.multiply(f"{parity} * CV_WORDS",
                      lambda sides: self.landed(L["nxt"], f"CV_BASE + {1 - parity} * CV_WORDS", sides),
                      first=parity == 0, last=parity == 1)
        w.line(f"{L['rd']} = {L['nxt']}")

    def k_steps(self) -> int:
        """The k8 mma steps of a stage: STAGE_K (MMA_BK // 2) // 8, written out."""
        from mlfuse.codegen.helpers import mma_geometry
        return mma_geometry(self.target)["bk"] // 16

    def stage_offset(self, side: str, row: str, chunk: str) -> str:
        """Padded rows, not swizzled: the stage is read by the conversion, value by value."""
        return f"{row} * {side.upper()}_STRIDE + ({chunk}) * 4"

    def converted_offset(self, row: str, chunk: str) -> str:
        """The offset (words) in a part of the converted area of 16-byte chunk ``chunk``
        of row ``row`` (STAGE_K words a row), swizzled."""
        return f"{row} * STAGE_K + ((({chunk}) ^ (({row} // CV_LINE) & CV_MASK)) << 2)"

    def fragments(self) -> None:
        w, L = self.w, self.loc
        part = "high parts" if self.split else "values"
        w.line(f"{L['cv']} = {L['tiles32']}.view(np.uint32)  # the converted stage's TF32 words")
        w.line(f"{L['cv16']} = {L['tiles32']}.view(np.uint16)  # the same, as ldmatrix reads it")
        w.line(f"{L['a_frag']} = cuda.local.array(A_REGS, numba.uint32)  # TF32 {part}")
        w.line(f"{L['b_frag']} = cuda.local.array(B_REGS, numba.uint32)")
        if self.split:
            w.line(f"{L['a_lo']} = cuda.local.array(A_REGS, numba.uint32)  # TF32 residuals")
            w.line(f"{L['b_lo']} = cuda.local.array(B_REGS, numba.uint32)")
            w.line(f"{L['part']} = cuda.local.array(ACC, numba.float32)  # a stage's sums")

    def landed(self, stage: str, area: str, sides: str = "ab") -> None:
        """The raw stage at ``stage`` converted once into the converted area at ``area``:
        A chunk by chunk (4 K values of a row: one 16-byte load; 8 consecutive threads
        read 128 consecutive bytes of unpadded rows, no bank conflict), B chunk by chunk
        of its transpose (4 K values of a column, consecutive threads on consecutive
        columns). ``sides``: the operands converted here ("a", "b" or both)."""
        w, L = self.w, self.loc
        xs = [L[f"x{q}"] for q in range(4)]
        w.line(f"# convert a stage's {' and '.join(sides.upper())} once: {self.convert} of each "
               "value, into a converted area")
        w.line(f"{L['src']}, {L['cvto']} = {stage}, {area}")
        if "a" in sides:
            self.landed_a(xs)
        if "b" in sides:
            self.landed_b(xs)

    def landed_a(self, xs: list[str]) -> None:
        w, L = self.w, self.loc
        with self.thread_share("BM * STAGE_K // 4", "-(-BM * STAGE_K // 4 // THREADS)"):
            w.line(f"{L['i']}, {L['j']} = {L['e']} // (STAGE_K // 4), {L['e']} % (STAGE_K // 4)"
                   "  # row m, chunk of K")
            at = f"{L['src']} + {L['i']} * A_STRIDE + {L['j']} * 4"
            w.line(f"{', '.join(xs)} = _ld_shared_v4({L['tiles']}, numba.uint32({at}))"
                   "  # (unsigned: no negative-index wraparound)")
            self.store_converted(xs, L["cvto"], L["i"], L["j"])

    def landed_b(self, xs: list[str]) -> None:
        w, L = self.w, self.loc
        with self.thread_share("BN * STAGE_K // 4", "-(-BN * STAGE_K // 4 // THREADS)"):
            w.line(f"{L['i']}, {L['j']} = {L['e']} % BN, {L['e']} // BN  # column n, chunk of K")
            w.line(f"{L['e']} = numba.uint32({L['src']} + A_STAGE + {L['j']} * 4 * B_STRIDE + "
                   f"{L['i']})  # the column's first value")
            for q, x in enumerate(xs):  # 32-bit addresses: the rows an immediate apart
                w.line(f"{x} = _ld_shared_word({L['tiles']}, {L['e']} + "
                       f"numba.uint32({q} * B_STRIDE))")
            self.store_converted(xs, f"{L['cvto']} + CV_A", L["i"], L["j"])

    def store_converted(self, xs: list[str], part: str, row: str, chunk: str) -> None:
        """The four values ``xs`` converted, into row ``row``'s chunk ``chunk`` of the
        part at ``part`` (A: the area, B: CV_A on), and their residuals one part on."""
        w, L = self.w, self.loc
        at = f"{part} + {self.converted_offset(row, chunk)}"
        if self.split:
            his, los = [L[f"h{q}"] for q in range(4)], [L[f"l{q}"] for q in range(4)]
            for x, hi, lo in zip(xs, his, los):
                w.line(f"{hi}, {lo} = _tf32_split({x})")
            w.line(f"_st_shared_v4({L['cv']}, {at}, {', '.join(his)})")
            w.line(f"_st_shared_v4({L['cv']}, {at} + CV_A + CV_B, {', '.join(los)})")
        else:
            values = ", ".join(f"_tf32_round({x})" for x in xs)
            w.line(f"_st_shared_v4({L['cv']}, {at}, {values})")

    def multiply(self, area: str, convert, first: bool, last: bool) -> None:
        """A converted stage's STAGE_K // 8 steps: each warp's fragments by ldmatrix from
        the converted area at ``area`` (A: lane l gives row l % 16, K from (l // 16) * 4;
        B: row (l // 16) * 8 + l % 8 of N, K from ((l // 8) % 2) * 4: two n8 tiles a
        load), then the MT x NT mma (three passes for 3xTF32, into the split sums).
        ``convert(sides)`` writes the next stage's conversion between a step's fragment
        loads and its mma (A's after the first step's, B's after the second's: half the
        conversion's registers live beside the fragments, 128 x 64 spilled with all of
        it after the first): ptxas keeps shared-memory accesses in order, so placed
        before the loads (as it was) the conversion's loads and stores all preceded the
        first mma, and the tensor pipe idled while every warp converted; here the mma,
        which wait on registers only, can issue among them. 3xTF32: the
        split sums start from zero at the ``first`` of two stages and are added to acc
        after the ``last``."""
        w, L = self.w, self.loc
        sums = L["acc"]
        if self.split:
            sums = L["part"]
        if self.split and first:
            w.line("# split accumulator: two stages' products sum from zero on the tensor cores "
                   "(each mma truncates), then one FADD (round to nearest) adds them to acc")
            with w.indented(f"for {L['slot']} in range(ACC):"):
                w.line(f"{L['part']}[{L['slot']}] = np.float32(0)")
        parts = [(L["a_frag"], L["b_frag"], "")]
        if self.split:
            parts.append((L["a_lo"], L["b_lo"], "CV_A + CV_B + "))
        # the k8 steps written out (constant K offsets: one basic block with the
        # conversion of the next stage, which ptxas interleaves with the mma)
        for step in range(self.k_steps()):
            w.line(f"# k8 step {step}")
            if step == 0:
                with w.indented("if CONVERT_EARLY:  # copies under 16 bytes: see step_constants"):
                    convert("ab")
            for a, b, part in parts:
                with w.indented(f"for {L['i']} in range(MT):"):
                    w.line(f"_ldmatrix_x4_words({a}, {L['i']} * 4, {L['cv']}, {L[f'fa{step}']} + "
                           f"numba.uint32({area} + {part}{L['i']} * 16 * STAGE_K))")
                with w.indented(f"for {L['j']} in range(NT // 2):"):
                    w.line(f"_ldmatrix_x4_words({b}, {L['j']} * 4, {L['cv']}, {L[f'fb{step}']} + "
                           f"numba.uint32({area} + {part}{L['j']} * 16 * STAGE_K))")
            if step < 2:  # A after the first step's loads, B after the second's (or both)
                with w.indented("if not CONVERT_EARLY:"):
                    convert("a" if step == 0 and self.k_steps() > 1 else "b" if step else "ab")
            passes = ([(L["a_lo"], L["b_frag"]), (L["a_frag"], L["b_lo"]),
                       (L["a_frag"], L["b_frag"])] if self.split else [(L["a_frag"], L["b_frag"])])
            if self.split:
                w.line("# small terms first: lo*hi, hi*lo, then hi*hi (lo*lo is below f32's "
                       "rounding)")
            for a, b in passes:
                with w.indented(f"for {L['i']} in range(MT):"):
                    with w.indented(f"for {L['j']} in range(NT):"):
                        w.line(f"_mma_tf32({sums}, ({L['i']} * NT + {L['j']}) * 4, {a}, "
                               f"{L['i']} * 4, {b}, {L['j']} * 2)")
        if self.split and last:
            with w.indented(f"for {L['slot']} in range(ACC):"):
                w.line(f"{L['acc']}[{L['slot']}] += {L['part']}[{L['slot']}]")


__all__ = ["Tf32ContractionEmitter"]
