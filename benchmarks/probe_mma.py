"""Probe: the tensor-core paths on the GPU against PyTorch (cuBLAS), every result checked
against float64. One command, under two minutes on an H100:

    python benchmarks/probe_mma.py            # from the repository root, on a GPU
    python benchmarks/probe_mma.py '{"tiles": [[128, 128]], "stages": 3}' ...

- f16 and bf16 matmul + bias + relu (aligned, odd-sized and unaligned, projection and
  decode shapes) against torch's f16/bf16 ``relu(addmm(b, x, w))``;
- f32 at ``--matmul-precision high`` (3xTF32) and ``medium`` (TF32) against cuBLAS SGEMM
  (TF32 off) and TF32 (on): time and max |out - exact| / max |exact| of each;
- each kernel's tile, registers and shared memory as Numba compiled it. Tables last.

Each JSON argument is a geometry for the "cuda" target (mlfuse.codegen.helpers.MMA_GEOMETRY:
any of "tiles", "tf32_tiles", "warps", "bk", "stages", "smem"), probed in turn.
"""
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402
import torch  # noqa: E402

import mlfuse  # noqa: E402

SOURCE = ("func f(x: {t}[M, K], w: {t}[K, N], b: {t}[N]) -> {t}[M, N] {{\n"
          "    return relu(matmul(x, w) + b)\n}}\n")
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
# (dtype, precision, shapes MxNxK)
RUNS = [("f16", None, [(4096, 4096, 4096), (1000, 1032, 520), (1000, 1027, 515),
                       (8192, 768, 768), (32, 4096, 4096)]),
        ("bf16", None, [(4096, 4096, 4096), (1000, 1027, 515)]),
        ("f32", "high", [(4096, 4096, 4096), (1000, 1027, 515)]),
        ("f32", "medium", [(4096, 4096, 4096)])]


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
    return float(np.median(times))


def copy_values(tensor, row):
    """Values per cp.async of an operand (the generated host's _copy_values): the widest
    of 16, 8, 4 bytes that the row and the start address allow; 0: gathered."""
    itemsize = tensor.element_size()
    for size in (16, 8, 4):
        values = size // itemsize
        if values and tensor.data_ptr() % size == 0 and row % values == 0:
            return values
    return 0


def max_rel(out, exact):
    return float((out.double() - exact).abs().max() / exact.abs().max())


def main():
    import json

    from mlfuse.codegen import helpers
    base = dict(helpers.MMA_GEOMETRY["cuda"])
    geometries = [json.loads(a) for a in sys.argv[1:]] or [{}]
    for geometry in geometries:
        given = {k: v if k in ("bk", "stages", "smem") else tuple(map(tuple, v))
                 for k, v in geometry.items()}
        helpers.MMA_GEOMETRY["cuda"] = {**base, **given}
        print("#### geometry", helpers.MMA_GEOMETRY["cuda"], flush=True)
        probe(helpers.MMA_GEOMETRY["cuda"])


def probe(geometry):
    rows, kernels = [], []
    for dtype, precision, shapes in RUNS:
        module = mlfuse.compile_source(SOURCE.format(t=dtype), f"probe_mma_{dtype}.fuse",
                                       matmul_precision=precision)
        variant = module.kernels("f")[0]["variant"]
        python_module = module.python_module
        for m, n, k in shapes:
            label = f"{variant} {m}x{n}x{k}"
            try:
                g = torch.Generator(device="cuda").manual_seed(m + n + k)
                x = torch.randn(m, k, device="cuda", generator=g).to(TORCH[dtype])
                w = torch.randn(k, n, device="cuda", generator=g).to(TORCH[dtype])
                b = torch.randn(n, device="cuda", generator=g).to(TORCH[dtype])
                out = module.f(x, w, b)  # torch tensors in, a torch tensor out
                exact = torch.relu(x.double() @ w.double() + b.double())
                ours = events_ms(lambda: module.f(x, w, b))
                peers = {}
                for tf32 in ([False, True] if dtype == "f32" else [False]):
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                    peer = torch.relu(torch.addmm(b, x, w))
                    peers["tf32" if tf32 else "cublas"] = (
                        events_ms(lambda: torch.relu(torch.addmm(b, x, w))), max_rel(peer, exact))
                torch.backends.cuda.matmul.allow_tf32 = False
                tiled = [t for t in vars(python_module).values() if hasattr(t, "tuned")]
                copies = (copy_values(x, k), copy_values(w, n))
                tile = [python_module._contraction_geometry(t, m, n, k, 1, copies)[0] + copies
                        for t in tiled]
                rows.append((label, ours, peers["cublas"][0], peers["cublas"][0] / ours,
                             2 * m * n * k / ours / 1e9, max_rel(out, exact), peers["cublas"][1],
                             peers.get("tf32"), tile[0] if tile else None))
            except Exception:
                traceback.print_exc()
                rows.append((label, float("nan"), float("nan"), 0, 0, float("nan"), 0, None, None))
        kernels += compiled_resources(python_module, variant)
    print(torch.cuda.get_device_name(), geometry)
    print("| kernel, shape MxNxK | BM, BN, K shares, copies A, B | mlfuse ms | cuBLAS ms | cuBLAS/mlfuse | mlfuse TFLOP/s "
          "| max rel err | cuBLAS max rel err | cuBLAS TF32 ms, err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tf32 = f"{r[7][0]:.3f}, {r[7][1]:.1e}" if r[7] else ""
        print(f"| {r[0]} | {r[8]} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.2f} | {r[4]:.0f} | "
              f"{r[5]:.1e} | {r[6]:.1e} | {tf32} |")
    for line in kernels:
        print(line)


def compiled_resources(python_module, variant):
    """Registers, local (spill) and shared memory of each compiled tile kernel."""
    lines = []
    for name, value in vars(python_module).items():
        for config, kernel in getattr(value, "kernels", {}).items():
            try:
                lines.append(f"{variant} {name}{list(config)}: {kernel.get_regs_per_thread()} "
                             f"regs, {kernel.get_local_mem_per_thread()} B local, "
                             f"{getattr(kernel, 'dynamic_shared', 0)} B dynamic shared")
            except Exception as e:  # an attribute this Numba lacks: the times still stand
                lines.append(f"{name}{list(config)}: {type(e).__name__}: {e}")
    return lines


if __name__ == "__main__":
    main()
