"""Probe: mlfuse's generated contraction kernels (matmul, conv2d as implicit GEMM, the
MLP block) on the GPU, for each tile shape and register cap, against cuBLAS/cuDNN
(PyTorch, TF32 off). Every result is checked against PyTorch in float64. Table last.

    python benchmarks/probe_contraction.py            # from the repository root
"""
import os
import re
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

from cases import CASES  # noqa: E402
from mlfuse.codegen import generate  # noqa: E402
import sgemm_reference  # noqa: E402
from mlfuse.pipeline import compile_text  # noqa: E402
from mlfuse.runtime.loader import load_source  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
OUT = os.environ.get("OUT")
CASE_NAMES = ("matmul_bias_relu", "conv_bias_relu", "mlp")
FLOPS = {"matmul_bias_relu": 2 * 4096 ** 3, "conv_bias_relu": 2 * 32 * 64 * 56 * 56 * 64 * 9,
         "mlp": 2 * 2 * 8192 * 1024 * 4096}


def events_ms(fn, repeats=7, inner=3):
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


def variants(source: str):
    """(label, source) for each knob setting: the tile shape forced, the register cap."""
    yield "model", source
    for bm, bn in ((128, 128), (128, 64), (64, 128), (64, 64)):
        yield f"{bm}x{bn}", re.sub(r"CONTRACTION_TILES = .*", f"CONTRACTION_TILES = (({bm}, {bn}),)",
                                   source)
    # the register cap: _simt_shape's blocks per SM asked of the launch bounds
    yield "model, no reg cap", source.replace("max(1, 65536 // (threads * 128))", "1")


def run_case(case, rows):
    ir = compile_text(case.source, f"{case.name}.fuse")
    func = ir.funcs[0]
    g = torch.Generator(device="cuda").manual_seed(0)
    args = []
    for a in func.args:
        shape = [case.dims[d] if isinstance(d, str) else d for d in a.type.shape]
        args.append(torch.randn(*shape, device="cuda", generator=g) * 0.5)
    ref = case.torch_fn(*[a.double() for a in args])
    t = events_ms(lambda: case.torch_fn(*args))
    rows.append((case.name, "torch (cuBLAS/cuDNN)", t, FLOPS[case.name] / t / 1e9, "-"))
    dargs = [cuda.as_cuda_array(a) for a in args]
    base = generate(ir, target="cuda")
    if OUT:
        open(os.path.join(OUT, f"{case.name}.py"), "w").write(base)
    if case.name == "matmul_bias_relu":  # the hand-written reference kernel, same run
        kernel = sgemm_reference.reference_kernel()
        M = N = K = 4096
        out = torch.empty(M, N, device="cuda")
        flat = [cuda.as_cuda_array(a.view(-1)) for a in args[:2]]
        launch = lambda: kernel[(N // 128, M // 128), 256](*flat, dargs[2], cuda.as_cuda_array(out), M, N, K)  # noqa: E731
        launch()
        err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
        t = events_ms(launch)
        rows.append((case.name, "hand-written reference", t, FLOPS[case.name] / t / 1e9, f"err {err:.1e}"))
    for label, source in variants(base):
        try:
            module = load_source(source, f"{case.name}_{label}")
            host = module.ENTRY_POINTS[func.sym_name]
            t0 = time.perf_counter()
            out = host(*dargs)
            cuda.synchronize()
            first = time.perf_counter() - t0
            got = torch.as_tensor(out, device="cuda").double()
            err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
            ok = bool(torch.isfinite(got).all()) and err < 3e-5
            t = events_ms(lambda: host(*dargs))
            regs = []
            for name in dir(module):
                obj = getattr(module, name)
                for kernel in (obj.kernels.values() if hasattr(obj, "factory") else ()):
                    r = kernel.get_regs_per_thread()
                    regs += list(r.values()) if isinstance(r, dict) else [r]
            rows.append((case.name, f"mlfuse {label}", t, FLOPS[case.name] / t / 1e9,
                         f"err {err:.1e} {'ok' if ok else 'BAD'}; regs {regs}; first call {first:.1f}s"))
        except Exception as e:  # one variant's failure must not hide the others
            traceback.print_exc()
            rows.append((case.name, f"mlfuse {label}", float("nan"), float("nan"),
                         f"failed: {type(e).__name__}: {str(e)[:100]}"))


def main():
    rows = []
    for case in CASES:
        if case.name in CASE_NAMES:
            try:
                run_case(case, rows)
            except Exception:
                traceback.print_exc()
    print(f"\ncontraction kernels on {torch.cuda.get_device_name()} (float32, TF32 off)")
    print(f"{'case':18s} {'variant':24s} {'ms':>8s} {'GFLOP/s':>8s}  notes")
    for case, label, t, rate, notes in rows:
        print(f"{case:18s} {label:24s} {t:8.3f} {rate:8.0f}  {notes}")


if __name__ == "__main__":
    main()
