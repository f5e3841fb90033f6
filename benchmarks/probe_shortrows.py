"""Probe: short-row reductions split over a group of lanes (issue 13, branch shortrows).
Run on the GPU from the repository root (one process, under 3 minutes on an H100):

    python benchmarks/probe_shortrows.py [--case NAME ...] [--no-peers] [--dry-run]

softmax over R x C for C in 8, 16, 32, 64, 128 with R * C = 2^26 f32 (512 MB moved
each), softmax over f16 rows of 64 (16-byte vectors of 8 halves, 256 MB) and layernorm
over rows of 64, each as the warp-rows vector kernel whose group
``mlfuse/row_groups.py`` picks (threads per row, 16-byte vectors each), against torch
eager and torch.compile on the same inputs. Every result is checked against the NumPy
interpreter (probe_memkern.py's machinery: generate with the knobs, run once recording
the launches, poison the outputs, replay the launches alone, check, time the replay with
CUDA events, median). Variants are ``mlfuse.hardware`` knobs (codegen only; the schedule
is warp-rows in all): for rows of 16, a thread per row (``short_row_lanes`` 1: the
grouping before this branch, 0.354 ms in the suite, with this branch's row loop) and 2
lanes a row; for rows of 8 a
thread per row; for rows of 32 and 64, 4 lanes a row (2 and 4 vectors each) against the
default 8; for rows of 128, 16 lanes (2 vectors each) against 8 (4 each); and for rows
of 16, a group taking 2 rows a step (``short_row_batch``: both rows' loads in flight
together; 43 registers instead of 31) and a grid of 16 blocks per SM whose threads walk
16 rows each (the per-thread setup, ~24 SASS instructions, paid once). The table comes last;
the log and probe_memkern.json go to $OUT when set. ``--dry-run`` checks the script on
the CUDA simulator (a few rows, nothing timed, no peers).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUDGET_S = 140  # no new variant starts after this: the run stays under 3 minutes
TOTAL = 1 << 26  # values of each input


def _cases():
    from cases import Case, t_layernorm, t_softmax
    cases = {}
    for c in (8, 16, 32, 64, 128):
        source = f"func softmax_{c}(x: f32[R, {c}]) -> f32[R, {c}] {{ return softmax(x, axis=1) }}"
        cases[f"softmax_{c}"] = Case(f"softmax_{c}", source, {"R": TOTAL // c}, t_softmax,
                                     dry_dims={"R": 7})
    source = "func softmax_f16_64(x: f16[R, 64]) -> f16[R, 64] { return softmax(x, axis=1) }"
    cases["softmax_f16_64"] = Case("softmax_f16_64", source, {"R": TOTAL // 64}, t_softmax,
                                   dry_dims={"R": 6})
    source = ("func layernorm_64(x: f32[R, 64], g: f32[64], b: f32[64]) -> f32[R, 64] {\n"
              "    return layernorm(x, g, b, axis=-1, eps=1e-5)\n}")
    cases["layernorm_64"] = Case("layernorm_64", source, {"R": TOTAL // 64}, t_layernorm,
                                 dry_dims={"R": 5})
    return cases


SWEEP = {  # label -> Target knobs; the first of each runs first, the rest while time is left
    "softmax_8": {"default": {}, "thread per row": {"short_row_lanes": 1}},
    "softmax_16": {"default": {}, "thread per row (before)": {"short_row_lanes": 1},
                   "2 lanes a row": {"short_row_lanes": 2},
                   "2 rows a step": {"short_row_batch": 2},
                   "grid 16 blocks/SM": {"pointwise_blocks_per_sm": 16}},
    "softmax_32": {"default": {}, "4 lanes a row": {"short_row_lanes": 4}},
    "softmax_64": {"default": {}, "4 lanes a row": {"short_row_lanes": 4}},
    "softmax_128": {"default": {}, "16 lanes a row": {"short_row_lanes": 16}},
    "softmax_f16_64": {"default": {}},
    "layernorm_64": {"default": {}, "4 lanes a row": {"short_row_lanes": 4}},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument("--no-peers", action="store_true", help="skip torch and torch.compile")
    from probe_memkern import prepare, probe_session, run_peers, run_variant
    t0 = time.perf_counter()
    opts, log, device, gbs = probe_session(parser)
    cases = _cases()
    names = opts.case or list(SWEEP)
    # every case's default, the suite case's sweep (rows of 16), the peers, then the other
    # sweeps while time is left
    first = [n for n in names if n == "softmax_16"]
    passes = [(n, "default") for n in names]
    passes += [(n, label) for n in first for label in list(SWEEP[n])[1:]]
    passes += [(n, "peers") for n in names if not (opts.no_peers or opts.dry_run)]
    passes += [(n, label) for n in names if n not in first for label in list(SWEEP[n])[1:]]
    rows, prepared = [], {}
    for name, label in passes:
        if time.perf_counter() - t0 > BUDGET_S:
            log(f"{name:14} [{label}] skipped: time budget")
            continue
        try:
            if name not in prepared:  # all of them fit on the GPU at once (~6 GB)
                prepared[name] = prepare(cases[name], device, 11, gbs)
            p = prepared[name]
            if label == "peers":
                for peer, r in run_peers(p, log).items():
                    rows.append((name, peer, r["ms"], p.floor_ms, r["ok"], "-"))
                continue
            r = run_variant(p, SWEEP[name][label])
            log(f"{name:14} [{label}] ok={r['ok']} err={r['err']:.2g} {r['ms']:.4f} ms "
                f"kernels={r['kernels']} grids={r['grids']} {'; '.join(r['resources'])}")
            rows.append((name, label, r["ms"], p.floor_ms, r["ok"], r["kernels"][-1]))
        except Exception as e:  # one failing variant must not lose the others
            log(f"{name:14} [{label}] FAILED: {type(e).__name__}: {e}"[:600])
    rows.sort(key=lambda r: names.index(r[0]))
    log(f"\nkernel times, ms (CUDA events, median); floor = bytes moved / copy rate "
        f"({gbs:.0f} GB/s); total {time.perf_counter() - t0:.0f} s")
    eager = {name: ms for name, label, ms, *_ in rows if label == "torch"}
    log(f"{'case':14} {'variant':26} {'ms':>8} {'%floor':>6} {'/eager':>7} ok   kernel")
    for name, label, ms, floor, ok, kernel in rows:
        ratio = f"{ms / eager[name]:6.2f}x" if name in eager else "      -"
        log(f"{name:14} {label:26} {ms:8.4f} {100 * floor / ms:5.0f}% {ratio} "
            f"{'ok ' if ok else 'BAD'}  {kernel}")


if __name__ == "__main__":
    main()
