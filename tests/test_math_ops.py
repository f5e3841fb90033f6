"""The math and bool ops of the elementwise table (floor, ceil, round, log1p, expm1,
softplus, hardswish, hardsigmoid, logical_and/or/not), clip and where with literal
branches: the NumPy oracle against torch's definitions, the kernels against the oracle
on special values in every float dtype, the GPU code through ptxas, the & | ~ operators
and their errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.elementwise import ELEMENTWISE
from mlfuse.frontend import parse_source
from mlfuse.interp import run_tensor

from helpers import assert_close, assert_error_at

NEW_UNARY = ["floor", "ceil", "round", "log1p", "expm1", "softplus", "hardswish", "hardsigmoid"]
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 1e-7, -1e-7, -1.0,
           -3.0, 3.0, -2.9, 2.9, 6.0, 19.9, 20.0, 20.5, -20.0, 88.0, -100.0, 1e6, 0.3]


def torch_reference(name: str, x: float) -> float:
    """The op as torch defines it, in float64 scalar Python."""
    def relu6(v):
        return min(max(v, 0.0), 6.0)

    if math.isnan(x):
        return math.nan
    return {
        "floor": lambda: float(math.floor(x)) if math.isfinite(x) else x,
        "ceil": lambda: float(math.ceil(x)) if math.isfinite(x) else x,
        "round": lambda: float(round(x)) if math.isfinite(x) else x,  # Python: halves to even
        "log1p": lambda: math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan),
        "expm1": lambda: math.expm1(x) if x < 700 else math.inf,
        "softplus": lambda: x if x > 20 else math.log1p(math.exp(x)),
        "hardswish": lambda: x * relu6(x + 3) / 6 if math.isfinite(x) else (x if x > 0 else math.nan),
        "hardsigmoid": lambda: relu6(x + 3) / 6,
    }[name]()


@pytest.mark.parametrize("name", NEW_UNARY)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_oracle_follows_torchs_definition(name, dtype):
    with np.errstate(all="ignore"):
        x = np.array(SPECIAL, dtype)
        got = ELEMENTWISE[name].numpy(x)
        want = np.array([torch_reference(name, float(v)) for v in x]).astype(dtype)
    assert got.dtype == dtype
    assert_close(got, want, 4, name)


def test_round_halves_to_even_and_signs_of_zero_stay():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -0.0, 0.49999997], np.float32)
    got = ELEMENTWISE["round"].numpy(x)
    np.testing.assert_array_equal(got, [0, 2, 2, -0.0, -2, -0.0, 0])
    assert np.signbit(got[3]) and np.signbit(got[5])


def test_softplus_and_hardswish_do_not_overflow_in_f16():
    """exp(15) and 10000 * 6 pass f16's largest value; the results do not (f32 inside)."""
    x = np.array([15.0, 10000.0], np.float16)
    np.testing.assert_array_equal(ELEMENTWISE["softplus"].numpy(x), x)
    np.testing.assert_array_equal(ELEMENTWISE["hardswish"].numpy(x), x)


MATH = """func f(x: {t}[N], c: bool[N], d: bool[N]) -> ({t}[N], {t}[N], {t}[N], {t}[N], {t}[N], {t}[N], {t}[N], {t}[N], bool[N], {t}[N]) {{
    return floor(x), ceil(x), round(x), log1p(x), expm1(x), softplus(x), hardswish(x), hardsigmoid(x), c & ~d | ~c & d, clip(x, -2.0, 2.0)
}}"""


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_kernels_match_the_oracle_on_special_values(dtype):
    source = MATH.format(t=dtype)
    func = parse_source(source).funcs[0]
    x = np.array(SPECIAL, dtype={"f16": np.float16, "f32": np.float32, "f64": np.float64}[dtype])
    c = np.arange(len(x)) % 2 == 0
    d = np.arange(len(x)) % 3 == 0
    with np.errstate(all="ignore"):
        want = run_tensor(func, [x, c, d])
    for fuse in (True, False):
        got = mlfuse.compile_source(source, "t.fuse", fuse=fuse, target="simulator").f(x, c, d)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, 4, f"fuse={fuse}, result {k}")
    np.testing.assert_array_equal(want[8], c ^ d)
    np.testing.assert_array_equal(want[9], np.clip(x, -2, 2))


GPU_PROGRAM = """
func math(x: f32[N], c: bool[N], d: bool[N]) -> (f32[N], bool[N]) {
    return floor(x) + ceil(x) + round(x) + log1p(x) + expm1(x) + softplus(x) + hardswish(x) + hardsigmoid(x) + clip(x, -2.0, 2.0) / N, c & ~d | ~c & d
}
func windows(x: f32[N, 8, 9, 9], w: f32[8, 1, 3, 3]) -> (f32[N, 8, 5, 5], f32[N, 8, 5, 5], i32[N, 8, 9], f32[N, 8, 9, 9]) {
    y = conv2d(x, w, padding=1, groups=8)
    return max_pool2d(relu(y), 3, stride=2, padding=1), avg_pool2d(x, 2, stride=2, ceil_mode=true, count_include_pad=false), argmax(x, axis=3), cumsum(x, axis=2, reverse=true)
}
func wide(x: f64[N, 4]) -> (f64[N, 4], i32[N]) {
    return round(x) + softplus(x) + floor(x), argmin(x, axis=1)
}
"""


def test_gpu_code_compiles_for_sm90_and_f32_stays_f32(tmp_path):
    """Every new op in kernels for the H100 through ptxas: floor, ceil and round call
    libdevice's float functions (Python's math.floor would return an int), so f32 kernels
    hold no f64 instruction; nothing spills."""
    from test_ptx import kernels, toolchain_problem
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    path = tmp_path / "new_ops.fuse"
    path.write_text(GPU_PROGRAM)
    found = kernels(str(path))
    assert {k["func"] for k in found} == {"math", "windows", "wide"}
    for k in found:
        assert k["spill_bytes"] == 0 and k["stack_bytes"] == 0, k
        assert k["func"] == "wide" or k["f64"] == [], k


def test_generated_code_calls_libdevice_on_the_gpu_and_numpy_in_the_simulator():
    from mlfuse.codegen import generate
    from mlfuse.pipeline import compile_text
    module = compile_text("func f(x: f32[N]) -> f32[N] { return floor(x) + round(x) }", "t.fuse")
    cuda_text, sim_text = (generate(module, target=t) for t in ("cuda", "simulator"))
    assert "cuda.libdevice.floorf(" in cuda_text and "cuda.libdevice.rintf(" in cuda_text
    assert "np.floor(" in sim_text and "np.rint(" in sim_text


# -- the language: & | ~, clip, where with literal branches ---------------------------
def ops(source: str) -> list[str]:
    return [op.name.split(".")[1] for op in parse_source(source).funcs[0].body.ops
            if op.name != "tensor.constant"]


HEAD = "func f(a: bool[N], b: bool[N], c: bool[N], x: f32[N], i: i32[N]) -> bool[N] {\n"


def test_bool_operators_bind_as_in_python():
    assert ops(HEAD + "    return a | b & c\n}") == ["logical_and", "logical_or", "return"]
    assert ops(HEAD + "    return ~a & b\n}") == ["logical_not", "logical_and", "return"]
    assert ops(HEAD + "    return a & b == c\n}") == ["logical_and", "eq", "return"]
    assert ops(HEAD + "    return (x > 0.0) & ~(x < 1.0) | a\n}") == \
        ["gt", "lt", "logical_not", "logical_and", "logical_or", "return"]


def test_where_takes_literal_branches_and_clip_literal_bounds():
    source = ("func f(c: bool[N], x: f32[N], i: i32[N]) -> (f32[N], f32[N], i32[N], i32[N]) {\n"
              "    return where(c, x, 0.0), where(c, -1.5, x), where(c, 1, i), clip(i, -2, 3)\n}")
    c = np.array([True, False, True])
    x = np.array([0.5, np.nan, -7.0], np.float32)
    i = np.array([5, -9, 1], np.int32)
    got = mlfuse.compile_source(source, "t.fuse", target="simulator").f(c, x, i)
    np.testing.assert_array_equal(got[0], np.where(c, x, 0))
    np.testing.assert_array_equal(got[1], np.where(c, -1.5, x))
    np.testing.assert_array_equal(got[2], np.where(c, 1, i))
    np.testing.assert_array_equal(got[3], np.clip(i, -2, 3))


ERRORS = [
    ("and of floats", "    return x & a\n", "2:14", "logical_and needs bool operands, got f32, bool"),
    ("not of an int", "    return ~i\n", "2:12", "logical_not needs bool operands, got i32"),
    ("comparison without parentheses", "    return x > 0.0 & a\n", "2:16",
     ("logical_and takes bool operands, not 0.0 (a comparison combined with & or | needs "
      "parentheses")),
    ("bool literal", "    r = a | 1\n    return a\n", "2:13", "logical_or takes bool operands, not 1"),
    ("chained comparison", "    return x > x & a < x\n", "2:22", "unexpected '<'"),
    ("where without a partner", "    return where(a, 1.0, 0.0) > x\n", "2:12",
     "where needs a tensor among its data operands"),
    ("clip dtype", "    return clip(x, i, 1.0) > x\n", "2:12", "maximum operands have different dtypes"),
    ("floor of an int", "    return floor(i) > 0\n", "2:12", "floor needs a float dtype, got i32"),
]


@pytest.mark.parametrize("body, position, message", [e[1:] for e in ERRORS],
                         ids=[e[0] for e in ERRORS])
def test_errors_point_at_the_offending_token(body, position, message):
    assert_error_at(HEAD + body + "}\n", position, message)
