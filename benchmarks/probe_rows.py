"""Probe: the row-family schedules of issue 13 (branch rows) at the benchmark sizes.
Run on the GPU from the repository root (one process, about a minute):

    python benchmarks/probe_rows.py [--case NAME ...] [--no-peers] [--dry-run]

Each variant is a set of ``mlfuse.hardware`` knobs; probe_memkern.py's machinery
generates the module with them, runs it once (recording its launches), poisons the
outputs, replays the launches alone, checks the result against the NumPy interpreter
and times the replay (CUDA events, median). What is swept:

- softmax_short (rows of 16): the warp-rows vector variant with a thread per row
  (short_row_values 16, the default), 2 and 4 threads per row (8, 4), and the scalar
  warp-rows kernel of before (vector_width 1: 16 threads per row, shuffles);
- softmax_long (512 x 65536, the row schedule's streaming variant): tiles of 8 loads
  per thread (the default: VALUES_PER_THREAD // 2), 4 and 16;
- softmax_middle, instance_norm, column_centring, colsum: the default only (strips
  counting its reduced indices on; colsum now split-columns at unbound sizes).

torch eager and torch.compile run on the same inputs unless ``--no-peers`` (compiling
takes a while); the driver is probe_memkern.sweep_probes. Writes
probe_memkern.json/.log to $OUT when set (the shared machinery's names).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SWEEP = {
    "softmax_short": {"default": {}, "2 threads per row": {"short_row_values": 8},
                      "4 threads per row": {"short_row_values": 4},
                      "scalar warp-rows (before)": {"vector_width": 1}},
    "softmax_long": {"default": {}, "tile 4": {"row_values_per_thread": 8},
                     "tile 16": {"row_values_per_thread": 32}},
    "softmax_middle": {"default": {}},
    "instance_norm": {"default": {}},
    "column_centring": {"default": {}},
    "colsum": {"default": {}},
}


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        return [Probe(name, next(c for c in CASES if c.name == name), variants)
                for name, variants in SWEEP.items()]
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)

if __name__ == "__main__":
    main()
