"""A row kernel's streaming variant (codegen/row_plans.py: each row loop re-reads its
row, a tile at a time): its block's threads per call.

One function, two readers: the host of a generated module (its source is copied into
it, so the module stays standalone) and the cost model (fusion/cost.py: the rows in
flight, whose re-reads come from L2 or DRAM), so the two agree.

The kernel's launch bounds ask for 1024 threads (64 registers a thread): an SM holds
1024 threads' worth of its blocks. One block of 1024 threads a row, one row an SM,
leaves nothing to overlap a row's block reductions and the round trips between its
tiles; several smaller blocks an SM do. H100, batch-norm training (rows of N x H x W
values in segments of H x W), ms at 1024 / 512 / 256 threads, torch.compile's after:
[256, 1024, 7, 7] 0.110 / 0.084 / 0.080 (0.073), [128, 1024, 7, 7] 0.075 / 0.050 /
0.041 (0.044), [64, 512, 14, 14] 0.055 / 0.042 / 0.039 (0.047), [96, 768, 9, 9] 0.060 /
0.039 / 0.036 (0.045). But the rows in flight grow with the blocks an SM, and a re-read
must find its row still in L2: a block keeps to the fewest threads whose rows in flight
fit there (layernorm over 600 rows of 80000 f32: 1024 threads 0.49 ms, 256 0.72).
"""
from __future__ import annotations

import inspect

SM_THREADS = 1024  # a streaming kernel's threads resident an SM (its launch bounds)


def _stream_row_threads(extent, reread_bytes, fewest, sm_count, l2_bytes):
    """Threads of a streaming row block for rows of ``extent`` values, ``reread_bytes``
    of each read again by later row loops: the least power of two (at least 32) holding
    a value a thread, at most ``fewest``, doubled (up to 1024) while the rows that
    ``sm_count`` SMs hold in flight (1024 threads' worth of blocks each) would re-read
    more than ``l2_bytes``."""
    threads = 32
    while threads < extent and threads < fewest:
        threads *= 2
    while threads < 1024 and sm_count * (1024 // threads) * extent * reread_bytes > l2_bytes:
        threads *= 2
    return threads


def stream_row_threads(extent: int, reread_bytes: int, target) -> int:
    """A call's threads a block (see ``_stream_row_threads``)."""
    return _stream_row_threads(extent, reread_bytes, target.stream_row_threads,
                               target.sm_count, target.l2_bytes)


def stream_row_source() -> str:
    """The function's source, for a generated module's host."""
    return inspect.getsource(_stream_row_threads)


__all__ = ["SM_THREADS", "stream_row_threads", "stream_row_source"]
