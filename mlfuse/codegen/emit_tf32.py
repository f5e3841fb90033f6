"""Tensor-core kernels for f32 contractions at a lower matmul precision
(mlfuse/matmul_precision.py): ``variant = "mma-tf32x3"`` (3xTF32, precision "high") and
``"mma-tf32"`` (TF32, "medium"), multiplied by ``mma.sync.m16n8k8`` .tf32 with f32
accumulation (helpers: ptx_tf32.py).

The kernel is emit_mma's (block and warp tiles, cp.async stages, the epilogue through
shared memory) with f32 stages: a stage holds STAGE_K = MMA_BK / 2 K values (the same
bytes as a 16-bit stage of MMA_BK), A as BM rows of K padded by 4 values and B as
STAGE_K rows of N padded by 8, so that the fragment reads below are free of bank
conflicts (lane (g, t) reads A at bank 4g + t and B at bank 8t + g). Operands are
copied 16 bytes (4 values) at a time where the host finds them aligned, else gathered
value by value as f32: the stages hold the exact operands.

Each m16n8k8 step a lane reads its fragment values from the stage (A: rows g, g + 8,
columns t, t + 4; B: rows t, t + 4 of column g) and converts them on the way:
TF32 rounds each to 10 mantissa bits (``_tf32_round``); 3xTF32 splits each into a
TF32 high part and the TF32-rounded residual (``_tf32_split``) and accumulates
lo*hi, then hi*lo, then hi*hi into the same f32 accumulators: the small terms first,
each pass over the MT x NT tiles independent (no mma waits on the one before it).
"""
from __future__ import annotations

from mlfuse.codegen.emit_mma import MmaContractionEmitter
from mlfuse.codegen.ptx_tf32 import TF32_HELPER

A_PAD, B_PAD = 4, 8  # f32 values after each row of a stage: conflict-free fragment reads

_LOCALS = ("a_lo", "b_lo", "g", "t", "x", "part")


class Tf32ContractionEmitter(MmaContractionEmitter):
    """The factory of one TF32 or 3xTF32 contraction kernel (see the module doc)."""

    WARP_SKIP = 1  # 64 x 64 warp tiles would spill (3xTF32 holds two fragments a value)
    HOST_K_STEP = "MMA_BK // 2"  # STAGE_K (below) as the host module names it
    TILES = "MMA_TF32_TILES"  # no wide tiles: their 512 threads would not fit the registers

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, target, helpers, hw, taken)
        self.loc.update({n: self.namer.fresh(n) for n in _LOCALS})
        self.split = self.c.variant == "mma-tf32x3"
        self.convert = TF32_HELPER[self.c.variant]
        helpers.add("_tf32_intrinsics")

    def schedule_text(self) -> str:
        how = ("3xTF32: each operand split into a TF32 high part and residual, lo*hi + "
               "hi*lo + hi*hi accumulated" if self.split else "TF32: operands rounded to 10 "
               "mantissa bits")
        return ("Tensor cores (m16n8k8 .tf32), " + how + " in f32: a block computes a BM x BN "
                "tile, each warp a WARP_M x WARP_N part as 16 x 8 mma tiles, from STAGES "
                "cp.async stages of f32 STAGE_K K deep; the epilogue runs on the "
                "accumulators, half a tile at a time through shared memory.")

    def stage_constants(self) -> None:
        w = self.w
        w.line("A_REGS, B_REGS, ACC = MT * 4, NT * 2, MT * NT * 4  # one TF32 value a register")
        w.line("STAGE_K = MMA_BK // 2  # f32 values: the bytes of MMA_BK 16-bit ones")
        w.line(f"A_STRIDE, B_STRIDE = STAGE_K + {A_PAD}, BN + {B_PAD}  # padded rows: "
               "conflict-free fragment reads")
        w.line("A_STAGE, B_STAGE = BM * A_STRIDE, STAGE_K * B_STRIDE  # f32 values")

    def stage_offset(self, side: str, row: str, chunk: str) -> str:
        """Padded rows, not swizzled: the fragment reads are per value, not ldmatrix."""
        return f"{row} * {side.upper()}_STRIDE + ({chunk}) * 4"

    def fragments(self) -> None:
        w, L = self.w, self.loc
        part = "high parts" if self.split else "values"
        w.line(f"{L['a_frag']} = cuda.local.array(A_REGS, numba.uint32)  # TF32 {part}")
        w.line(f"{L['b_frag']} = cuda.local.array(B_REGS, numba.uint32)")
        if self.split:
            w.line(f"{L['a_lo']} = cuda.local.array(A_REGS, numba.uint32)  # TF32 residuals")
            w.line(f"{L['b_lo']} = cuda.local.array(B_REGS, numba.uint32)")
            w.line(f"{L['part']} = cuda.local.array(ACC, numba.float32)  # a stage's sums")

    def multiply(self) -> None:
        """The stage kt's STAGE_K // 8 steps: each warp's fragments, read from the stage
        and converted to TF32, then the MT x NT mma (three passes for 3xTF32)."""
        w, L = self.w, self.loc
        w.line(f"{L['a_base']} = ({L['kt']} % STAGES) * (A_STAGE + B_STAGE)")
        w.line(f"{L['b_base']} = {L['a_base']} + A_STAGE")
        w.line(f"{L['g']}, {L['t']} = {L['lane']} // 4, {L['lane']} % 4  # the ISA's groupID, "
               "threadID_in_group")
        sums = L["acc"]
        if self.split:
            sums = L["part"]
            w.line("# split accumulator: the stage's products sum on the tensor cores from zero "
                   "(each mma truncates), then one FADD (round to nearest) adds them to acc")
            with w.indented(f"for {L['slot']} in range(ACC):"):
                w.line(f"{L['part']}[{L['slot']}] = np.float32(0)")
        with w.indented(f"for {L['kk']} in range(0, STAGE_K, 8):"):
            with w.indented(f"for {L['i']} in range(MT):"):
                with w.indented(f"for {L['q']} in range(4):  # rows g, g + 8; columns t, t + 4"):
                    self.fragment_value(
                        L["a_frag"], L["a_lo"], f"{L['i']} * 4 + {L['q']}",
                        f"{L['a_base']} + ({L['wm0']} + {L['i']} * 16 + {L['g']} + 8 * "
                        f"({L['q']} % 2)) * A_STRIDE + {L['kk']} + {L['t']} + 4 * ({L['q']} // 2)")
            with w.indented(f"for {L['j']} in range(NT):"):
                with w.indented(f"for {L['q']} in range(2):  # rows t, t + 4 of column g"):
                    self.fragment_value(
                        L["b_frag"], L["b_lo"], f"{L['j']} * 2 + {L['q']}",
                        f"{L['b_base']} + ({L['kk']} + {L['t']} + 4 * {L['q']}) * B_STRIDE + "
                        f"{L['wn0']} + {L['j']} * 8 + {L['g']}")
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
        if self.split:
            with w.indented(f"for {L['slot']} in range(ACC):"):
                w.line(f"{L['acc']}[{L['slot']}] += {L['part']}[{L['slot']}]")

    def fragment_value(self, high: str, low: str, slot: str, at: str) -> None:
        """One fragment register (and its residual's, for 3xTF32) from the stage at ``at``."""
        w, L = self.w, self.loc
        w.line(f"{L['x']} = {L['tiles']}[{at}]")
        if self.split:
            w.line(f"{high}[{slot}], {low}[{slot}] = _tf32_split({L['x']})")
        else:
            w.line(f"{high}[{slot}] = _tf32_round({L['x']})")



__all__ = ["Tf32ContractionEmitter"]
