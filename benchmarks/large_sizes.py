"""Sizes past 2**31 elements on a GPU (issue 16, item 9): each case runs at more than
2**31 elements with 64-bit indices and is checked against NumPy; a call past 2**62
elements is refused before any launch. Needs about 40 GB of GPU memory and 60 GB of
host memory. Prints one line per case and exits 1 if any fails.

    python benchmarks/large_sizes.py
"""
from __future__ import annotations

import sys

import numpy as np

import mlfuse
from mlfuse.errors import ArgumentValueError

BIG = 2 ** 31 + 1000  # elements: past the int32 range, not a multiple of any block
CASES = {
    # name: (source, argument shapes, NumPy reference)
    "pointwise chain": ("func f(x: f32[N], b: f32[N]) -> f32[N] {\n"
                        "    return relu(x * 2.0 + b) * 0.5 + x\n}\n",
                        [(BIG,), (BIG,)], lambda x, b: np.maximum(x * 2 + b, 0) * 0.5 + x),
    "row softmax": ("func f(x: f32[R, C]) -> f32[R] {\n    return sum(softmax(x), axis=1)\n}\n",
                    [(BIG // 1000, 1000)], lambda x: np.ones(x.shape[0], np.float32)),
    "sum of everything": ("func f(x: f32[N]) -> f32[] {\n    return sum(x * 0.0 + 1.0)\n}\n",
                          [(BIG,)], lambda x: np.float32(x.size)),
}


def main() -> int:
    failures = 0
    rng = np.random.default_rng(0)
    for name, (source, shapes, reference) in CASES.items():
        f = mlfuse.compile_source(source, target="cuda").f
        args = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
        got = f(*args)
        want = reference(*args)
        ok = np.allclose(got, want, rtol=1e-3, atol=1e-3)
        failures += not ok
        print(f"{name}: {np.prod(shapes[0])} elements: {'ok' if ok else 'WRONG'}")
        del args, got, want
    outer = mlfuse.compile_source(
        "func outer(x: f32[N], y: f32[M]) -> f32[N, M, 2147483648] {\n    return broadcast_to("
        "reshape(x, [N, 1, 1]) * reshape(y, [M, 1]), [N, M, 2147483648])\n}\n",
        target="cuda").outer
    try:
        outer(np.ones(2 ** 16, np.float32), np.ones(2 ** 16, np.float32))
        print("2**63 elements: NOT refused")
        failures += 1
    except ArgumentValueError as e:
        print(f"2**63 elements: refused before any launch: {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
