"""Probe for the audit of issues 2-8: what only a GPU can show, through the CLI users run.

    python benchmarks/probe_audit.py          # under 3 minutes; logs to $OUT/ when set

1. `mlfuse run` on every example on the GPU (.fuse files fused and --no-fuse, the ONNX
   models fused): each
   result checked against the NumPy interpreter (issue 3 and 4: "on the GPU").
2. the rounding-decided regression with its own inputs on the GPU (issue 7).
3. `mlfuse bench --json` on a .fuse file and an ONNX model (the plumbing changed).
4. `mlfuse explain --compile --json`, fused and --no-fuse: Numba's real registers,
   local memory and shared memory for every kernel the report names (issue 4).
Each section runs in its own subprocess with a timeout; the table comes last.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
EXAMPLE_DIMS = ["--dim", "N=64", "--dim", "B=4096", "--dim", "R=4096", "--dim", "C=1000",
                "--dim", "D=1024"]
rows: list[tuple[str, str, str]] = []


def mlfuse(*argv, timeout=120) -> subprocess.CompletedProcess:
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "mlfuse.cli", *argv], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        done = subprocess.CompletedProcess(e.cmd, 124, e.stdout or "", f"timeout {timeout} s")
    done.seconds = time.perf_counter() - start
    if OUT:
        name = "_".join(Path(a).stem if "/" in a else a for a in argv[:3]).replace("-", "")
        (OUT / f"{name}.log").write_text(f"$ mlfuse {' '.join(argv)}\nrc={done.returncode}\n"
                                         f"{done.stdout}\n--- stderr\n{done.stderr}")
    return done


def on_gpu(done) -> bool:
    return "running on GPU" in done.stderr


def tail(text: str, n: int = 200) -> str:
    return " / ".join(text.strip().splitlines())[-n:].replace("|", "\\|")


def dims_for(path: Path) -> list[str]:
    text = path.read_text() if path.suffix == ".fuse" else ""
    out = []
    for flag, value in zip(EXAMPLE_DIMS[::2], EXAMPLE_DIMS[1::2]):
        name = value.split("=")[0]
        if f"{name}," in text or f"{name}]" in text:
            out += [flag, value]
    return out


def section(title, fn):
    try:
        fn()
    except Exception as e:  # one failure must not hide the rest
        rows.append((title, "ERROR", f"{type(e).__name__}: {e}"[:150]))


def runs():
    for path in sorted(Path("examples").glob("*.fuse")) + sorted(Path("examples/onnx").glob(
            "*.onnx")):
        for extra in ([], ["--no-fuse"]) if path.suffix == ".fuse" else ([],):
            done = mlfuse("run", str(path), *dims_for(path), *extra)
            kernels = [line.split(": ")[1] for line in done.stdout.splitlines()
                       if line.startswith("func ")]
            ok = done.returncode == 0 and done.stdout.rstrip().endswith("PASS") and on_gpu(done)
            rows.append((f"run {path.name} {' '.join(extra)}".strip(), "ok" if ok else "FAIL",
                         f"{', '.join(kernels)}; {done.seconds:.1f} s"
                         + ("" if ok else f"; {tail(done.stdout + done.stderr)}")))


def regression():
    case = Path("tests/regressions/layernorm_inf_gamma_equal_values")
    done = mlfuse("run", str(case.with_suffix(".fuse")), "--inputs", str(case.with_suffix(".npz")))
    line = next((ln for ln in done.stdout.splitlines() if "result 0" in ln), done.stderr)
    ok = done.returncode == 0 and on_gpu(done)
    rows.append(("run layernorm_inf_gamma --inputs", "ok" if ok else "FAIL", tail(line, 120)))


def bench():
    for path, dims in (("examples/softmax.fuse", ["--dim", "R=4096", "--dim", "C=1024"]),
                       ("examples/onnx/mlp.onnx", [])):
        target = (OUT or Path("/tmp")) / f"bench_{Path(path).stem}.json"
        done = mlfuse("bench", path, *dims, "--json", str(target), timeout=180)
        data = json.loads(target.read_text()) if target.exists() else {"functions": []}
        summary = "; ".join(f"{f['func']}: fused {f['fused']['median_ms']:.4f} ms, unfused "
                            f"{f['unfused']['median_ms']:.4f} ms, checked "
                            f"{f['fused']['checked'] and f['unfused']['checked']}"
                            for f in data["functions"])
        rows.append((f"bench {Path(path).name} --json", "ok" if done.returncode == 0 else "FAIL",
                     summary or tail(done.stderr)))


def explain_compile():
    for extra in ([], ["--no-fuse"]):
        done = mlfuse("explain", "examples/layernorm.fuse", "--dim", "B=4096", "--compile",
                      "--json", *extra)
        report = json.loads(done.stdout)["layernorm"] if done.returncode == 0 else None
        kernels = report["kernels"] if report else []
        known = all(k["registers"] is not None for k in kernels) and kernels
        rows.append((f"explain --compile {' '.join(extra)}".strip(),
                     "ok" if known else "FAIL",
                     "; ".join(f"{k['name']}: {k['registers']} regs, {k['local_memory_bytes']} B "
                               f"local, {k['shared_memory_bytes']} B shared" for k in kernels)
                     or tail(done.stderr)))


def main():
    if OUT:
        OUT.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for title, fn in (("runs", runs), ("regression", regression), ("bench", bench),
                      ("explain", explain_compile)):
        section(title, fn)
    print(f"\nprobe_audit: {time.perf_counter() - start:.0f} s")
    print("| check | result | detail |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
