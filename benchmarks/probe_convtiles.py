"""Probe (branch convtiles, issues 14/15): SIMT f32 contractions on model shapes against
torch (cuDNN / cuBLAS, TF32 off): resnet18's convs at batch 8 (the 7x7 stride-2 stem,
the 3x3 convs at 64/128/256/512 channels, the stride-2 3x3 and 1x1 downsample convs
entering layers 2-4), the ONNX MLP's two GEMMs (256x1024x4096 with GELU,
256x4096x1024; weights [out, in] as nn.Linear's, read transposed) and 4096^3.

Each shape runs the tile model's pick (tile_model.py) and, where the model splits K,
the same tile unsplit, so that the split's price (partial sums plus the second kernel)
is measured against the tail it saves. Every result is checked against torch in
float64 (relative error under 3e-5); the table comes last with TFLOP/s, the model's
estimate and the pick's reasoning.

    python benchmarks/probe_convtiles.py               # everything (~2-3 minutes)
    python benchmarks/probe_convtiles.py conv3_64 mm_4096   # some shapes (names in SHAPES)
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from numba import cuda  # noqa: E402

from cases import MATMUL, t_matmul  # noqa: E402
from probe_contraction import events_ms  # noqa: E402  (CUDA events, median)
from probe_simt import module_for  # noqa: E402  (one generated module per program)

from mlfuse.runtime.memory import install  # noqa: E402

install()  # mlfuse's caching allocator, as benchmarks/run.py and `mlfuse bench` (round 1
# ran without it: every call's cudaMalloc of its result and partial sums was timed)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

BATCH = 8


def conv(cin: int, cout: int, side: int, kernel: int, stride: int, pad: int):
    """(source, dims, torch reference, GEMM (m, n, k)) of conv + bias + relu at batch 8."""
    out = (side + 2 * pad - kernel) // stride + 1
    source = f"""
func conv_{cin}_{cout}_{kernel}_{stride}(x: f32[N, {cin}, {side}, {side}], w: f32[{cout}, {cin}, {kernel}, {kernel}], b: f32[{cout}]) -> f32[N, {cout}, {out}, {out}] {{
    y = conv2d(x, w, stride={stride}, padding={pad})
    return relu(y + reshape(b, [1, {cout}, 1, 1]))
}}
"""

    def reference(x, w, b):
        return torch.relu(F.conv2d(x, w, stride=stride, padding=pad) + b.reshape(1, -1, 1, 1))
    return source, {"N": BATCH}, reference, (cout, BATCH * out * out, cin * kernel * kernel)


LINEAR_GELU = """
func linear_gelu(x: f32[B, I], w: f32[O, I], b: f32[O]) -> f32[B, O] {
    return gelu(matmul(x, transpose(w)) + b)
}
"""
LINEAR = """
func linear(x: f32[B, I], w: f32[O, I], b: f32[O]) -> f32[B, O] {
    return matmul(x, transpose(w)) + b
}
"""


def t_linear_gelu(x, w, b):
    return F.gelu(x @ w.T + b)


def t_linear(x, w, b):
    return x @ w.T + b


# name -> (source, dims, torch reference, GEMM (m, n, k) for the FLOP count)
SHAPES = {
    "stem7x7": conv(3, 64, 224, 7, 2, 3),
    "conv3_64": conv(64, 64, 56, 3, 1, 1),
    "conv3_64s2": conv(64, 128, 56, 3, 2, 1),
    "conv3_128": conv(128, 128, 28, 3, 1, 1),
    "conv3_128s2": conv(128, 256, 28, 3, 2, 1),
    "conv3_256": conv(256, 256, 14, 3, 1, 1),
    "conv3_256s2": conv(256, 512, 14, 3, 2, 1),
    "conv3_512": conv(512, 512, 7, 3, 1, 1),
    "down1x1_128": conv(64, 128, 56, 1, 2, 0),
    "down1x1_256": conv(128, 256, 28, 1, 2, 0),
    "down1x1_512": conv(256, 512, 14, 1, 2, 0),
    "mlp_fc1": (LINEAR_GELU, {"B": 256, "I": 1024, "O": 4096}, t_linear_gelu, (256, 4096, 1024)),
    "mlp_fc2": (LINEAR, {"B": 256, "I": 4096, "O": 1024}, t_linear, (256, 1024, 4096)),
    "mm_4096": (MATMUL, {"M": 4096, "K": 4096, "N": 4096}, t_matmul, (4096, 4096, 4096)),
}


def kernel_us(fn, calls=5) -> str:
    """Each kernel's device time per call in us (CUPTI through torch.profiler: the tile
    kernel and split-K's second kernel apart, without ncu)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            # Numba's kernels have mangled names (_ZN...); split-K's second ends in _finish
            short = "finish" if "finish" in event.name else \
                "tile" if event.name.startswith("_Z") else event.name[:16]
            us = getattr(event, "device_time", None) or getattr(event, "cuda_time", 0.0)
            times[short] = times.get(short, 0.0) + us / calls
    return " + ".join(f"{k} {v:.1f}" for k, v in times.items()) or "?"


def run_shape(name, rows):
    source, dims, reference, (m, n, k) = SHAPES[name]
    func, module = module_for(source)
    g = torch.Generator(device="cuda").manual_seed(0)
    args = []
    for a in func.args:
        shape = [dims[d] if isinstance(d, str) else d for d in a.type.shape]
        args.append(torch.randn(*shape, device="cuda", generator=g) * 0.5)
    want = reference(*[a.double() for a in args])
    flops = 2 * m * n * k
    t = events_ms(lambda: reference(*args))
    rows.append((name, "torch", t, flops / t / 1e9, f"(m, n, k) = ({m}, {n}, {k})"))
    host = module.ENTRY_POINTS[func.sym_name]
    dargs = [cuda.as_cuda_array(a) for a in args]
    (tiled,) = [v for v in vars(module).values() if hasattr(v, "factory")]
    host(*dargs)  # the model's pick, which records the kernel's (m, n, k, batch)
    size = tiled.last_shape
    pick, estimate, why = tiled.plan(tiled.tiles, *size, module.SM_COUNT)
    configs = [("model", pick)]
    if pick[2] > 1:
        configs.append(("unsplit", (pick[0], pick[1], 1)))
    for label, config in configs:
        try:
            tiled.tuned[size] = config
            t0 = time.perf_counter()
            out = host(*dargs)
            cuda.synchronize()
            first = time.perf_counter() - t0
            got = torch.as_tensor(out, device="cuda").double()
            err = float(torch.linalg.norm(got - want) / torch.linalg.norm(want))
            ok = bool(torch.isfinite(got).all()) and err < 3e-5
            t = events_ms(lambda: host(*dargs))
            kernels = kernel_us(lambda: host(*dargs))
            bm, bn, splits = config
            regs = sorted({r for key, kernel in tiled.kernels.items() if key[:2] == (bm, bn)
                           for r in [kernel.get_regs_per_thread()]
                           for r in (r.values() if isinstance(r, dict) else [r])})
            notes = (f"{bm}x{bn}/{splits}, kernels {kernels}, regs {regs}, "
                     f"err {err:.1e} {'ok' if ok else 'BAD'}, "
                     f"first {first:.1f}s"
                     + (f"; model {estimate:.0f} us: {why}" if label == "model" else ""))
            rows.append((name, f"mlfuse {label}", t, flops / t / 1e9, notes))
        except Exception as e:  # one config's failure must not hide the others
            traceback.print_exc()
            rows.append((name, f"mlfuse {label}", float("nan"), float("nan"),
                         f"failed: {type(e).__name__}: {str(e)[:120]}"))
    tiled.tuned.pop(size, None)


def main(argv):
    names = [a for a in argv if not a.startswith("--")] or list(SHAPES)
    rows = []
    start = time.perf_counter()
    for name in names:
        try:
            run_shape(name, rows)
        except Exception:
            traceback.print_exc()
            rows.append((name, "failed", float("nan"), float("nan"), "see the traceback"))
    print(f"\nconvtiles probe on {torch.cuda.get_device_name()} (float32, TF32 off, "
          f"{time.perf_counter() - start:.0f} s)")
    print(f"{'shape':12s} {'variant':15s} {'ms':>8s} {'TFLOP/s':>8s}  notes")
    for name, label, t, rate, notes in rows:
        print(f"{name:12s} {label:15s} {t:8.4f} {rate:8.2f}  {notes}")  # flops / ms / 1e9


if __name__ == "__main__":
    main(sys.argv[1:])
