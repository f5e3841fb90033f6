"""Probe: split-columns reductions (codegen/schedule_split.py) at several shapes.
Run on the GPU from the repository root (one process, under 3 minutes on an H100):

    python benchmarks/probe_split_columns.py [--case LABEL ...] [--no-peers] [--dry-run]

Reductions over a middle or first axis with few kept points, which split-columns runs
as a thread per (chunk, point): the masked mean pool (``w = sigmoid(m)``, then
``sum(x * w, axis=1) / sum(w, axis=1)``: two sibling reductions that share ``w``) at
four shapes, in f16, and with D = 1022 (no whole vectors); the plain
``sum(x * m) / sum(m)`` the planner's second look makes one kernel; and column sums at
two shapes. Each runs in three variants (``mlfuse.hardware`` knobs): the defaults (the vector twin, codegen/split_columns_vector.py, where it applies),
"scalar" (vector_width 1: a point a thread) and "32 in flight" (strip_vector_values 32: a
thread's tile of 8 f32 vectors, not 4), beside torch eager and torch.compile on the same
inputs, every result checked against the NumPy interpreter (probe_memkern.py's
machinery). The last lines are a table: ms, % of the copy bandwidth's time for the
bytes a perfect fused kernel moves, the time over the faster peer, ok, the grids.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MASKED_SUM = """
func masked_sum(x: f32[B, S, D], m: f32[B, S, 1]) -> f32[B, D] {
    return sum(x * m, axis=1) / sum(m, axis=1)
}
"""

# label -> (case in cases.py, dims, (name, source, torch function) override or None,
# dry-run dims)
SHAPES = {
    "pool 64x2048x1024": ("masked_mean_pool", {"B": 64, "S": 2048, "D": 1024}, None,
                          {"B": 2, "S": 9, "D": 40}),
    "pool 32x4096x768": ("masked_mean_pool", {"B": 32, "S": 4096, "D": 768}, None,
                         {"B": 2, "S": 70, "D": 6}),
    "pool 256x512x1024": ("masked_mean_pool", {"B": 256, "S": 512, "D": 1024}, None,
                          {"B": 3, "S": 5, "D": 8}),
    "pool 8x8192x2048": ("masked_mean_pool", {"B": 8, "S": 8192, "D": 2048}, None,
                         {"B": 1, "S": 130, "D": 4}),
    "pool f16 64x2048x1024": ("masked_mean_pool", {"B": 64, "S": 2048, "D": 1024}, "f16",
                              {"B": 2, "S": 9, "D": 16}),
    # D = 1022: no whole vectors of points, the scalar kernel
    "pool 64x2048x1022": ("masked_mean_pool", {"B": 64, "S": 2048, "D": 1022}, None,
                          {"B": 2, "S": 9, "D": 6}),
    "masked_sum 64x2048x1024": ("masked_mean_pool", {"B": 64, "S": 2048, "D": 1024},
                                "masked_sum", {"B": 2, "S": 9, "D": 40}),
    "colsum 16384x4096": ("colsum", {"R": 16384, "C": 4096}, None, {"R": 70, "C": 8}),
    "colsum 4096x16384": ("colsum", {"R": 4096, "C": 16384}, None, {"R": 70, "C": 8}),
}


VARIANTS = {"default": {}, "scalar": {"vector_width": 1}, "32 in flight": {"strip_vector_values": 32}}

def t_masked_sum(x, m):
    return (x * m).sum(dim=1) / m.sum(dim=1)


def main() -> None:
    def probes(opts, dry_run):
        from cases import CASES
        from probe_memkern import Probe
        out = []
        for label, (name, dims, override, dry) in SHAPES.items():
            case = next(c for c in CASES if c.name == name)
            if override == "f16":  # 8 halves a vector (the twin's _load_halves)
                case = dataclasses.replace(case, name="masked_mean_pool_f16",
                                           source=case.source.replace("f32", "f16"))
            if override == "masked_sum":
                case = dataclasses.replace(case, name="masked_sum", source=MASKED_SUM,
                                           torch_fn=t_masked_sum)
            case = dataclasses.replace(case, dims=dims, dry_dims=dry)
            out.append(Probe(label, case, VARIANTS))
        return out
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)


if __name__ == "__main__":
    main()
