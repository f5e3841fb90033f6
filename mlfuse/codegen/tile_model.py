"""The model that picks a contraction's tile shape and K split for the sizes of a call.

A tiled contraction (contraction.py, emit_mma.py) runs a BM x BN tile of outputs per
block; with split-K, ``splits`` blocks share each tile, each summing a share of K (a
whole number of K steps) into a workspace, and a second kernel adds the shares in order
and runs the epilogue (split_k.py). The host asks ``_contraction_plan`` for
(BM, BN, splits) at each call unless a search on the device (``mlfuse bench --tune``,
mlfuse/tools/tuning.py) left a choice for those sizes. ``mlfuse explain`` prints the
same plan with the numbers behind it.

The estimate of one choice, in microseconds, is the largest of three bounds, plus a
launch when K is split:

- **latency**: a block's K loop is a chain of steps, each waiting on its operands'
  global loads (double-buffered: about one load latency, ``step_us``, a step when the SM
  has nothing else to run). Blocks resident on an SM together overlap; an SM holds
  32768 // (BM * BN) blocks (each thread keeps 64 accumulators; an SM's 64K registers
  hold two 128 x 128 tiles). So: waves of resident blocks on the busiest SM x steps of
  a share x ``step_us``. This is the bound that kept decode (M = 32) slow: 32 blocks,
  one 4096-long K loop each.
- **compute**: the busiest SM's FMAs (ceil(blocks / SMs) blocks of BM * BN * share)
  at ``fma_per_us``, times 1 + 8 * (BM + BN) / (BM * BN): a tile's operand values cost
  about 8 FMAs each to bring in (global load, shared store, barrier), which is what
  makes larger tiles faster when the GPU is full.
- **memory**: the operands read once and the output written once, at ``bytes_per_us``.

With split-K, the partial sums' round trip (2 x splits x M x N x 4 bytes) and the second
kernel's launch (``launch_us``) come on top: the second kernel runs after the first.

Splits are tried in powers of two up to the kernel's ``max_split`` (its ``split_k``
attribute: the K extent over MIN_SPLIT_K, dialects/contraction.py), each share rounded up to whole K steps (empty
shares are never launched). The cheapest choice wins; ties go to fewer splits, then to
the least compute (less work wasted past the edges). The rates are H100 numbers:
``fma_per_us`` calibrated on the SIMT kernel's 4096^3 time (4.16 ms), ``step_us`` on
decode's (0.62 ms for 512 steps alone on an SM), ``bytes_per_us`` the copy bandwidth.

The function below is copied verbatim into every generated module that has a
contraction (``source()``), so the module stays standalone and explain and the host
run the same code.
"""
from __future__ import annotations

import inspect

# FMAs per microsecond per SM that each kind of tiled kernel reaches when the GPU is full:
# SIMT f32 calibrated on the 4096^3 matmul (4.16 ms: 1.4e5, 55% of the 2.5e5 peak); f64
# at half that (the H100's f64 rate); tensor cores (mma.sync, f16/bf16) calibrated on
# f16 4096^3 (0.733 ms: 0.71e6); 3xTF32 on its 4096^3 (4.64 ms: 1.1e5), TF32 three times
# that (one mma pass, not three: an estimate).
FMA_PER_US = {"simt": 1.4e5, "simt-f64": 0.7e5, "mma": 0.71e6, "mma-tf32x3": 1.1e5,
              "mma-tf32": 3.3e5}
# The exposed latency of one K step: SIMT kernels double-buffer (one step's loads in
# flight: about a global load's latency a step), tensor-core kernels keep STAGES - 1 = 2
# stages in flight (half that).
STEP_US = {"simt": 0.7, "simt-f64": 0.7, "mma": 0.35, "mma-tf32x3": 0.35, "mma-tf32": 0.35}


def _contraction_plan(tiles, m_size, n_size, k_size, batch_size, sm_count, max_split=1,
                      k_step=8, fma_per_us=1.4e5, value_bytes=4, step_us=0.7,
                      bytes_per_us=2.8e6, launch_us=2.0):
    """((BM, BN, splits), estimated us, why) for a contraction of m_size x n_size outputs
    per batch over k_size: the cheapest tile of ``tiles`` and power-of-two split of K up
    to ``max_split`` by the model of mlfuse/codegen/tile_model.py."""
    best, best_key, why = None, None, ""
    k_size = max(k_size, 1)
    operand_bytes = (m_size + n_size) * k_size * batch_size * value_bytes
    output_bytes = m_size * n_size * batch_size * 4
    for bm, bn in tiles:
        tile_count = -(-m_size // bm) * -(-n_size // bn) * batch_size
        resident = max(1, 32768 // (bm * bn))
        splits = 1
        while splits <= max(1, max_split):
            share = -(-k_size // splits)
            share = -(-share // k_step) * k_step  # whole K steps
            shares = -(-k_size // share)  # those that hold some K
            per_sm = -(-tile_count * shares // sm_count)
            latency = -(-per_sm // resident) * (share // k_step) * step_us
            compute = per_sm * bm * bn * share / fma_per_us * (1 + 8 * (bm + bn) / (bm * bn))
            memory = (operand_bytes + output_bytes) / bytes_per_us
            # the partial sums' round trip and the second launch come on top: the second
            # kernel starts when the first is done
            split_us = 2 * shares * output_bytes / bytes_per_us + launch_us if shares > 1 else 0
            us = max(latency, compute, memory) + split_us
            # cheaper wins; a tie goes to fewer shares, then to less work (fewer FMAs wasted
            # past the edges)
            key = (round(us, 6), shares, compute)
            if best is None or key < best_key:
                best, best_key = (bm, bn, shares), key
                bound = max((latency, "latency"), (compute, "compute"), (memory, "memory"))[1]
                why = (f"{tile_count * shares} blocks ({tile_count} tiles x {shares} K shares of "
                       f"{share}), {per_sm} on the busiest of {sm_count} SMs ({resident} "
                       f"resident): latency {latency:.1f} us, compute {compute:.1f} us, "
                       f"memory {memory:.1f} us; {bound}-bound"
                       + (f"; the shares' partial sums {split_us:.1f} us more" if shares > 1
                          else ""))
            if shares < splits or share <= k_step:
                break  # more splits would give the same shares
            splits *= 2
    return best, best_key[0], why


def source() -> str:
    """The plan function's source, for a generated module."""
    return inspect.getsource(_contraction_plan)


__all__ = ["FMA_PER_US", "STEP_US", "source"]
