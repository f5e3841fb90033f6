"""Nsight Compute over mlfuse's kernels: each benchmark case (at its full sizes), .fuse
program or ONNX model runs once through `mlfuse run` under `ncu`, and the kernels' key
counters are printed one line each (time, DRAM and SM throughput, registers,
occupancy, bytes per global load instruction, shared-memory bank conflicts, the top
stall reasons). The raw CSV of every run is kept in --out for a closer look.

    python benchmarks/ncu_profile.py --case colsum --case softmax_short [--set full]
    python benchmarks/ncu_profile.py --model resnet18.onnx --set light

Needs a GPU whose counters ncu can read (clocks left alone: --clock-control none).
"""
from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

SETS = {
    "full": ["--set", "full"],
    "light": ["--section", "SpeedOfLight", "--section", "LaunchStats", "--section", "Occupancy"],
}
# column -> (label, scale)
KEY = [
    ("gpu__time_duration.sum", "us", 1e-3),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%", 1),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm%", 1),
    ("launch__registers_per_thread", "regs", 1),
    ("launch__block_size", "block", 1),
    ("launch__grid_size", "grid", 1),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occ%", 1),
]


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def profile(argv: list[str], which: str, out: Path, name: str, timeout: int) -> list[dict]:
    raw = out / f"{name}.csv"
    cmd = ["ncu", "--clock-control", "none", *SETS[which], "--csv", "--page", "raw",
           "--log-file", str(raw), sys.executable, "-m", "mlfuse", "run", *argv]
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True,
                              timeout=timeout)
        (out / f"{name}.log").write_text(done.stdout + done.stderr)
    except subprocess.TimeoutExpired:
        print(f"{name}: timeout {timeout} s", flush=True)
    if not raw.exists():
        return []
    text = raw.read_text()
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    return rows[1:]  # the first row holds the units


def summary(row: dict) -> str:
    parts = [row.get("Kernel Name", "?")[:40]]
    for column, label, scale in KEY:
        value = number(row.get(column, ""))
        parts.append(f"{label}={value * scale:.4g}" if value is not None else f"{label}=-")
    loads = number(row.get("smsp__sass_inst_executed_op_global_ld.sum", ""))
    ld_bytes = number(row.get("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", ""))
    if loads and ld_bytes is not None:
        parts.append(f"B/ld-warp={ld_bytes / loads:.0f}")
    conflicts = number(row.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", ""))
    if conflicts is not None:
        parts.append(f"smem-ld-conflicts={conflicts:.3g}")
    stalls = []
    for column, value in row.items():
        m = re.fullmatch(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio", column)
        v = number(value)
        if m and v:
            stalls.append((v, m.group(1)))
    if stalls:
        parts.append("stalls:" + ",".join(f"{n}={v:.2f}" for v, n in sorted(stalls)[::-1][:4]))
    return " ".join(parts)


def main(argv=None) -> int:
    from cases import CASES
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", action="append", default=[], help="a benchmark case (repeatable)")
    p.add_argument("--fuse", action="append", default=[],
                   help="FILE[:N=SIZE,...] a .fuse program and its dims (repeatable)")
    p.add_argument("--model", action="append", default=[], help="an .onnx model (repeatable)")
    p.add_argument("--set", dest="which", choices=sorted(SETS), default="full")
    p.add_argument("--out", default=".")
    p.add_argument("--timeout", type=int, default=300)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        by_name = {c.name: c for c in CASES}
        for name in args.case:
            case = by_name[name]
            path = Path(tmp) / f"{name}.fuse"
            path.write_text(case.source)
            run = [str(path), *[f"--dim={k}={v}" for k, v in case.dims.items()], "--seed", "1"]
            if case.matmul_precision:
                run += ["--matmul-precision", case.matmul_precision]
            runs.append((name, run))
        for spec in args.fuse:
            file, _, dims = spec.partition(":")
            runs.append((Path(file).stem, [file, *[f"--dim={d}" for d in dims.split(",") if d],
                                           "--seed", "1"]))
        for model in args.model:
            runs.append((Path(model).stem, [model, "--seed", "1"]))
        lines = []
        for name, run in runs:
            rows = profile(run, args.which, out, name, args.timeout)
            lines += [f"{name}: {summary(r)}" for r in rows] or [f"{name}: no kernels profiled"]
            print(*lines[-len(rows) or -1:], sep="\n", flush=True)
    print("#### summary")
    print(*lines, sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
