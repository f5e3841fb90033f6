"""Probe: f16/bf16 tensor-core matmuls and 3xTF32 on the GPU against PyTorch (cuBLAS), per
tile configuration (issue 14). One command, under 3 minutes on an H100:

    python benchmarks/probe_gemm16.py                       # every case, default geometry
    python benchmarks/probe_gemm16.py default t128x128 bk64 # then variants (f16 cases only)
    python benchmarks/probe_gemm16.py --cases=f16_4096,attn default s3

Cases (CASES): f16 and bf16 4096^3 + bias + relu, f16 8192^3 and 4096x4096x1024 + bias +
relu, a batched attention product (96 x 512 x 64 @ 96 x 64 x 512, f16) and 3xTF32 4096^3
(``--matmul-precision high``) + bias + relu, each against torch's own (cuBLAS; TF32 off
for the f32 peer). Every result is checked against PyTorch in float64: max |out - exact| /
max |exact| must stay within 2x the peer's, or 2 ulps of the output dtype.

Variants (VARIANTS, or a JSON geometry): overrides of mlfuse.codegen.helpers.MMA_GEOMETRY
["cuda"] before compiling: "default"; "tBMxBN" forces one block tile; "s2"/"s3" cap the
stages, "s6" allows 6 in up to 227 KB; "bk64" stages 64 K deep (4 mma steps) in up to
227 KB. The first variant runs every case (or --cases), later ones the f16 cases only
(f16_4096, f16_8192), unless --cases.
Each row says the tile, K shares and copies the host picked and the kernel's registers.
"""
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import mlfuse  # noqa: E402
from probe_contraction import events_ms  # noqa: E402  (CUDA events, median)

torch.backends.cuda.matmul.allow_tf32 = False

MATMUL = ("func f(x: {t}[M, K], w: {t}[K, N], b: {t}[N]) -> {t}[M, N] {{\n"
          "    return relu(matmul(x, w) + b)\n}}\n")
BATCHED = ("func f(q: f16[B, M, K], k: f16[B, K, N]) -> f16[B, M, N] {\n"
           "    return matmul(q, k)\n}\n")
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
EPS = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23}
# name -> (dtype, matmul precision, batch, M, N, K)
CASES = {
    "f16_4096": ("f16", None, 0, 4096, 4096, 4096),
    "bf16_4096": ("bf16", None, 0, 4096, 4096, 4096),
    "f16_8192": ("f16", None, 0, 8192, 8192, 8192),
    "f16_4096x4096x1024": ("f16", None, 0, 4096, 4096, 1024),
    "attn": ("f16", None, 96, 512, 512, 64),
    "tf32x3_4096": ("f32", "high", 0, 4096, 4096, 4096),
}
F16_CASES = ["f16_4096", "f16_8192"]
VARIANTS = {
    "default": {},
    **{f"t{bm}x{bn}": {"tiles": ((bm, bn),)} for bm, bn in
       ((128, 256), (256, 128), (128, 128), (128, 64), (64, 128))},
    "s2": {"stages": 2}, "s3": {"stages": 3},
    "s6": {"stages": 6, "smem": 227 * 1024},  # (one block an SM either way: its registers)
    "bk64": {"bk": 64, "smem": 227 * 1024},
}


def inputs(dtype, batch, m, n, k):
    """Operands (randn, in the dtype) and the float64 exact result of the case."""
    g = torch.Generator(device="cuda").manual_seed(m + n + k + batch)
    t = TORCH[dtype]
    if batch:
        q = torch.randn(batch, m, k, device="cuda", generator=g).to(t)
        kt = torch.randn(batch, k, n, device="cuda", generator=g).to(t)
        return (q, kt), torch.bmm(q.double(), kt.double()), lambda: torch.bmm(q, kt)
    x = torch.randn(m, k, device="cuda", generator=g).to(t)
    w = torch.randn(k, n, device="cuda", generator=g).to(t)
    b = torch.randn(n, device="cuda", generator=g).to(t)
    exact = torch.relu(torch.addmm(b.double(), x.double(), w.double()))
    return (x, w, b), exact, lambda: torch.relu(torch.addmm(b, x, w))


def rel_err(out, exact):
    return float((out.double() - exact).abs().max() / exact.abs().max())


_MODULES = {}


def module_for(dtype, precision, batch, geometry_key):
    key = (dtype, precision, bool(batch), geometry_key)
    if key not in _MODULES:
        source = BATCHED if batch else MATMUL.format(t=dtype)
        name = f"probe_gemm16_{dtype}{'_batched' if batch else ''}.fuse"
        _MODULES[key] = mlfuse.compile_source(source, name, matmul_precision=precision)
    return _MODULES[key]


def copy_values(tensor):
    """Values per cp.async of an operand (as the generated host's _copy_values): the
    widest of 16, 8, 4 bytes that its rows and start address allow; 0: gathered."""
    itemsize = tensor.element_size()
    for size in (16, 8, 4):
        values = size // itemsize
        if values and tensor.data_ptr() % size == 0 and tensor.shape[-1] % values == 0:
            return values
    return 0


def picked(module, args):
    """(BM, BN, K shares) the host picks for these operands, and the copies (values per
    cp.async of A, B) it found, as the generated host computes them."""
    python_module = module.python_module
    tiled = [t for t in vars(python_module).values() if hasattr(t, "tuned")]
    if not tiled:
        return None
    a, b = args[0], args[1]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.shape[0] if a.dim() == 3 else 1
    copies = tuple(copy_values(t) for t in (a, b))
    try:
        plan = python_module._contraction_geometry(tiled[0], m, n, k, batch, copies)[0]
    except Exception as e:  # a host without this signature: the times still stand
        return f"? ({type(e).__name__})"
    return tuple(plan) + copies


def registers(module):
    regs = []
    for value in vars(module.python_module).values():
        kernels = getattr(value, "kernels", None)
        if not isinstance(kernels, dict):  # e.g. the module's `cuda` (numba.cuda.kernels)
            continue
        for config, kernel in kernels.items():
            try:
                regs.append(f"{list(config)[:2]}:{kernel.get_regs_per_thread()}r/"
                            f"{kernel.get_local_mem_per_thread()}B")
            except Exception:
                pass
    return " ".join(regs)


def run_case(name, geometry_key):
    dtype, precision, batch, m, n, k = CASES[name]
    module = module_for(dtype, precision, batch, geometry_key)
    args, exact, peer = inputs(dtype, batch, m, n, k)
    out = module.f(*args)
    ours_ms = events_ms(lambda: module.f(*args))
    peer_ms = events_ms(peer)
    err, peer_err = rel_err(out, exact), rel_err(peer(), exact)
    ok = err <= max(2 * peer_err, 2 * EPS[dtype])
    flops = 2 * max(batch, 1) * m * n * k
    return {"case": name, "variant": geometry_key, "ms": ours_ms, "peer_ms": peer_ms,
            "tflops": flops / ours_ms / 1e9, "peer_tflops": flops / peer_ms / 1e9,
            "ratio": peer_ms / ours_ms, "err": err, "peer_err": peer_err, "ok": ok,
            "pick": picked(module, args), "regs": registers(module)}


def main(argv):
    from mlfuse.codegen import helpers
    cases = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--cases=")), None)
    variants = [a for a in argv if not a.startswith("--")] or ["default"]
    base = dict(helpers.MMA_GEOMETRY["cuda"])
    rows = []
    for number, variant in enumerate(variants):
        given = VARIANTS[variant] if variant in VARIANTS else {
            key: v if key in ("bk", "stages", "smem") else tuple(map(tuple, v))
            for key, v in json.loads(variant).items()}
        helpers.MMA_GEOMETRY["cuda"] = {**base, **given}
        print("#### variant", variant, helpers.MMA_GEOMETRY["cuda"], flush=True)
        for name in cases or (list(CASES) if number == 0 else F16_CASES):
            try:
                rows.append(run_case(name, variant))
                print(rows[-1], flush=True)
            except Exception:
                traceback.print_exc()
                rows.append({"case": name, "variant": variant, "ok": False, "ms": float("nan"),
                             "peer_ms": float("nan"), "tflops": 0, "peer_tflops": 0, "ratio": 0,
                             "err": float("nan"), "peer_err": float("nan"), "pick": "failed",
                             "regs": ""})
    helpers.MMA_GEOMETRY["cuda"] = base
    print(torch.cuda.get_device_name())
    print("| case | variant | BM, BN, shares, copies | mlfuse ms | torch ms | torch/mlfuse | "
          "mlfuse TFLOP/s | torch TFLOP/s | max rel err | torch err | ok |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['variant']} | {r['pick']} | {r['ms']:.3f} | "
              f"{r['peer_ms']:.3f} | "
              f"{r['ratio']:.2f} | {r['tflops']:.0f} | {r['peer_tflops']:.0f} | {r['err']:.1e} | "
              f"{r['peer_err']:.1e} | {'ok' if r['ok'] else 'FAIL'} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
