"""Probe: permutes whose moved axes are short (issue 13, branch thin2: coalesce-axes).
Run on the GPU from the repository root (one process, under 3 minutes on an H100):

    python benchmarks/probe_thin2.py [--only NAME ...] [--out DIR]

NCHW -> NHWC at late-CNN and early-CNN shapes (H, W merged into one axis of H*W by
coalesce-axes: runs of 196 or 49 values, not 14 or 7), the same plus a bias over W alone
(which keeps H and W apart: what the merge saves, and whether splitting the index back
would pay), the same read through a reshape of [N, C, S] (a ravel: a pointwise kernel
with strided reads before coalesce-axes, transpose tiles now), NHWC -> NCHW, and attention's
head transpose [B, S, H, D] -> [B, H, S, D] (the innermost axis kept: a pointwise
kernel) with D = 64 and 32, in f32 and f16, and keys transposed per head [B, S, H, D] ->
[B, H, D, S] in f16 (H, D merged: runs of H*D). Each is checked against the NumPy
interpreter and timed against torch eager and torch.compile in the same run with
run.py's machinery (shape_sweep.py's); the schedule explain gives is logged; a table
(ms, ratio to the best peer, % of the measured copy bandwidth by the bytes a fused
kernel must move) is printed last. Writes probe_thin2.json to --out ($OUT when set).
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

NHWC_NCHW = """
func nhwc_nchw(x: f32[N, H, W, C], g: f32[C, 1, 1]) -> f32[N, C, H, W] {
    return transpose(x, [0, 3, 1, 2]) * g
}
"""
RESHAPED = """
func reshaped(x: f32[N, C, S], g: f32[C]) -> f32[N, 14, S/14, C] {
    return transpose(reshape(x, [N, C, 14, S/14]), [0, 2, 3, 1]) * g
}
"""
BIAS_W = """
func bias_w(x: f32[N, C, H, W], b: f32[W, 1]) -> f32[N, H, W, C] {
    return transpose(x, [0, 2, 3, 1]) + b
}
"""
KEYS_T = """
func keys_t(x: {dt}[B, S, H, D]) -> {dt}[B, H, D, S] {{
    return transpose(x, [0, 2, 3, 1]) * 0.125
}}
"""
HEADS = """
func heads(x: {dt}[B, S, H, D]) -> {dt}[B, H, S, D] {{
    return transpose(x, [0, 2, 1, 3]) * 0.125
}}
"""


# The peers end in .contiguous() (as probe_tiles3.py's): an elementwise op on a permuted
# view keeps the input's memory order in eager PyTorch (and Inductor matches eager's
# strides), so without it they would never transpose; mlfuse's results are C-contiguous.
def t_nchw_nhwc(x, g):
    return (x.permute(0, 2, 3, 1) * g).contiguous()


def t_nhwc_nchw(x, g):
    return (x.permute(0, 3, 1, 2) * g).contiguous()


def t_reshaped(x, g):
    n, c, s = x.shape
    return (x.view(n, c, 14, s // 14).permute(0, 2, 3, 1) * g).contiguous()


def t_bias_w(x, b):
    return (x.permute(0, 2, 3, 1) + b).contiguous()


def t_heads(x):
    return (x.permute(0, 2, 1, 3) * 0.125).contiguous()


def t_keys_t(x):
    return (x.permute(0, 2, 3, 1) * 0.125).contiguous()


BUDGET_S = 150  # cases not started by then are skipped


def cases():
    """(name, Case, dims) of every probe."""
    from cases import CASES, Case
    suite = next(c for c in CASES if c.name == "nchw_nhwc")
    nchw = Case("nchw_nhwc", suite.source, suite.dims, t_nchw_nhwc)
    found = [(f"nchw_nhwc {d['N']}x{d['C']}x{d['H']}x{d['W']}", nchw, d) for d in (
        {"N": 64, "C": 512, "H": 14, "W": 14}, {"N": 32, "C": 2048, "H": 7, "W": 7},
        {"N": 8, "C": 64, "H": 224, "W": 224}, {"N": 32, "C": 256, "H": 64, "W": 64})]
    d = {"N": 64, "C": 512, "S": 196}  # the reshape's ravel merged: tiles over S
    found.append(("reshaped 64x512x196", Case("reshaped", RESHAPED, d, t_reshaped), d))
    d = {"N": 64, "C": 512, "H": 14, "W": 14}  # b[w] keeps H, W apart: W tiled alone
    found.append(("bias_w (no merge) 64x512x14x14", Case("bias_w", BIAS_W, d, t_bias_w), d))
    d = {"N": 64, "H": 14, "W": 14, "C": 512}
    found.append(("nhwc_nchw 64x14x14x512", Case("nhwc_nchw", NHWC_NCHW, d, t_nhwc_nchw), d))
    for dt in ("f32", "f16"):
        for heads, depth in ((16, 64), (32, 32)):
            d = {"B": 32, "S": 1024, "H": heads, "D": depth}
            case = Case(f"heads_{dt}", HEADS.format(dt=dt), d, t_heads)
            found.append((f"heads {dt} 32x1024x{heads}x{depth}", case, d))
    d = {"B": 32, "S": 1024, "H": 32, "D": 32}  # K^T per head: H, D merged (1024)
    found.append(("keys_t f16 32x1024x32x32", Case("keys_t_f16", KEYS_T.format(dt="f16"), d,
                                                    t_keys_t), d))
    return found


def schedule_of(case, dims) -> str:
    """explain's schedule line of the case's first kernel at these dims."""
    from mlfuse.pipeline import compile_text
    from mlfuse.tools.explain import explain_module
    loops = compile_text(case.source, f"{case.name}.fuse", level="loops")
    (report,) = explain_module(loops, dims)
    k = report.kernels[0]
    return f"{k.schedule}: {k.schedule_reason or '(one thread per point)'}"


def main(argv=None) -> int:
    import run
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", help="only probes whose name starts so")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/mlfuse-probe-thin2"))
    args = p.parse_args(argv)
    if not run.gpu_setup("the probe needs"):
        return 2
    from mlfuse.cli.bench import measure_copy_bandwidth
    copy_gbps = measure_copy_bandwidth() / 1e9
    peers = run.available_peers(True) - {"mlfuse_unfused", "cupy"}
    rows, results = [], []
    began = time.perf_counter()
    for name, case, dims in cases():
        if args.only and not any(name.startswith(o) for o in args.only):
            continue
        if time.perf_counter() - began > BUDGET_S:  # the table still comes, under 3 minutes
            run.log(f"{name}: skipped (past {BUDGET_S} s)")
            rows.append([name, None, None, None, "-", "-", "skipped"])
            continue
        started = time.perf_counter()
        schedule = schedule_of(case, dims)
        run.log(f"{name}: {schedule}")
        r = run.run_case(case, dims, True, peers)
        r.update(probe=name, dims=dims, schedule=schedule,
                 wall_s=round(time.perf_counter() - started, 1))
        results.append(r)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "probe_thin2.json").write_text(json.dumps(results, indent=1, default=str))
        rows.append([name, *run.peer_columns(r, copy_gbps)])
    from mlfuse.tools.benchmark import markdown_table
    print(f"copy bandwidth {copy_gbps:.0f} GB/s; times in ms (median)\n")
    print(markdown_table(["probe", "mlfuse", "torch", "torch.compile", "mlfuse / best peer",
                          "% copy BW", "checked"], rows))
    return 0 if all(r["checked"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
