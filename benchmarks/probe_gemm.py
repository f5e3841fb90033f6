"""Probe: how fast can a Numba SGEMM with a fused bias+relu epilogue go on this GPU?
Times the hand-written variants of gemm_variants.py on M=N=K=4096 against cuBLAS
(torch.matmul, TF32 off), each checked against a float64 reference. Table last."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

import gemm_variants as G  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def events_ms(fn, repeats=7, inner=5):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return float(np.median(times))


def main(M=4096, N=4096, K=4096):
    rows = []
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn(K, N, device="cuda", generator=g)
    bias = torch.randn(N, device="cuda", generator=g)
    ref = torch.relu(a.double() @ b.double() + bias.double())
    flops = 2.0 * M * N * K
    t = events_ms(lambda: torch.relu(torch.matmul(a, b) + bias))
    rows.append(("torch eager mm+bias+relu", t, flops / t / 1e9, "-", "-"))
    t = events_ms(lambda: torch.matmul(a, b))
    rows.append(("cuBLAS mm alone", t, flops / t / 1e9, "-", "-"))
    da, db, dbias = (cuda.as_cuda_array(x) for x in (a, b, bias))
    fa, fb = cuda.as_cuda_array(a.view(-1)), cuda.as_cuda_array(b.view(-1))
    for name, make in G.VARIANTS.items():
        try:
            kernel = make()
            out = torch.full((M, N), float("nan"), device="cuda")
            dout = cuda.as_cuda_array(out)
            args = (da, db) if name == "scalar" else (fa, fb)
            grid = ((N + G.BN - 1) // G.BN, (M + G.BM - 1) // G.BM)
            t0 = time.perf_counter()
            kernel[grid, G.THREADS](*args, dbias, dout, M, N, K)
            cuda.synchronize()
            compile_s = time.perf_counter() - t0
            err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
            ok = bool(torch.isfinite(out).all()) and err < 1e-5
            t = events_ms(lambda: kernel[grid, G.THREADS](*args, dbias, dout, M, N, K))
            regs = kernel.get_regs_per_thread()
            regs = next(iter(regs.values())) if isinstance(regs, dict) else regs
            rows.append((f"numba {name}", t, flops / t / 1e9, f"{err:.1e} {'ok' if ok else 'BAD'}",
                         f"{regs} regs, compile {compile_s:.1f}s"))
        except Exception as e:  # one variant's failure must not hide the others
            rows.append((f"numba {name}", float("nan"), float("nan"), f"failed: {e!r}"[:80], "-"))
    print(f"\nSGEMM {M}x{N}x{K} + bias + relu, float32, TF32 off, {torch.cuda.get_device_name()}")
    print(f"{'variant':28s} {'ms':>8s} {'GFLOP/s':>9s}  {'rel err':14s} notes")
    for name, t, rate, err, notes in rows:
        print(f"{name:28s} {t:8.3f} {rate:9.0f}  {err:14s} {notes}")


if __name__ == "__main__":
    main()
    main(1000, 1000, 1004)  # edges: partial tiles
