"""How far the cost model's estimates are from measured times (issue 13).

    python benchmarks/cost_model_error.py [--results benchmarks/results/latest.json] [--markdown]

For every benchmark case measured on the GPU (a results file written by benchmarks/run.py),
the fused program's estimated time (the sum of its kernels' estimates, as `mlfuse explain`
prints it) is set beside mlfuse's measured median. The ratio measured / estimated says how
the model errs: above 1 it is optimistic (the kernel runs slower than priced). Runs on a CPU:
only the estimates are computed here, the times come from the file.

The summary gives the geometric mean and the spread of the ratios by family (memory-bound
and contraction cases), since the fusion decisions compare estimates of alternative plans
for the same program: a ratio that is the same for every plan does not mislead them, a
spread between schedules does.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cases import CASES  # noqa: E402


def estimate_us(case) -> tuple[float, list[str]]:
    """The fused plan's estimated time of ``case`` at its benchmark dims, and its kernels'
    schedules."""
    from mlfuse.pipeline import lower, parse_program
    from mlfuse.tools.explain import explain_module
    module = lower(parse_program(case.source, f"{case.name}.fuse"), "loops",
                   fuse_options={"dims": dict(case.dims)})
    report = explain_module(module, dict(case.dims), matmul_precision=case.matmul_precision)[0]
    return report.estimated_us_after, [k.schedule for k in report.kernels]


def is_contraction(schedules: list[str]) -> bool:
    return "contraction" in schedules


def rows(results: dict) -> list[dict]:
    out = []
    for case in CASES:
        measured = results.get(case.name, {}).get("mlfuse")
        if case.latency or measured is None:
            continue
        est, schedules = estimate_us(case)
        out.append({"case": case.name, "schedules": "+".join(sorted(set(schedules))),
                    "estimated_us": est, "measured_us": measured * 1000.0,
                    "ratio": measured * 1000.0 / est if est else float("inf"),
                    "family": "contraction" if is_contraction(schedules) else "memory"})
    return out


def summary(table: list[dict]) -> list[str]:
    lines = []
    for family in ("memory", "contraction"):
        ratios = [r["ratio"] for r in table if r["family"] == family and math.isfinite(r["ratio"])]
        if not ratios:
            continue
        logs = [math.log(x) for x in ratios]
        geo = math.exp(sum(logs) / len(logs))
        spread = [x / geo for x in ratios]
        lines.append(f"{family}: {len(ratios)} cases, measured/estimated geometric mean {geo:.2f}, "
                     f"range {min(ratios):.2f}-{max(ratios):.2f}; after dividing by the mean, "
                     f"{sum(0.8 <= s <= 1.25 for s in spread)} of {len(ratios)} within 25%, "
                     f"worst {max(max(spread), 1 / min(spread)):.2f}x")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "latest.json"))
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args(argv)
    data = json.loads(Path(args.results).read_text())
    table = rows(data["cases"])
    if args.markdown:
        print("| case | schedules | estimated us | measured us | measured / estimated |")
        print("|---|---|---|---|---|")
        for r in table:
            print(f"| {r['case']} | {r['schedules']} | {r['estimated_us']:.1f} | "
                  f"{r['measured_us']:.1f} | {r['ratio']:.2f} |")
    else:
        for r in table:
            print(f"{r['case']:24s} {r['schedules']:28s} est {r['estimated_us']:9.1f} us  "
                  f"measured {r['measured_us']:9.1f} us  ratio {r['ratio']:5.2f}")
    print()
    for line in summary(table):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
