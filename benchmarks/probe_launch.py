"""Probe: host time per call of compiled functions, Numba's launches ("numba") against
the planned driver launches (mlfuse/runtime/launcher.py) through cuda-bindings ("bindings")
and through ctypes ("ctypes"), with Numba device arrays and PyTorch tensors as inputs.

Cases: the fused chain relu(x*2+b)*0.5+x (1 kernel), the same 3 first ops unfused
(relu(x*2+b), fuse=False: 3 kernels), softmax rows of 128 (registers variant) and of
8192 (streaming variant). Every result is checked against NumPy on fresh random inputs
(the first call, which records the plan, and two planned calls), with the result
buffers poisoned with NaN first (the allocators hand back freed blocks). Host time as
benchmarks/run.py measures it: 2000 back-to-back calls, synchronized at the end
(median of 3). Peers on the chain: PyTorch eager and cupy.fuse (if importable).
Then the chain on 2^26 elements: device time (CUDA events) old vs new, and host time
per call enqueued without synchronizing (far below the device time: no hidden sync).

Run from the repository root: python benchmarks/probe_launch.py (logs in $OUT)."""
import os
import statistics
import sys
import time
import traceback
from functools import partial

sys.path.insert(0, ".")
import numpy as np  # noqa: E402

from mlfuse.runtime.memory import install  # noqa: E402

install()  # before Numba's context exists
from numba import cuda  # noqa: E402

import mlfuse  # noqa: E402
from mlfuse.api import CompiledFunction  # noqa: E402
from mlfuse.tools.benchmark import time_gpu  # noqa: E402
from mlfuse.runtime.cuda_driver import LAUNCHES  # noqa: E402
from mlfuse.runtime.launcher import DriverCall, FastPath, launch_mode  # noqa: E402
from mlfuse.runtime.memory import active  # noqa: E402
from mlfuse.tools.checking import compare  # noqa: E402

OUT = os.environ.get("OUT")
LOG = open(os.path.join(OUT, "probe_launch.log"), "w") if OUT else None
CALLS = 2000
MODES = ("numba", "bindings", "ctypes")


def log(*parts):
    text = " ".join(str(p) for p in parts)
    print(text, flush=True)
    if LOG:
        LOG.write(text + "\n")
        LOG.flush()


def softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


CHAIN = "func chain(x: f32[N], b: f32[N]) -> f32[N] {\n    return relu(x * 2.0 + b) * 0.5 + x\n}\n"
CHAIN3 = "func chain3(x: f32[N], b: f32[N]) -> f32[N] {\n    return relu(x * 2.0 + b)\n}\n"
SOFTMAX = open("examples/softmax.fuse").read()
CASES = [  # name, source, fuse, function, input shapes, reference, ops, reduced
    ("chain N=1024", CHAIN, True, "chain", [(1024,), (1024,)],
     lambda x, b: np.maximum(x * 2 + b, 0) * 0.5 + x, 5, 1),
    ("3 kernels N=1024", CHAIN3, False, "chain3", [(1024,), (1024,)],
     lambda x, b: np.maximum(x * 2 + b, 0), 3, 1),
    ("softmax 32x128", SOFTMAX, True, "softmax", [(32, 128)], softmax_ref, 5, 128),
    ("softmax 4x8192", SOFTMAX, True, "softmax", [(4, 8192)], softmax_ref, 5, 8192),
]


def variants(compiled):
    """The function with each launch mode, sharing its host function and kernels."""
    sig, host = compiled.signature, compiled.host
    return {"numba": CompiledFunction(sig, host),
            **{m: CompiledFunction(sig, host, FastPath(sig, partial(DriverCall,
                                                                    launch_class=LAUNCHES[m])))
               for m in LAUNCHES}}


def to_kind(arrays, kind):
    if kind == "torch":
        import torch
        return [torch.from_numpy(a).cuda() for a in arrays]
    if kind == "cupy":
        import cupy
        return [cupy.asarray(a) for a in arrays]
    return [cuda.to_device(a) for a in arrays]


def to_numpy(x):
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return x.get()


def poison(shape, kind, count=4):
    """Freed blocks of ``shape`` full of NaN: a result that is not written stays NaN."""
    if kind == "torch":
        import torch
        blocks = [torch.full(shape, float("nan"), device="cuda") for _ in range(count)]
    elif kind == "cupy":
        import cupy
        blocks = [cupy.full(shape, np.nan, dtype=np.float32) for _ in range(count)]
    else:
        blocks = [cuda.to_device(np.full(shape, np.nan, np.float32)) for _ in range(count)]
    cuda.synchronize()
    del blocks


def host_latency(fn, args, repeats=3):
    for _ in range(20):
        fn(*args)
    cuda.synchronize()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(CALLS):
            fn(*args)
        cuda.synchronize()
        runs.append((time.perf_counter() - start) / CALLS * 1e6)
    return statistics.median(runs)


def check(fn, shapes, reference, kind, ops, reduced, seeds):
    """Results of calls on fresh inputs (one per seed) against NumPy: (ok, message)."""
    for seed in seeds:
        rng = np.random.default_rng(seed)
        host = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        poison(shapes[0], kind)
        got = to_numpy(fn(*to_kind(host, kind)))
        c = compare(reference(*host).astype(np.float32), got, ops, reduced)
        if not c.ok:
            return False, f"seed {seed}: {c.message}"
    return True, "ok"


def kinds_available():
    kinds = ["numba"]
    try:
        import torch
        if torch.cuda.is_available():
            kinds.append("torch")
    except ImportError:
        pass
    return kinds


def section_cases(rows):
    kinds = kinds_available()
    for name, source, fuse, func, shapes, reference, ops, reduced in CASES:
        try:
            module = mlfuse.compile_source(source, f"{func}.fuse", fuse=fuse, target="cuda")
            fns = variants(module[func])
            kernels = len(module.kernels(func))
        except Exception:
            log(f"SECTION FAILED {name}:\n{traceback.format_exc()}")
            continue
        for kind in kinds:
            try:
                times, checks = {}, []
                for mode, fn in fns.items():
                    ok, message = check(fn, shapes, reference, kind, ops, reduced, (1, 2, 3))
                    checks.append(ok)
                    if not ok:
                        log(f"CHECK FAILED {name} {kind} {mode}: {message}")
                    if fn.fast_path is not None:
                        plans = fn.fast_path.plans
                        bound = [p for p in plans.values() if p is not None]
                        log(f"{name} {kind} {mode}: {len(bound)}/{len(plans)} plans bound, "
                            f"kernels {[[la[0].name for la in p._launches] for p in bound]}, "
                            f"refused {list(fn.fast_path.refused.values())}")
                    args = to_kind([np.random.default_rng(9).standard_normal(s)
                                    .astype(np.float32) for s in shapes], kind)
                    times[mode] = host_latency(fn, args)
                    log(f"{name} {kind} {mode}: {times[mode]:.2f} us/call")
                best = min(times["bindings"], times["ctypes"])
                rows.append((name, kind, kernels, times["numba"], times["bindings"],
                             times["ctypes"], best / kernels, all(checks)))
            except Exception:
                log(f"SECTION FAILED {name} {kind}:\n{traceback.format_exc()}")


def section_peers(rows):
    n = 1024
    rng = np.random.default_rng(5)
    x, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    want = np.maximum(x * 2 + b, 0) * 0.5 + x
    try:
        import torch
        tx, tb = torch.from_numpy(x).cuda(), torch.from_numpy(b).cuda()

        def eager(x, b):
            return torch.relu(x * 2.0 + b) * 0.5 + x
        ok = compare(want, eager(tx, tb).cpu().numpy(), 5, 1).ok
        rows.append(("chain N=1024", "torch eager", 5, None, None, None,
                     host_latency(eager, (tx, tb)) / 5, ok))
    except Exception:
        log(f"torch eager: {traceback.format_exc()}")
    try:
        import cupy

        @cupy.fuse()
        def fused(x, b):
            return cupy.maximum(x * 2.0 + b, 0) * 0.5 + x
        cx, cb = cupy.asarray(x), cupy.asarray(b)
        ok = compare(want, fused(cx, cb).get(), 5, 1).ok
        rows.append(("chain N=1024", "cupy.fuse", 1, None, None, None,
                     host_latency(fused, (cx, cb)), ok))
        module = mlfuse.compile_source(CHAIN, "chain.fuse", target="cuda")
        ok, message = check(module.chain, [(n,), (n,)],
                            lambda x, b: np.maximum(x * 2 + b, 0) * 0.5 + x, "cupy", 5, 1, (1, 2))
        rows.append(("chain N=1024", "cupy in, mlfuse", 1, None, None, None,
                     host_latency(module.chain, (cx, cb)), ok))
    except ImportError:
        log("cupy not importable")
    except Exception:
        log(f"cupy: {traceback.format_exc()}")


def section_breakdown():
    """Where a planned call's host time goes (numba arrays, the chain)."""
    try:
        module = mlfuse.compile_source(CHAIN, "chain.fuse", target="cuda")
        f = module.chain
        x, b = to_kind([np.ones(1024, np.float32)] * 2, "numba")
        for _ in range(3):
            f(x, b)
        fast = f.fast_path
        key, pointers = fast.read((x, b))
        bound = fast.plans[key]
        allocate = bound._allocate[0]
        launch = bound._launches[0][0]

        def per_call(fn, n=5000):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            cuda.synchronize()
            return (time.perf_counter() - start) / n * 1e6
        parts = {"read 2 arguments": lambda: fast.read((x, b)),
                 "read + look up": lambda: fast.plans.get(fast.read((x, b))[0]),
                 "planned call": lambda: bound((x, b), list(pointers)),
                 "allocate result": allocate,
                 "cuda.device_array": lambda: cuda.device_array(1024, np.float32),
                 "launch only (may wait on the GPU)": launch,
                 "whole call": lambda: f(x, b)}
        for label, fn in parts.items():
            log(f"breakdown {label}: {per_call(fn):.2f} us")
    except Exception:
        log(f"SECTION FAILED breakdown:\n{traceback.format_exc()}")


def section_large(rows):
    """2^26 elements: device time old vs new, and the enqueue rate without syncing."""
    n = 1 << 26
    try:
        module = mlfuse.compile_source(CHAIN, "chain.fuse", target="cuda")
        fns = variants(module.chain)
        kinds = kinds_available()
        for kind in kinds:
            ok, message = check(fns["bindings"], [(n,), (n,)],
                                lambda x, b: np.maximum(x * 2 + b, 0) * 0.5 + x, kind, 5, 1, (4, 5))
            args = to_kind([np.random.default_rng(s).standard_normal(n).astype(np.float32)
                            for s in (7, 8)], kind)
            for mode, fn in fns.items():
                device_ms = time_gpu(lambda i: fn(*args), repeats=9, budget_ms=400).median_ms
                for _ in range(3):
                    fn(*args)
                cuda.synchronize()
                start = time.perf_counter()
                for _ in range(50):
                    fn(*args)
                enqueue = (time.perf_counter() - start) / 50 * 1e6
                cuda.synchronize()
                log(f"2^26 {kind} {mode}: device {device_ms:.4f} ms, enqueue {enqueue:.1f} us/call")
                rows.append(("chain 2^26", f"{kind} {mode} (enqueue {enqueue:.1f} us/call)", 1,
                             None, None, None, device_ms * 1000, ok))
    except Exception:
        log(f"SECTION FAILED large:\n{traceback.format_exc()}")


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def main():
    name = cuda.get_current_device().name
    log(f"device: {name.decode() if isinstance(name, bytes) else name}; caching allocator "
        f"active: {active()}; default launch: {launch_mode()}")
    rows, other = [], []
    section_cases(rows)
    section_peers(other)
    section_breakdown()
    section_large(other)
    log("\n| case | inputs | kernels | numba us/call | bindings us/call | ctypes us/call "
        "| best us/kernel | checked |")
    log("|---|---|---|---|---|---|---|---|")
    for name, kind, k, old, b, c, per_kernel, ok in rows:
        log(f"| {name} | {kind} | {k} | {fmt(old)} | {fmt(b)} | {fmt(c)} | {fmt(per_kernel)} "
            f"| {ok} |")
    log("\n| case | what | ops/kernels | host us per op (2^26: device us per call) | checked |")
    log("|---|---|---|---|---|")
    for name, what, k, _, _, _, value, ok in other:
        log(f"| {name} | {what} | {k} | {fmt(value)} | {ok} |")


if __name__ == "__main__":
    main()
