"""Probe: rows whose length is known only at call time (issue 13, branch shortrows2).
Run on the GPU from the repository root (one process, under 3 minutes on an H100):

    python benchmarks/probe_shortrows2.py [--only NAME ...] [--no-compile] [--out DIR]

The suite's programs with ``x: f32[R, C]`` rows (C a symbol) called with short rows: a
row kernel's short-row plan (mlfuse/codegen/short_rows.py) runs them as warp-rows, the
group of lanes per row picked per call from C and the dtype. Each case is checked
against the NumPy interpreter and timed against torch eager and torch.compile in the
same run (run.py's run_case, as shape_sweep.py); the table (% of copy bandwidth by the
bytes a fused kernel must move) comes last. Instance norm ([H, W] rows over two axes)
and group norm's rows of 12544 are here to show where they stand (the plan takes rows
along one axis; instance norm keeps its strips kernel). torch.compile is dropped for
the cases left once BUDGET_S has passed (its compiles take most of the time).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

BUDGET_S = 120  # after this, no torch.compile for the cases left: the run stays < 3 min

LOG_SOFTMAX = """
func log_softmax(x: f32[R, C]) -> f32[R, C] {
    m = max(x, axis=1, keepdims=true)
    return x - m - log(sum(exp(x - m), axis=1, keepdims=true))
}
"""

SOFTMAX_F16 = """
func softmax_f16(x: f16[R, C]) -> f16[R, C] {
    return softmax(x, axis=1)
}
"""


def t_log_softmax(x):
    import torch
    return torch.log_softmax(x, dim=1)


def _cases():
    from cases import (CASES, GROUP_NORM, INSTANCE_NORM, LAYERNORM, SOFTMAX, Case,
                       t_group_norm, t_instance_norm, t_layernorm, t_softmax)
    del CASES  # (the suite's sources, at other sizes)
    return [
        (Case("softmax", SOFTMAX, {}, t_softmax), {"R": 131072, "C": 100}),
        (Case("softmax", SOFTMAX, {}, t_softmax), {"R": 1 << 20, "C": 24}),
        (Case("layernorm", LAYERNORM, {}, t_layernorm), {"R": 262144, "C": 200}),
        (Case("log_softmax", LOG_SOFTMAX, {}, t_log_softmax), {"R": 500000, "C": 50}),
        (Case("softmax_f16", SOFTMAX_F16, {}, t_softmax), {"R": 262144, "C": 120}),
        (Case("softmax", SOFTMAX, {}, t_softmax), {"R": 131072, "C": 101}),  # scalar twin
        (Case("instance_norm", INSTANCE_NORM, {}, t_instance_norm),
         {"N": 64, "C": 512, "H": 16, "W": 16}),
        (Case("instance_norm", INSTANCE_NORM, {}, t_instance_norm),
         {"N": 32, "C": 256, "H": 7, "W": 7}),
        (Case("group_norm", GROUP_NORM, {}, t_group_norm), {"N": 64, "C": 128, "H": 28, "W": 28}),
    ]


def _schedule(case, dims) -> str:
    """What explain says of the (first) kernel's schedule at these sizes."""
    from mlfuse.pipeline import compile_text
    from mlfuse.transforms.fusion.schedules import choose_schedule
    from mlfuse.hardware import get_target
    module = compile_text(case.source, f"{case.name}.fuse")
    kernels = [o for o in module.funcs[0].body.ops if o.name == "fused.kernel"]
    if not kernels:
        return "-"
    return choose_schedule(kernels[0], dims, get_target()).reason[:110]


def main(argv=None) -> int:
    import run
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", help="only this case (repeatable)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/mlfuse-shortrows2"))
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if not run.gpu_setup("the probe needs"):
        return 2
    from mlfuse.cli.bench import measure_copy_bandwidth
    copy_gbps = measure_copy_bandwidth() / 1e9
    all_peers = run.available_peers(True) - {"mlfuse_unfused", "cupy"}
    rows, results = [], []
    for case, dims in _cases():
        if args.only and case.name not in args.only:
            continue
        peers = set(all_peers)
        if args.no_compile or time.perf_counter() - t0 > BUDGET_S:
            peers.discard("torch_compile")
        started = time.perf_counter()
        try:
            r = run.run_case(case, dims, True, peers)
        except Exception as e:  # one failing case must not lose the others
            print(f"{case.name} {dims}: FAILED {type(e).__name__}: {e}"[:600], flush=True)
            rows.append([case.name, str(dims), None, None, None, "-", "-", "FAILED"])
            continue
        r.update(case=case.name, dims=dims, wall_s=round(time.perf_counter() - started, 1),
                 schedule=_schedule(case, dims))
        results.append(r)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "probe_shortrows2.json").write_text(
            json.dumps(results, indent=1, default=str))
        print(f"{case.name} {dims}: {r['schedule']}", flush=True)
        rows.append([case.name, ",".join(f"{k}={v}" for k, v in dims.items()),
                     *run.peer_columns(r, copy_gbps)])
    from mlfuse.tools.benchmark import markdown_table
    print(f"\ncopy bandwidth {copy_gbps:.0f} GB/s; times in ms (median); "
          f"total {time.perf_counter() - t0:.0f} s\n")
    print(markdown_table(["case", "dims", "mlfuse", "torch", "torch.compile", "mlfuse / best peer",
                          "% copy BW", "checked"], rows))
    return 0 if all(r["checked"] for r in results) and len(results) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
