"""The i64 and bf16 dtypes at every level: the language, the interpreters (NumPy with
ml_dtypes' bfloat16 as the oracle), the kernels under the simulator (bf16 as 16-bit
words computed in f32, mlfuse/codegen/bf16.py), the runtime's argument checks, ONNX."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mlfuse
from mlfuse.codegen.bf16 import bf16_helper_source
from mlfuse.codegen.scalar import STORAGE_TYPE, literal
from mlfuse.dtypes import BFLOAT16, device_dtype, eps, is_float, numpy_dtype
from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.interp import run_loops, run_tensor
from mlfuse.ir import print_ir
from mlfuse.ir.types import DTYPES
from mlfuse.pipeline import compile_text, parse_program

BF16 = ml_dtypes.bfloat16
ULP = eps(BFLOAT16)  # 2**-7: bf16 keeps 8 significant bits


def _compile(source: str, fuse: bool = True):
    return mlfuse.compile_source(source, "dtypes.fuse", fuse=fuse)


def _oracle(source: str, args):
    return run_tensor(parse_program(source, "dtypes.fuse").funcs[0], args)


def _loops(source: str, args, level: str = "loops"):
    return run_loops(compile_text(source, "dtypes.fuse", level=level).funcs[0], args)


def _bf16(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(BF16)


def _assert_bf16_close(got, want, ulps: float):
    """Same dtype and shape, NaN in the same places, finite values within ``ulps`` bf16
    ulps of the reference's magnitude (at least 1)."""
    assert got.dtype == BFLOAT16 and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])
    allowed = ulps * ULP * np.maximum(np.abs(w[finite]), 1.0)
    assert np.all(np.abs(g[finite] - w[finite]) <= allowed), np.max(np.abs(g - w))


# -- the dtype table -------------------------------------------------------------------
def test_every_dtype_has_a_numpy_dtype_and_a_device_storage():
    assert {"i64", "bf16"} <= set(DTYPES)
    for dtype in DTYPES:
        assert np.dtype(STORAGE_TYPE[dtype]) == device_dtype(dtype)
    assert numpy_dtype("bf16") == BFLOAT16 and device_dtype("bf16") == np.uint16
    assert numpy_dtype("i64") == np.int64 == device_dtype("i64")
    assert is_float(BFLOAT16) and BFLOAT16.kind == "V"  # NumPy does not call it a float


# -- the conversions kernels run ---------------------------------------------------------
@pytest.fixture(scope="module")
def conversions():
    """The simulator's bf16 helpers as plain functions (``cuda.jit`` made a no-op)."""
    class Cuda:
        @staticmethod
        def jit(device=False):
            return lambda f: f
    space = {"np": np, "cuda": Cuda}
    exec(bf16_helper_source("simulator"), space)  # noqa: S102 (mlfuse's own helper text)
    return space


def test_every_bf16_widens_exactly(conversions):
    bits = np.arange(1 << 16, dtype=np.uint16)
    want = bits.view(BF16).astype(np.float32)
    got = np.array([conversions["_bf16_load"](b) for b in bits], np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))  # NaN payloads too


def rounding_cases(count: int = 20000) -> np.ndarray:
    """f32 values (NaN among them) that probe rounding to bf16: random words; ties (the
    lower 16 bits exactly 0x8000, even and odd kept parts) and their neighbours; the
    largest finite values (rounding up overflows to inf), zeros, subnormals, inf, NaNs
    with either sign and low payload bits."""
    rng = np.random.default_rng(0)
    words = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    upper = rng.integers(0, 1 << 16, count // 10, dtype=np.uint64).astype(np.uint32) << 16
    special = np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0, 0x80000000, 1,
                        0x8000, 0x18000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                        0x7F800001, 0xFF800001, 0x7FFFFFFF], np.uint32)
    return np.concatenate([words, upper | 0x8000, upper | 0x7FFF, upper | 0x8001,
                           special]).view(np.float32)


def assert_bf16_rounded(got_bits: np.ndarray, x: np.ndarray) -> None:
    """``got_bits`` are f32 ``x`` rounded to bf16 as ``_bf16_store`` rounds: ml_dtypes'
    bits where x is a number; NaN with x's sign where it is not."""
    nan = np.isnan(x)
    assert np.array_equal(got_bits[~nan], x[~nan].astype(BF16).view(np.uint16))
    assert np.all(np.isnan(got_bits[nan].view(BF16)))
    assert np.array_equal(got_bits[nan] >> 15, x[nan].view(np.uint32) >> 31)


def test_f32_rounds_to_bf16_as_ml_dtypes_does(conversions):
    x = rounding_cases()
    x = x[~np.isnan(x)]
    want = x.astype(BF16).view(np.uint16)
    got = np.array([conversions["_bf16_store"](v) for v in x], np.uint16)
    assert np.array_equal(got, want)


def test_nan_stays_nan_through_a_bf16_store(conversions):
    for word in (0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF):
        x = np.uint32(word).view(np.float32)
        bits = conversions["_bf16_store"](x)
        assert np.isnan(np.uint16(bits).view(BF16))
        assert (int(bits) >> 15) == (word >> 31)  # the sign is kept


def test_float_literals_are_rounded_to_their_dtype_in_kernels():
    assert literal(0.1, "bf16") == f"np.float32({float(BF16(0.1))!r})"
    assert literal(0.1, "f16") == f"np.float32({float(np.float16(0.1))!r})"
    assert literal(0.1, "f32") == f"np.float32({float(np.float32(0.1))!r})"
    assert literal(-5, "i64") == "np.int64(-5)"


# -- the interpreters ----------------------------------------------------------------------
SUMS = """
func f(x: bf16[N]) -> (bf16[], bf16[], bf16[]) {
    return sum(x, axis=0), mean(x, axis=0), max(x, axis=0)
}
"""


def test_bf16_sums_add_up_in_f32_at_every_level():
    x = _bf16(np.ones(1000))  # bf16 steps would stall at 256: 256 + 1 rounds to 256
    want = [_bf16(1000.0), _bf16(1.0), _bf16(1.0)]
    for got in (_oracle(SUMS, [x]), _loops(SUMS, [x]), _loops(SUMS, [x], "fused")):
        assert [g.dtype for g in got] == [BFLOAT16] * 3
        assert [float(g) for g in got] == [float(w) for w in want]


def test_bf16_elementwise_ops_round_each_result_as_numpy():
    source = """
func f(x: bf16[N], y: bf16[N]) -> (bf16[N], bf16[N], bool[N]) {
    return exp(x) * y + 0.1, tanh(x - y) / (y * y + 1.0), x < y
}
"""
    rng = np.random.default_rng(1)
    x, y = _bf16(rng.standard_normal(64)), _bf16(rng.standard_normal(64))
    a, b, c = _oracle(source, [x, y])
    assert np.array_equal(a, (np.exp(x) * y + BF16(0.1)))  # ml_dtypes' ufuncs, op by op
    assert np.array_equal(c, x < y)
    loops = _loops(source, [x, y])  # computes in f32, rounds at the store: within 2 ulps
    _assert_bf16_close(loops[0], a, 2)
    _assert_bf16_close(loops[1], b, 3)
    assert np.array_equal(loops[2], c)


def test_bf16_matmul_sums_f32_products_and_rounds_once():
    source = "func f(a: bf16[M, K], b: bf16[K, N]) -> bf16[M, N] {\n    return matmul(a, b)\n}\n"
    rng = np.random.default_rng(2)
    a, b = _bf16(rng.standard_normal((3, 40))), _bf16(rng.standard_normal((40, 5)))
    (got,) = _oracle(source, [a, b])
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(got, (a.astype(np.float32) @ b.astype(np.float32)).astype(BF16))
    _assert_bf16_close(got, exact.astype(BF16), 1)
    _assert_bf16_close(_loops(source, [a, b])[0], got, 1)


I64 = """
func f(k: i64[N], j: i64[N]) -> (i64[N], i64[], i64[], i32[N], f64[N]) {
    return k * j + 3, sum(k, axis=0), max(k - j, axis=0), cast(k, dtype=i32), cast(k, dtype=f64)
}
"""


def _i64_inputs():
    k = np.array([2 ** 62, -2 ** 62, 2 ** 40 + 7, -3, 0, 2 ** 63 - 1], np.int64)
    j = np.array([4, 3, 2 ** 30, -1, 5, 1], np.int64)
    return k, j


def test_i64_wraps_around_as_numpy_int64_at_every_level():
    k, j = _i64_inputs()
    with np.errstate(over="ignore"):
        want = [k * j + 3, np.sum(k), np.max(k - j), k.astype(np.int32), k.astype(np.float64)]
    assert want[0][0] == 3 and want[1] == np.int64(2 ** 40 + 4 + 2 ** 63 - 1 - 2 ** 64)
    for got in (_oracle(I64, [k, j]), _loops(I64, [k, j]), _loops(I64, [k, j], "fused")):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w)


# -- kernels under the simulator ------------------------------------------------------------
# (the simulator runs kernels as NumPy scalar code, which warns where the GPU wraps around
# or overflows silently, as the interpreters do under np.errstate)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_i64_kernels_wrap_around_as_numpy():
    k, j = _i64_inputs()
    for fuse in (True, False):
        got = _compile(I64, fuse).f(k, j)
        for g, w in zip(got, _oracle(I64, [k, j])):
            assert g.dtype == w.dtype and np.array_equal(g, w), (fuse, g, w)


def test_vector_kernels_move_bf16_as_the_scalar_conversions_do():
    """A pointwise kernel whose bf16 loads and stores move 8 values (16 bytes) at a time
    widens every bit pattern exactly and rounds f32 as ``_bf16_store`` does (the GPU's
    twin of those moves is LLVM integer code, checked there by benchmarks' gpu scripts)."""
    from helpers import record_launches
    source = ("func f(x: f32[N], b: bf16[M]) -> (bf16[N], f32[M]) {\n"
              "    return cast(x, dtype=bf16), cast(b, dtype=f32)\n}\n")
    x = rounding_cases(2000)
    x = np.concatenate([x, np.zeros(-len(x) % 8, np.float32)])
    b = np.arange(0, 1 << 16, 7, dtype=np.uint16)[:4096].view(BF16)
    module = _compile(source)
    launched = record_launches(module.python_module, ["f_0_vector", "f_1_vector"])
    got_b, got_x = module.f(x, b)
    assert sorted(launched) == ["f_0_vector", "f_1_vector"]
    assert_bf16_rounded(got_b.view(np.uint16), x)
    assert np.array_equal(got_x.view(np.uint32), b.astype(np.float32).view(np.uint32))


def test_bf16_elementwise_and_reduction_kernels_match_the_oracle():
    source = """
func f(x: bf16[R, C], y: bf16[C]) -> (bf16[R, C], bf16[R], bf16[R], bf16[C], f32[R, C]) {
    z = gelu(x * y + 0.5)
    return z, sum(z, axis=1), max(x, axis=1), mean(x, axis=0), cast(z, dtype=f32)
}
"""
    rng = np.random.default_rng(3)
    x, y = _bf16(rng.standard_normal((4, 70))), _bf16(rng.standard_normal(70))
    x[0, 3] = np.nan
    want = _oracle(source, [x, y])
    for fuse in (True, False):
        got = _compile(source, fuse).f(x, y)
        _assert_bf16_close(got[0], want[0], 3)
        _assert_bf16_close(got[1], want[1], 8)  # 70 terms of either sign
        assert np.array_equal(got[2].astype(np.float32), want[2].astype(np.float32),
                              equal_nan=True)  # max is exact
        _assert_bf16_close(got[3], want[3], 3)
        assert got[4].dtype == np.float32
        assert np.array_equal(got[4].astype(BF16), got[0], equal_nan=True)  # same rounding


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_casts_to_and_from_bf16_round_as_the_interpreters():
    source = """
func f(x: f32[N], d: f64[N], k: i64[N], i: i32[N]) -> (bf16[N], bf16[N], bf16[N], bf16[N], i32[N], i64[N], bool[N]) {
    b = cast(x, dtype=bf16)
    return b, cast(d, dtype=bf16), cast(k, dtype=bf16), cast(i, dtype=bf16), cast(b, dtype=i32), cast(b, dtype=i64), cast(b, dtype=bool)
}
"""
    # ties to even both ways, values that round up and down, and a double that rounds
    # twice (f64 -> f32 -> bf16, as kernels convert: mlfuse.dtypes.convert; ml_dtypes 0.7
    # rounds once), integers past bf16's 8 bits
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -0.0, 300.6, np.inf,
                  np.nan, 3.3e38], np.float32)
    d = np.array([1 + 2 ** -8 + 2 ** -30, 0.1, -1e-40, 1e39, 2.5, -7.0, 1.0, 0.0])
    k = np.array([2 ** 24 + 2 ** 16 + 1, 257, -259, 2 ** 62, 1, 0, -1, 3], np.int64)
    i = np.array([2 ** 24 + 2 ** 16 + 1, 257, -259, 2 ** 31 - 1, 1, 0, -1, 3], np.int32)
    args = [x, d, k, i]
    want = _oracle(source, args)
    # float to integer is defined only within the integer's range (NaN, inf and 3.3e38
    # give NumPy's INT_MIN, the GPU's saturated values)
    defined = np.abs(np.nan_to_num(want[0].astype(np.float64), nan=np.inf)) < 2 ** 31
    for got in (_compile(source).f(*args), _loops(source, args)):
        for n, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype, n
            if n in (4, 5):
                assert np.array_equal(g[defined], w[defined]), (n, g, w)
            else:
                assert np.array_equal(g.astype(np.float64), w.astype(np.float64),
                                      equal_nan=True), (n, g, w)


def test_bf16_matmul_runs_on_tensor_cores_and_matches():
    source = ("func f(a: bf16[M, K], b: bf16[K, N], c: bf16[N]) -> bf16[M, N] {\n"
              "    return relu(matmul(a, b) + c)\n}\n")
    fused = compile_text(source, "dtypes.fuse", level="fused")
    assert 'variant = "mma-bf16"' in print_ir(fused)
    rng = np.random.default_rng(4)
    a, b = _bf16(rng.standard_normal((18, 24))), _bf16(rng.standard_normal((24, 10)))
    c = _bf16(rng.standard_normal(10))
    (want,) = _oracle(source, [a, b, c])
    got = _compile(source).f(a, b, c)
    exact = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64), 0)
    _assert_bf16_close(got, exact.astype(BF16), 1)  # f32 sums, rounded once
    _assert_bf16_close(got, want, 3)


def test_bf16_batched_matmul_with_a_transposed_operand():
    source = ("func f(a: bf16[B, M, K], b: bf16[B, N, K]) -> bf16[B, M, N] {\n"
              "    return matmul(a, transpose(b, [0, 2, 1]))\n}\n")
    rng = np.random.default_rng(5)
    a, b = _bf16(rng.standard_normal((2, 5, 16))), _bf16(rng.standard_normal((2, 3, 16)))
    exact = a.astype(np.float64) @ b.astype(np.float64).transpose(0, 2, 1)
    _assert_bf16_close(_compile(source).f(a, b), exact.astype(BF16), 1)


# -- the runtime's arguments ------------------------------------------------------------------
ARGS = "func f(x: bf16[N], k: i64[N], s: bf16[]) -> (bf16[N], i64[N]) {\n    return x * s, k + 1\n}\n"


@pytest.fixture(scope="module")
def args_module():
    return _compile(ARGS)


def test_bf16_and_i64_arguments_and_results_on_the_host(args_module):
    x, k = _bf16([1.5, -2.0, 3.0]), np.array([1, 2, 2 ** 62], np.int64)
    y, j = args_module.f(x, k, 2.0)
    assert y.dtype == BFLOAT16 and np.array_equal(y, _bf16([3.0, -4.0, 6.0]))
    assert j.dtype == np.int64 and np.array_equal(j, k + 1)
    y, _ = args_module.f(x, k, BF16(0.5))  # a bfloat16 scalar
    assert np.array_equal(y, _bf16([0.75, -1.0, 1.5]))


@pytest.mark.parametrize("which, value, message", [
    (0, np.ones(3, np.float32), r"parameter 'x' of @f: expects dtype bfloat16 \(bf16\), got float32"),
    (0, np.ones(3, np.uint16), r"expects dtype bfloat16 \(bf16\), got uint16"),
    (1, np.ones(3, np.int32), r"parameter 'k' of @f: expects dtype int64 \(i64\), got int32"),
    (2, np.float32(2.0), r"parameter 's' of @f: expects bf16 \(bfloat16\), got a float32 scalar"),
    (2, 1e39, r"1e\+39 is beyond the largest bf16"),
])
def test_wrong_arguments_name_the_dtype(args_module, which, value, message):
    args = [_bf16([1.0, 2.0, 3.0]), np.arange(3, dtype=np.int64), 1.0]
    args[which] = value
    with pytest.raises(ArgumentError, match=message):
        args_module.f(*args)


def test_i64_scalar_parameter_takes_python_ints_in_range():
    module = _compile("func f(x: i64[N], s: i64[]) -> i64[N] {\n    return x * s\n}\n")
    x = np.arange(3, dtype=np.int64)
    assert np.array_equal(module.f(x, 2 ** 40), x * 2 ** 40)
    with pytest.raises(ArgumentError, match="expects i64, got int"):
        module.f(x, 2 ** 63)


def test_device_arrays_pass_bf16_as_uint16_bits(args_module):
    from numba import cuda
    x, k = _bf16([1.5, -2.0, 3.0]), np.array([1, 2, 3], np.int64)
    y, _ = args_module.f(cuda.to_device(x.view(np.uint16)), cuda.to_device(k),
                         cuda.to_device(np.array(2.0, np.float32).astype(BF16).view(np.uint16)))
    host = y.copy_to_host()
    assert host.dtype == np.uint16 and np.array_equal(host.view(BF16), _bf16([3.0, -4.0, 6.0]))
    with pytest.raises(ArgumentError, match=r"expects bf16 as a device array of its 16-bit "
                                            r"words, dtype uint16 .* got float32"):
        args_module.f(cuda.to_device(np.ones(3, np.float32)), cuda.to_device(k), 1.0)


# -- the language ---------------------------------------------------------------------------
@pytest.mark.parametrize("source, message", [
    ("func f(x: bf16[N]) -> bf16[N] {\n    return x * 1e39\n}\n", r"2:16: .*literal 1e\+39 overflows bf16"),
    ("func f(x: i64[N]) -> i64[N] {\n    return x + 0.5\n}\n", r"2:16: .*not a whole number"),
    ("func f(x: i64[N]) -> i64[N] {\n    return exp(x)\n}\n", r"2:12: .*exp needs a float dtype, got i64"),
    ("func f(x: bf61[N]) -> bf16[N] {\n    return x\n}\n", r"1:11: .*unknown dtype 'bf61'; did you mean 'bf16'"),
    ("func f(x: bf16[N], y: f32[N]) -> f32[N] {\n    return x + y\n}\n", r"different dtypes \(bf16, f32\)"),
])
def test_dtype_errors_point_at_the_source(source, message):
    with pytest.raises(MlfuseError, match=message):
        parse_program(source, "dtypes.fuse")


def test_literals_take_the_i64_range():
    big = "func f(x: i64[N]) -> i64[N] {\n    return x + 4294967296\n}\n"
    (got,) = _oracle(big, [np.array([1], np.int64)])
    assert got[0] == 4294967297
    with pytest.raises(MlfuseError, match="out of the i32 range"):
        parse_program(big.replace("i64", "i32"), "dtypes.fuse")


# -- ONNX -----------------------------------------------------------------------------------------
def test_onnx_int64_and_bfloat16_tensors_import_and_run():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(_bf16([0.5, 2.0, -1.0]), "w")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"]), helper.make_node("Add", ["k", "k"], ["j"]),
         helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT)], "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("j", TensorProto.INT64, [3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x, k = _bf16([1.0, 3.0, 5.0]), np.array([2 ** 40, -1, 7], np.int64)
    j, z = mlfuse.compile_onnx(model)(x, k)
    assert j.dtype == np.int64 and np.array_equal(j, 2 * k)
    assert z.dtype == np.float32 and np.array_equal(z, [0.5, 6.0, -5.0])
    assert onnx is not None
