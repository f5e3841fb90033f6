"""The benchmark suite: every case of benchmarks/cases.py in one process, timed for
mlfuse (fused and unfused), PyTorch eager, torch.compile and CuPy, all on the same
inputs and each checked against mlfuse's NumPy interpreter.

    python benchmarks/run.py                    # on a GPU: writes benchmarks/results/
    python benchmarks/run.py --only softmax     # some cases
    python benchmarks/run.py --dry-run          # tiny sizes, simulator, no timings
    python benchmarks/run.py --markdown-from benchmarks/results/latest.json  # BENCHMARKS.md table

Device times: CUDA events around back-to-back calls after a warm-up, median of
repeats, inputs rotated when they fit in L2 (mlfuse.benchmark.time_gpu). The
small_latency case reports host microseconds per call over 2000 calls instead.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from cases import CASES, DRY_DIMS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PEERS = ("mlfuse", "mlfuse_unfused", "torch", "torch_compile", "cupy")
LATENCY_CALLS = 2000


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for name in ("numpy", "numba", "numba_cuda", "torch", "cupy", "mlfuse"):
        try:
            mod = __import__(name)
            out[name] = getattr(mod, "__version__", "?")
        except Exception:
            out[name] = None
    return out


def run_case(case, dims, timed: bool, peers: set) -> dict:
    import numpy as np
    import mlfuse
    from mlfuse.driver import parse_program
    from mlfuse.interp import run_tensor
    from mlfuse.testing import compare, program_size, random_inputs
    module = parse_program(case.source, f"{case.name}.fuse")
    func = module.funcs[0]
    inputs = random_inputs(func, dims, seed=0)
    log(f"{case.name}: reference (NumPy interpreter)")
    (expected,) = run_tensor(func, inputs)
    ops, reduced = program_size(func)
    result = {p: None for p in PEERS}
    result["checked"] = True
    result["errors"] = {}

    def check(label, got):
        c = compare(expected, np.asarray(got), ops, reduced)
        result["errors"][label] = c.max_abs_error
        if not c.ok:
            result["checked"] = False
            log(f"  {label}: MISMATCH {c.message} (max abs error {c.max_abs_error:.3g})")

    calls = {}
    target = "cuda" if timed else "simulator"
    for label, fuse in (("mlfuse", True), ("mlfuse_unfused", False)):
        if label in peers:
            log(f"{case.name}: compiling {label}")
            mod = mlfuse.compile_source(case.source, f"{case.name}.fuse", fuse=fuse, target=target)
            calls[label] = mod[func.sym_name]
    torch_inputs = None
    if timed and peers & {"torch", "torch_compile", "cupy"}:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch_inputs = [torch.from_numpy(a).cuda() for a in inputs]
        if "torch" in peers:
            calls["torch"] = case.torch_fn
        if "torch_compile" in peers:
            log(f"{case.name}: torch.compile")
            calls["torch_compile"] = torch.compile(case.torch_fn)
        if "cupy" in peers and case.cupy_factory is not None:
            try:
                calls["cupy"] = case.cupy_factory()
            except ImportError:
                pass
    for label, fn in calls.items():
        args = _args_for(label, inputs, torch_inputs, timed)
        try:
            got = fn(*args)
        except Exception as e:  # a peer that cannot run this case is reported, not fatal
            if label.startswith("mlfuse"):
                raise
            log(f"  {label} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            result["errors"][label] = f"failed: {type(e).__name__}"
            continue
        check(label, _to_numpy(got))
        if timed:
            log(f"{case.name}: timing {label}")
            result[label] = (_host_latency(fn, args) if case.latency
                             else _device_time(fn, label, inputs, torch_inputs))
    return result


def _args_for(label, inputs, torch_inputs, timed):
    if not timed:
        return inputs
    if label.startswith("mlfuse"):
        from numba import cuda
        return [cuda.as_cuda_array(t) for t in torch_inputs]  # same memory, no copy
    if label == "cupy":
        import cupy
        return [cupy.asarray(t) for t in torch_inputs]
    return torch_inputs


def _to_numpy(x):
    import numpy as np
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    if hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def _device_time(fn, label, inputs, torch_inputs) -> float:
    """Median ms per call; extra input sets rotate when the inputs fit in L2."""
    import torch
    from mlfuse.benchmark import rotations, time_gpu
    n_sets = rotations(sum(a.nbytes for a in inputs))
    sets = [torch_inputs] + [[t.clone().normal_() if t.is_floating_point() else t.clone()
                              for t in torch_inputs] for _ in range(n_sets - 1)]
    arg_sets = [_args_for(label, None, s, True) for s in sets]
    t = time_gpu(lambda i: fn(*arg_sets[i]), n_sets=n_sets, repeats=11, budget_ms=800)
    return round(t.median_ms, 4)


def _host_latency(fn, args) -> float:
    """Host microseconds per call, over LATENCY_CALLS calls, synchronized at the end."""
    from numba import cuda
    for _ in range(20):
        fn(*args)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(LATENCY_CALLS):
        fn(*args)
    cuda.synchronize()
    return round((time.perf_counter() - start) / LATENCY_CALLS * 1e6, 2)


def copy_bandwidth_GBps() -> float:
    import torch
    from mlfuse.benchmark import time_gpu
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = time_gpu(lambda i: dst.copy_(src), warmup=3, repeats=10, calls_per_repeat=5)
    return round(2 * src.numel() * 4 / (t.median_ms * 1e-3) / 1e9, 1)


def write_results(results: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{results['device'].replace(' ', '_')}-{results['date']}"
    for path in (out / f"{stem}.json", out / "latest.json"):
        path.write_text(json.dumps(results, indent=2) + "\n")
    (out / "latest.md").write_text(markdown(results))


def markdown(results: dict) -> str:
    from mlfuse.benchmark import markdown_table
    rows = []
    for name, r in results["cases"].items():
        unit = "us (host)" if name == "small_latency" else "ms"
        best_peer = min((r[p] for p in ("torch", "torch_compile", "cupy") if r.get(p)), default=None)
        ratio = None if not (r.get("mlfuse") and best_peer) else round(r["mlfuse"] / best_peer, 2)
        rows.append([name, unit, r.get("mlfuse"), r.get("mlfuse_unfused"), r.get("torch"),
                     r.get("torch_compile"), r.get("cupy"), ratio,
                     "yes" if r.get("checked") else "NO"])
    head = (f"Device: {results['device']}; date: {results['date']}; copy bandwidth "
            f"{results['copy_GBps']} GB/s (read + write).\n\n")
    return head + markdown_table(
        ["case", "unit", "mlfuse", "mlfuse unfused", "torch", "torch.compile", "cupy",
         "mlfuse / best peer", "all checked"], rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", help="run only this case (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="tiny sizes on the simulator, no timing")
    p.add_argument("--markdown-from", help="print the Markdown table of a results JSON and exit")
    p.add_argument("--out", default=str(RESULTS), help="folder for the results")
    args = p.parse_args(argv)
    if args.markdown_from:
        print(markdown(json.loads(Path(args.markdown_from).read_text())), end="")
        return 0
    if args.dry_run:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    cases = [c for c in CASES if not args.only or c.name in args.only]
    timed = not args.dry_run
    device = "simulator"
    if timed:
        from mlfuse.device import gpu_present
        if not gpu_present():
            sys.stderr.write("benchmarks need a CUDA GPU (use --dry-run to check the script)\n")
            return 2
        import torch
        device = torch.cuda.get_device_name()
    results = {"device": device, "date": datetime.date.today().isoformat(), "versions": versions(),
               "command": "python benchmarks/run.py" + "".join(f" --only {o}" for o in args.only or []),
               "copy_GBps": copy_bandwidth_GBps() if timed else None, "cases": {}}
    if timed:
        from mlfuse.runtime_memory import active
        results["mlfuse_caching_allocator"] = active()
    for case in cases:
        if not timed and case.name in ("conv_bias_relu", "mlp"):
            log(f"{case.name}: skipped in --dry-run (fixed sizes too big for the simulator)")
            continue
        dims = {k: DRY_DIMS.get(k, v) for k, v in case.dims.items()} if not timed else case.dims
        started = time.perf_counter()
        peers = set(PEERS) if timed else {"mlfuse", "mlfuse_unfused"}
        results["cases"][case.name] = run_case(case, dims, timed, peers)
        log(f"{case.name}: done in {time.perf_counter() - started:.1f} s")
        if timed:  # after every case, so a run cut short still leaves its numbers
            write_results(results, Path(args.out))
    print(markdown(results) if timed else json.dumps(results["cases"], indent=1))
    return 0 if all(r["checked"] for r in results["cases"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
