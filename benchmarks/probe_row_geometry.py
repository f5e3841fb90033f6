"""Probe: rows just past registers (the held-rows and registers kernels' geometry) at
shape_sweep.py's shapes still behind torch.compile, each under several sets of
``mlfuse.hardware`` knobs (probe_memkern.py's machinery: generate, run recording the
launches, poison, replay, check against the NumPy interpreter, time; torch and
torch.compile on the same inputs). Run on the GPU from the repository root:

    python benchmarks/probe_row_geometry.py [--case NAME ...] [--no-peers] [--dry-run]
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = {
    "default": {},
    "one block a row": {"shared_row_split": False},
    "held 512": {"shared_row_threads": 512},
    "vpt 32": {"row_values_per_thread": 32},
    "not held": {"shared_row_bytes": 0},
}
FLAT = ["default", "not held"]  # rows through a reshape or over several axes (flat rows)
SHAPES = [("layernorm", {"R": 8192, "C": 5120}, None),
          ("layernorm", {"R": 4096, "C": 16384}, "f16"),
          ("layernorm", {"R": 8192, "C": 5119}, None),
          ("layernorm", {"R": 1000, "C": 50000}, None),
          ("residual_layernorm", {"R": 8192, "C": 8192}, "f16"),
          ("residual_layernorm", {"R": 8192, "C": 8190}, "f16"),
          ("softmax", {"R": 4000, "C": 12289}, None),
          ("softmax", {"R": 2048, "C": 12287}, "f16"),
          ("softmax_long", {"R": 2048, "C": 16384}, None),
          ("rmsnorm", {"R": 4096, "C": 8191}, "f16"),
          ("rmsnorm", {"R": 4096, "C": 8192}, "f16"),
          ("instance_norm", {"N": 32, "C": 64, "H": 128, "W": 128}, None),
          ("instance_norm", {"N": 32, "C": 64, "H": 128, "W": 128}, "f16"),
          ("instance_norm", {"N": 64, "C": 64, "H": 96, "W": 96}, None),
          ("spatial_centring", {"N": 32, "C": 64, "H": 128, "W": 128}, None),
          ("group_norm", {"N": 64, "C": 128, "H": 28, "W": 28}, None),
          ("group_norm", {"N": 32, "C": 256, "H": 32, "W": 32}, None),
          ("group_norm", {"N": 64, "C": 128, "H": 28, "W": 28}, "f16")]
DRY = {"R": 3, "C": 40, "N": 1, "H": 4, "W": 10}  # (group norm: C of 8 groups)


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        from shape_sweep import _extra_cases, in_dtype
        by_name = {c.name: c for c in CASES + _extra_cases()}
        out = []
        for name, dims, dtype in SHAPES:
            case = dataclasses.replace(in_dtype(by_name[name], dtype), dims=dims,
                                       dry_dims={k: DRY[k] for k in dims})
            label = f"{case.name} " + "x".join(str(v) for v in dims.values())
            flat = name in ("instance_norm", "spatial_centring", "group_norm")
            out.append(Probe(label, case, {v: VARIANTS[v] for v in FLAT} if flat else VARIANTS))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)


if __name__ == "__main__":
    main()
