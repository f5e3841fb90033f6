"""Probe: transposes through shared-memory tiles (issue 13, branch tiles3), scalar and
vector kernels, at several layouts and shapes, against torch eager and torch.compile.
Run on the GPU from the repository root (one process, under 3 minutes):

    python benchmarks/probe_tiles3.py [--case NAME ...] [--no-sweep] [--dry-run]

probe_memkern.py's machinery: generate with ``mlfuse.hardware`` knobs, run once, poison
the outputs, replay the recorded launches alone, check against the NumPy interpreter,
time with CUDA events. Variants: "default" (the thin kernel where a tiled extent is under
16, else the vector kernel where its 16-byte vectors divide both tiled extents, else the
scalar one), "scalar" (vector_width 1: no vector kernel), and for the C = 3 cases (thin
kernel) a sweep of its threads and steps. Round 2: nhwc_c3 added; f16 vectors of 8.

The peers end in ``.contiguous()``: an elementwise op on a permuted view keeps the
input's memory order in eager PyTorch (and in Inductor, which matches eager's strides),
so ``x.permute(0, 2, 3, 1) * g`` alone may never transpose; the mlfuse result is a
C-contiguous [N, H, W, C]. Writes probe_memkern.json and probe_memkern.log to $OUT.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_memkern  # noqa: E402
from cases import Case  # noqa: E402


def _nchw_nhwc(x, g):
    return (x.permute(0, 2, 3, 1) * g).contiguous()


def _nhwc_nchw(x, g):
    return (x.permute(0, 3, 1, 2) * g).contiguous()


def _transpose_add(x, y):
    return (x.t() + y).contiguous()


NCHW_NHWC = """
func {name}(x: {t}[N, C, H, W], g: {t}[C]) -> {t}[N, H, W, C] {{
    return transpose(x, [0, 2, 3, 1]) * g
}}
"""
NHWC_NCHW = """
func {name}(x: {t}[N, H, W, C], g: {t}[C, 1, 1]) -> {t}[N, C, H, W] {{
    return transpose(x, [0, 3, 1, 2]) * g
}}
"""
TRANSPOSE_ADD = """
func {name}(x: {t}[N, M], y: {t}[M, N]) -> {t}[M, N] {{
    return transpose(x) + y
}}
"""


def case(name, text, dtype, dims, fn, dry):
    return Case(name, text.format(name=name, t=dtype), dims, fn, dry_dims=dry)


DRY4 = {"N": 1, "C": 20, "H": 2, "W": 16}
CASES = [
    case("nchw_nhwc", NCHW_NHWC, "f32", {"N": 32, "C": 256, "H": 64, "W": 64}, _nchw_nhwc, DRY4),
    case("nchw_c64", NCHW_NHWC, "f32", {"N": 64, "C": 64, "H": 56, "W": 56}, _nchw_nhwc, DRY4),
    case("nchw_c3", NCHW_NHWC, "f32", {"N": 256, "C": 3, "H": 224, "W": 224}, _nchw_nhwc,
         {"N": 1, "C": 3, "H": 2, "W": 20}),  # C = 3: the thin kernel (224 x 3 rectangles)
    case("nhwc_c3", NHWC_NCHW, "f32", {"N": 256, "C": 3, "H": 224, "W": 224}, _nhwc_nchw,
         {"N": 1, "C": 3, "H": 2, "W": 20}),  # C = 3 along A: the thin kernel the other way
    case("nchw_odd", NCHW_NHWC, "f32", {"N": 64, "C": 256, "H": 31, "W": 31}, _nchw_nhwc,
         {"N": 1, "C": 17, "H": 2, "W": 17}),  # ragged: the scalar kernel
    case("nhwc_nchw", NHWC_NCHW, "f32", {"N": 32, "C": 256, "H": 64, "W": 64}, _nhwc_nchw, DRY4),
    case("transpose_add", TRANSPOSE_ADD, "f32", {"N": 8192, "M": 8192}, _transpose_add,
         {"N": 20, "M": 28}),
    case("tadd_4kx12k", TRANSPOSE_ADD, "f32", {"N": 4096, "M": 12288}, _transpose_add,
         {"N": 20, "M": 28}),
    case("tadd_f16", TRANSPOSE_ADD, "f16", {"N": 8192, "M": 8192}, _transpose_add,
         {"N": 24, "M": 32}),  # 8 f16 values (16 bytes) a vector
]
VARIANTS = {
    "default": {},  # thin where a side is short, else the vector kernel (64 x 64, 256 threads)
    "scalar": {"vector_width": 1},  # no vector kernel: the scalar square (or the thin one)
}
THIN = {  # the thin kernel's threads and points a thread (default 256 x 4)
    "default": {},
    "thin t256 s8": {"transpose_thin_threads": 256, "transpose_thin_steps": 8},
    "thin t512 s2": {"transpose_thin_threads": 512, "transpose_thin_steps": 2},
    "thin t128 s8": {"transpose_thin_threads": 128, "transpose_thin_steps": 8},
    "thin t256 s2": {"transpose_thin_threads": 256, "transpose_thin_steps": 2},
}
# round 1 swept the squares (64 x 64, 256 threads kept); this round sweeps the thin kernel
probe_memkern.CASES[:0] = CASES  # found by name before the suite's cases of the same name
probe_memkern.SWEEP = {c.name: (THIN if c.name.endswith("_c3") else VARIANTS)
                       for c in CASES}
probe_memkern.BUDGET_S = 150

if __name__ == "__main__":
    probe_memkern.main()
