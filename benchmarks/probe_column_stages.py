"""Probe: strips over columns in column stages (codegen/column_stages.py) at several shapes.
Run on the GPU from the repository root (one process, a few minutes on an H100):

    python benchmarks/probe_column_stages.py [--case LABEL ...] [--no-peers] [--dry-run]

Programs whose reduction over a first or middle axis is broadcast back over it: column
centring ``x - mean(x, axis=0)`` at three shapes and in f16, centring over a middle axis
scaled per column (``gamma[c]``: each lane's own load), and column standardisation by
two sibling statistics (mean and mean square: one stage of partials). Where a strip's
values fit neither shared memory nor registers the host runs the column stages: the
split-columns first stage, then an epilogue. Variants (``mlfuse.hardware`` knobs): the
defaults (``column_lanes_rows`` "auto": the lean epilogue where the points' values are
their reductions scaled, a mean; else bands), "bands" (the vector epilogue,
codegen/column_epilogue_vector.py, where the call allows: a chunk of consecutive rows a
thread), "lean" (codegen/column_epilogue_lean.py: a thread per (row, vector), a
pointwise kernel's order, 32-bit offsets) and "no stages" (``strip_column_stages``
off: the streaming strips kernel, a block per strip re-reading it for each loop). The
softmax probes have two levels of reductions: a stage and a combine each. A chunk's rows n_chunks apart
("interleaved") measured within noise of bands in the twenty-third session, and the
scalar epilogue within 1% in the seventh; neither is probed now. Beside torch eager and
torch.compile on the same inputs, every result checked against the NumPy interpreter
(probe_memkern.py's machinery). The last lines are a table: ms, % of the copy
bandwidth's time for the bytes a perfect fused kernel moves, the time over the faster
peer, ok, the grids.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIDDLE = """
func middle_centring(x: f32[A, B, C], g: f32[C]) -> f32[A, B, C] {
    return (x - mean(x, axis=1, keepdims=true)) * g
}
"""

STANDARDISE = """
func standardise(x: f32[R, C]) -> f32[R, C] {
    m = mean(x, axis=0, keepdims=true)
    q = mean(x * x, axis=0, keepdims=true)
    return (x - m) * rsqrt(q - m * m + 1e-5)
}
"""


SOFTMAX_COLUMNS = """
func softmax_columns(x: f32[R, C]) -> f32[R, C] {
    return softmax(x, axis=0)
}
"""

SOFTMAX_MIDDLE = """
func softmax_middle(x: f32[A, B, C]) -> f32[A, B, C] {
    return softmax(x, axis=1)
}
"""


def t_softmax_columns(x):
    import torch
    return torch.softmax(x, dim=0)


def t_softmax_middle(x):
    import torch
    return torch.softmax(x, dim=1)


def t_middle(x, g):
    return (x - x.mean(dim=1, keepdim=True)) * g


def t_standardise(x):
    m = x.mean(dim=0, keepdim=True)
    q = (x * x).mean(dim=0, keepdim=True)
    return (x - m) * (q - m * m + 1e-5).rsqrt()


# label -> (dims, (name, source, torch function) or None for the suite's centring, dtype,
# dry-run dims)
SHAPES = {
    "centring 16384x4096": ({"R": 16384, "C": 4096}, None, "f32", {"R": 70, "C": 8}),
    "centring 65536x1024": ({"R": 65536, "C": 1024}, None, "f32", {"R": 70, "C": 8}),
    "centring 4096x16384": ({"R": 4096, "C": 16384}, None, "f32", {"R": 70, "C": 8}),
    "centring 100000x640": ({"R": 100000, "C": 640}, None, "f32", {"R": 70, "C": 8}),
    "centring 3000x20000": ({"R": 3000, "C": 20000}, None, "f32", {"R": 70, "C": 8}),
    "centring f16 16384x8192": ({"R": 16384, "C": 8192}, None, "f16", {"R": 70, "C": 16}),
    "mid centring 16x8192x1024": ({"A": 16, "B": 8192, "C": 1024},
                                  ("middle_centring", MIDDLE, t_middle), "f32",
                                  {"A": 2, "B": 70, "C": 8}),
    "standardise 16384x4096": ({"R": 16384, "C": 4096},
                               ("standardise", STANDARDISE, t_standardise), "f32",
                               {"R": 70, "C": 8}),
    # two levels (max, then the sum of exp(x - max)): a stage and a combine each
    "softmax columns 100000x640": ({"R": 100000, "C": 640},
                                   ("softmax_columns", SOFTMAX_COLUMNS, t_softmax_columns),
                                   "f32", {"R": 70, "C": 8}),
    "softmax middle 8x16384x512": ({"A": 8, "B": 16384, "C": 512},
                                   ("softmax_middle", SOFTMAX_MIDDLE, t_softmax_middle),
                                   "f32", {"A": 2, "B": 70, "C": 8}),
}

VARIANTS = {"default": {}, "bands": {"column_lanes_rows": "bands"},
            "lean": {"column_lanes_rows": "one"},
            "no stages": {"strip_column_stages": False}}  # the streaming strips kernel


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        out = []
        centring = next(c for c in CASES if c.name == "column_centring")
        for label, (dims, override, dtype, dry) in SHAPES.items():
            case = centring
            if override is not None:
                name, source, fn = override
                case = dataclasses.replace(case, name=name, source=source, torch_fn=fn)
            if dtype != "f32":
                case = dataclasses.replace(case, name=f"{case.name}_{dtype}",
                                           source=case.source.replace("f32", dtype))
            out.append(Probe(label, dataclasses.replace(case, dims=dims, dry_dims=dry),
                             VARIANTS))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)


if __name__ == "__main__":
    main()
