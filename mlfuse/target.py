"""Parameters of a compilation target, in one place: the fusion cost model and the
code generator read them from here and nowhere else."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    dram_bytes_per_s: float     # measured device-to-device copy rate (bytes read + written)
    flops_per_s: float          # fp32 FMA-pipe throughput, counting one op as one flop
    launch_s: float             # device-side cost of one kernel launch
    register_budget: int        # live scalars per thread before a fused kernel would spill
    shared_mem_bytes: int       # per block
    sm_count: int
    threads_per_block: int      # for pointwise kernels
    pointwise_per_thread: int   # points per thread of a loop-free pointwise kernel: their
                                # loads are issued together, so more bytes are in flight
    row_values_per_thread: int  # a row of at most this * 1024 values stays in registers
    row_min_extent: int         # a reduction shorter than this runs one thread per output
    default_dim: int            # size assumed for a symbolic dim that --dim did not bind


# Measured on one H100 (see ../shared/gpu/NOTES.md): copy 2.81 TB/s, SGEMM 49.7 TFLOP/s.
# Launch shape: benchmarks/probe_codegen.py sweeps (docs/perf-notes.md).
H100 = Target(name="h100", dram_bytes_per_s=2.81e12, flops_per_s=49.7e12, launch_s=4e-6,
              register_budget=96, shared_mem_bytes=48 * 1024, sm_count=132,
              threads_per_block=512, pointwise_per_thread=4,
              row_values_per_thread=8, row_min_extent=32, default_dim=1024)

TARGETS = {"h100": H100}
DEFAULT_TARGET = H100


def get_target(name: str | None = None) -> Target:
    return TARGETS[name] if name else DEFAULT_TARGET
