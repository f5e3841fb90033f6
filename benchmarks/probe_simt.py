"""Probe: SIMT contraction tiles (exact fp32, TF32 off) on the GPU, per tile shape, for the
shapes of issue 14 and resnet18's 3x3 convs, against PyTorch (cuBLAS / cuDNN). For each
shape: the tile model's pick (tile_model.py), then every tile of CONTRACTION_TILES
forced without a split (its thread shape from _simt_shape), each result checked against
PyTorch in float64 (relative error under 3e-5), with the registers of the kernels the
call ran. Table last; the model's estimate beside each pick, to recalibrate FMA_PER_US,
STEP_US and FULL_WARPS from.

    python benchmarks/probe_simt.py                 # everything (~3 minutes, mostly compiles)
    python benchmarks/probe_simt.py --model-only    # the model's pick per shape only
    python benchmarks/probe_simt.py conv_64 mm_4096 # some shapes (names in SHAPES)
    python benchmarks/probe_simt.py --splits=1,2,4 lin_up lin_down   # each tile at each
        K split too (lin_*: the ONNX MLP's Gemm(transB=1) layers, weights stored [N, K])
    python benchmarks/probe_simt.py --simt-threads=128 mm_projection   # bigger thread
        tiles (SIMT_THREADS: 64 x 64 then runs 128 threads of 8 x 4: fewer fragment reads
        per FMA, fewer warps)
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from cases import ATTN_TAIL, CONV3X3_256, MATMUL, t_conv, t_matmul  # noqa: E402
from probe_contraction import events_ms  # noqa: E402  (CUDA events, median)
import mlfuse  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def conv_source(channels: int, side: int) -> str:
    """benchmarks/cases.py's 3x3 conv + bias + relu at ``channels`` in and out."""
    return CONV3X3_256.replace("256", str(channels)).replace("14, 14", f"{side}, {side}")


# the imported Gemm(transB=1): weights stored [N, K], as benchmarks/models.py's MLP has them
MATMUL_T = """
func linear_relu(x: f32[M, K], w: f32[N, K], b: f32[N]) -> f32[M, N] {
    return relu(matmul(x, transpose(w)) + b)
}
"""


def t_matmul_t(x, w, b):
    return torch.relu(x @ w.T + b)


def t_attn_tail(p, v):
    b, h, s, d = v.shape
    return (p @ v).transpose(1, 2).reshape(b, s, h * d)


# name -> (source, dims, torch reference, GEMM (m, n, k) for the FLOP count)
SHAPES = {
    "mm_4096": (MATMUL, {"M": 4096, "K": 4096, "N": 4096}, t_matmul, (4096, 4096, 4096)),
    "mm_projection": (MATMUL, {"M": 8192, "K": 768, "N": 768}, t_matmul, (8192, 768, 768)),
    "mm_mlp_layer": (MATMUL, {"M": 256, "K": 4096, "N": 1024}, t_matmul, (256, 1024, 4096)),
    "mm_decode": (MATMUL, {"M": 32, "K": 4096, "N": 4096}, t_matmul, (32, 4096, 4096)),
    "lin_up": (MATMUL_T, {"M": 256, "K": 1024, "N": 4096}, t_matmul_t, (256, 4096, 1024)),
    "lin_down": (MATMUL_T, {"M": 256, "K": 4096, "N": 1024}, t_matmul_t, (256, 1024, 4096)),
    # resnet18 at batch 8: (m, n, k) = (C, 8 * side^2, 9 C); the 32 x 256 x 14 x 14
    **{f"conv_{c}": (conv_source(c, s), {"N": 8}, t_conv, (c, 8 * s * s, 9 * c))
       for c, s in ((64, 56), (128, 28), (256, 14), (512, 7))},
    "conv_256_n32": (conv_source(256, 14), {"N": 32}, t_conv, (256, 32 * 196, 2304)),
    # the suite's attn_tail: 128 batched P.V of (1024, 64, 1024), heads merged on store
    # (the FLOP count's m takes the batch)
    "attn_pv": (ATTN_TAIL, {"B": 8, "H": 16, "S": 1024, "D": 64}, t_attn_tail,
                (128 * 1024, 64, 1024)),
}


_MODULES = {}


def module_for(source: str, simt_threads: int | None = None):
    """mlfuse.compile_source's function for ``source`` (called with torch tensors, as the
    suite calls it) and its generated module (one per program: every shape of it shares
    its compiled kernels), the module's SIMT_THREADS set to ``simt_threads`` if given."""
    if source not in _MODULES:
        compiled = mlfuse.compile_source(source, "probe.fuse", target="cuda")
        module = compiled.python_module
        if simt_threads:  # _simt_shape reads it when a tile's kernel is first made
            module.SIMT_THREADS = simt_threads
        func = compiled.ir.funcs[0]
        _MODULES[source] = (func, compiled[func.sym_name], module)
    return _MODULES[source]


def run_shape(name, rows, model_only, simt_threads=None, splits=(1,)):
    source, dims, reference, (m, n, k) = SHAPES[name]
    func, host, module = module_for(source, simt_threads)
    g = torch.Generator(device="cuda").manual_seed(0)
    args = []
    for a in func.args:
        shape = [dims[d] if isinstance(d, str) else d for d in a.type.shape]
        args.append(torch.randn(*shape, device="cuda", generator=g) * 0.5)
    want = reference(*[a.double() for a in args])
    flops = 2 * m * n * k
    t = events_ms(lambda: reference(*args))
    rows.append((name, "torch", t, flops / t / 1e9, ""))
    dargs = args
    (tiled,) = [v for v in vars(module).values() if hasattr(v, "factory")]
    host(*dargs)  # the model's pick, which records the kernel's (m, n, k, batch)
    size = tiled.last_shape
    model = tiled.plan(tiled.tiles, *size, module.SM_COUNT)
    configs = [("model", None)] + ([] if model_only else
                                   [(f"{bm}x{bn}/{s}", (bm, bn, s)) for bm, bn in tiled.tiles
                                    for s in splits])
    for label, config in configs:
        try:
            tiled.tuned.pop(size, None)
            if config:
                tiled.tuned[size] = config
            host.fast_path.plans.clear()  # the recorded launches of the previous config
            bm, bn, split = config or model[0]
            tm, tn, bk, blocks = module._simt_shape(bm, bn)
            t0 = time.perf_counter()
            out = host(*dargs)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            got = torch.as_tensor(out, device="cuda").double()
            err = float(torch.linalg.norm(got - want) / torch.linalg.norm(want))
            ok = bool(torch.isfinite(got).all()) and err < 3e-5
            t = events_ms(lambda: host(*dargs))
            regs = sorted({r for key, kernel in tiled.kernels.items() if key[:2] == (bm, bn)
                           for r in [kernel.get_regs_per_thread()]
                           for r in (r.values() if isinstance(r, dict) else [r])})
            notes = (f"{bm}x{bn} split {split}, threads {tm}x{tn} x {(bm // tm) * (bn // tn)}, "
                     f"BK {bk}, regs {regs}; err {err:.1e} {'ok' if ok else 'BAD'}; "
                     f"first call {first:.1f}s"
                     + (f"; model {model[1]:.0f} us: {model[2]}" if config is None else ""))
            rows.append((name, f"mlfuse {label}", t, flops / t / 1e9, notes))
        except Exception as e:  # one config's failure must not hide the others
            traceback.print_exc()
            rows.append((name, f"mlfuse {label}", float("nan"), float("nan"),
                         f"failed: {type(e).__name__}: {str(e)[:120]}"))
    tiled.tuned.pop(size, None)


def main(argv):
    model_only = "--model-only" in argv
    threads = next((int(a.split("=")[1]) for a in argv if a.startswith("--simt-threads=")), None)
    splits = next((tuple(int(s) for s in a.split("=")[1].split(","))
                   for a in argv if a.startswith("--splits=")), (1,))
    names = [a for a in argv if not a.startswith("--")] or list(SHAPES)
    rows = []
    for name in names:
        try:
            run_shape(name, rows, model_only, threads, splits)
        except Exception:
            traceback.print_exc()
    print(f"\nSIMT contraction tiles on {torch.cuda.get_device_name()} (float32, TF32 off"
          + (f", SIMT_THREADS {threads})" if threads else ")"))
    print(f"{'shape':14s} {'variant':16s} {'ms':>8s} {'GFLOP/s':>8s}  notes")
    for name, label, t, rate, notes in rows:
        print(f"{name:14s} {label:16s} {t:8.3f} {rate:8.0f}  {notes}")


if __name__ == "__main__":
    main(sys.argv[1:])
