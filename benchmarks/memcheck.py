"""compute-sanitizer memcheck over every case of the benchmark suite (and, optionally, the
ONNX models of benchmarks/models.py), at sizes a sanitized run finishes in seconds: each
symbolic dim of a case is capped at --cap (the cases' shapes, schedules and tile classes
mostly survive: 4096^3 becomes 512^3, a 32-row decode keeps its 32 rows). Each run is
`mlfuse run` (checked against the NumPy interpreter) under memcheck. Table last.

    python benchmarks/memcheck.py [--cap 512] [--only NAME] [--models DIR]   # on a GPU
    python benchmarks/models.py --export DIR --small                         # models for --models
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def sanitized(argv: list[str], timeout: int) -> tuple[str, str]:
    """(errors, check) of one `mlfuse run` under memcheck: the ERROR SUMMARY count and
    PASS/FAIL (or why neither came)."""
    cmd = ["compute-sanitizer", "--tool", "memcheck", "--report-api-errors", "no",
           sys.executable, "-m", "mlfuse", "run", *argv]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "-", f"timeout {timeout} s"
    out = done.stdout + done.stderr
    summary = re.search(r"ERROR SUMMARY: (\d+) error", out)
    verdict = "PASS" if re.search(r"^PASS$", out, re.M) else (
        "FAIL" if "FAIL" in out else out.strip().splitlines()[-1][:80] if out.strip() else "?")
    return (summary.group(1) if summary else "-"), verdict


def main(argv=None) -> int:
    from cases import CASES
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cap", type=int, default=512, help="largest size of a symbolic dim")
    p.add_argument("--only", action="append", help="only this case (repeatable)")
    p.add_argument("--models", metavar="DIR", help="also every .onnx model in DIR")
    p.add_argument("--timeout", type=int, default=240)
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if args.only and case.name not in args.only:
                continue
            path = Path(tmp) / f"{case.name}.fuse"
            path.write_text(case.source)
            dims = {k: min(v, args.cap) for k, v in case.dims.items()}
            run = [str(path), *[f"--dim={k}={v}" for k, v in dims.items()], "--seed", "1"]
            if case.matmul_precision:
                run += ["--matmul-precision", case.matmul_precision]
            errors, verdict = sanitized(run, args.timeout)
            rows.append((case.name, " ".join(f"{k}={v}" for k, v in dims.items()), errors, verdict))
            print(*rows[-1], flush=True)
    for model in sorted(Path(args.models).glob("*.onnx")) if args.models else []:
        errors, verdict = sanitized([str(model), "--seed", "1"], args.timeout)
        rows.append((model.stem, "(model)", errors, verdict))
        print(*rows[-1], flush=True)
    print("| case | sizes | memcheck errors | result |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0 if all(r[2] == "0" and r[3] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
