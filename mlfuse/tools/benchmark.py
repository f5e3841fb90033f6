"""Timing on the GPU: CUDA events around many back-to-back calls, after a warm-up,
median over repeats, with inputs rotated so that small ones do not sit in L2.

The statistics and the table format are plain Python (tested on the CPU); the
event timing needs a real GPU and refuses to time the simulator.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

L2_BYTES = 50 * 1024 * 1024  # H100: inputs smaller than a few L2s are rotated


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    spread: float          # (p90 - p10) / median: the noise of this measurement
    samples: int


def summarize(samples_ms: Sequence[float]) -> Timing:
    """Median and spread of per-call times (at least one sample)."""
    if not samples_ms:
        raise ValueError("no samples")
    xs = sorted(samples_ms)
    med = statistics.median(xs)

    def pct(p):
        k = (len(xs) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)
    return Timing(med, xs[0], xs[-1], (pct(0.9) - pct(0.1)) / med if med else 0.0, len(xs))


def rotations(input_bytes: int, l2_bytes: int = L2_BYTES, most: int = 8) -> int:
    """How many input sets to cycle through so a call never finds its inputs in L2."""
    if input_bytes <= 0:
        return 1
    return max(1, min(most, -(-3 * l2_bytes // input_bytes)))


def plan_repeats(one_call_ms: float, repeats: int, budget_ms: float,
                 min_repeats: int = 3) -> tuple[int, int]:
    """(repeats, calls per repeat) that fit ``budget_ms`` given one call's time.

    Fast calls are batched (up to 200 per repeat) so the events' resolution and the
    launch gaps do not dominate; slow calls (a naive 4096^3 matmul takes ~0.1-1 s)
    get one call per repeat and fewer repeats, but never fewer than ``min_repeats``,
    so a whole suite stays inside its time limit.
    """
    one = max(one_call_ms, 1e-3)
    if one * repeats > budget_ms:
        return max(min_repeats, min(repeats, int(budget_ms / one))), 1
    return repeats, max(1, min(200, int(budget_ms / repeats / one)))


def time_gpu(call: Callable[[int], object], n_sets: int = 1, warmup: int = 3, repeats: int = 15,
             calls_per_repeat: int | None = None, budget_ms: float = 2000.0) -> Timing:
    """Median time of ``call(i)`` (i picks the input set) with CUDA events.

    Each repeat records an event, makes ``calls_per_repeat`` calls back to back and
    records another; the per-call time is the elapsed time over the count. Left to
    itself (``calls_per_repeat=None``) the count and the repeats come from
    ``plan_repeats`` and one timed call, so the timing takes about ``budget_ms``.
    """
    from mlfuse.runtime.device import gpu_present
    if not gpu_present():
        raise RuntimeError("timing needs a CUDA GPU; the simulator's times mean nothing")
    from mlfuse.runtime.memory import install
    install()  # before Numba's context exists, so timed calls reuse freed buffers
    from numba import cuda
    for i in range(warmup):
        call(i % n_sets)
    cuda.synchronize()
    start, stop = cuda.event(), cuda.event()
    if calls_per_repeat is None:
        start.record()
        call(0)
        stop.record()
        stop.synchronize()
        repeats, calls_per_repeat = plan_repeats(cuda.event_elapsed_time(start, stop),
                                                 repeats, budget_ms)
    samples = []
    for r in range(repeats):
        start.record()
        for c in range(calls_per_repeat):
            call((r + c) % n_sets)
        stop.record()
        stop.synchronize()
        samples.append(cuda.event_elapsed_time(start, stop) / calls_per_repeat)
    return summarize(samples)


def relative_error(reference, got) -> float:
    """||got - reference|| / ||reference|| in float64 (0 when both are zero).

    One number per result that a per-element check can miss: TF32 matmuls, say,
    err by ~1e-3 of the norm, float32 ones by ~1e-6 (measured on 4096-term dot
    products), while the per-element tolerance grows with the reduction length.
    """
    import numpy as np
    ref = np.asarray(reference, dtype=np.float64)
    diff = float(np.linalg.norm(np.asarray(got, dtype=np.float64) - ref))
    norm = float(np.linalg.norm(ref))
    return diff / norm if norm else diff


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table; floats with 3 significant decimals, None as '-'."""
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
