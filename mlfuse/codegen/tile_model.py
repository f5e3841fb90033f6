"""The model that picks a contraction's tile shape and K split for the sizes of a call.

A tiled contraction (contraction.py, emit_mma.py) runs a BM x BN tile of outputs per
block; with split-K, ``splits`` blocks share each tile, each summing a share of K (a
whole number of K steps) into a workspace, and a second kernel adds the shares in order
and runs the epilogue (split_k.py). The host asks ``_contraction_plan`` for
(BM, BN, splits) at each call unless a search on the device (``mlfuse bench --tune``,
mlfuse/tools/tuning.py) left a choice for those sizes. ``mlfuse explain`` prints the
same plan with the numbers behind it.

A SIMT tile's threads come from ``_simt_shape``: each thread computes TM x TN outputs,
the largest of 8 x 8, 8 x 4, 4 x 8 and 4 x 4 that still gives the block SIMT_THREADS
(256) threads, so a 64 x 64 tile runs 256 threads of 4 x 4 rather than 64 of 8 x 8 (2
warps: an SM held 6 warps of them, 8% occupancy, 9 TFLOP/s on resnet18's convs). The
same function says the K values of a step (BK: 8 for 8 x 8, else 16, so that a step
keeps 256 or more products per thread against its loads and barrier) and the blocks per
SM the kernel's launch bounds ask (which caps its registers).

The estimate of one choice, in microseconds, is the largest of three bounds, plus a
launch when K is split:

- **latency**: a block's K loop is a chain of steps, each waiting on its operands'
  global loads (double-buffered: about one load latency, ``step_us``, a step when the SM
  has nothing else to run). Blocks resident on an SM together overlap: SIMT tiles as
  their launch bounds ask (``_simt_shape``), tensor-core tiles 32768 // (BM * BN)
  blocks. So: waves of resident blocks on the busiest SM x steps of a share x ``step_us``.
  This is the bound that kept decode (M = 32) slow: 32 blocks, one 4096-long K loop each.
- **compute**: the busiest SM's FMAs (ceil(blocks / SMs) blocks of BM * BN * share)
  at ``fma_per_us``, times 1 + 8 * (BM + BN) / (BM * BN): a tile's operand values cost
  about 8 FMAs each to bring in (global load, shared store, barrier), which is what
  makes larger tiles faster when the GPU is full. The rate needs warps: with fewer than
  FULL_WARPS (16) resident on the SM it falls, ``_warp_share``: as (warps / 16) ** 0.3
  down to 8 warps (one 256-thread block an SM ran 128 x 64 tiles at 0.7-0.8 of two
  blocks' rate, not half), then as the cube of warps / 8 (under two warps a scheduler
  nothing hides a shared-memory load: resnet18's first convs, once 64-thread blocks
  that left an SM 6 warps, ran at about a third of the rate). A SIMT thread tile smaller
  than 8 x 8 issues more instructions per FMA (its fragment reads and its share of a
  step's loads, stores, barrier and loop, about 200 instructions a step):
  ``_simt_overhead``, relative to 8 x 8 with BK 8.
- **memory**: the operands read once and the output written once, at ``bytes_per_us``.

A conv's operand gathered through im2col index math (any operand that is not one plain
load: ``gather``, the SASS instructions a gathered value costs, ``GATHER_INSTRUCTIONS``)
adds gather / BM instructions per FMA for a gathered B (gather / BN for A): a step
gathers BN x BK values of B for BM x BN x BK FMAs, whatever the thread tile.

With split-K, the partial sums are written by the first kernel (shares x M x N x 4 bytes
instead of the output, in its memory bound) and the second kernel comes on top, after
the first: its launch (``launch_us``) and its reads of every share plus its store at
``finish_bytes_per_us`` (0.5e6). The finish kernels alone reached 0.9-1.2 TB/s on the
H100 (PROFILE2.md, resnet18); 0.5 TB/s also prices what the split costs the first
kernel (its shares' stores, its blocks' shorter K loops filling and draining the
pipeline) and the gap between the kernels: at 1 TB/s the model split 256 x 4096 x 1024
in two (101 us measured; unsplit 91 us) and the 3 x 3 convs at 256-512 channels onto
128 x 128 tiles 4-16 ways (1.2-1.5x the best).

Splits are tried in powers of two up to the kernel's ``max_split`` (its ``split_k``
attribute: the K extent over MIN_SPLIT_K, dialects/contraction.py), each share rounded up to whole K steps (empty
shares are never launched). The cheapest choice wins; ties go to fewer splits, then to
the least compute (less work wasted past the edges). The rates are H100 numbers, the SIMT ones fitted to
``benchmarks/probe_simt.py --splits=1,2,4,8,16``, which times every tile and split on
eleven shapes (matmuls from decode to 4096^3, resnet18's 3 x 3 convs, the ONNX MLP's
layers): the model's pick is the fastest measured, or within 1%, on all eleven
(docs/perf-notes.md). ``fma_per_us`` was calibrated on the SIMT kernel's 4096^3 time (4.16 ms), ``step_us`` on
decode's (0.62 ms for 512 steps alone on an SM), ``bytes_per_us`` the copy bandwidth.

The functions below are copied verbatim into every generated module that has a
contraction (``source()``), so the module stays standalone and explain and the host
run the same code.
"""
from __future__ import annotations

import inspect

# FMAs per microsecond per SM that each kind of tiled kernel reaches when the GPU is full:
# SIMT f32 calibrated on the 4096^3 matmul (4.16 ms: 1.4e5, 55% of the 2.5e5 peak); f64
# at half that (the H100's f64 rate); tensor cores (mma.sync, f16/bf16) calibrated on
# f16 4096^3 (0.733 ms: 0.71e6; its 128 x 256 now takes 0.378 ms, 1.55e6, but at that rate
# the model's latency bound, which counts a wgmma tile's 64-deep stages as two 32-deep
# K steps, hands 256x4096x1024 from wgmma's 128 x 128 (measured 1.37x cuBLAS) to
# mma.sync's 128 x 64: kept until the latency bound takes each kernel's own K step);
# 3xTF32 on its 4096^3 (4.64 ms: 1.1e5), TF32 three times that (one mma pass, not three:
# an estimate).
# wgmma (warpgroup MMA, Hopper, emit_wgmma.py) alike, per tile (WGMMA_TILE_RATES: f16
# 4096^3 at 128 x 256 in 0.246 ms, at 128 x 128 in 0.302 ms: 8 blocks an SM x 1.125);
# "wgmma" is the rate of a wgmma tile not measured.
FMA_PER_US = {"simt": 1.4e5, "simt-f64": 0.7e5, "mma": 0.71e6, "mma-tf32x3": 1.1e5,
              "mma-tf32": 3.3e5, "wgmma": 2.0e6}
# 128 x 128 reads 1.5x the shared memory per FMA of 128 x 256 (each warpgroup's wgmma
# read all of B's stage): its rate is lower though two of its blocks fit an SM
WGMMA_TILE_RATES = {(128, 256): 2.4e6, (128, 128): 2.0e6}
# The exposed latency of one K step: SIMT kernels double-buffer (one step's loads in
# flight: about a global load's latency a step), tensor-core kernels keep STAGES - 1 = 2
# stages in flight (half that).
STEP_US = {"simt": 0.7, "simt-f64": 0.7, "mma": 0.35, "mma-tf32x3": 0.35, "mma-tf32": 0.35,
           "wgmma": 0.35}
# SASS instructions a gathered operand value costs a SIMT tile's K step (conv's im2col:
# the tap's indices counted up, padding checks, the flat offset; the pixel's part once per
# tile: codegen/gather.py): resnet18's 3x3 conv at 64 x 128 runs 869 instructions a K step
# against the matmul's 674, for 8 gathered values a thread (1198 before gather.py: 65)
GATHER_INSTRUCTIONS = 24
SIMT_THREADS = 256  # a SIMT block's threads where its tile allows (a generated module
                    # sets its own: 4 under the simulator, which runs threads in Python)
FULL_WARPS = 16  # warps an SM needs resident for the FMA rate above (8 per block x 2)


def wgmma_tile_rates(tiles) -> dict:
    """(BM, BN) -> FMA rate of each wgmma tile of ``tiles`` (a _TiledKernel's
    ``tile_rates``)."""
    return {tuple(t): WGMMA_TILE_RATES.get(tuple(t), FMA_PER_US["wgmma"]) for t in tiles}


def _simt_shape(bm, bn):
    """(TM, TN, BK, BLOCKS) of a SIMT contraction's BM x BN tile: a thread's TM x TN
    outputs, the K values a step takes and the blocks per SM its launch bounds ask
    (registers capped at 65536 / (threads * BLOCKS)). See the module doc."""
    outputs = max(16, bm * bn // SIMT_THREADS)
    tm = 8 if outputs >= 64 or (outputs >= 32 and bm >= bn) else 4
    tn = 8 if outputs >= 64 or (outputs >= 32 and bm < bn) else 4
    threads = (bm // tm) * (bn // tn)
    # 128 registers a thread: 64 accumulators and their fragments fit without spills, and
    # so does a conv's gather beside 16 (80 would spill it; a matmul's 4 x 4 threads use
    # about 80, so more of its blocks are resident than asked)
    return tm, tn, 8 if tm * tn == 64 else 16, max(1, 65536 // (threads * 128))


def _warp_share(warps):
    """The share of a SIMT kernel's full FMA rate that ``warps`` resident on an SM reach
    (FULL_WARPS or more: all of it). See the module doc."""
    if warps >= 8:
        return min(1.0, (warps / FULL_WARPS) ** 0.3)
    return (8 / FULL_WARPS) ** 0.3 * (max(1, warps) / 8) ** 3


def _simt_overhead(tm, tn, bk, gather=(0, 0), tile=(128, 128)):
    """Instructions a SIMT thread tile issues per FMA, relative to 8 x 8 with BK 8: its
    16-byte fragment reads ((TM + TN) / 4 per TM * TN FMAs), its share of a step's
    loads, stores, barrier and loop (about 200 instructions per TM * TN * BK FMAs) and
    the gathers: ``gather`` (A, B) instructions per gathered value, one value of B per BM
    FMAs and one of A per BN of the BM x BN ``tile``."""
    def per_fma(m, n, k):
        return 1 + (m + n) / (4 * m * n) + 200 / (m * n * k)
    extra = gather[0] / tile[1] + gather[1] / tile[0]
    return (per_fma(tm, tn, bk) + extra) / per_fma(8, 8, 8)


def _contraction_plan(tiles, m_size, n_size, k_size, batch_size, sm_count, max_split=1,
                      k_step=8, fma_per_us=1.4e5, value_bytes=4, step_us=0.7,
                      bytes_per_us=2.8e6, launch_us=3.0, shape=None, gather=(0, 0),
                      finish_bytes_per_us=0.5e6, tile_rates=None):
    """((BM, BN, splits), estimated us, why) for a contraction of m_size x n_size outputs
    per batch over k_size: the cheapest tile of ``tiles`` and power-of-two split of K up
    to ``max_split`` by the model of mlfuse/codegen/tile_model.py. ``shape``: a SIMT
    kernel's ``_simt_shape`` (None: a tensor-core kernel: 32768 // (BM * BN) blocks an
    SM, K steps of ``k_step``, the rate as calibrated whatever its warps); ``gather``:
    the SASS instructions a gathered value of A and of B costs (0: a plain load);
    ``tile_rates``: the FMA rate of the tiles another kernel runs ((BM, BN) -> FMAs per us
    per SM: a 16-bit contraction's wgmma tiles), ``fma_per_us`` for the rest."""
    best, best_key, why = None, None, ""
    k_size = max(k_size, 1)
    operand_bytes = (m_size + n_size) * k_size * batch_size * value_bytes
    output_bytes = m_size * n_size * batch_size * 4
    for bm, bn in tiles:
        tile_count = -(-m_size // bm) * -(-n_size // bn) * batch_size
        threads, resident, step, overhead = 0, max(1, 32768 // (bm * bn)), k_step, 1
        if shape is not None:
            tm, tn, step, resident = shape(bm, bn)
            threads = bm * bn // (tm * tn)
            overhead = _simt_overhead(tm, tn, step, gather, (bm, bn))
        splits = 1
        while splits <= max(1, max_split):
            share = -(-k_size // splits)
            share = -(-share // k_step) * k_step  # whole K steps
            shares = -(-k_size // share)  # those that hold some K
            per_sm = -(-tile_count * shares // sm_count)
            latency = -(-per_sm // resident) * -(-share // step) * step_us
            warps = min(per_sm, resident) * threads // 32  # on the busiest SM at once
            rate = (tile_rates or {}).get((bm, bn), fma_per_us) * (
                _warp_share(warps) if threads else 1)
            compute = (per_sm * bm * bn * share / rate * (1 + 8 * (bm + bn) / (bm * bn))
                       * overhead)
            # the first kernel writes every share's partial sums (or the output once)
            memory = (operand_bytes + shares * output_bytes) / bytes_per_us
            # the second kernel comes on top (it starts when the first is done): its
            # launch, its reads of the shares and its store, at the rate it reaches
            split_us = ((shares + 1) * output_bytes / finish_bytes_per_us + launch_us
                        if shares > 1 else 0)
            us = max(latency, compute, memory) + split_us
            # cheaper wins; a tie goes to fewer shares, then to less work (fewer FMAs wasted
            # past the edges)
            key = (round(us, 6), shares, compute)
            if best is None or key < best_key:
                best, best_key = (bm, bn, shares), key
                bound = max((latency, "latency"), (compute, "compute"), (memory, "memory"))[1]
                each = f", {threads} threads each" if threads else ""
                why = (f"{tile_count * shares} blocks ({tile_count} tiles x {shares} K shares of "
                       f"{share}), {per_sm} on the busiest of {sm_count} SMs ({resident} "
                       f"resident{each}): latency {latency:.1f} us, compute {compute:.1f} us, "
                       f"memory {memory:.1f} us; {bound}-bound"
                       + (f"; the shares' partial sums {split_us:.1f} us more" if shares > 1
                          else ""))
            if shares < splits or share <= k_step:
                break  # more splits would give the same shares
            splits *= 2
    return best, best_key[0], why


def source() -> str:
    """The model's functions' source, for a generated module (its header sets
    SIMT_THREADS)."""
    return (f"FULL_WARPS = {FULL_WARPS}  # warps an SM needs for the FMA rate (tile_model.py)"
            "\n\n\n" + "\n\n".join(inspect.getsource(f) for f in (
                _simt_shape, _warp_share, _simt_overhead, _contraction_plan)))


__all__ = ["FMA_PER_US", "GATHER_INSTRUCTIONS", "SIMT_THREADS", "STEP_US", "WGMMA_TILE_RATES",
           "source", "wgmma_tile_rates"]
