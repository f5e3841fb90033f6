"""Probe: the split stages' vector walk (codegen/split_stages.py) with more vectors of
each streamed buffer in flight a thread. Run on the GPU from the repository root:

    python benchmarks/probe_split_tiles.py [--case LABEL ...] [--no-peers] [--dry-run]

A whole-tensor reduction whose prologue value is also returned (``d = p - t; return d,
mean(d * d)``: stage 0 stores d as it reduces, shape_sweep's residual_mse) and the
suite's sum of squares to a scalar, at sizes where the host takes the split plan.
Variants (``hw.split_tile_vectors``): the default (the streaming row kernels' tile: one
vector of each of two buffers, two loads in flight before the tile's stores) and 2 or
4 vectors of each; and the stages' blocks resident an SM (``hw.split_stage_min_blocks``
where the epilogue walks the rows again, default 2; ``hw.split_combine_plan_min_blocks``
where it only combines, default 4: at 2, stage 0 took 64 registers and 50% occupancy),
also at the other kernels the split stages serve (group norm, rows split across blocks).
Beside torch eager and torch.compile, every result checked against the NumPy interpreter
(probe_memkern.py's machinery); a table last.
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
# other kernels the split stages serve (rows split across blocks, whose epilogue walks
# the rows again), where more blocks an SM also mean more, shorter chunks a row
OTHER_SHAPES = {
    "group_norm suite": ("group_norm", None, None),
    "group_norm_split 8x256x128^2": ("group_norm_split", {"N": 8, "C": 256, "H": 128, "W": 128},
                                     {"N": 1, "C": 16, "H": 9, "W": 9}),
    "residual_row_energy 64x2^20": ("residual_row_energy", {"R": 64, "C": 2 ** 20},
                                    {"R": 2, "C": 5000}),
    "softmax_long suite": ("softmax_long", None, None),
}

VARIANTS = {"default": {}, "2 vectors": {"split_tile_vectors": 2},
            "4 vectors": {"split_tile_vectors": 4},
            # the stages' blocks resident an SM (launch bounds; a wave's chunks): 64
            # registers at 2, 40 at 3, 32 at 4 (ptxas, residual_mse, no spill); plans whose
            # epilogue only combines take 4 (the default), the others 2 (group norm's
            # epilogue spills at 32 registers)
            "2 blocks": {"split_combine_plan_min_blocks": 2},
            "3 blocks": {"split_combine_plan_min_blocks": 3, "split_stage_min_blocks": 3},
            "4 blocks": {"split_stage_min_blocks": 4}}


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        from shape_sweep import _extra_cases
        cases = {c.name: c for c in [*CASES, *_extra_cases()]}
        out = []
        blocks = {k: v for k, v in VARIANTS.items() if "vectors" not in k}
        for shapes, variants in ((SHAPES, VARIANTS), (OTHER_SHAPES, blocks)):
            for label, (name, dims, dry) in shapes.items():
                case = cases[name]
                if dims is not None:
                    case = dataclasses.replace(case, dims=dims, dry_dims=dry)
                out.append(Probe(label, case, variants))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)


if __name__ == "__main__":
    main()
