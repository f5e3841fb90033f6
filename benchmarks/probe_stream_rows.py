"""Probe: the streaming row kernel's block (mlfuse/row_stream.py) on batch-norm training
at many channels of short segments, each block size timed on the same module in turn.

The generated host reads STREAM_ROW_THREADS per call, so the probe sets it on the module
and drops the function's launch plans (a plan replays the launches it recorded: without
this every setting would time the first one's). For each shape: every setting checked
against torch's batch norm (max error), then timed three rounds in turn (CUDA events,
median of each round, three input sets rotated; the best round kept), torch.compile
after. Run on the GPU from the repository root:

    python benchmarks/probe_stream_rows.py [THREADS ...]    (default: 1024 512 256)

The table comes last. Where the rule raises a setting (rows in flight past L2) the
launch takes the raised one, as the host would.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHAPES = [((256, 1024, 7, 7), "f32"), ((64, 512, 14, 14), "f32"), ((128, 512, 7, 7), "f32"),
          ((512, 512, 7, 7), "f32"), ((256, 512, 7, 7), "f16"), ((128, 1024, 7, 7), "f32"),
          ((64, 1024, 14, 14), "f32"), ((96, 768, 9, 9), "f32")]


def torch_batchnorm(x, g, b):
    """Training batch norm in f32, results in x's dtype (the program's three)."""
    k = x.shape[1]
    xf = x.float()
    m = xf.mean(dim=(0, 2, 3), keepdim=True)
    v = ((xf - m) ** 2).mean(dim=(0, 2, 3), keepdim=True)
    y = (xf - m) * (v + 1e-5).rsqrt() * g.float().reshape(1, k, 1, 1) + b.float().reshape(1, k, 1, 1)
    return y.to(x.dtype), m.reshape(k).to(x.dtype), v.reshape(k).to(x.dtype)


def use(fn, module, threads: int) -> None:
    """Launch ``fn``'s streaming kernel in blocks of ``threads`` from its next call."""
    module.STREAM_ROW_THREADS = threads
    if fn.fast_path is not None:
        fn.fast_path.plans.clear()


def main() -> None:
    import torch

    import mlfuse
    from mlfuse.tools.benchmark import time_gpu
    settings = tuple(int(t) for t in sys.argv[1:]) or (1024, 512, 256)
    source = (ROOT / "examples" / "batchnorm_train.fuse").read_text()
    modules = {"f32": mlfuse.compile_source(source, "bn.fuse"),
               "f16": mlfuse.compile_source(source.replace("f32", "f16"), "bn16.fuse")}
    compiled = torch.compile(torch_batchnorm, dynamic=False)
    rows = []
    for (n, k, h, w), dtype in SHAPES:
        tdtype = torch.float16 if dtype == "f16" else torch.float32
        xs = [torch.randn(n, k, h, w, device="cuda", dtype=tdtype) for _ in range(3)]
        g = torch.randn(k, device="cuda", dtype=tdtype)
        b = torch.randn(k, device="cuda", dtype=tdtype)
        module = modules[dtype].python_module
        fn = modules[dtype]["batchnorm_train"]
        errors, best = {}, {}
        for t in settings:
            use(fn, module, t)
            got = torch.as_tensor(fn(xs[0], g, b)[0], device="cuda").float()
            errors[t] = (got - torch_batchnorm(xs[0], g, b)[0].float()).abs().max().item()
        for _ in range(3):
            for t in settings:
                use(fn, module, t)
                fn(xs[0], g, b)
                ms = time_gpu(lambda i: fn(xs[i], g, b), n_sets=3, repeats=11, budget_ms=250).median_ms
                best[t] = min(best.get(t, float("inf")), ms)
        peer = min(time_gpu(lambda i: compiled(xs[i], g, b), n_sets=3, repeats=11,
                            budget_ms=250).median_ms for _ in range(2))
        rows.append(("x".join(map(str, (n, k, h, w))), dtype, best, peer, errors))
        print(rows[-1], flush=True)
    print("| shape | dtype | " + " | ".join(map(str, settings)) + " | torch.compile | max error |")
    print("|---|---|" + "---|" * len(settings) + "---|---|")
    for shape, dtype, best, peer, errors in rows:
        print(f"| {shape} | {dtype} | " + " | ".join(f"{best[t]:.4f}" for t in settings)
              + f" | {peer:.4f} | " + "/".join(f"{errors[t]:.1e}" for t in settings) + " |")


if __name__ == "__main__":
    main()
