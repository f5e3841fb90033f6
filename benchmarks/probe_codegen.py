"""Probe: how fast are the kernels mlfuse generates for the memory-bound cases, and
which launch constants suit them? Run on the GPU (one process, ~2-3 minutes):

    python benchmarks/probe_codegen.py [--peers] [--sweep] [--out DIR]

For each memory-bound case of benchmarks/cases.py (ew_chain, ew_chain10, softmax,
layernorm, sumsq) it generates the module, checks its result against the NumPy
interpreter, and times (CUDA events, median) both the host function and its kernel
launches replayed alone (the same grids and arguments, without the host's dispatch
and allocation), so a kernel faster than the host path still shows its own time.
It prints each kernel's registers and local memory per thread (local memory in a
register-held schedule means Numba did not unroll a slot loop). ``--peers`` also
times torch and torch.compile on the same inputs; ``--sweep`` re-generates the module
with other POINTS_PER_THREAD / VALUES_PER_THREAD / THREADS_PER_BLOCK values. Not part
of the test suite (benchmarks/run.py is the benchmark).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cases import CASES  # noqa: E402

MEMORY_BOUND = ("ew_chain", "ew_chain10", "softmax", "layernorm", "sumsq")
# Variants to try: module constants (NAME: value) or literal source edits (text: text).
_POINTWISE = [{"THREADS_PER_BLOCK": 512}, {"THREADS_PER_BLOCK": 512, "POINTS_PER_THREAD": 8},
              {"POINTS_PER_THREAD": 8}]
_ROWS = [{"launch_bounds=REGISTER_ROW_THREADS": f"launch_bounds=(REGISTER_ROW_THREADS, {b})"}
         for b in (3, 4)] + [{"VALUES_PER_THREAD": 16, "REGISTER_ROW_THREADS": 256}]
SWEEP = {"ew_chain": _POINTWISE, "ew_chain10": _POINTWISE, "softmax": _ROWS,
         "layernorm": _ROWS, "sumsq": [{"VALUES_PER_THREAD": 16, "REGISTER_ROW_THREADS": 256}]}


class LaunchRecorder:
    """Stands in for a generated kernel: records each launch (grid, block, args) and
    runs it, so the launches can be replayed without the host function."""

    def __init__(self, kernel, launches: list):
        self.kernel, self.launches = kernel, launches

    def __getitem__(self, config):
        def launch(*args):
            self.launches.append((self.kernel, config, args))
            return self.kernel[config](*args)
        return launch


def load(source: str, name: str, constants: dict):
    from mlfuse.runtime.loader import load_source
    for key, value in constants.items():
        if re.fullmatch(r"[A-Z_]+", key):  # a module constant
            source, n = re.subn(rf"^{key} = \d+", f"{key} = {value}", source, flags=re.M)
        else:
            n = source.count(key)
            source = source.replace(key, value)
        assert n >= 1, key
    return load_source(source, name)


def kernel_resources(kernels: dict) -> list[str]:
    """Registers / local bytes per thread of each kernel that was compiled."""
    out = []
    for name, obj in kernels.items():
        if obj.overloads:
            regs = obj.get_regs_per_thread()
            local = obj.get_local_mem_per_thread()
            regs = max(regs.values()) if isinstance(regs, dict) else regs
            local = max(local.values()) if isinstance(local, dict) else local
            out.append(f"{name}: {regs} regs, {local} B local")
    return out


def measure(case, func, inputs, expected, constants: dict) -> dict:
    from numba import cuda

    from mlfuse.tools.benchmark import time_gpu
    from mlfuse.codegen import generate
    from mlfuse.pipeline import compile_text
    from mlfuse.tools.checking import compare, program_size
    source = generate(compile_text(case.source, f"{case.name}.fuse", level="fused"), "cuda")
    module = load(source, case.name, constants)
    host = module.ENTRY_POINTS[func.sym_name]
    args = [cuda.to_device(a) for a in inputs]
    launches: list = []
    kernel_def = r"^@cuda\.jit(?:\(launch_bounds=\w+\))?\ndef (\w+)\("
    kernels = {name: getattr(module, name) for name in re.findall(kernel_def, source, flags=re.M)}
    for name, kernel in kernels.items():
        setattr(module, name, LaunchRecorder(kernel, launches))
    got = host(*args).copy_to_host()
    for name, kernel in kernels.items():  # record only the first call's launches
        setattr(module, name, kernel)
    ops, reduced = program_size(func)
    check = compare(expected, got, ops, reduced)

    def replay(_):
        for kernel, config, kargs in launches:
            kernel[config](*kargs)
    kernel_ms = time_gpu(replay, repeats=11, budget_ms=600).median_ms
    host_ms = time_gpu(lambda _: host(*args), repeats=11, budget_ms=600).median_ms
    return {"ok": check.ok, "err": check.max_abs_error, "kernel_ms": kernel_ms,
            "host_ms": host_ms, "grids": [str(c) for _, c, _ in launches],
            "resources": kernel_resources(kernels)}


def peer_times(case, inputs) -> dict:
    import torch

    from mlfuse.tools.benchmark import time_gpu
    torch.backends.cuda.matmul.allow_tf32 = False
    args = [torch.from_numpy(a).cuda() for a in inputs]
    out = {}
    for label, fn in (("torch", case.torch_fn), ("torch_compile", torch.compile(case.torch_fn))):
        fn(*args)
        out[label] = time_gpu(lambda _: fn(*args), repeats=11, budget_ms=600).median_ms
    return out


def copy_bandwidth() -> float:
    """Device-to-device copy of 2**28 bytes, in GB/s counting bytes read + written."""
    import numpy as np
    from numba import cuda

    from mlfuse.tools.benchmark import time_gpu
    a = cuda.device_array(1 << 26, np.float32)
    b = cuda.device_array(1 << 26, np.float32)
    ms = time_gpu(lambda _: b.copy_to_device(a), repeats=11, budget_ms=600).median_ms
    return 2 * a.nbytes / (ms * 1e-3) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", action="store_true", help="time torch and torch.compile")
    parser.add_argument("--sweep", action="store_true", help="try other launch constants")
    parser.add_argument("--out", default=None, help="write results.json there")
    opts = parser.parse_args()

    from mlfuse.pipeline import parse_program
    from mlfuse.interp import run_tensor
    from mlfuse.runtime.memory import install
    from mlfuse.tools.checking import random_inputs
    install()
    gbs = copy_bandwidth()
    rows, results = [], {"copy_gb_s": gbs, "cases": {}}
    for case in [c for c in CASES if c.name in MEMORY_BOUND]:
        func = parse_program(case.source, f"{case.name}.fuse").funcs[0]
        inputs = random_inputs(func, case.dims, seed=0)
        (expected,) = run_tensor(func, inputs)
        moved = sum(a.nbytes for a in inputs) + expected.nbytes
        floor_ms = moved / (gbs * 1e9) * 1e3
        peers = peer_times(case, inputs) if opts.peers else {}
        variants = [{}] + (SWEEP[case.name] if opts.sweep else [])
        for constants in variants:
            label = ",".join(f"{k}={v}" if re.fullmatch(r"[A-Z_]+", k) else v.split("=")[1]
                             for k, v in constants.items()) or "default"
            try:
                r = measure(case, func, inputs, expected, constants)
            except Exception as e:  # one failing variant must not lose the others' numbers
                print(f"{case.name} [{label}] FAILED: {type(e).__name__}: {e}"[:400], flush=True)
                continue
            r.update(peers, floor_ms=floor_ms, constants=constants)
            results["cases"].setdefault(case.name, []).append(r)
            print(f"{case.name} [{label}] ok={r['ok']} err={r['err']:.2g} grids={r['grids']} "
                  f"{'; '.join(r['resources'])}", flush=True)
            rows.append((case.name, label, r["kernel_ms"], r["host_ms"], floor_ms,
                         peers.get("torch"), peers.get("torch_compile"), r["ok"]))
    if opts.out:
        Path(opts.out).mkdir(parents=True, exist_ok=True)
        (Path(opts.out) / "probe_codegen.json").write_text(json.dumps(results, indent=1))
    print(f"\ncopy bandwidth {gbs:.0f} GB/s (read + write); floor = bytes moved / that")
    print(f"{'case':11} {'variant':40} {'kernel':>7} {'host fn':>7} {'floor':>6} {'%copy':>6} "
          f"{'torch':>6} {'t.comp':>6} ok")
    for name, label, k, h, f, t, tc, ok in rows:
        peer = [f"{v:6.3f}" if v else "     -" for v in (t, tc)]
        print(f"{name:11} {label:40} {k:7.3f} {h:7.3f} {f:6.3f} {100 * f / k:5.0f}% "
              f"{peer[0]} {peer[1]} {ok}")


if __name__ == "__main__":
    main()
