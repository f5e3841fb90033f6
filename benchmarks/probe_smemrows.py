"""Probe (branch smemrows): long rows held in registers and shared memory
(codegen/held_rows.py: the "shared-vector" variant, shared_rows.py, and the
"shared-scalar" one for odd or misaligned rows, shared_rows_scalar.py), at the suite's
shapes and at shape_sweep.py's rows of 5120-50000 values. Run on the GPU from the
repository root (about three minutes):

    python benchmarks/probe_smemrows.py [--case NAME ...] [--no-peers] [--dry-run]

Each case runs twice with probe_memkern.py's machinery (generate with knobs, run once
recording the launches, poison the output, replay the launches alone, check against
the NumPy interpreter, time the replay: CUDA events, median): "held" (the default: the
host takes the shared-memory variant where it fits) and "before" (shared_row_bytes 0:
no such variant, the streaming kernel or the split plan as before), "one block a row"
(shared_row_split off: a block of up to SHARED_ROW_THREADS, not smaller blocks where their
rows fit shared memory together) and, for few rows,
"split" (the split plan forced: no held rows, every call split), then torch eager and
torch.compile on the same inputs (also checked). "host" is the time the host takes to
issue a call's launches without waiting (near "ms": the launches bound the call). "%copy" is the bytes a perfect
fused kernel moves (inputs read once, output written once) at the measured copy rate
over the time. The table comes last. ``--dry-run`` checks the script on the simulator
at tiny sizes (no timing).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOFTMAX = "func softmax{tag}(x: {t}[R, C]) -> {t}[R, C] {{ return softmax(x, axis=1) }}"
LAYERNORM = """func layernorm(x: f32[R, C], g: f32[C], b: f32[C]) -> f32[R, C] {
    return layernorm(x, g, b, axis=-1, eps=1e-5)
}"""
RMSNORM = """func rmsnorm(x: f32[R, C], g: f32[C]) -> f32[R, C] {
    return rmsnorm(x, g, eps=1e-6)
}"""
LOG_SOFTMAX = """func log_softmax(x: f32[R, C]) -> f32[R, C] {
    m = max(x, axis=1, keepdims=true)
    d = x - m
    return d - log(sum(exp(d), axis=1, keepdims=true))
}"""
VARIANTS = {"held": {}, "before": {"shared_row_bytes": 0}, "one block a row": {"shared_row_split": False}}
# few rows: the split plan forced (no held rows; every call past registers splits)
SPLIT = {"shared_row_bytes": 0, "split_stage_rows_per_sm": 2**20}
# --dry-run: 2 rows, which the split plan would take (fewer than SPLIT_STAGE_ROWS), and
# blocks of 64 threads holding 32 values each in registers, so the simulator runs the
# held kernels quickly
DRY_KNOBS = {"split_stage_rows_per_sm": 0, "shared_row_threads": 64, "row_threads": 32,
             "row_values_per_thread": 32}


def _torch():
    import torch
    import torch.nn.functional as F
    return torch, F


def t_softmax(x):
    torch, _ = _torch()
    return torch.softmax(x, dim=1)


def t_layernorm(x, g, b):
    _, F = _torch()
    return F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)


def t_rmsnorm(x, g):
    torch, _ = _torch()
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * g


def t_log_softmax(x):
    torch, _ = _torch()
    return torch.log_softmax(x, dim=1)


def cases():
    from cases import Case
    dry = {"R": 2, "C": 4352}  # simulator-sized (DRY_KNOBS)
    return [
        Case("softmax 512x65536", SOFTMAX.format(tag="", t="f32"), {"R": 512, "C": 65536},
             t_softmax, dry_dims=dry),
        Case("softmax 256x32768", SOFTMAX.format(tag="", t="f32"), {"R": 256, "C": 32768},
             t_softmax, dry_dims=dry),
        Case("layernorm 1024x32768", LAYERNORM, {"R": 1024, "C": 32768}, t_layernorm,
             dry_dims=dry),
        Case("softmax f16 512x131072", SOFTMAX.format(tag="_f16", t="f16"),
             {"R": 512, "C": 131072}, t_softmax, dry_dims=dry),
        Case("rmsnorm 2048x16384", RMSNORM, {"R": 2048, "C": 16384}, t_rmsnorm, dry_dims=dry),
        Case("log_softmax 384x49152", LOG_SOFTMAX, {"R": 384, "C": 49152}, t_log_softmax,
             dry_dims=dry),
        # shape_sweep.py's rows past 4096 values (before this branch: streamed, 21-42% of copy)
        Case("softmax 4000x12289", SOFTMAX.format(tag="", t="f32"), {"R": 4000, "C": 12289},
             t_softmax, dry_dims={"R": 2, "C": 4353}),
        Case("layernorm 8192x5120", LAYERNORM, {"R": 8192, "C": 5120}, t_layernorm,
             dry_dims=dry),
        Case("layernorm 1000x50000", LAYERNORM, {"R": 1000, "C": 50000}, t_layernorm,
             dry_dims=dry),
        Case("softmax_long 128x262144", SOFTMAX.format(tag="_long", t="f32"),
             {"R": 128, "C": 262144}, t_softmax, dry_dims=dry),
        Case("softmax_long 2048x16384", SOFTMAX.format(tag="_long", t="f32"),
             {"R": 2048, "C": 16384}, t_softmax, dry_dims=dry),
        Case("softmax f16 2048x12289", SOFTMAX.format(tag="_f16", t="f16"),
             {"R": 2048, "C": 12289}, t_softmax, dry_dims={"R": 2, "C": 4353}),
    ]


def main() -> None:
    def probes(opts, dry_run):
        from probe_memkern import Probe
        out = []
        for case in cases():
            variants = dict(VARIANTS)
            if case.dims["R"] < 264:  # few rows: the split plan too (the held rows' rival)
                variants["split"] = SPLIT
            if dry_run:
                variants = {label: {**knobs, **DRY_KNOBS} for label, knobs in variants.items()}
            out.append(Probe(case.name, case, variants))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)

if __name__ == "__main__":
    main()
