"""The TF32 helpers' simulator twins (mlfuse.codegen.ptx_tf32), checked against
references written independently of them: cvt.rna.tf32.f32's rounding from its
definition (round to nearest, ties away from zero, 10 mantissa bits) in exact
arithmetic, the 3xTF32 split's identities, and mma.m16n8k8's fragment layouts as the
PTX ISA tables give them, lane by lane on one warp."""
import math
from fractions import Fraction

import numba
import numpy as np
import pytest
from numba import cuda

from mlfuse.codegen.ptx_mma import mma_helper_source
from mlfuse.codegen.ptx_tf32 import tf32_helper_source
from mlfuse.runtime.simulator import patch_shared_arrays

from helpers import run_mma_lanes


@pytest.fixture(scope="module")
def twins():
    patch_shared_arrays()  # as load_source does before a generated module runs
    namespace = {"cuda": cuda, "numba": numba, "np": np, "math": math}
    source = mma_helper_source("simulator") + "\n\n" + tf32_helper_source("simulator")
    exec(compile(source, "<ptx_tf32 twins>", "exec"), namespace)
    return namespace


def rna_tf32(x: np.float32) -> np.float32:
    """x rounded to TF32 from the definition, in exact rational arithmetic: the nearest
    multiple of x's TF32 ulp (2^(e - 10), e its binary exponent, at least -126), ties
    away from zero; past the largest finite value, infinity."""
    if not np.isfinite(x):
        return x
    if x == 0:
        return x
    exact = Fraction(float(x))
    e = max(math.frexp(float(x))[1] - 1, -126)
    ulp = Fraction(2) ** (e - 10)
    q = abs(exact) / ulp
    n = math.floor(q + Fraction(1, 2))  # half-way goes up in magnitude: away from zero
    value = math.copysign(float(n * ulp), float(x))
    return np.float32(value) if abs(value) < 2.0**128 else np.float32(math.copysign(np.inf, x))


def special_values() -> np.ndarray:
    bits = [0x3F800000 | 0x1000,            # 1 + half a TF32 ulp: a tie, rounds up
            0xBF800000 | 0x1000,            # its negative: away from zero, down
            0x3F800000 | 0x0FFF,            # just below the tie: down
            0x3F800000 | 0x3000,            # odd last TF32 bit and a tie: up (not to even)
            0x3FFFF000,                     # a tie carrying into the exponent: 2.0
            0x7F7FFFFF,                     # the largest float: rounds to infinity
            0x7F7FE000,                     # the largest TF32: unchanged
            0x00000001, 0x00001000, 0x00001FFF, 0x807FF000,  # subnormals
            0x00000000, 0x80000000, 0x7F800000, 0xFF800000]  # zeros, infinities
    return np.array(bits, np.uint32).view(np.float32)


def run_lanes(kernel, values: np.ndarray, *outs):
    """``kernel`` on one warp, each lane taking every 32nd value."""
    kernel[1, 32](values, *outs)


def test_tf32_round_is_round_to_nearest_ties_away_on_10_mantissa_bits(twins):
    convert = twins["_tf32_round"]

    @cuda.jit
    def kernel(values, out):
        for n in range(cuda.threadIdx.x, values.shape[0], 32):
            out[n] = convert(values[n])

    rng = np.random.default_rng(3)
    scaled = rng.standard_normal(400) * 10.0 ** rng.integers(-30, 30, 400)
    any_bits = rng.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32).view(np.float32)
    values = np.concatenate([special_values(), scaled.astype(np.float32), any_bits])
    values = values[~np.isnan(values)]
    out = np.zeros(values.shape, np.uint32)
    run_lanes(kernel, values, out)
    assert not np.any(out & 0x1FFF), "a TF32 value has its lower 13 bits zero"
    want = np.array([rna_tf32(v) for v in values], np.float32)
    np.testing.assert_array_equal(out.view(np.float32), want)
    assert np.isnan(np.array([twins["_tf32_round"](np.float32(np.nan))], np.uint32)
                    .view(np.float32)[0])


def test_tf32_split_gives_a_high_part_and_the_rounded_residual(twins):
    split = twins["_tf32_split"]

    @cuda.jit
    def kernel(values, hi, lo):
        for n in range(cuda.threadIdx.x, values.shape[0], 32):
            hi[n], lo[n] = split(values[n])

    rng = np.random.default_rng(4)
    values = np.concatenate([rng.standard_normal(300).astype(np.float32),
                             np.array([np.inf, -np.inf, np.nan, 3.4028235e38], np.float32)])
    hi, lo = np.zeros(values.shape, np.uint32), np.zeros(values.shape, np.uint32)
    run_lanes(kernel, values, hi, lo)
    high, low = hi.view(np.float32), lo.view(np.float32)
    finite = np.isfinite(values) & np.isfinite(high)
    np.testing.assert_array_equal(high[finite], [rna_tf32(v) for v in values[finite]])
    residual = values[finite] - high[finite]  # exact in f32
    np.testing.assert_array_equal(low[finite], [rna_tf32(r) for r in residual])
    # hi + lo is x to within 2^-22 of it (the residual's own TF32 rounding)
    error = np.abs(high[finite].astype(np.float64) + low[finite] - values[finite])
    assert np.all(error <= 2.0**-22 * np.abs(values[finite]))
    # an infinite or NaN input, or a high part past the largest float: no residual
    assert np.all(lo[~finite] == 0)
    assert np.isposinf(high[-4]) and np.isneginf(high[-3]) and np.isnan(high[-2])
    assert np.isposinf(high[-1])  # the largest float rounds up to infinity


def mma_fragments(a, b, c):
    """The registers of each lane for A (16 x 8), B (8 x 8) and C (16 x 8), written out
    from the PTX ISA's tables for mma.m16n8k8 .tf32 (groupID g, threadID_in_group t)."""
    a_regs, b_regs, acc = np.zeros((32, 4), np.uint32), np.zeros((32, 2), np.uint32), \
        np.zeros((32, 4), np.float32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        a_regs[lane] = [a[g, t], a[g + 8, t], a[g, t + 4], a[g + 8, t + 4]]  # a0..a3
        b_regs[lane] = [b[t, g], b[t + 4, g]]                                # b0, b1
        acc[lane] = [c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1]]
    return a_regs, b_regs, acc


def test_mma_m16n8k8_tf32_matches_numpy_from_isa_fragments(twins):
    mma = twins["_mma_tf32"]
    rng = np.random.default_rng(5)
    a = np.array([rna_tf32(v) for v in rng.standard_normal(128).astype(np.float32)],
                 np.float32).reshape(16, 8)
    b = np.array([rna_tf32(v) for v in rng.standard_normal(64).astype(np.float32)],
                 np.float32).reshape(8, 8)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    a_regs, b_regs, acc = mma_fragments(a.view(np.uint32), b.view(np.uint32), c)

    run_mma_lanes(mma, a_regs, b_regs, acc)
    d = a.astype(np.float64) @ b.astype(np.float64) + c
    for lane in range(32):
        g, t = lane // 4, lane % 4
        want = [d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t], d[g + 8, 2 * t + 1]]
        np.testing.assert_allclose(acc[lane], want, rtol=1e-6, atol=1e-6)


def test_mma_tf32_twin_refuses_an_operand_not_converted_to_tf32(twins):
    mma = twins["_mma_tf32"]

    @cuda.jit
    def kernel(word):
        fa = cuda.local.array(4, np.uint32)
        fb = cuda.local.array(2, np.uint32)
        fc = cuda.local.array(4, np.float32)
        for r in range(4):
            fa[r], fc[r] = word[0], 0
        for r in range(2):
            fb[r] = word[0]
        mma(fc, 0, fa, 0, fb, 0)

    with pytest.raises(RuntimeError, match="not in TF32 format"):
        kernel[1, 32](np.array([np.float32(1.1)]).view(np.uint32))


def test_st_shared_v4_twin_stores_four_words_and_faults_when_misaligned(twins):
    store = twins["_st_shared_v4"]

    @cuda.jit
    def kernel(tiles, shift):
        lane = cuda.threadIdx.x
        store(tiles, lane * 4 + shift, np.uint32(lane), np.uint32(lane + 1), np.uint32(lane + 2),
              np.uint32(lane + 3))

    tiles = np.zeros(4 * 8 + 4, np.uint32)
    kernel[1, 8](tiles, 0)
    np.testing.assert_array_equal(tiles[:32].reshape(8, 4),
                                  np.arange(8)[:, None] + np.arange(4)[None, :])
    with pytest.raises(RuntimeError, match="misaligned st.shared.v4"):
        kernel[1, 8](tiles, 2)
