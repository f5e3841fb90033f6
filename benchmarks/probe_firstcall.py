"""Probe: the cold first call of real models (issue 15's first-call time), on a GPU.

    python benchmarks/probe_firstcall.py DIR [--only=NAME]... [--serial] [--workers=N]
        [--timeout=S]

DIR holds the models as benchmarks/models.py exports them (``python benchmarks/models.py
--export DIR``; a missing one is exported there first, which needs torch, torchvision,
timm and transformers). Each model runs in a fresh process, as a user's would, with
MLFUSE_KERNEL_CACHE=0 and an empty MLFUSE_CACHE_DIR: nothing compiled earlier is
found. Per model: the compile time (import, passes, code generation, module load), the
first call's time (kernel compiles, launches, synchronize) and in it the parallel
precompile's (runtime/precompile.py: tasks, workers' kernels, seconds), the kernels a
call launches, the distinct kernel codes it compiled (codegen/shared_code.py: a
repeated layer's kernels are one), the kernels still compiled at their launch, and
every output checked against ONNX Runtime (relative error <= 1e-5, as models.py).
``--serial`` adds a run per model with MLFUSE_COMPILE_WORKERS=0 (one process compiles
everything: the time before the parallel precompile); ``--workers=N`` runs the
parallel mode with N compile workers (MLFUSE_COMPILE_WORKERS; default: the CPUs less
one, at most 8). The table comes last.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
MODELS = ("resnet18", "mobilenet_v3_small", "vit_tiny", "gpt2", "bert_encoder")
REL_ERROR_LIMIT = 1e-5


def compiled_kernels(python_module) -> tuple[int, int]:
    """(distinct kernels compiled or installed in this process, of which compiled at
    their launch): every dispatcher's overloads, and its compiles at launch (Numba
    counts a compile as a disk-cache miss; the cache is off here)."""
    from mlfuse.codegen.abi import is_tiled_kernel
    seen, total, at_launch = set(), 0, 0
    for value in vars(python_module).values():
        kernels = value.kernels.values() if is_tiled_kernel(value) else [value]
        for k in kernels:
            if id(k) in seen or not hasattr(k, "overloads"):
                continue
            seen.add(id(k))
            total += len(k.overloads)
            misses = getattr(getattr(k, "stats", None), "cache_misses", {})
            at_launch += sum(misses.values())
    return total, at_launch


def child(name: str, path: str) -> dict:
    """One model, cold, in this process: the row of the table."""
    import numpy as np
    from models import onnx_runtime, random_feeds, relative_error
    from numba import cuda

    import mlfuse
    from mlfuse.runtime import precompile
    row = {"model": name}
    feeds = random_feeds(path)
    expected = onnx_runtime(path, feeds)
    pre = {"tasks": 0, "compiled": 0, "s": 0.0}
    run_workers = precompile.run_workers

    def recording(module_path, tasks, workers, scope=None):
        started = time.perf_counter()
        done = run_workers(module_path, tasks, workers, scope)
        pre.update(tasks=len(tasks), compiled=done, s=time.perf_counter() - started,
                   workers=min(workers, len(tasks)))
        return done
    precompile.run_workers = recording
    started = time.perf_counter()
    model = mlfuse.compile_onnx(path)
    row["compile_s"] = time.perf_counter() - started
    inputs = [cuda.to_device(feeds[n]) for n in model.input_names]
    started = time.perf_counter()
    got = model(*inputs)
    cuda.synchronize()
    row["first_call_s"] = time.perf_counter() - started
    started = time.perf_counter()
    model(*inputs)
    cuda.synchronize()
    row["second_call_ms"] = (time.perf_counter() - started) * 1e3
    row["kernels"] = len(model.kernels())
    row["compiled"], row["at_launch"] = compiled_kernels(model.compiled.python_module)
    row["precompile"] = pre
    errors = [relative_error(np.asarray(g.copy_to_host() if hasattr(g, "copy_to_host") else g),
                             w) for g, w in zip(got, expected)]
    row["rel_error"] = max(errors)
    row["ok"] = len(got) == len(expected) and row["rel_error"] <= REL_ERROR_LIMIT
    return row


def run(name: str, path: Path, serial: bool, timeout: float, workers: str | None) -> dict:
    """``child`` in a fresh process with a cold cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, MLFUSE_KERNEL_CACHE="0", MLFUSE_CACHE_DIR=cache,
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        if serial or workers:
            env["MLFUSE_COMPILE_WORKERS"] = "0" if serial else workers
        started = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, __file__, "--child", name, str(path)],
                                  check=False, capture_output=True, text=True, env=env,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"model": name, "error": f"timed out after {timeout:.0f} s"}
        wall = time.perf_counter() - started
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        return {"model": name, "error": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    row = json.loads(lines[-1])
    row["process_s"] = wall
    return row


def table(rows: list[dict]) -> str:
    head = ("model", "mode", "compile s", "first call s", "precompile (tasks/done/s)",
            "kernels", "compiled", "at launch", "2nd call ms", "rel. error", "ok")
    out = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        if "error" in r:
            out.append(f"{r['model']} | {r['mode']} | FAILED: {r['error']}")
            continue
        p = r["precompile"]
        out.append(" | ".join(str(c) for c in (
            r["model"], r["mode"], f"{r['compile_s']:.2f}", f"{r['first_call_s']:.2f}",
            f"{p['tasks']}/{p['compiled']}/{p['s']:.1f}", r["kernels"], r["compiled"],
            r["at_launch"], f"{r['second_call_ms']:.2f}", f"{r['rel_error']:.1e}",
            "ok" if r["ok"] else "MISMATCH")))
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], argv[2])), flush=True)
        return 0
    folder = Path(next(a for a in argv if not a.startswith("--")))
    only = [a.split("=", 1)[1] for a in argv if a.startswith("--only=")] or list(MODELS)
    timeout = next((float(a.split("=", 1)[1]) for a in argv if a.startswith("--timeout=")), 150)
    workers = next((a.split("=", 1)[1] for a in argv if a.startswith("--workers=")), None)
    modes = ["parallel"] + (["serial"] if "--serial" in argv else [])
    rows = []
    for name in only:
        path = folder / f"{name}.onnx"
        if not path.exists():
            from models import MODELS as CASES
            from models import export
            folder.mkdir(parents=True, exist_ok=True)
            export(next(c for c in CASES if c.name == name), folder)
        for mode in modes:
            row = run(name, path, mode == "serial", timeout, workers)
            row["mode"] = mode
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(table(rows))
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
