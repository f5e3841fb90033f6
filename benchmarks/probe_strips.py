"""Probe: the strips schedule over columns (branch strips, issue 13) at several shapes.
Run on the GPU from the repository root (one process, under 3 minutes on an H100):

    python benchmarks/probe_strips.py [--case LABEL ...] [--no-peers] [--no-sweep] [--dry-run]

Reductions over a non-last axis with their broadcast-back epilogue in one kernel
(softmax over axis 1 of [B, S, D], column centring ``x - mean(x, axis=0)`` in f32 and
f16) and a plain column sum. The host picks each call's strip width (32 points down to
a 32-byte sector a row where the values are held, a 128-byte line where streamed, so the
grid has STRIP_BLOCKS_PER_SM blocks an SM) and threads per point (blocks of at most
STRIP_BLOCK_THREADS, streaming ones up to STRIP_STREAM_THREADS): mlfuse/strip_plan.py. Each variant is a set of
``mlfuse.hardware`` knobs (probe_memkern.py's machinery: generate with them, run once
recording the launches, poison the outputs, replay the launches alone, check against the
NumPy interpreter, time the replay with CUDA events, median):

- default: this branch (round 3: where VECTOR_WIDTH (f16: 2x) divides the points and the
  buffers are aligned, "strips-vector": each thread owns a 16-byte vector of neighbouring
  points, STRIP_VECTOR_VALUES (16) values in flight a tile, codegen/strips_vector.py);
- "scalar (round 2)": strip_vectors off (round 2's kernels: a thread a point);
- "vec 32 in flight": the vector kernel with 32 values a tile (8 f32 / 4 f16 vectors);
- "vec stream 256": the vector kernel's blocks no deeper than 256 threads.

The last lines are a table: ms, % of the copy bandwidth's time for the bytes a perfect
fused kernel moves, ok (checked), and the grids launched. Writes probe_memkern.json/.log
to $OUT when set (the shared machinery's names).
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CENTRING_F16 = """
func column_centring_f16(x: f16[R, C]) -> f16[R, C] {
    return x - mean(x, axis=0, keepdims=true)
}
"""

# label -> (case in cases.py, dims, source override or None)
SHAPES = {
    "softmax_mid 64x256x2048": ("softmax_middle", {"B": 64, "S": 256, "D": 2048}, None),
    "softmax_mid 32x1024x512": ("softmax_middle", {"B": 32, "S": 1024, "D": 512}, None),
    "softmax_mid 8x64x32768": ("softmax_middle", {"B": 8, "S": 64, "D": 32768}, None),
    "centring 16384x4096": ("column_centring", {"R": 16384, "C": 4096}, None),
    "centring 4096x16384": ("column_centring", {"R": 4096, "C": 16384}, None),
    "centring f16 16384x8192": ("column_centring", {"R": 16384, "C": 8192}, CENTRING_F16),
    "colsum 16384x4096": ("colsum", {"R": 16384, "C": 4096}, None),
    # round 2: split-columns' first stage reads a column by cursor (no 2-D index a value)
    "colsum 65536x1024": ("colsum", {"R": 65536, "C": 1024}, None),
    "colsum 4096x16384": ("colsum", {"R": 4096, "C": 16384}, None),
}
DEFAULT = {"default": {}, "scalar (round 2)": {"strip_vectors": False}}
SWEEP = {**DEFAULT,
         "vec 32 in flight": {"strip_vector_values": 32},
         "vec stream 256": {"strip_stream_threads": 256}}
SWEPT = ("softmax_mid 64x256x2048", "centring 16384x4096", "centring f16 16384x8192")


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        out = []
        for label, (name, dims, source) in SHAPES.items():
            base = next(c for c in CASES if c.name == name)
            case = dataclasses.replace(base, dims=dims, source=source or base.source,
                                       name=base.name if source is None else "column_centring_f16")
            variants = SWEEP if label in SWEPT and not opts.no_sweep else DEFAULT
            if name == "colsum":  # split-columns: no strips kernel, so no vector one either
                variants = {"default": {}}
            out.append(Probe(label, case, variants))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes, sweep_flag="the default variant only")

if __name__ == "__main__":
    main()
