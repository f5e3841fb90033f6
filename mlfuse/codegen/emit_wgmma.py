"""f16 and bf16 contractions on Hopper's warpgroup MMA (``wgmma.mma_async``; helpers:
ptx_wgmma.py): the tiles of a 16-bit contraction in the module's WGMMA_TILES run this
kernel, the others emit_mma.py's (mma.sync); ``_mma_or_wgmma`` picks by tile.

A block computes a BM x BN tile with BM / 64 warpgroups (128 threads each), warpgroup g
the rows 64 g .. 64 g + 63, all BN columns: per k16 step, BN / WGMMA_N (at most 256)
``wgmma.m64nNk16`` with f32 accumulators (BN / 2 a thread), whose operands the tensor
cores read from shared memory through matrix descriptors. So no fragments pass through
the threads' registers (mma.sync's ldmatrix), and a warpgroup's 64 x BN x 16 product is
one instruction.

**Stages** (STAGE_K = 64: a stage row is 128 bytes, one 128-byte swizzle line): A as BM
rows of 64 K (K-major), B as BN / 64 blocks of 64 columns, each STAGE_K rows of 64 N
(N-major: each operand as stored, no transpose); in both, 16-byte chunk c of row r sits
at chunk c ^ (r % 8) (``stage_offset``), the 128-byte swizzle the descriptors name
(their 1024-byte patterns start on 1024-byte boundaries: the shared memory is aligned
to 1024, every stage, operand and block a multiple of it). Descriptor strides: A's 8-row
groups SBO = 1024 bytes apart (LBO unused); B's 8-row K groups SBO = 1024 apart, its
64-column blocks LBO = STAGE_K * 128 bytes apart. A k16 step moves A's start 32 bytes
along its rows, B's 16 rows (2048 bytes) down. The copies into the stages are
emit_mma's (mma_copies.py: cp.async of 16, 8 or 4 bytes planned once a tile, or a
gather), through this layout.

**The K loop**: tiles 0 .. STAGES - 2 fill their stages first; iteration kt waits for
tile kt (this thread's copies, then ``fence.proxy.async``: the copies visible to the
tensor cores, then the barrier: everyone's), issues its 4 k16 steps of wgmma (one
``wgmma.fence`` before, one commit group after), waits until only that group is in
flight (tile kt - 1's wgmma done in this warpgroup), and after a second barrier (every
warpgroup's) copies tile kt + STAGES - 1 into tile kt - 1's stage. So the wgmma of tile
kt run while the threads copy, and the tensor cores always have the next tile landed.

The epilogue is emit_mma's: wgmma's D fragment is mma.sync's C layout of a 16 x BN warp
tile (warp w of warpgroup g: rows 64 g + 16 w on; ptx_wgmma), so each warp stages its
accumulators as a 16 x BN warp tile (MT = 1, NT = BN / 8) through shared memory, half
the tile's rows at a time, then the fused ops after the reduction and coalesced stores;
split-K's partial sums alike.
"""
from __future__ import annotations

from mlfuse.codegen.contraction import factory_name
from mlfuse.codegen.emit_mma import MmaContractionEmitter, emit_mma_contraction
from mlfuse.codegen.ptx_wgmma import WGMMA_HELPER

STAGE_K = 64  # K values a stage: 128-byte rows of 16-bit values, one swizzle line
ROW_BYTES = 128  # bytes of a stage row, of A (64 K) and of a B block (64 N)
SWIZZLE_BYTES = 1024  # the 128-byte swizzle's pattern: 8 rows of 128 bytes

_LOCALS = ("wg_a", "wr", "desc_a", "desc_b")


class WgmmaContractionEmitter(MmaContractionEmitter):
    """The factory of one warpgroup-MMA contraction kernel (see the module doc)."""

    MOST_STAGES = "WGMMA_STAGES"
    ALIGN = SWIZZLE_BYTES  # the descriptors' swizzle patterns start on 1024-byte boundaries

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, target, helpers, hw, taken)
        self.loc.update({n: self.namer.fresh(n) for n in _LOCALS})
        self.wgmma = WGMMA_HELPER[self.operand]
        helpers.add("_wgmma_intrinsics")

    def factory_name(self) -> str:
        return "_wgmma" + factory_name(self.name)

    def schedule_text(self) -> str:
        return ("Warpgroup MMA (wgmma, Hopper): a block computes a BM x BN tile, a warpgroup "
                "(128 threads) each 64 rows, from STAGES cp.async stages 64 K deep in the "
                "128-byte swizzle its descriptors name; the epilogue runs on the "
                "accumulators, half a tile at a time through shared memory.")

    def warp_constants(self) -> None:
        w = self.w
        w.line("assert BM % 64 == 0 and BN % 64 == 0, 'a wgmma tile is 64-row warpgroups "
               "by 64-column B blocks'")
        w.line("WARP_M, WARP_N = 16, BN  # a warp's rows of its warpgroup's 64: wgmma's D "
               "fragment is mma.sync's C of a 16 x BN warp tile")
        w.line("WARPS_N = 1")
        w.line("THREADS = BM // 64 * 128  # a warpgroup per 64 rows")
        w.line("MT, NT = 1, BN // 8  # the warp tile as 16 x 8 mma tiles (the epilogue's)")
        w.line("WG_N = min(BN, WGMMA_N)  # N of one wgmma")
        w.line("assert BN % WG_N == 0 and WG_N % 64 == 0")

    def stage_constants(self) -> None:
        w = self.w
        w.line("ACC = BN // 2  # a thread's f32 accumulators: its warpgroup's 64 x BN")
        w.line(f"STAGE_K = {STAGE_K}  # K values a stage: rows of {ROW_BYTES} bytes, one "
               "swizzle line")
        w.line("A_STRIDE, B_STRIDE = 64, 64  # 16-bit values a row (B: a row of a 64-column "
               "block)")
        w.line("A_LINE, B_LINE, A_MASK, B_MASK = 1, 1, 7, 7  # chunk c of row r at c ^ (r % 8)")
        w.line("A_STAGE, B_STAGE = BM * STAGE_K, STAGE_K * BN  # 16-bit values")
        w.line("B_BLOCK = STAGE_K * 64  # values of a 64-column block of B")
        w.line(f"A_SBO, B_SBO = {SWIZZLE_BYTES}, {SWIZZLE_BYTES}  # bytes between 8-row groups")
        w.line("A_LBO, B_LBO = 16, B_BLOCK * 2  # bytes: A's unused (swizzled K-major), B's "
               "between 64-column blocks")

    def step_constants(self) -> None:
        self.copy_constants(swizzled=True)

    def stage_offset(self, side: str, row: str, chunk: str) -> str:
        """Chunk ``chunk`` (16 bytes) of row ``row`` in a side's stage: A rows of 64 K; B in
        64-column blocks of STAGE_K rows; chunk c of row r at c ^ (r % 8)."""
        if side == "a":
            return f"{row} * 64 + ((({chunk}) ^ ({row} & 7)) << 3)"
        return (f"(({chunk}) >> 3) * B_BLOCK + {row} * 64 + "
                f"(((({chunk}) & 7) ^ ({row} & 7)) << 3)")

    def fragments(self) -> None:
        """No fragments in registers: the tensor cores read the stages."""

    def tile(self) -> None:
        """The K loop (see the module doc)."""
        w, L = self.w, self.loc
        with w.indented(f"for {L['slot']} in range(ACC):"):
            w.line(f"{L['acc']}[{L['slot']}] = np.float32(0)")
        self.copy_plans()
        w.line("# tiles 0 .. STAGES - 2 into their stages, one commit group each")
        with w.indented(f"for {L['ahead']} in range(STAGES - 1):"):
            self.fetch_stage(L["ahead"], f"{L['ahead']} * STAGE_SIZE")
            w.line("_cp_async_commit()")
        w.line(f"{L['rd']}, {L['wr']} = 0, (STAGES - 1) * STAGE_SIZE  # the stages of tiles kt "
               "and kt - 1")
        w.line(f"{L['wg_a']} = ({L['tid']} // 128) * 64 * STAGE_K  # this warpgroup's rows of A")
        with w.indented(f"for {L['kt']} in range({L['k_tiles']}):"):
            w.line("_cp_async_wait(WAIT)  # this thread's copies of tile kt landed (STAGES - 2 in flight)")
            w.line("_fence_proxy_async()  # ... and are visible to the tensor cores")
            w.line("cuda.syncthreads()  # everyone's")
            w.line("_wgmma_fence()")
            self.multiply()
            w.line("_wgmma_commit()")
            w.line("_wgmma_wait(" + L["acc"] + ", ACC, 1)  # tile kt - 1's wgmma are done "
                   "(this warpgroup's)")
            w.line("cuda.syncthreads()  # every warpgroup's: tile kt - 1's stage is free")
            w.line("# tile kt + STAGES - 1 (zeros past K) into tile kt - 1's stage")
            self.fetch_stage(f"{L['kt']} + STAGES - 1", L["wr"])
            w.line("_cp_async_commit()  # (a group each iteration: the wait counts groups)")
            w.line(f"{L['wr']} = {L['rd']}")
            w.line(f"{L['rd']} = {L['rd']} + STAGE_SIZE if {L['rd']} < (STAGES - 1) * STAGE_SIZE "
                   "else 0")
        w.line(f"_wgmma_wait({L['acc']}, ACC, 0)  # every wgmma done")
        w.line("_cp_async_wait(0)  # and every copy (past K: zeros) before the epilogue reuses "
               "the stages")
        self.epilogue()

    def multiply(self) -> None:
        """Tile kt's STAGE_K // 16 k16 steps, written out: BN // WG_N wgmma each, on this
        warpgroup's rows of A (32 bytes along them a step) and a WG_N-column part of B
        (16 rows down a step)."""
        w, L = self.w, self.loc
        for step in range(STAGE_K // 16):
            w.line(f"{L['desc_a']} = _wgmma_desc({L['tiles']}, {L['rd']} + {L['wg_a']} + "
                   f"{step * 16}, A_LBO, A_SBO)  # k16 step {step}")
            with w.indented(f"for {L['j']} in range(BN // WG_N):"):
                w.line(f"{L['desc_b']} = _wgmma_desc({L['tiles']}, {L['rd']} + A_STAGE + "
                       f"{L['j']} * (WG_N // 64) * B_BLOCK + {step * 16 * 64}, B_LBO, B_SBO)")
                w.line(f"{self.wgmma}({L['acc']}, {L['j']} * (WG_N // 2), {L['desc_a']}, "
                       f"{L['desc_b']}, {L['tiles']}, WG_N)")


def emit_16bit_contraction(op, name: str, target: str, helpers: set[str], hw, taken,
                           plan: str):
    """A 16-bit contraction's factories, mma.sync's and (where the target has wgmma tiles)
    this module's, and its ``_TiledKernel``: the wgmma tiles at their own FMA rate, the
    narrow tiles (copies under 16 bytes) mma.sync's own. Returns (source, vector sides)
    as emit_mma_contraction."""
    from mlfuse.codegen.helpers import mma_geometry
    from mlfuse.codegen.tile_model import wgmma_tile_rates
    if not mma_geometry(target)["wgmma_tiles"]:
        return emit_mma_contraction(op, name, target, helpers, hw, taken, plan=plan)
    mma = MmaContractionEmitter(op, name, target, helpers, hw, taken)
    text = mma.emit()
    sides = {side: load.operands[0] for side in ("a", "b")
             if (load := mma.vector_side(side)) is not None}
    wgmma = WgmmaContractionEmitter(op, name, target, helpers, hw, taken)
    text += "\n\n" + wgmma.emit()
    # (the target's wgmma tiles are the module's WGMMA_TILES)
    rates = wgmma_tile_rates(mma_geometry(target)["wgmma_tiles"])
    text += (f"\n\n{name} = _TiledKernel(_mma_or_wgmma({mma.factory_name()}, "
             f"{wgmma.factory_name()}), MMA16_TILES, _mma16_threads, k_step=MMA_BK, {plan}, "
             f"narrow_tiles=MMA16_NARROW_TILES, tile_rates={rates})\n")
    return text, sides


__all__ = ["WgmmaContractionEmitter", "emit_16bit_contraction"]
