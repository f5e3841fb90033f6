"""Probe: where does a compiled function's host time go? Times the chain on 1024 and
2^26 elements (device arrays in), then profiles the small call with cProfile.
Run twice: with and without MLFUSE_CACHING_ALLOCATOR=0."""
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, ".")
import numpy as np  # noqa: E402

import mlfuse  # noqa: E402
from mlfuse.tools.benchmark import time_gpu  # noqa: E402

SRC = "func chain(x: f32[N], b: f32[N]) -> f32[N] {\n    return relu(x * 2.0 + b) * 0.5 + x\n}\n"


def main():
    mod = mlfuse.compile_source(SRC, "chain.fuse", target="cuda")
    from numba import cuda
    from mlfuse.runtime.memory import active
    f = mod.chain
    for n in (1024, 1 << 26):
        x = cuda.to_device(np.random.default_rng(0).standard_normal(n).astype(np.float32))
        b = cuda.to_device(np.random.default_rng(1).standard_normal(n).astype(np.float32))
        for _ in range(20):
            f(x, b)
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(500):
            f(x, b)
        cuda.synchronize()
        host = (time.perf_counter() - t0) / 500 * 1e6
        dev = time_gpu(lambda i: f(x, b), repeats=9, budget_ms=300).median_ms
        print(f"allocator cached={active()} n={n}: {host:.1f} us per call (host loop), "
              f"{dev:.3f} ms (events)")
    x = cuda.to_device(np.ones(1024, np.float32))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        f(x, x)
    cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
