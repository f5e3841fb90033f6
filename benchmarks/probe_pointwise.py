"""Probe: which pointwise kernel shape reaches the copy bandwidth in Numba on this GPU?
Variants of relu(x*2+b)*0.5+x on 2^26 float32, each checked against NumPy, timed with
CUDA events (median). Run on the GPU: python benchmarks/probe_pointwise.py"""
import math
import sys

import numba
import numpy as np
from numba import cuda

sys.path.insert(0, ".")
from mlfuse.tools.benchmark import time_gpu  # noqa: E402


@cuda.jit(device=True, inline="always")
def mx(a, b):
    return a if (a > b or a != a) else b


@cuda.jit
def v_int64_stride(x, b, out, n):  # the current codegen: int64 grid-stride
    start = numba.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    stride = numba.int64(cuda.gridDim.x) * cuda.blockDim.x
    for i in range(start, n, stride):
        xv = x[i]
        out[i] = mx(xv * np.float32(2.0) + b[i], np.float32(0.0)) * np.float32(0.5) + xv


@cuda.jit
def v_uint64_stride(x, b, out, n):
    start = numba.uint64(cuda.blockIdx.x) * numba.uint64(cuda.blockDim.x) + numba.uint64(cuda.threadIdx.x)
    stride = numba.uint64(cuda.gridDim.x) * numba.uint64(cuda.blockDim.x)
    for i in range(start, numba.uint64(n), stride):
        xv = x[i]
        out[i] = mx(xv * np.float32(2.0) + b[i], np.float32(0.0)) * np.float32(0.5) + xv


@cuda.jit
def v_uint32_stride(x, b, out, n):
    start = numba.uint32(cuda.blockIdx.x) * numba.uint32(cuda.blockDim.x) + numba.uint32(cuda.threadIdx.x)
    stride = numba.uint32(cuda.gridDim.x) * numba.uint32(cuda.blockDim.x)
    for i in range(start, numba.uint32(n), stride):
        xv = x[i]
        out[i] = mx(xv * np.float32(2.0) + b[i], np.float32(0.0)) * np.float32(0.5) + xv


@cuda.jit
def v_uint64_unroll4(x, b, out, n):
    # each thread handles 4 elements one block-width apart: 4 independent loads in flight
    bd = numba.uint64(cuda.blockDim.x)
    base = numba.uint64(cuda.blockIdx.x) * bd * numba.uint64(4) + numba.uint64(cuda.threadIdx.x)
    stride = numba.uint64(cuda.gridDim.x) * bd * numba.uint64(4)
    un = numba.uint64(n)
    while base < un:
        for u in range(4):
            i = base + numba.uint64(u) * bd
            if i < un:
                xv = x[i]
                out[i] = mx(xv * np.float32(2.0) + b[i], np.float32(0.0)) * np.float32(0.5) + xv
        base += stride


@cuda.jit
def v_uint32_unroll4(x, b, out, n):
    bd = numba.uint32(cuda.blockDim.x)
    base = numba.uint32(cuda.blockIdx.x) * bd * numba.uint32(4) + numba.uint32(cuda.threadIdx.x)
    stride = numba.uint32(cuda.gridDim.x) * bd * numba.uint32(4)
    un = numba.uint32(n)
    while base < un:
        for u in range(4):
            i = base + numba.uint32(u) * bd
            if i < un:
                xv = x[i]
                out[i] = mx(xv * np.float32(2.0) + b[i], np.float32(0.0)) * np.float32(0.5) + xv
        base += stride


def main():
    n = 1 << 26
    rng = np.random.default_rng(0)
    xh = rng.standard_normal(n).astype(np.float32)
    bh = rng.standard_normal(n).astype(np.float32)
    want = np.maximum(xh * np.float32(2) + bh, 0) * np.float32(0.5) + xh
    x, b = cuda.to_device(xh), cuda.to_device(bh)
    out = cuda.device_array(n, np.float32)
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    rows = []
    for kernel in (v_int64_stride, v_uint64_stride, v_uint32_stride, v_uint64_unroll4, v_uint32_unroll4):
        for threads in (256, 512):
            for per_sm in (4, 8, 32, None):
                per_elem = 4 if "unroll4" in kernel.__name__ else 1
                blocks = math.ceil(n / (threads * per_elem)) if per_sm is None else sms * per_sm
                out[:] = np.float32(np.nan)
                kernel[blocks, threads](x, b, out, n)
                ok = np.array_equal(out.copy_to_host(), want)
                t = time_gpu(lambda i: kernel[blocks, threads](x, b, out, n), repeats=9, budget_ms=400)
                gbs = 3 * 4 * n / (t.median_ms * 1e-3) / 1e9
                rows.append((kernel.__name__, threads, per_sm or "all", t.median_ms, gbs, ok))
    rows.sort(key=lambda r: r[3])
    print(f"{'variant':20} {'thr':>4} {'blk/SM':>6} {'ms':>7} {'GB/s':>6} ok")
    for r in rows:
        print(f"{r[0]:20} {r[1]:>4} {str(r[2]):>6} {r[3]:7.3f} {r[4]:6.0f} {r[5]}")


if __name__ == "__main__":
    main()
