"""A NumPy emulation of 3xTF32 matmul on tensor cores, to choose and bound the order in
which emit_tf32.py accumulates (no simulator, no GPU: plain arrays).

The hardware model (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA
tensor cores", PeerJ CS 2021, measured on V100/T4/A100; Hopper's mma.sync behaves
alike): one ``mma.m16n8k8`` .tf32 computes each output as c + sum of 8 products, where
the products of TF32 values are exact, every addend (c too) is aligned to the largest
one's exponent with the bits below that binade's f32 ulp cut off (round toward zero,
no guard bits), the aligned addends are summed exactly and the sum is truncated to f32
(round toward zero). So each mma rounds toward zero, by up to one ulp of the running
sum: over a K of 4096 (512 mma per pass, three passes) the error grows with K in one
direction, where an f32 FMA chain's round-to-nearest errors mostly cancel.

Schemes (``emulate_3xtf32(a, b, promote=...)``):

- ``promote=None``: all three passes of every k8 step accumulate into one f32
  accumulator on the tensor cores (what emit_tf32 did before).
- ``promote=S``: a stage's S k8 steps accumulate into a zeroed partial sum on the tensor
  cores, which is then added to the f32 accumulator with an FADD (round to nearest):
  the truncation acts on a partial sum of S * 8 products instead of the whole row, and
  the long chain of additions rounds to nearest ("split accumulator", as in Ootomo and
  Yokota, "Recovering single precision accuracy from Tensor Cores while surpassing the
  FP32 theoretical peak performance", IJHPCA 2022).

``emulate_sgemm`` is the reference: an f32 FMA chain along K (round to nearest), as a
cuBLAS SGEMM thread computes each output. ``relative_error`` is the benchmark's
measure: max |got - exact| / max |exact| against float64.
"""
from __future__ import annotations

import numpy as np

TF32_CUT = 13  # f32 mantissa bits below TF32's 10


def tf32_round(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32: to 10 mantissa bits, nearest, ties away from zero (finite x)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + (1 << (TF32_CUT - 1))) & ~np.uint64((1 << TF32_CUT) - 1)).astype(np.uint32)
    return rounded.view(np.float32)


def tf32_split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 3xTF32 split: hi = tf32(x), lo = tf32(x - hi) (x - hi exact in f32)."""
    x = np.asarray(x, np.float32)
    hi = tf32_round(x)
    return hi, tf32_round(x - hi)


def _truncate(x: np.ndarray, quantum: np.ndarray) -> np.ndarray:
    """x cut toward zero to a multiple of quantum (a power of two per element)."""
    return np.trunc(x / quantum) * quantum


def _ulp_quantum(magnitude: np.ndarray) -> np.ndarray:
    """The f32 ulp of the binade of ``magnitude`` (> 0), as float64; 2^-149 at zero."""
    _, exponent = np.frexp(magnitude)  # magnitude = m 2^e, 0.5 <= m < 1
    return np.ldexp(1.0, np.maximum(exponent - 24, -149))


def mma_tf32(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """c (M, N) + a (M, 8) @ b (8, N) as one mma.m16n8k8 per output (the model in the
    module doc): products exact, addends cut to the largest one's ulp, the sum
    truncated to f32."""
    products = a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None, :, :]
    addends = np.concatenate([c.astype(np.float64)[:, None, :], products], axis=1)
    quantum = _ulp_quantum(np.abs(addends).max(axis=1))[:, None, :]
    total = _truncate(addends, quantum).sum(axis=1)
    return _truncate(total, _ulp_quantum(np.abs(total))).astype(np.float32)


def emulate_3xtf32(a: np.ndarray, b: np.ndarray, promote: int | None = None) -> np.ndarray:
    """a (M, K) @ b (K, N) in f32 as 3xTF32 on tensor cores: per k8 step the passes
    lo*hi, hi*lo, hi*hi; ``promote``: k8 steps per partial sum added to the f32
    accumulator by an FADD (None: one accumulator on the tensor cores throughout)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    k = a.shape[1]
    pad = -k % 8
    a = np.pad(a, ((0, 0), (0, pad)))
    b = np.pad(b, ((0, pad), (0, 0)))
    (a_hi, a_lo), (b_hi, b_lo) = tf32_split(a), tf32_split(b)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    part = acc if promote is None else np.zeros_like(acc)
    steps = a.shape[1] // 8
    for step in range(steps):
        s = slice(8 * step, 8 * step + 8)
        for x, y in ((a_lo[:, s], b_hi[s]), (a_hi[:, s], b_lo[s]), (a_hi[:, s], b_hi[s])):
            part = mma_tf32(part, x, y)
        if promote is not None and ((step + 1) % promote == 0 or step + 1 == steps):
            acc = (acc + part).astype(np.float32)  # FADD, round to nearest
            part = np.zeros_like(acc)
    return part if promote is None else acc


def emulate_sgemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b as an f32 FMA chain along K (round to nearest): the product is exact in
    float64, and the sum rounded to f32 once per step."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(a[:, k], b[k]).astype(np.float64)).astype(np.float32)
    return acc


def relative_error(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """max |got - exact| / max |exact|, exact = a @ b in float64."""
    exact = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    return float(np.abs(got.astype(np.float64) - exact).max() / np.abs(exact).max())


__all__ = ["emulate_3xtf32", "emulate_sgemm", "mma_tf32", "relative_error", "tf32_round",
           "tf32_split"]
