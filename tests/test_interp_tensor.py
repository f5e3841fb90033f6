"""The tensor interpreter (the oracle) against hand-written NumPy formulas."""
import math

import numpy as np
import pytest

from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.interp import run_tensor
from mlfuse.dialects import parse_ir

from helpers import assert_close, random_inputs

FLOATS = ["f32", "f64"]
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32}


def run(text, args):
    return run_tensor(parse_ir(text).funcs[0], args)


def unary(op, dtype, shape="3, 4"):
    return (f"func @f(%x: {dtype}[{shape}]) -> ({dtype}[{shape}]) {{\n"
            f"  %0 = tensor.{op} %x : {dtype}[{shape}]\n  return %0\n}}\n")


def binary(op, dtype, result_dtype=None, shape="3, 4"):
    rd = result_dtype or dtype
    return (f"func @f(%x: {dtype}[{shape}], %y: {dtype}[{shape}]) -> ({rd}[{shape}]) {{\n"
            f"  %0 = tensor.{op} %x, %y : {rd}[{shape}]\n  return %0\n}}\n")


_erf64 = np.vectorize(math.erf)

# Each formula is evaluated in f64 from the (f32 or f64) inputs, then cast back.
UNARY_FORMULAS = {
    "neg": lambda x: -x,
    "abs": lambda x: np.where(x < 0, -x, x),
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "gelu": lambda x: 0.5 * x * (1 + _erf64(x / math.sqrt(2))),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "sin": np.sin,
    "cos": np.cos,
    "erf": _erf64,
}
POSITIVE_ONLY = {"log", "sqrt", "rsqrt"}

BINARY_FORMULAS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "pow": lambda x, y: np.exp(y * np.log(x)),
    "maximum": lambda x, y: np.where(x > y, x, y),
    "minimum": lambda x, y: np.where(x < y, x, y),
}
COMPARISONS = {"lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__",
               "eq": "__eq__", "ne": "__ne__"}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(UNARY_FORMULAS))
def test_unary_op_matches_its_formula(op, dtype):
    (x,) = random_inputs(parse_ir(unary(op, dtype)).funcs[0],
                         low=0.5 if op in POSITIVE_ONLY else None, seed=1)
    (got,) = run(unary(op, dtype), [x])
    want = UNARY_FORMULAS[op](x.astype(np.float64)).astype(x.dtype)
    assert_close(got, want, n_ops=8, what=op)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(BINARY_FORMULAS))
def test_binary_op_matches_its_formula(op, dtype):
    x, y = random_inputs(parse_ir(binary(op, dtype)).funcs[0], low=0.5 if op == "pow" else None,
                         seed=2)
    (got,) = run(binary(op, dtype), [x, y])
    want = BINARY_FORMULAS[op](x.astype(np.float64), y.astype(np.float64)).astype(x.dtype)
    assert_close(got, want, n_ops=4, what=op)


@pytest.mark.parametrize("op", sorted(COMPARISONS))
def test_comparison_gives_bool(op):
    x = np.array([[1, 2, 3]], np.int32)
    y = np.array([[2, 2, 2]], np.int32)
    (got,) = run(binary(op, "i32", "bool", shape="1, 3"), [x, y])
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, getattr(x, COMPARISONS[op])(y))


def test_where_picks_by_condition():
    text = """func @f(%c: bool[4], %x: f32[4], %y: f32[]) -> (f32[4]) {
  %0 = tensor.where %c, %x, %y : f32[4]
  return %0
}"""
    c = np.array([True, False, True, False])
    x = np.arange(4, dtype=np.float32)
    (got,) = run(text, [c, x, np.float32(-1)])
    np.testing.assert_array_equal(got, [0, -1, 2, -1])
    assert got.dtype == np.float32


@pytest.mark.parametrize("src,dst,values,expected", [
    ("f32", "i32", [2.7, -2.7, 0.0, -0.5], [2, -2, 0, 0]),            # truncates toward 0
    ("f32", "bool", [0.0, -0.0, 1e-30, -3.0], [False, False, True, True]),
    ("bool", "f32", [True, False, True, False], [1.0, 0.0, 1.0, 0.0]),
    ("i32", "f64", [-7, 0, 2 ** 30, 3], [-7.0, 0.0, 2.0 ** 30, 3.0]),
    ("f64", "f32", [0.1, 1e300, -1e-300, 2.5], [np.float32(0.1), np.inf, -0.0, 2.5]),
    ("f32", "f16", [0.1, 70000.0, 1e-8, -2.0], [np.float16(0.1), np.inf, 0.0, -2.0]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_cast_converts_like_numpy_astype(src, dst, values, expected):
    text = (f"func @f(%x: {src}[4]) -> ({dst}[4]) {{\n"
            f"  %0 = tensor.cast %x {{dtype = \"{dst}\"}} : {dst}[4]\n  return %0\n}}\n")
    from mlfuse.ir.types import NUMPY_DTYPE
    x = np.array(values, dtype=NUMPY_DTYPE[src])
    with np.errstate(over="ignore"):
        (got,) = run(text, [x])
    assert got.dtype == np.dtype(NUMPY_DTYPE[dst])
    np.testing.assert_array_equal(got, np.array(expected, dtype=NUMPY_DTYPE[dst]))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.array(expected, got.dtype)))


def test_broadcasting_binds_symbolic_dims_from_arguments():
    text = """func @f(%x: f32[N, 4], %b: f32[4], %s: f32[], %col: f32[N, 1]) -> (f32[N, 4]) {
  %0 = tensor.add %x, %b : f32[N, 4]
  %1 = tensor.mul %0, %s : f32[N, 4]
  %2 = tensor.sub %1, %col : f32[N, 4]
  return %2
}"""
    x, b, s, col = random_inputs(parse_ir(text).funcs[0], {"N": 5})
    (got,) = run(text, [x, b, s, col])
    assert got.shape == (5, 4)
    assert_close(got, (x + b) * s - col, n_ops=3)


def test_constants_take_the_result_dtype_so_f32_stays_f32():
    text = """func @f(%x: f32[3]) -> (f32[3]) {
  %c = tensor.constant {value = 0.1} : f32[]
  %0 = tensor.mul %x, %c : f32[3]
  return %0
}"""
    x = np.array([1, 3, 7], np.float32)
    (got,) = run(text, [x])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x * np.float32(0.1))  # bit-exact, not rounded from f64


def test_nan_and_inf_propagate_as_numpy():
    text = """func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4], f32[4], f32[], f32[4], f32[4]) {
  %0 = tensor.maximum %x, %y : f32[4]
  %1 = tensor.minimum %x, %y : f32[4]
  %2 = tensor.relu %x : f32[4]
  %3 = tensor.max %x {axis = [0]} : f32[]
  %4 = tensor.log %y : f32[4]
  %5 = tensor.div %y, %y : f32[4]
  return %0, %1, %2, %3, %4, %5
}"""
    x = np.array([np.nan, 1, -np.inf, 2], np.float32)
    y = np.array([0, np.nan, 1, 0], np.float32)
    mx, mn, relu, red, log, div = run(text, [x, y])
    nan, inf = np.nan, np.inf
    assert_close(mx, np.array([nan, nan, 1, 2], np.float32))
    assert_close(mn, np.array([nan, nan, -inf, 0], np.float32))
    assert_close(relu, np.array([nan, 1, 0, 2], np.float32))
    assert np.isnan(red)
    assert_close(log, np.array([-inf, nan, 0, -inf], np.float32))
    assert_close(div, np.array([nan, nan, 1, nan], np.float32))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op,formula", [("sum", np.add.reduce), ("max", np.maximum.reduce),
                                        ("min", np.minimum.reduce)])
@pytest.mark.parametrize("axes,keepdims", [([1], False), ([0, 2], True), ([0, 1, 2], False)])
def test_reductions_over_axes(op, formula, axes, keepdims, dtype):
    shape = (3, 5, 2)
    out = tuple(1 if a in axes else d for a, d in enumerate(shape)) if keepdims else tuple(
        d for a, d in enumerate(shape) if a not in axes)
    text = (f"func @f(%x: {dtype}[3, 5, 2]) -> ({dtype}[{', '.join(map(str, out))}]) {{\n"
            f"  %0 = tensor.{op} %x {{axis = {axes}, keepdims = {str(keepdims).lower()}}} : "
            f"{dtype}[{', '.join(map(str, out))}]\n  return %0\n}}")
    (x,) = random_inputs(parse_ir(text).funcs[0], seed=3)
    (got,) = run(text, [x])
    want = x.astype(np.float64)
    for a in reversed(axes):
        want = formula(want, axis=a)
    assert_close(got, want.reshape(out).astype(x.dtype), n_ops=30)


def test_mean_is_sum_over_count_and_integer_sum_stays_i32():
    text = """func @f(%x: f32[N, 6], %k: i32[2, 3]) -> (f32[N, 1], i32[3]) {
  %0 = tensor.mean %x {axis = [1], keepdims = true} : f32[N, 1]
  %1 = tensor.sum %k {axis = [0]} : i32[3]
  return %0, %1
}"""
    x, k = random_inputs(parse_ir(text).funcs[0], {"N": 4})
    mean, total = run(text, [x, k])
    assert_close(mean, (x.astype(np.float64).sum(1, keepdims=True) / 6).astype(np.float32), 8)
    assert total.dtype == np.int32
    np.testing.assert_array_equal(total, k[0] + k[1])


def test_reshape_transpose_broadcast_to_move_elements_as_numpy():
    text = """func @f(%x: f32[N, 6]) -> (f32[3, N, 2], f32[6, N], f32[2, N, 6]) {
  %0 = tensor.reshape %x {shape = [3, N, 2]} : f32[3, N, 2]
  %1 = tensor.transpose %x {perm = [1, 0]} : f32[6, N]
  %2 = tensor.broadcast_to %x {shape = [2, N, 6]} : f32[2, N, 6]
  return %0, %1, %2
}"""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    reshaped, transposed, broadcast = run(text, [x])
    np.testing.assert_array_equal(reshaped, x.ravel().reshape(3, 4, 2))
    np.testing.assert_array_equal(transposed, x.T)
    np.testing.assert_array_equal(broadcast, np.stack([x, x]))


@pytest.mark.parametrize("a_shape,b_shape,out", [("3, 5", "5, 2", "3, 2"),
                                                 ("2, 3, 5", "2, 5, 4", "2, 3, 4"),
                                                 ("2, 3, 5", "5, 4", "2, 3, 4")])
def test_matmul_sums_products_over_k(a_shape, b_shape, out):
    text = (f"func @f(%a: f32[{a_shape}], %b: f32[{b_shape}]) -> (f32[{out}]) {{\n"
            f"  %0 = tensor.matmul %a, %b : f32[{out}]\n  return %0\n}}")
    a, b = random_inputs(parse_ir(text).funcs[0], seed=4)
    (got,) = run(text, [a, b])
    bb = b if b.ndim == a.ndim else np.broadcast_to(b, (a.shape[0],) + b.shape)
    want = (a[..., :, :, None].astype(np.float64) * bb[..., None, :, :]).sum(-2)
    assert_close(got, want.astype(np.float32), n_ops=10)


def naive_conv2d(x, w, stride, pad, dil):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for i, j, p, q, ci, a, b in np.ndindex(n, o, oh, ow, c, kh, kw):
        r, s = p * stride[0] - pad[0] + a * dil[0], q * stride[1] - pad[1] + b * dil[1]
        if 0 <= r < h and 0 <= s < wd:
            out[i, j, p, q] += float(x[i, ci, r, s]) * float(w[j, ci, a, b])
    return out


CONV_CASES = [  # (input, weights, stride, padding, dilation, output)
    ("1, 2, 5, 5", "3, 2, 3, 3", [1, 1], [0, 0], [1, 1], "1, 3, 3, 3"),
    ("2, 1, 6, 5", "2, 1, 3, 2", [2, 1], [1, 0], [1, 2], "2, 2, 3, 3"),
    ("1, 2, 4, 4", "1, 2, 2, 2", [1, 2], [1, 1], [1, 1], "1, 1, 5, 3"),
]


@pytest.mark.parametrize("xs,ws,stride,pad,dil,out", CONV_CASES)
def test_conv2d_matches_a_naive_loop(xs, ws, stride, pad, dil, out):
    text = (f"func @f(%x: f32[{xs}], %w: f32[{ws}]) -> (f32[{out}]) {{\n"
            f"  %0 = tensor.conv2d %x, %w {{dilation = {dil}, padding = {pad}, stride = {stride}}}"
            f" : f32[{out}]\n  return %0\n}}")
    x, w = random_inputs(parse_ir(text).funcs[0], seed=5)
    (got,) = run(text, [x, w])
    assert got.dtype == np.float32
    assert_close(got, naive_conv2d(x, w, stride, pad, dil).astype(np.float32), n_ops=20)


def test_composites_match_their_definitions():
    text = """func @f(%x: f64[N, 5], %g: f64[5], %b: f64[5]) -> (f64[N, 5], f64[N, 5], f64[N, 5]) {
  %0 = tensor.softmax %x {axis = 1} : f64[N, 5]
  %1 = tensor.layernorm %x, %g, %b {eps = 0.001} : f64[N, 5]
  %2 = tensor.rmsnorm %x, %g {eps = 0.001} : f64[N, 5]
  return %0, %1, %2
}"""
    x, g, b = random_inputs(parse_ir(text).funcs[0], {"N": 3}, seed=6)
    soft, layer, rms = run(text, [x, g, b])
    e = np.exp(x)
    assert_close(soft, e / e.sum(1, keepdims=True), n_ops=10)
    mu = x.mean(1, keepdims=True)
    sd = np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-3)
    assert_close(layer, (x - mu) / sd * g + b, n_ops=20)
    assert_close(rms, x / np.sqrt((x ** 2).mean(1, keepdims=True) + 1e-3) * g, n_ops=20)


def test_layernorm_over_trailing_dims_from_axis():
    text = """func @f(%x: f32[2, 3, 4], %g: f32[3, 4], %b: f32[3, 4]) -> (f32[2, 3, 4]) {
  %0 = tensor.layernorm %x, %g, %b {axis = 1} : f32[2, 3, 4]
  return %0
}"""
    x, g, b = random_inputs(parse_ir(text).funcs[0], seed=7)
    (got,) = run(text, [x, g, b])
    x64 = x.astype(np.float64)
    mu = x64.mean((1, 2), keepdims=True)
    var = x64.var((1, 2), keepdims=True)
    assert_close(got, ((x64 - mu) / np.sqrt(var + 1e-5) * g + b).astype(np.float32), n_ops=30)


ADD_N = """func @f(%x: f32[N, 2], %y: f32[N, 2]) -> (f32[N, 2]) {
  %0 = tensor.add %x, %y : f32[N, 2]
  return %0
}"""


@pytest.mark.parametrize("args,message", [
    ([np.zeros((3, 2), np.float32), np.zeros((4, 2), np.float32)],
     r"dim 0 is 4, expected N \(N = 3"),
    ([np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float64)], "must be f32, got float64"),
    ([np.zeros((3, 2), np.float32), np.zeros((3, 5), np.float32)], "dim 1 is 5, expected 2"),
    ([np.zeros((3, 2), np.float32)], "takes 2 argument"),
    ([np.zeros(3, np.float32), np.zeros(3, np.float32)], "must have rank 2"),
])
def test_bad_arguments_raise_one_error_naming_the_problem(args, message):
    with pytest.raises(ArgumentError, match=message):
        run(ADD_N, args)


def test_arguments_are_not_modified_and_results_are_fresh():
    text = """func @f(%x: f32[2]) -> (f32[2]) {
  return %x
}"""
    x = np.array([1, 2], np.float32)
    (got,) = run(text, [x])
    got[0] = 9
    assert x[0] == 1


def test_unknown_op_is_an_error_naming_it():
    text = """func @f(%x: f32[2]) -> (f32[2]) {
  %c = arith.constant {value = 1.0} : f32
  return %x
}"""
    with pytest.raises(MlfuseError, match="arith.constant"):
        run_tensor(parse_ir(text, verify=False).funcs[0], [np.zeros(2, np.float32)])
