"""Probe: f16/bf16 contractions on warpgroup MMA (wgmma, mlfuse/codegen/emit_wgmma.py)
against the mma.sync kernel (emit_mma.py) and PyTorch (cuBLAS), in one run (issue 14).
One command, under 3 minutes on an H100:

    python benchmarks/probe_wgmma.py                  # variants "wgmma" and "mma"
    python benchmarks/probe_wgmma.py wgmma t128x128 s3 n128 --cases=f16_4096

Cases (CASES): f16 and bf16 4096^3 + bias + relu, f16 8192x768x768 and 256x4096x1024
(M x N x K) + bias + relu, a batched f16 product (16 x 1024 x 1024 x 1024), and
shape_sweep.py's f16 8192x8192x1024 and 2048x2048x8192 + bias + relu. Each result
is checked against PyTorch in float64: max |out - exact| / max |exact| within 2x torch's
own error or 2 ulps of the output dtype.

Variants: overrides of mlfuse.codegen.helpers.MMA_GEOMETRY["cuda"] before compiling:
"wgmma" (the default geometry: 16-bit contractions take wgmma tiles where the tile model
picks them), "mma" (no wgmma tiles: the mma.sync kernel alone, as before), "t128x256" /
"t128x128" (that wgmma tile forced), "s3" (3 wgmma stages), "n128" (wgmma of N 128: two
a k16 step on a 256-wide tile), "t128x128s3" (128 x 128 in 3 stages: two blocks an SM).
Each row says the kernel kind, tile, K shares and copies the host picked and, per kernel
configuration that ran, tile:registers/local bytes; the table comes last.
"""
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from probe_contraction import events_ms  # noqa: E402  (CUDA events, median)
from probe_gemm16 import EPS, inputs, module_for, picked, rel_err  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False

# name -> (dtype, batch, M, N, K)
CASES = {
    "f16_4096": ("f16", 0, 4096, 4096, 4096),
    "bf16_4096": ("bf16", 0, 4096, 4096, 4096),
    "f16_8192x768x768": ("f16", 0, 8192, 768, 768),
    "f16_256x4096x1024": ("f16", 0, 256, 4096, 1024),
    "f16_batched_16x1024": ("f16", 16, 1024, 1024, 1024),
    # benchmarks/shape_sweep.py's two f16 shapes (M x N x K)
    "f16_8192x8192x1024": ("f16", 0, 8192, 8192, 1024),
    "f16_2048x2048x8192": ("f16", 0, 2048, 2048, 8192),
}
VARIANTS = {
    "wgmma": {},
    "mma": {"wgmma_tiles": ()},
    "t128x256": {"wgmma_tiles": ((128, 256),)},
    "t128x128": {"wgmma_tiles": ((128, 128),)},
    "s3": {"wgmma_stages": 3},
    "n128": {"wgmma_n": 128},
    # 128 x 128 in 3 stages (96 KB): two blocks an SM, one's epilogue under the other's
    # products
    "t128x128s3": {"wgmma_tiles": ((128, 128),), "wgmma_stages": 3},
}


def kind(module, pick):
    """Which kernel the host's pick runs: wgmma for the module's WGMMA_TILES."""
    tiles = getattr(module.python_module, "WGMMA_TILES", ())
    return "wgmma" if isinstance(pick, tuple) and tuple(pick[:2]) in tiles else "mma.sync"


def registers(module):
    """tile:registers/local bytes of each kernel configuration that ran ("s": split)."""
    out = []
    for value in vars(module.python_module).values():
        if not hasattr(value, "tuned"):  # a _TiledKernel
            continue
        for config, kernel in value.kernels.items():
            regs, local = kernel.get_regs_per_thread(), kernel.get_local_mem_per_thread()
            if isinstance(regs, dict):  # per signature: the one that ran
                regs, local = max(regs.values()), max(local.values())
            out.append(f"{config[0]}x{config[1]}{'s' if config[4] else ''}:{regs}/{local}")
    return " ".join(out)


def run_case(name, variant):
    dtype, batch, m, n, k = CASES[name]
    module = module_for(dtype, None, batch, variant)
    args, exact, peer = inputs(dtype, batch, m, n, k)
    out = module.f(*args)
    ours_ms = events_ms(lambda: module.f(*args))
    peer_ms = events_ms(peer)
    err, peer_err = rel_err(out, exact), rel_err(peer(), exact)
    flops = 2 * max(batch, 1) * m * n * k
    pick = picked(module, args)
    return {"case": name, "variant": variant, "kind": kind(module, pick), "pick": pick,
            "ms": ours_ms, "peer_ms": peer_ms, "ratio": peer_ms / ours_ms,
            "tflops": flops / ours_ms / 1e9, "peer_tflops": flops / peer_ms / 1e9,
            "err": err, "peer_err": peer_err,
            "ok": err <= max(2 * peer_err, 2 * EPS[dtype]), "regs": registers(module)}


def main(argv):
    from mlfuse.codegen import helpers
    cases = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--cases=")),
                 list(CASES))
    variants = [a for a in argv if not a.startswith("--")] or ["wgmma", "mma"]
    base = dict(helpers.MMA_GEOMETRY["cuda"])
    rows = []
    for variant in variants:
        helpers.MMA_GEOMETRY["cuda"] = {**base, **VARIANTS[variant]}
        print("#### variant", variant, helpers.MMA_GEOMETRY["cuda"], flush=True)
        for name in cases:
            try:
                rows.append(run_case(name, variant))
                print(json.dumps(rows[-1], default=str), flush=True)
            except Exception:
                traceback.print_exc()
                rows.append({"case": name, "variant": variant, "kind": "?", "pick": "failed",
                             "ms": float("nan"), "peer_ms": float("nan"), "ratio": 0,
                             "tflops": 0, "peer_tflops": 0, "err": float("nan"),
                             "peer_err": float("nan"), "ok": False, "regs": ""})
    helpers.MMA_GEOMETRY["cuda"] = base
    print(torch.cuda.get_device_name())
    print("| case | variant | kernel | BM, BN, shares, copies | mlfuse ms | torch ms | "
          "torch/mlfuse | mlfuse TFLOP/s | torch TFLOP/s | max rel err | torch err | ok | regs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['variant']} | {r['kind']} | {r['pick']} | {r['ms']:.3f} | "
              f"{r['peer_ms']:.3f} | {r['ratio']:.2f} | {r['tflops']:.0f} | "
              f"{r['peer_tflops']:.0f} | {r['err']:.1e} | {r['peer_err']:.1e} | "
              f"{'ok' if r['ok'] else 'FAIL'} | {r['regs']} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
