"""Probe: the tensor-core path (f16 matmul + bias + relu) on the GPU against torch's f16
matmul + bias + relu (cuBLAS), checked against float64. Also the kernel's registers
and shared memory as Numba compiled it. Table last.

    python benchmarks/probe_mma.py            # from the repository root, on a GPU
    python benchmarks/probe_mma.py '{"tiles": [[128, 128]], "warps": [[64, 64]], "bk": 32}' ...

Each JSON argument is a geometry for the "cuda" target (mlfuse.codegen.helpers.MMA_GEOMETRY:
the block tiles the host may pick, its warp tiles, largest first, K per stage), probed in turn.
"""
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

import mlfuse  # noqa: E402

SOURCE = ("func f(x: f16[M, K], w: f16[K, N], b: f16[N]) -> f16[M, N] {\n"
          "    return relu(matmul(x, w) + b)\n}\n")
SHAPES = [(4096, 4096, 4096), (1000, 1032, 520), (1000, 1027, 515), (8192, 768, 768),
          (32, 4096, 4096), (1, 4096, 4096)]


def events_ms(fn, repeats=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times)), float(np.min(times)), float(np.max(times))


def main():
    import json

    from mlfuse.codegen import helpers
    geometries = [json.loads(a) for a in sys.argv[1:]] or [None]
    for geometry in geometries:
        if geometry is not None:
            helpers.MMA_GEOMETRY["cuda"] = {k: tuple(map(tuple, v)) if k != "bk" else v
                                            for k, v in geometry.items()}
        print("#### geometry", helpers.MMA_GEOMETRY["cuda"], flush=True)
        probe(helpers.MMA_GEOMETRY["cuda"])


def probe(geometry):
    module = mlfuse.compile_source(SOURCE, "probe_mma.fuse")
    print([(k["schedule"], k["variant"]) for k in module.kernels("f")], flush=True)
    rows = []
    for m, n, k in SHAPES:
        try:
            g = torch.Generator(device="cuda").manual_seed(m + n + k)
            x = torch.randn(m, k, device="cuda", generator=g).half()
            w = torch.randn(k, n, device="cuda", generator=g).half()
            b = torch.randn(n, device="cuda", generator=g).half()
            args = [cuda.as_cuda_array(t) for t in (x, w, b)]
            out = torch.as_tensor(module.f(*args), device="cuda")
            ref = torch.relu(x.double() @ w.double() + b.double())
            err = float((out.double() - ref).norm() / ref.norm())
            torch_out = torch.relu(x @ w + b)
            torch_err = float((torch_out.double() - ref).norm() / ref.norm())
            ours = events_ms(lambda: module.f(*args))
            theirs = events_ms(lambda: torch.relu(torch.addmm(b, x, w)))
            tflops = 2 * m * n * k / ours[0] / 1e9
            rows.append((f"{m}x{n}x{k}", ours[0], theirs[0], theirs[0] / ours[0], tflops, err,
                         torch_err))
        except Exception:
            traceback.print_exc()
            rows.append((f"{m}x{n}x{k}", float("nan"), float("nan"), 0, 0, float("nan"), 0))
    try:
        from mlfuse.tools.ptx_report import report
        for r in report("probe_mma.fuse", SOURCE):
            print(r["kernel"], r["registers"], "regs", r["spill_bytes"], "B spilled",
                  r["shared_bytes"], "B smem", flush=True)
    except Exception:
        traceback.print_exc()
    print(torch.cuda.get_device_name(), geometry)
    print("| shape MxNxK | mlfuse ms | torch ms | torch/mlfuse | mlfuse TFLOP/s | rel err | "
          "torch rel err |")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.2f} | {r[4]:.0f} | {r[5]:.1e} | "
              f"{r[6]:.1e} |")


if __name__ == "__main__":
    main()
