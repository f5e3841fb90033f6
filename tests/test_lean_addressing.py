"""Lean addressing (mlfuse/codegen/addressing.py): flat offsets, unsigned indices and
divisions by multiply-high, checked against NumPy on tiny sizes under the simulator."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlfuse.codegen import generate
from mlfuse.codegen.addressing import lean_divisors, magic_numbers
from mlfuse.pipeline import compile_text
from mlfuse.runtime.loader import load_source

from helpers import assert_close, record_launches
from test_codegen_vector import HW, kernel_names, launch, offset_by_one


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def _divide(n: int, d: int) -> int:
    m, s = magic_numbers(d)
    return (((n * m) >> 32) + n) >> s


@given(st.integers(1, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_magic_numbers_divide_every_index_under_2_31(d, n):
    m, _ = magic_numbers(d)
    assert 0 < m < 2**32  # a uint32 multiplier, and m > 0 tells the kernel to use it
    assert _divide(n, d) == n // d


@pytest.mark.parametrize("d", [1, 2, 3, 7, 64, 1000, 4096, 2**31 - 1, 2**30 + 1])
def test_magic_numbers_at_the_edges(d):
    for n in {0, 1, d - 1, d, d + 1, 2**31 - 1, (2**31 - 1) // d * d, (2**31 - 1) // d * d - 1}:
        if n >= 0:
            assert _divide(n, d) == n // d, (n, d)


def _module(source: str, hw=HW):
    text = generate(compile_text(source, "lean.fuse", level="fused"), "simulator", hw)
    module = load_source(text, "lean_test")
    return text, module, record_launches(module, kernel_names(text))


def _call(module, *arrays):
    from numba import cuda
    args = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    return next(iter(module.ENTRY_POINTS.values()))(*args).copy_to_host()


BROADCASTS = """
func bcast(x: f32[A, B, C], y: f32[B, C], z: f32[C], w: f32[A, 1, 1]) -> f32[A, B, C] {
    return (x + y) * z - w
}
"""


@pytest.mark.parametrize("shape,kernel", [((3, 5, 8), "bcast_0_vector"),
                                          ((2, 3, 7), "bcast_0"), ((1, 1, 1), "bcast_0")])
def test_broadcasts_of_trailing_axes_read_at_the_flat_index_mod_their_size(shape, kernel):
    """y [B, C] and z [C] collapse (flat mod B*C, flat mod C: a magic divisor each); w
    broadcasts over size-1 axes and is read at the unravelled index; NaN propagates."""
    a, b, c = shape
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(shape, np.float32), rng.standard_normal((b, c), np.float32)
    z, w = rng.standard_normal(c, np.float32), rng.standard_normal((a, 1, 1), np.float32)
    x.flat[-1] = np.nan
    text, module, launched = _module(BROADCASTS)
    op = next(o for o in compile_text(BROADCASTS, "b", level="fused").funcs[0].body.ops
              if o.name == "fused.kernel")
    assert lean_divisors(op) == [("B", "C"), ("C",), ("B",)]  # y, z; w's unravel
    got = _call(module, x, y, z, w)
    assert launched == [kernel]
    assert_close(got, (x + y) * z - w, n_ops=3)
    assert np.isnan(got.flat[-1])
    kernel_text = text[text.index(f"def {kernel}("):]
    assert "x_flat[" in kernel_text or "_load_vector(x_flat, (first,)" in kernel_text


def test_the_uint64_kernel_divides_when_the_host_gives_no_magic_numbers():
    """Past 2**31 points the host passes m = 0 and the scalar kernel divides in 64
    bits: the same results (launched here by hand on a tiny space)."""
    from numba import cuda
    text, module, _ = _module(BROADCASTS)
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    y, z = np.ones((3, 5), np.float32), np.arange(5, dtype=np.float32)
    w = np.zeros((2, 1, 1), np.float32)
    out = cuda.device_array(x.shape, np.float32)
    params = re.search(r"def bcast_0\(([^)]*)\)", text).group(1).split(", ")
    magic = [0] * (len(params) - 8)  # x, y, z, w, out, A, B, C, then (m, s) pairs
    assert magic and len(magic) % 2 == 0
    module.bcast_0[2, 8](*[cuda.to_device(v) for v in (x, y, z, w)], out, 2, 3, 5, *magic)
    np.testing.assert_array_equal(out.copy_to_host(), (x + y) * z - w)


TRANSPOSED = """
func tr(x: f32[R, C], y: f32[C, R]) -> f32[R, C] {
    return x * transpose(y) + iota([R, C], axis=1, dtype=f32)
}
"""


@pytest.mark.parametrize("shape", [(3, 8), (5, 3)])
def test_accesses_that_do_not_collapse_and_index_arithmetic_use_the_unravelled_indices(shape):
    r, c = shape
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(shape, np.float32), rng.standard_normal((c, r), np.float32)
    _, module, _ = _module(TRANSPOSED)
    got = _call(module, x, y)
    assert_close(got, x * y.T + np.arange(c, dtype=np.float32), n_ops=2)


GROUP_SCALE = """
func gs(x: f32[R, C], s: f32[R, 4]) -> f32[R, C] {
    return reshape(reshape(x, [R, 4, C / 4]) * reshape(s, [R, 4, 1]), [R, C])
}
"""


@pytest.mark.parametrize("shape", [(3, 8), (2, 12), (5, 4)])
def test_a_loop_index_divided_by_a_run_time_extent_uses_the_hosts_magic_numbers(shape):
    # s[r, c // (C/4)]: the channel's group, as group norm's normalisation reads its
    # statistics; a multiply-high on the unsigned index, not Numba's int64 division
    r, c = shape
    rng = np.random.default_rng(4)
    x, scale = rng.standard_normal(shape, np.float32), rng.standard_normal((r, 4), np.float32)
    text, module, launches = _module(GROUP_SCALE)
    assert ("C/4",) in lean_divisors(compile_text(GROUP_SCALE, "lean.fuse", level="fused")
                                     .funcs[0].body.ops[-2])
    assert re.search(r"_divmod_magic\(u1_lane\w*, d_C_4", text)  # the vector kernel's
    assert re.search(r"_divmod_wide\(u1\w*, d_C_4", text)  # the scalar one's
    assert "// C_4" not in text
    got = _call(module, x, scale)
    assert_close(got, x * np.repeat(scale, c // 4, axis=1))
    assert launches == ["gs_0_vector"]


PERMUTED_STORE = """\
func @perm(%x: buf<f32[A, B, C]>) -> (buf<f32[B, A, C]>) {
  %t = loops.alloc : buf<f32[B, A, C]>
  loops.parallel {extents = [A, B, C]} (%i: index, %j: index, %k: index) {
    %a = loops.load %x, %i, %j, %k : f32
    loops.store %a, %t, %j, %i, %k
  }
  return %t
}
"""


def test_a_vector_store_that_does_not_collapse_writes_at_its_first_lane():
    """t[j, i, k] moves whole vectors along k but is not t's flat order: it is stored at
    the unravelled indices of the vector's first lane."""
    x = np.arange(3 * 5 * 8, dtype=np.float32).reshape(3, 5, 8)
    got, launched = launch(PERMUTED_STORE, x)
    assert launched == ["perm_0_vector"]
    np.testing.assert_array_equal(got, x.transpose(1, 0, 2))


BIAS_GELU = """
func bias_gelu(x: f16[R, C], b: f16[C]) -> f16[R, C] {
    return gelu(x + b)
}
"""


def _gelu16(x, b):
    import math
    s = x.astype(np.float32) + b.astype(np.float32)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return (np.float32(0.5) * s * (np.float32(1) + erf(s * np.float32(math.sqrt(0.5)))
                                   .astype(np.float32))).astype(np.float16)


@pytest.mark.parametrize("shape,kernel,misaligned", [
    ((2, 16), "bias_gelu_0_vector", False),  # 8 halves a vector (16 bytes), 2 per row
    ((3, 12), "bias_gelu_0", False),         # 12 is not a multiple of 8: the scalar kernel
    ((2, 16), "bias_gelu_0", True)])         # x one half past a 16-byte boundary
def test_f16_moves_8_halves_a_vector_where_rows_allow(shape, kernel, misaligned):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float16)
    b = rng.standard_normal(shape[1:]).astype(np.float16)
    x[0, 1:3] = [np.inf, np.nan]
    text, module, launched = _module(BIAS_GELU)
    assert "_load_halves(x_flat, (first,), x_vals, vec * VECTOR_WIDTH_16)" in text
    got = _call(module, offset_by_one(x) if misaligned else x, b)
    assert launched == [kernel]
    np.testing.assert_allclose(got.astype(np.float32), _gelu16(x, b).astype(np.float32),
                               rtol=1e-3, atol=1e-3, equal_nan=True)
    assert got[0, 1] == np.inf and np.isnan(got[0, 2])


# -- split reductions: vector loads at flat offsets ---------------------------------------
BCE = """
func bce(x: f32[N, C], t: f32[N, C]) -> f32[] {
    l = maximum(x, 0.0) - x * t + log1p(exp(-abs(x)))
    return mean(l)
}
"""
ROWS = "func rows(x: f32[2, C]) -> (f32[2], f32[2]) { return sum(x, axis=1), min(x, axis=1) }"
HALF_SUM = "func hsum(x: f16[N]) -> f32[] { return sum(cast(x, f32) * cast(x, f32)) }"


def _split(source: str, dims: dict, poison=None):
    """Run ``source`` under the simulator at ``dims`` (planned as split reductions)
    against the NumPy interpreter; the kernels it launched."""
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    from mlfuse.tools.checking import program_size, random_inputs
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=5)
    if poison is not None:
        inputs[0].flat[poison] = np.nan
    expected = run_tensor(func, inputs)
    text, module, launched = _module(source)
    got = next(iter(module.ENTRY_POINTS.values()))(*[_device(a) for a in inputs])
    got = got if isinstance(got, tuple) else (got,)
    n_ops, reduced = program_size(func)
    for e, g in zip(expected, got):
        assert_close(g.copy_to_host(), e, n_ops, reduced=reduced)
    return text, launched, [g.copy_to_host() for g in got]


def _device(a):
    from numba import cuda
    return cuda.to_device(a)


@pytest.mark.parametrize("source,dims,vector", [
    (BCE, {"N": 7, "C": 40}, True),     # 280 values: whole vectors of 4
    (BCE, {"N": 7, "C": 41}, False),    # 287: the scalar first stage
    (ROWS, {"C": 2500}, True),          # two points, two reductions: point * n_k + kf
    (ROWS, {"C": 2501}, False),
    (HALF_SUM, {"N": 2400}, True)])     # f16: vectors of 8 halves
def test_split_reductions_load_vectors_at_flat_offsets(source, dims, vector):
    text, launched, _ = _split(source, dims)
    name = re.search(r"func (\w+)", source).group(1)
    assert f"def {name}_0_combine(" in text  # planned as a split reduction
    first = [k for k in launched if not k.endswith("_combine")]
    assert first == [f"{name}_0_vector" if vector else f"{name}_0"], launched
    if "f16" in source:
        assert "_load_halves(x, (kf,), x_vals, vec * VECTOR_WIDTH_16)" in text
    # the scalar first stage reads at flat offsets too: no unravel of each value's index
    scalar = text[text.index(f"def {name}_0("):text.index(f"def {name}_0_vector(")]
    assert re.search(r"x(_flat)?\[numba\.uint64\((kbase \+ )?kf\)\]", scalar), scalar
    assert "_divmod_index" not in scalar


def test_split_vector_reduction_propagates_nan():
    _, launched, got = _split(BCE, {"N": 5, "C": 16}, poison=37)
    assert "bce_0_vector" in launched and np.isnan(got[0])
