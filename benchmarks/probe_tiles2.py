"""Probe: transpose tiles (issue 13, branch tiles2) at the benchmark sizes, by tile shape.
Run on the GPU from the repository root (one process, under 3 minutes):

    python benchmarks/probe_tiles2.py [--no-sweep] [--dry-run]

probe_memkern.py's machinery (generate with ``mlfuse.hardware`` knobs, run, poison,
replay the recorded launches alone, check against the NumPy interpreter, time with CUDA
events; torch eager and torch.compile as peers) over transpose_add and nchw_nhwc, with
the tile's side (``transpose_tile``) and the rows its threads take at once
(``transpose_tile_rows``; threads per block = side x rows) as the knobs. Writes
probe_memkern.json and probe_memkern.log to $OUT when set.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_memkern  # noqa: E402

TILES = {
    "default": {},  # 32 x 32, 256 threads: 4 points each
    "32x32 t128": {"transpose_tile": 32, "transpose_tile_rows": 4},  # 8 points each
    "64x64 t256": {"transpose_tile": 64, "transpose_tile_rows": 4},  # 16 points each
    "64x64 t512": {"transpose_tile": 64, "transpose_tile_rows": 8},
    "32x32 t512": {"transpose_tile": 32, "transpose_tile_rows": 16},
}
probe_memkern.SWEEP = {"transpose_add": TILES, "nchw_nhwc": TILES}

if __name__ == "__main__":
    probe_memkern.main()
