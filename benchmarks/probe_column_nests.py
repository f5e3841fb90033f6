"""Probe: column reductions over several neighbouring axes walked as one loop
(flatten-column-nests) against the nests as before. Run on the GPU from the repository
root (one process, a few minutes on an H100):

    python benchmarks/probe_column_nests.py [--case LABEL ...] [--no-peers] [--dry-run]

Batch norm's training step over NHWC (statistics over [N, H, W], also returned), a
sequence's batch norm over [N, L] of [N, L, C], and instance norm over NHWC (statistics
over [H, W], points [N, C]), compiled for symbols as the suite compiles. Variants: "flat"
(the default: the nests walked as one loop, so the column plans of one reduced axis take
the kernel: column stages, one kernel where fusion made three for batch norm) and
"nests" (flatten-column-nests turned off, in the planner's pricing too: the plans as
before), beside torch eager and torch.compile on the same inputs, every result checked
against the NumPy interpreter (probe_memkern.py's machinery). The last lines are a
table: ms, % of the copy bandwidth's time for the bytes a perfect fused kernel moves,
the time over the faster peer, ok, the grids.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# label -> (case name in shape_sweep's extra cases, dims, dry-run dims)
SHAPES = {
    "bn nhwc 32x56x56x64": ("batchnorm_nhwc", {"N": 32, "H": 56, "W": 56, "C": 64},
                            {"N": 2, "H": 3, "W": 5, "C": 8}),
    "bn nhwc 8x28x28x256": ("batchnorm_nhwc", {"N": 8, "H": 28, "W": 28, "C": 256},
                            {"N": 2, "H": 3, "W": 5, "C": 6}),
    "bn nhwc 64x28x28x128": ("batchnorm_nhwc", {"N": 64, "H": 28, "W": 28, "C": 128},
                             {"N": 2, "H": 3, "W": 5, "C": 8}),
    "bn nlc 64x1024x256": ("batchnorm_nlc", {"N": 64, "L": 1024, "C": 256},
                           {"N": 3, "L": 20, "C": 8}),
    "bn nlc 32x197x768": ("batchnorm_nlc", {"N": 32, "L": 197, "C": 768},
                          {"N": 3, "L": 7, "C": 6}),
    "in nhwc 16x64x64x128": ("instance_norm_nhwc", {"N": 16, "H": 64, "W": 64, "C": 128},
                             {"N": 2, "H": 5, "W": 7, "C": 8}),
    "in nhwc 32x56x56x64": ("instance_norm_nhwc", {"N": 32, "H": 56, "W": 56, "C": 64},
                            {"N": 2, "H": 5, "W": 7, "C": 8}),
}


@contextlib.contextmanager
def nests_as_before():
    """flatten-column-nests off: the planner prices the nests and the pass leaves them."""
    import mlfuse.transforms.flatten_column_nests as module
    saved = module.flattened_columns
    module.flattened_columns = lambda kernel, dims, target: None
    try:
        yield
    finally:
        module.flattened_columns = saved


VARIANTS = {"flat": {}, "nests": ({}, nests_as_before)}


def main() -> None:
    def probes(opts, dry_run):
        from probe_memkern import Probe
        from shape_sweep import _extra_cases
        cases = {c.name: c for c in _extra_cases()}
        return [Probe(label, dataclasses.replace(cases[name], dims=dims, dry_dims=dry), VARIANTS)
                for label, (name, dims, dry) in SHAPES.items()]
    from probe_memkern import sweep_probes
    sweep_probes(__doc__.splitlines()[0], probes)


if __name__ == "__main__":
    main()
