"""``mlfuse bench``: fused vs unfused on the GPU, checked, with bandwidth figures."""
from __future__ import annotations

import json
import sys

from mlfuse.cli.options import fuse_options, parse_dims
from mlfuse.cli.program import load_program
from mlfuse.runtime.device import gpu_present


def status(message: str) -> None:
    sys.stderr.write(f"\r\033[K{message}")
    sys.stderr.flush()


def measure_copy_bandwidth() -> float:
    """Bytes read + written per second of a large device-to-device copy: the faster
    of cuMemcpyDtoD and, when PyTorch is importable, its copy kernel. (On an H100 the
    driver's copy measured 2.75 TB/s and PyTorch's 3.0 TB/s; fused kernels reach
    2.8 TB/s, so the slower one alone would report shares over 100%.)"""
    import numpy as np
    from numba import cuda
    from mlfuse.tools.benchmark import time_gpu
    n = 1 << 28  # 1 GiB of float32
    src = cuda.device_array(n, np.float32)
    dst = cuda.device_array(n, np.float32)
    copies = [lambda i: dst.copy_to_device(src)]
    try:
        import torch
        tsrc, tdst = torch.as_tensor(src, device="cuda"), torch.as_tensor(dst, device="cuda")
        copies.append(lambda i: tdst.copy_(tsrc))
    except ImportError:
        pass
    best_ms = min(time_gpu(copy, warmup=2, repeats=10, calls_per_repeat=3).median_ms
                  for copy in copies)
    return 2 * n * 4 / (best_ms * 1e-3)


def bench_function(program, func, dims, seed=0, fuse_options=None, tune=False,
                   matmul_precision=None) -> dict:
    """Compile ``func`` of ``program`` (a cli_program.Program) fused and unfused, check
    both, time both; return the numbers. The fused kernels are planned at ``dims`` (and
    ``fuse_options``' limit), as the bytes-moved figure is. ``tune``: first search the
    tile shape of each contraction kernel (mlfuse.tools.tuning) and remember it.
    ``matmul_precision``: how f32 contractions multiply (checked with its tolerance)."""
    from numba import cuda
    from mlfuse.tools.benchmark import rotations, time_gpu
    from mlfuse.interp import run_tensor
    from mlfuse.tools.checking import compare, matmul_eps, program_size

    name = func.sym_name
    inputs = program.inputs(func, dims, seed)
    expected = run_tensor(func, inputs)
    ops, reduced = program_size(func, dims=dims)
    fuse_options = {**(fuse_options or {}), "dims": dims}
    bytes_unfused, bytes_fused = bytes_moved(func, dims, fuse_options.get("limit"))
    n_sets = rotations(sum(a.nbytes for a in inputs))
    sets = [[cuda.to_device(a) for a in program.inputs(func, dims, seed + k)]
            for k in range(n_sets)]
    out = {"func": name, "dims": dims, "bytes_fused": bytes_fused, "bytes_unfused": bytes_unfused}
    for label, fuse in (("fused", True), ("unfused", False)):
        status(f"{name}: compiling and checking {label}")
        mod = program.compile(fuse=fuse, target="cuda", fuse_options=fuse_options,
                              matmul_precision=matmul_precision)
        f = mod[name]
        if tune:
            out.setdefault("tuned", {})[label] = tune_tiles(mod, f, sets[0])
        got = f(*[cuda.to_device(a) for a in inputs])
        got = got if isinstance(got, tuple) else (got,)
        unit = matmul_eps(mod.kernels(name))
        checks = [compare(e, g.copy_to_host(), ops, reduced, unit=unit)
                  for e, g in zip(expected, got)]
        status(f"{name}: timing {label}")
        t = time_gpu(lambda i: f(*sets[i]), n_sets=n_sets)
        out[label] = {"median_ms": t.median_ms, "spread": t.spread, "kernels": len(mod.kernels(name)),
                      "checked": all(c.ok for c in checks),
                      "max_abs_error": max(c.max_abs_error for c in checks)}
    status("")
    return out


def tune_tiles(mod, f, args) -> dict:
    """Search and remember the tile shape and K split of each contraction kernel of ``f``
    for these sizes; returns {kernel: {"shape", "best", "model", "ms"}} for --json
    (tiles labelled BM x BN, with /S for a K split into S shares)."""
    from mlfuse.tools.benchmark import time_gpu
    from mlfuse.runtime.device import device_name
    from mlfuse.tools.tuning import remember, tune

    def timer(call):
        return time_gpu(lambda i: call(), repeats=5, budget_ms=300).median_ms
    choices = tune(f, mod.python_module, args, timer, progress=status)
    remember(mod.source, device_name(), choices)
    def label(plan):  # BM x BN, and /S when K is split into S shares
        return f"{plan[0]}x{plan[1]}" + (f"/{plan[2]}" if plan[2] > 1 else "")
    for c in choices:
        times = ", ".join(f"{label(p)} {ms:.3f}" for p, ms in c.times_ms.items())
        sys.stderr.write(f"\r\033[Ktuned {c.kernel} at (m, n, k, batch) = {c.shape}: "
                         f"{label(c.best)} (model: {label(c.model)}); ms: {times}\n")
    return {c.kernel: {"shape": list(c.shape), "best": list(c.best), "model": list(c.model),
                       "ms": {label(p): ms for p, ms in c.times_ms.items()}}
            for c in choices}


def bytes_moved(func, dims: dict, limit: int | None = None) -> tuple[int, int]:
    """DRAM bytes (read + written) of one call unfused and fused, from the explain
    report's model: every kernel reads its inputs and writes its outputs once."""
    from mlfuse.pipeline import lower
    from mlfuse.tools.explain import explain_module
    report = explain_module(lower(_clone(func), "loops", fuse_options={"dims": dims}), dims, limit)[0]
    return report.bytes_before, report.bytes_after


def _clone(func):
    """A fresh module holding a copy of one tensor-level function."""
    from mlfuse.dialects import parse_ir
    from mlfuse.ir.printer import print_ir
    return parse_ir(print_ir(func))


def bench_command(args) -> int:
    if not gpu_present():
        sys.stderr.write("mlfuse bench: no CUDA GPU found; it never reports simulator timings "
                         "as performance\n")
        return 2
    from mlfuse.runtime.memory import install
    install()  # before any Numba CUDA call: compiled functions allocate their results per call
    from mlfuse.tools.benchmark import markdown_table
    from mlfuse.tools.checking import bind_dims
    program = load_program(args.file, args.func)
    given = program.dims(parse_dims(args.dim))
    status("measuring copy bandwidth")
    copy = measure_copy_bandwidth()
    results = []
    rows = []
    for func in program.module.funcs:
        dims = bind_dims(func, given, default=None)
        r = bench_function(program, func, dims, fuse_options=fuse_options(args),
                           tune=args.tune, matmul_precision=args.matmul_precision)
        results.append(r)
        fused, unfused = r["fused"], r["unfused"]
        bw = r["bytes_fused"] / (fused["median_ms"] * 1e-3)
        r.update(speedup=unfused["median_ms"] / fused["median_ms"], GBps=bw / 1e9,
                 copy_share=bw / copy)  # so --json holds every number of the table
        rows.append([r["func"], fused["median_ms"], unfused["median_ms"], r["speedup"],
                     r["bytes_fused"] / 1e6, r["GBps"], 100 * r["copy_share"],
                     f"{fused['kernels']} / {unfused['kernels']}",
                     "yes" if fused["checked"] and unfused["checked"] else "NO"])
    print(f"copy bandwidth: {copy / 1e9:.0f} GB/s (read + write)")
    print(markdown_table(["func", "fused ms", "unfused ms", "speedup", "MB moved", "GB/s",
                          "% of copy", "kernels fused/unfused", "checked"], rows), end="")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"copy_GBps": copy / 1e9, "functions": results}, fh, indent=2)
    return 0 if all(r["fused"]["checked"] and r["unfused"]["checked"] for r in results) else 1
