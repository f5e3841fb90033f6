"""Probe: the row-family schedules of issue 13 (branch rows) at the benchmark sizes.
Run on the GPU from the repository root (one process, about a minute):

    python benchmarks/probe_rows.py [--case NAME ...] [--peers] [--dry-run]

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

``--peers`` adds torch eager and torch.compile on the same inputs (compiling takes a
while); benchmarks/run.py gives them for the whole suite anyway. Writes
probe_memkern.json/.log to $OUT when set (the shared machinery's names).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument("--peers", action="store_true", help="torch and torch.compile too")
    parser.add_argument("--dry-run", action="store_true", help="check the script on the simulator")
    opts = parser.parse_args()
    if opts.dry_run:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba.cuda is imported
    from cases import CASES
    from probe_codegen import copy_bandwidth
    from probe_memkern import Device, Log, prepare, run_peers, run_variant

    from mlfuse.runtime.memory import install
    install()
    log, device = Log(), Device(opts.dry_run)
    gbs = 1.0 if opts.dry_run else copy_bandwidth()
    rows = []
    for name in opts.case or list(SWEEP):
        p = prepare(next(c for c in CASES if c.name == name), device, 7, gbs)
        for label, knobs in SWEEP[name].items():
            try:
                r = run_variant(p, knobs)
            except Exception as e:  # one failing variant must not lose the others
                log(f"{name:16} [{label}] FAILED: {type(e).__name__}: {e}"[:600])
                continue
            log(f"{name:16} [{label}] ok={r['ok']} {r['ms']:.4f} ms kernels={r['kernels']} "
                f"grids={r['grids']} {'; '.join(r['resources'])}")
            rows.append((name, label, r["ms"], p.floor_ms, r["ok"]))
        if opts.peers:
            for label, r in run_peers(p, log).items():
                rows.append((name, label, r["ms"], p.floor_ms, r["ok"]))
        del p
    log(f"\n{'case':16} {'variant':28} {'ms':>8} {'%floor':>6} ok   (copy {gbs:.0f} GB/s)")
    for name, label, ms, floor, ok in rows:
        log(f"{name:16} {label:28} {ms:8.4f} {100 * floor / ms:5.0f}% {'ok' if ok else 'BAD'}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - t0:.0f} s")
