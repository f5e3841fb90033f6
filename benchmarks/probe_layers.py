"""Probe: the same fused chain timed at three layers, to see which one costs:
the bare kernel (preallocated output), the generated host function, and the
checked mlfuse function. 2^26 float32, CUDA events, median."""
import sys
import time

sys.path.insert(0, ".")
import numpy as np  # noqa: E402

import mlfuse  # noqa: E402
from mlfuse.tools.benchmark import time_gpu  # noqa: E402

SRC = "func chain(x: f32[N], b: f32[N]) -> f32[N] {\n    return relu(x * 2.0 + b) * 0.5 + x\n}\n"


def host_us(fn, calls=200):
    from numba import cuda
    fn()
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / calls * 1e6, (t2 - t0) / calls * 1e6


def main():
    from numba import cuda
    mod = mlfuse.compile_source(SRC, "chain.fuse", target="cuda")
    py = mod.python_module
    n = 1 << 26
    x = cuda.to_device(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    b = cuda.to_device(np.random.default_rng(1).standard_normal(n).astype(np.float32))
    out = cuda.device_array(n, np.float32)
    grid = py._pointwise_blocks(n)
    layers = {
        "bare kernel": lambda: py.chain_0[grid, py.THREADS_PER_BLOCK](x, b, out, n),
        "host function": lambda: py.chain(x, b),
        "mlfuse function": lambda: mod.chain(x, b),
        "alloc only": lambda: cuda.device_array(n, np.float32),
    }
    for name, fn in layers.items():
        enq, total = host_us(fn)
        dev = time_gpu(lambda i: fn(), repeats=9, budget_ms=300).median_ms
        print(f"{name:16} enqueue {enq:8.1f} us/call, with sync {total:8.1f} us/call, events {dev:.3f} ms")


if __name__ == "__main__":
    main()
