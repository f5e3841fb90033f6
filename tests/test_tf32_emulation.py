"""The NumPy emulation of 3xTF32 on tensor cores (mlfuse/tools/tf32_emulation.py) that
chose emit_tf32's split accumulator: its mma rounds as the hardware model says, and
its error bounds: a stage's partial sums promoted to an f32 FADD (what emit_tf32 does:
STAGE_K = 16, two k8 steps) keep 3xTF32 within fp32 SGEMM's error, one accumulator on
the tensor cores does not."""
import numpy as np
import pytest

from mlfuse.tools.tf32_emulation import (emulate_3xtf32, emulate_sgemm, mma_tf32, relative_error,
                                         tf32_round, tf32_split)


def test_tf32_round_and_split():
    x = np.float32(1 + 2.0**-11)  # a tie between two TF32 values: away from zero
    assert tf32_round(np.array([x, -x])).tolist() == [1 + 2.0**-10, -(1 + 2.0**-10)]
    values = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    hi, lo = tf32_split(values)
    assert not np.any(hi.view(np.uint32) & 0x1FFF) and not np.any(lo.view(np.uint32) & 0x1FFF)
    err = np.abs(hi.astype(np.float64) + lo - values)
    assert np.all(err <= 2.0**-22 * np.abs(values))


def test_an_mma_cuts_each_addend_to_the_largest_ones_ulp_and_truncates():
    one = np.ones((1, 1), np.float32)
    a = np.zeros((1, 8), np.float32)
    b = np.zeros((8, 1), np.float32)
    a[0, 0], b[0, 0] = 2.0**-12, 2.0**-12 + 2.0**-13  # the product 1.5 * 2^-24: below 1's ulp
    assert mma_tf32(one, a, b)[0, 0] == 1.0  # cut to 2^-24 -> 0: the sum stays 1
    a[0, 0] = -2.0**-12
    assert mma_tf32(one, a, b)[0, 0] == 1.0  # toward zero, not down to 1 - 2^-24
    a[0, 0], b[0, 0] = 2.0**-11, 2.0**-12 + 2.0**-13  # 1.5 * 2^-23: cut to one ulp
    assert mma_tf32(one, a, b)[0, 0] == np.float32(1 + 2.0**-23)


@pytest.mark.parametrize("seed", [0, 1])
def test_promoting_each_stage_keeps_3xtf32_within_sgemm_error(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((16, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 16)).astype(np.float32)
    sgemm = relative_error(emulate_sgemm(a, b), a, b)
    promoted = relative_error(emulate_3xtf32(a, b, promote=2), a, b)
    single = relative_error(emulate_3xtf32(a, b), a, b)
    assert promoted <= sgemm, (promoted, sgemm)
    assert single > 1.5 * promoted, (single, promoted)  # truncation's drift along K
