"""Probe: strips held in shared memory (branch smemstrips, issue 13) at several shapes.
Run on the GPU from the repository root (one process, under 3 minutes on an H100):

    python benchmarks/probe_smemstrips.py [--case LABEL ...] [--no-peers] [--no-sweep] [--dry-run]

Reductions over a non-last axis with their broadcast-back epilogue in one kernel:
softmax over axis 1 of [B, S, D] (f32 and f16), over the channels of NCHW, column
centring ``x - mean(x, axis=0)``; and instance norm (a strips kernel over rows, which
the shared variant does not take: its numbers for comparison). Each variant is a set of
``mlfuse.hardware`` knobs (probe_memkern.py's machinery: generate with them, run once
recording the launches, poison the outputs, replay the launches alone, check against the
NumPy interpreter, time the replay with CUDA events, median):

- default: this branch: "strips-shared" (codegen/strips_shared.py) where VECTOR_WIDTH
  (f16: 2x) divides the points, the buffers are aligned and a strip's values fit
  STRIP_SHARED_BYTES (40 KB): x read from DRAM once, the later loops read shared memory;
  blocks of STRIP_SHARED_THREADS (128), launch_bounds asking 6 resident an SM (4 for 8-lane f16 vectors); where
  vectors do not fit (D = 2047), "strips-shared-scalar": the same, a point a thread;
- "no shared": strip_shared_bytes 0 (main's kernels: registers, vector or streaming);
- "streamed": nor the registers kernel (strip_held_threads 0): the vector or scalar
  streaming kernel, which reads x once a loop (the later reads mostly from L2);
- "shared min4", "shared min5", "shared min6": launch_bounds asking 4 (at most 128
  registers: the default before 2026-11-24's fifth session), 5 (102) or 6 blocks an SM
  (85) of every shared kernel (the default: 6, and 4 where vectors have 8 lanes);
- "shared 32 in flight": the first loop's tile 32 values (8 f32 / 4 f16 vectors a thread);
- "shared lane combine": the reductions combine a lane at a time (main's vector kernel's
  way: two barriers and `per` reads a lane) instead of all lanes at once.

The last lines are a table: ms, % of the copy bandwidth's time for the bytes a perfect
fused kernel moves, ok (checked), and the grids launched (a shared launch's config ends
with its dynamic shared bytes).
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOFTMAX_F16 = """
func softmax_middle_f16(x: f16[B, S, D]) -> f16[B, S, D] {
    return softmax(x, axis=1)
}
"""
CHANNEL_SOFTMAX = """
func channel_softmax(x: f32[N, K, H, W]) -> f32[N, K, H, W] {
    return softmax(x, axis=1)
}
"""

# label -> (case in cases.py, dims, (name, source) override or None, dry-run dims)
SHAPES = {
    "softmax_mid 64x256x2048": ("softmax_middle", {"B": 64, "S": 256, "D": 2048}, None,
                                {"B": 2, "S": 9, "D": 16}),
    "softmax_mid 32x128x4096": ("softmax_middle", {"B": 32, "S": 128, "D": 4096}, None,
                                {"B": 2, "S": 5, "D": 8}),
    "softmax_mid f16 16x512x1024": ("softmax_middle", {"B": 16, "S": 512, "D": 1024},
                                    ("softmax_middle_f16", SOFTMAX_F16), {"B": 2, "S": 7, "D": 16}),
    "channel softmax 32x64x56x56": ("softmax_middle", {"N": 32, "K": 64, "H": 56, "W": 56},
                                    ("channel_softmax", CHANNEL_SOFTMAX),
                                    {"N": 2, "K": 3, "H": 2, "W": 8}),
    # D not a multiple of 4: no 16-byte vectors, the scalar shared kernel (a point a thread)
    "softmax_mid 64x256x2047": ("softmax_middle", {"B": 64, "S": 256, "D": 2047}, None,
                                {"B": 2, "S": 9, "D": 7}),
    "centring 16384x4096": ("column_centring", {"R": 16384, "C": 4096}, None,
                            {"R": 13, "C": 16}),
    "centring 1024x65536": ("column_centring", {"R": 1024, "C": 65536}, None,
                            {"R": 9, "C": 32}),
    # the sweep's shapes (BENCHMARKS.md, fifteenth session: 1.08-1.31x torch.compile)
    "softmax_mid 8x1024x2048": ("softmax_middle", {"B": 8, "S": 1024, "D": 2048}, None,
                                {"B": 2, "S": 9, "D": 16}),
    "softmax_mid 512x32x1024": ("softmax_middle", {"B": 512, "S": 32, "D": 1024}, None,
                                {"B": 2, "S": 5, "D": 16}),
    "softmax_mid f16 64x256x2048": ("softmax_middle", {"B": 64, "S": 256, "D": 2048},
                                    ("softmax_middle_f16", SOFTMAX_F16), {"B": 2, "S": 7, "D": 16}),
    "channel softmax 32x64x112x112": ("softmax_middle", {"N": 32, "K": 64, "H": 112, "W": 112},
                                      ("channel_softmax", CHANNEL_SOFTMAX),
                                      {"N": 2, "K": 3, "H": 2, "W": 8}),
    "channel softmax 64x21x128x128": ("softmax_middle", {"N": 64, "K": 21, "H": 128, "W": 128},
                                      ("channel_softmax", CHANNEL_SOFTMAX),
                                      {"N": 2, "K": 3, "H": 2, "W": 8}),
    "instance_norm 128x128x64x64": ("instance_norm", {"N": 128, "C": 128, "H": 64, "W": 64},
                                    None, {"N": 2, "C": 3, "H": 5, "W": 7}),
}
DEFAULT = {"default": {}, "no shared": {"strip_shared_bytes": 0},
           "streamed": {"strip_shared_bytes": 0, "strip_held_threads": 0},
           "shared min4": {"strip_shared_min_blocks": 4, "strip_shared_wide_min_blocks": 4}}
SWEEP = {**DEFAULT,
         "shared min5": {"strip_shared_min_blocks": 5, "strip_shared_wide_min_blocks": 5},
         "shared min6": {"strip_shared_min_blocks": 6, "strip_shared_wide_min_blocks": 6},
         "shared 32 in flight": {"strip_vector_values": 32},
         "shared lane combine": {"strip_lanes_combine": False}}
SWEPT = ("softmax_mid 64x256x2048", "softmax_mid f16 16x512x1024", "channel softmax 32x64x56x56")


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        out = []
        for label, (name, dims, override, dry) in SHAPES.items():
            base = next(c for c in CASES if c.name == name)
            name, source = override or (base.name, base.source)
            case = dataclasses.replace(base, name=name, source=source, dims=dims, dry_dims=dry)
            out.append(Probe(label, case, SWEEP if label in SWEPT and not opts.no_sweep
                             else DEFAULT))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes, sweep_flag="default and no-shared only")

if __name__ == "__main__":
    main()
