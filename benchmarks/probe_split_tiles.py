"""Probe: the split stages' vector walk (codegen/split_stages.py) with more vectors of
each streamed buffer in flight a thread. Run on the GPU from the repository root:

    python benchmarks/probe_split_tiles.py [--case LABEL ...] [--no-peers] [--dry-run]

A whole-tensor reduction whose prologue value is also returned (``d = p - t; return d,
mean(d * d)``: stage 0 stores d as it reduces, shape_sweep's residual_mse) and the
suite's sum of squares to a scalar, at sizes where the host takes the split plan.
Variants (``hw.split_tile_vectors``): the default (the streaming row kernels' tile: one
vector of each of two buffers, two loads in flight before the tile's stores) and 2 or
4 vectors of each; and (``hw.split_stage_min_blocks``) 3 or 4 blocks of the stages
resident an SM, where the default's 2 leave stage 0 at 64 registers and 50% occupancy. Beside torch eager and torch.compile, every result checked against
the NumPy interpreter (probe_memkern.py's machinery); a table last.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# label -> (case name in shape_sweep's extra cases or the suite, dims, dry-run dims)
SHAPES = {
    "residual_mse 2^26": ("residual_mse", {"N": 2 ** 26}, {"N": 5000}),
    "residual_mse 50000003": ("residual_mse", {"N": 50_000_003}, {"N": 4099}),
    "residual_mse_2d 8192^2": ("residual_mse_2d", {"B": 8192, "D": 8192}, {"B": 3, "D": 1000}),
    "sumsq_all 2^26": ("sumsq_all", None, None),
}

VARIANTS = {"default": {}, "2 vectors": {"split_tile_vectors": 2},
            "4 vectors": {"split_tile_vectors": 4},
            # the stages' blocks resident an SM (launch bounds; a wave's chunks): 64
            # registers at 2, 40 at 3, 32 at 4 (ptxas, residual_mse, no spill)
            "3 blocks": {"split_stage_min_blocks": 3}, "4 blocks": {"split_stage_min_blocks": 4}}


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        from shape_sweep import _extra_cases
        cases = {c.name: c for c in [*CASES, *_extra_cases()]}
        out = []
        for label, (name, dims, dry) in SHAPES.items():
            case = cases[name]
            if dims is not None:
                case = dataclasses.replace(case, dims=dims, dry_dims=dry)
            out.append(Probe(label, case, VARIANTS))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)


if __name__ == "__main__":
    main()
