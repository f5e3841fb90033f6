"""Contractions (matmul, batched matmul, conv2d, with fused prologues and epilogues):
which kernels the schedule-contractions pass marks, how it splits their indices, and
the tiled kernels against the NumPy interpreter under the simulator, at sizes that
leave partial tiles in M, N and K."""
import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.api import compile_ir
from mlfuse.dialects import parse_ir
from mlfuse.transforms import get_pass
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.interp import run_tensor
from mlfuse.transforms.contraction import match_contraction
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def kernels(source: str) -> list[KernelOp]:
    module = compile_text(source, "t.fuse")
    return [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]


def test_matmul_with_epilogue_is_one_contraction_with_m_and_n_sides():
    (k,) = kernels("func f(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
                   "    return relu(matmul(x, w) + b)\n}\n")
    assert k["schedule"] == "contraction"
    c = match_contraction(k)
    assert (c.m_dims, c.n_dims, c.batch_dims) == ([0], [1], [])
    assert c.k_extents == ["K"]
    assert c.direct_load("a").operands[0].name_hint == "x"
    assert c.direct_load("b").operands[0].name_hint == "w"


def test_batched_matmul_has_a_batch_dim_and_2d_weights_do_not():
    (k,) = kernels("func f(x: f32[B, M, K], y: f32[B, K, N]) -> f32[B, M, N] {\n"
                   "    return matmul(x, y)\n}\n")
    c = match_contraction(k)
    assert (c.m_dims, c.n_dims, c.batch_dims) == ([1], [2], [0])
    (k,) = kernels("func f(x: f32[B, M, K], w: f32[K, N]) -> f32[B, M, N] {\n"
                   "    return matmul(x, w)\n}\n")
    c = match_contraction(k)
    assert (c.m_dims, c.n_dims, c.batch_dims) == ([0, 1], [2], [])


def test_conv2d_flattens_three_reductions_and_puts_the_pixels_on_the_n_side():
    # NCHW output: its fastest index (ow) is read by the input gather, so the input is
    # the N side (coalesced stores); the OIHW weights are read 16 bytes at a time
    (k,) = kernels("func f(x: f32[N, 4, 9, 9], w: f32[8, 4, 3, 3]) -> f32[N, 8, 9, 9] {\n"
                   "    return conv2d(x, w, padding=1)\n}\n")
    c = match_contraction(k)
    assert c.k_extents == [4, 3, 3]
    assert (c.m_dims, c.n_dims, c.batch_dims) == ([1], [0, 2, 3], [])
    assert c.direct_load("a").operands[0].name_hint == "w"
    assert c.direct_load("b") is None  # a masked gather


@pytest.mark.parametrize("body", [
    "return sum(x * x, axis=1)",            # one side only: a row reduction
    "return max(x, axis=1)",                # not a sum
])
def test_row_reductions_are_not_contractions(body):
    for k in kernels(f"func f(x: f32[R, C]) -> f32[R] {{\n    {body}\n}}\n"):
        assert k["schedule"] != "contraction"
        assert match_contraction(k) is None


PROLOGUE = """\
func @f(%x: buf<f32[M, K]>, %w: buf<f32[K, N]>) -> (buf<f32[M, N]>) {
  %out = loops.alloc : buf<f32[M, N]>
  fused.kernel {extents = [M, N], kernel_name = "f_0", sources = ["relu", "matmul"]} (%i: index, %j: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = K} : f32 (%k: index) {
      %a = loops.load %x, %i, %k : f32
      %r = arith.relu %a : f32
      %b = loops.load %w, %k, %j : f32
      %p = arith.mul %r, %b : f32
      loops.yield %p
    }
    loops.store %acc, %out, %i, %j
  }
  return %out
}
"""


def test_a_fused_prologue_is_part_of_the_operand_and_runs_tiled():
    module = parse_ir(PROLOGUE)
    get_pass("schedule-contractions").run(module)
    (k,) = [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]
    c = match_contraction(k)
    assert k["schedule"] == "contraction"
    assert c.a.op.name == "arith.relu" and c.direct_load("a") is None
    x = np.random.default_rng(1).standard_normal((19, 11)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((11, 22)).astype(np.float32)
    assert_close(compile_ir(module, target="simulator").f(x, w), np.maximum(x, 0) @ w, 2,
                 "prologue", reduced=11)


CASES = {
    "matmul_epilogue": ("func f(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
                        "    return relu(matmul(x, w) + b)\n}\n", {"M": 37, "N": 21, "K": 13}),
    "matmul_f64": ("func f(x: f64[M, K], w: f64[K, N]) -> f64[M, N] {\n"
                   "    return matmul(x, w) * 2.0\n}\n", {"M": 17, "N": 18, "K": 9}),
    "transposed_operands": ("func f(x: f32[K, M], w: f32[N, K]) -> f32[M, N] {\n"
                            "    return matmul(transpose(x), transpose(w))\n}\n",
                            {"M": 19, "N": 20, "K": 11}),
    "gram_matrix": ("func f(x: f32[M, K]) -> f32[M, M] {\n"
                    "    return matmul(x, transpose(x))\n}\n", {"M": 18, "K": 7}),
    "prologue_and_two_outputs": ("func f(x: f32[M, K], w: f32[K, N], b: f32[N]) -> "
                                 "(f32[M, N], f32[M, N]) {\n"
                                 "    h = matmul(relu(x - 0.5), w) + b\n"
                                 "    return gelu(h), h\n}\n", {"M": 20, "N": 17, "K": 24}),
    "batched": ("func f(x: f32[B, M, K], y: f32[B, K, N]) -> f32[B, M, N] {\n"
                "    return matmul(x, y)\n}\n", {"B": 3, "M": 9, "N": 18, "K": 10}),
    "batched_by_2d": ("func f(x: f32[B, M, K], w: f32[K, N]) -> f32[B, M, N] {\n"
                      "    return tanh(matmul(x, w))\n}\n", {"B": 2, "M": 9, "N": 17, "K": 12}),
    "conv_same": ("func f(x: f32[N, 3, 7, 6], w: f32[5, 3, 3, 3], b: f32[5]) -> "
                  "f32[N, 5, 7, 6] {\n    y = conv2d(x, w, padding=1)\n"
                  "    return relu(y + reshape(b, [1, 5, 1, 1]))\n}\n", {"N": 2}),
    "conv_stride_dilation": ("func f(x: f32[N, 2, 11, 10], w: f32[3, 2, 3, 2]) -> "
                             "f32[N, 3, 5, 5] {\n"
                             "    return conv2d(x, w, stride=2, padding=1, dilation=2)\n}\n",
                             {"N": 2}),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("fuse", [True, False])
def test_tiled_kernels_agree_with_the_interpreter(name, fuse):
    source, dims = CASES[name]
    module = mlfuse.compile_source(source, f"{name}.fuse", fuse=fuse, target="simulator")
    assert any(k["schedule"] == "contraction" for k in module.kernels("f"))
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=3)
    want = run_tensor(func, args)
    got = module.f(*args)
    got = got if isinstance(got, tuple) else (got,)
    ops, reduced = program_size(func)
    for g, w in zip(got, want):
        assert_close(g, w, ops, name, reduced)


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # the simulator's numpy math
def test_nan_and_inf_in_an_operand_reach_exactly_the_outputs_they_touch():
    source, _ = CASES["matmul_epilogue"]
    module = mlfuse.compile_source(source, "nan.fuse", target="simulator")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((18, 9)).astype(np.float32)
    w = rng.standard_normal((9, 20)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    x[3, 4], x[7, 0], w[2, 5] = np.nan, np.inf, -np.inf
    want = run_tensor(parse_program(source).funcs[0], [x, w, b])[0]
    assert_close(module.f(x, w, b), want, 3, "nan/inf", reduced=9)
