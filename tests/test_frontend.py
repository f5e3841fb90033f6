"""The .fuse frontend: examples parse, IR snapshots, inferred types, literals, docs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlfuse.frontend import parse_source
from mlfuse.frontend.calls import SIGNATURES
from mlfuse.frontend.reference import op_reference
from mlfuse.ir import TensorType, print_ir
from mlfuse.dialects import default_registry, parse_ir

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.fuse"))


def ops_of(module):
    return list(module.funcs[0].body.ops)


def result_type(params: str, expr: str) -> TensorType:
    """The type of ``expr``, bound to ``r`` in a function over ``params``."""
    src = f"func f({params}) -> f32[] {{\n  r = {expr}\n  return cast(1.0, dtype=f32)\n}}"
    module = parse_source(src)
    named = [op for op in ops_of(module) if op.results and op.result.name_hint == "r"]
    return named[0].result.type


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_parses_and_round_trips_through_ir_text(path):
    module = parse_source(path.read_text(), str(path))
    text = print_ir(module)
    assert module.funcs and module.funcs[0].sym_name == path.stem
    assert print_ir(parse_ir(text)) == text


def test_all_required_examples_exist():
    names = {p.stem for p in EXAMPLES}
    assert {"chain", "softmax", "layernorm", "mlp", "conv_block", "l2norm", "bn_relu",
            "scale_relu_add", "matmul_bias_relu"} <= names


def test_chain_snapshot():
    module = parse_source((ROOT / "examples" / "chain.fuse").read_text())
    assert print_ir(module) == """\
func @chain(%x: f32[N], %b: f32[N]) -> (f32[N]) {
  %0 = tensor.constant {value = 2.0} : f32[]
  %1 = tensor.mul %x, %0 : f32[N]
  %2 = tensor.add %1, %b : f32[N]
  %3 = tensor.relu %2 : f32[N]
  %4 = tensor.constant {value = 0.5} : f32[]
  %5 = tensor.mul %3, %4 : f32[N]
  %6 = tensor.add %5, %x : f32[N]
  return %6
}
"""


def test_softmax_snapshot_names_results_after_source_names():
    module = parse_source((ROOT / "examples" / "softmax.fuse").read_text())
    assert print_ir(module) == """\
func @softmax(%x: f32[R, C]) -> (f32[R, C]) {
  %m = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %0 = tensor.sub %x, %m : f32[R, C]
  %e = tensor.exp %0 : f32[R, C]
  %1 = tensor.sum %e {axis = [1], keepdims = true} : f32[R, 1]
  %2 = tensor.div %e, %1 : f32[R, C]
  return %2
}
"""


def test_every_op_records_its_source_position():
    src = "func f(x: f32[N]) -> f32[N] {\n  y = exp(x)\n  return y * 2.0\n}\n"
    ops = ops_of(parse_source(src, "p.fuse"))
    assert [(op.name, op.loc.line, op.loc.column) for op in ops] == [
        ("tensor.exp", 2, 7), ("tensor.constant", 3, 14), ("tensor.mul", 3, 12),
        ("builtin.return", 3, 3)]
    assert all(op.loc.file == "p.fuse" for op in ops)


X = "x: f32[N, 4], y: f32[4], m: f32[4, 8], w: f32[8, 4, 3, 3], i: i32[N], c: bool[N, 4]"
TYPE_CASES = [
    ("-x", "f32[N, 4]"), ("x + y", "f32[N, 4]"), ("x - y", "f32[N, 4]"), ("x * y", "f32[N, 4]"),
    ("x / y", "f32[N, 4]"), ("x ** y", "f32[N, 4]"), ("x < y", "bool[N, 4]"),
    ("x <= y", "bool[N, 4]"), ("x > y", "bool[N, 4]"), ("x >= y", "bool[N, 4]"),
    ("x == y", "bool[N, 4]"), ("x != y", "bool[N, 4]"),
    *[(f"{fn}(x)", "f32[N, 4]") for fn in
      ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu",
       "sin", "cos", "erf")],
    ("maximum(x, y)", "f32[N, 4]"), ("minimum(y, x)", "f32[N, 4]"), ("pow(x, 2.0)", "f32[N, 4]"),
    ("where(c, x, y)", "f32[N, 4]"), ("where(c, x, 0.0)", "f32[N, 4]"),
    ("cast(x, dtype=f16)", "f16[N, 4]"), ("cast(i, i32)", "i32[N]"),
    ("sum(x)", "f32[]"), ("sum(x, axis=-1)", "f32[N]"), ("max(x, axis=0, keepdims=true)", "f32[1, 4]"),
    ("min(x, axis=[0, 1], keepdims=true)", "f32[1, 1]"), ("mean(x, 1)", "f32[N]"),
    ("sum(i, axis=0)", "i32[]"),
    ("reshape(x, [4, N])", "f32[4, N]"), ("reshape(y, [1, 4, 1])", "f32[1, 4, 1]"),
    ("transpose(x)", "f32[4, N]"), ("transpose(m, [1, 0])", "f32[8, 4]"),
    ("broadcast_to(y, [N, 4])", "f32[N, 4]"),
    ("matmul(x, m)", "f32[N, 8]"),
    ("conv2d(reshape(x, [N, 4, 1, 1]), reshape(m, [8, 4, 1, 1]))", "f32[N, 8, 1, 1]"),
    ("conv2d(broadcast_to(reshape(x, [N, 4, 1, 1]), [N, 4, 6, 6]), w, stride=2, padding=[1, 0])",
     "f32[N, 8, 3, 2]"),
    ("softmax(x)", "f32[N, 4]"), ("softmax(x, axis=0)", "f32[N, 4]"),
    ("layernorm(x, y, y)", "f32[N, 4]"), ("layernorm(x, x, x, axis=0, eps=1e-3)", "f32[N, 4]"),
    ("rmsnorm(x, y)", "f32[N, 4]"),
    # indexing (tests/test_indexing_ops.py has their semantics)
    ("x[0]", "f32[4]"), ("x[:, 1:3]", "f32[N, 2]"), ("x[..., ::-1]", "f32[N, 4]"),
    ("m[1:-1, ::3]", "f32[2, 3]"), ("m[-1, 2]", "f32[]"), ("m[::-2][0]", "f32[8]"),
    ("x[-1]", "f32[4]"), ("x[::-1, 1]", "f32[N]"),
    ("concat([x, x], axis=1)", "f32[N, 8]"), ("concat([x, x])", "f32[2*N, 4]"),
    ("concat(split(m, [1, 3]), axis=0)", "f32[4, 8]"), ("pad(m, [[1, 0], [2, 3]], value=-1)",
                                                          "f32[5, 13]"),
    ("take(m, i)", "f32[N, 8]"), ("take(x, 2, axis=1)", "f32[N]"),
    ("take(m, reshape(i, [N, 1]), axis=-1)", "f32[4, N, 1]"),
    ("iota([N, 4], axis=1)", "i32[N, 4]"), ("iota([3], dtype=f32)", "f32[3]"),
    ("arange(5)", "i32[5]"), ("arange(2, 11, 3)", "i32[3]"), ("arange(1, 2, 0.25)", "f32[4]"),
    ("arange(0.0, 1.0, 0.25, dtype=f16)", "f16[4]"),
    ("reshape(x, [4*N])", "f32[4*N]"), ("reshape(reshape(x, [N*4]), [N, 2, 2])", "f32[N, 2, 2]"),
    ("matmul(y, m)", "f32[8]"), ("matmul(y, y)", "f32[]"),
    ("matmul(broadcast_to(m, [2, 3, 4, 8]), transpose(m))", "f32[2, 3, 4, 4]"),
    ("matmul(m, broadcast_to(transpose(m), [5, 1, 8, 4]))", "f32[5, 1, 4, 4]"),
    *[(f"{fn}(x)", "f32[N, 4]") for fn in
      ("floor", "ceil", "round", "log1p", "expm1", "softplus", "hardswish", "hardsigmoid")],
    ("logical_and(c, c)", "bool[N, 4]"), ("logical_or(c, x > y)", "bool[N, 4]"),
    ("logical_not(c)", "bool[N, 4]"), ("c & ~c | c", "bool[N, 4]"),
    ("clip(x, -1.0, y)", "f32[N, 4]"), ("clip(i, 0, 3)", "i32[N]"),
    ("x / N", "f32[N, 4]"), ("i * N", "i32[N]"), ("cast(N, dtype=f16)", "f16[]"),
    ("x * rsqrt(N + 1.0)", "f32[N, 4]"),
    ("max_pool2d(w, 3)", "f32[8, 4, 1, 1]"), ("max_pool2d(w, 2, stride=1, padding=1)",
                                               "f32[8, 4, 4, 4]"),
    ("max_pool2d(w, [2, 2], stride=[2, 1], dilation=[1, 2], ceil_mode=true)", "f32[8, 4, 2, 1]"),
    ("avg_pool2d(w, 2, stride=2, padding=1, ceil_mode=true)", "f32[8, 4, 2, 2]"),
    ("avg_pool2d(w, 3, padding=1, count_include_pad=false)", "f32[8, 4, 1, 1]"),
    ("global_avg_pool2d(w)", "f32[8, 4, 1, 1]"), ("global_max_pool2d(w)", "f32[8, 4, 1, 1]"),
    ("argmax(x, axis=1)", "i32[N]"), ("argmin(x, axis=0, keepdims=true)", "i32[1, 4]"),
    ("cumsum(x, axis=-1)", "f32[N, 4]"), ("cumsum(i, 0, exclusive=true, reverse=true)", "i32[N]"),
    ("conv2d(w, reshape(m, [8, 1, 2, 2]), groups=4)", "f32[8, 8, 2, 2]"),
]


@pytest.mark.parametrize("expr, expected", TYPE_CASES, ids=[c[0] for c in TYPE_CASES])
def test_expression_has_inferred_type(expr, expected):
    assert str(result_type(X, expr)) == expected


def test_every_builtin_function_is_covered_by_a_type_case():
    called = {name for expr, _ in TYPE_CASES for name in re.findall(r"(\w+)\(", expr)}
    operator_only = {"add", "sub", "mul", "div", "lt", "le", "gt", "ge", "eq", "ne"}
    assert set(SIGNATURES) - operator_only <= called


def test_symbolic_dims_broadcast_against_ints():
    assert str(result_type("a: f32[N, 1], b: f32[4]", "a + b")) == "f32[N, 4]"
    assert str(result_type("a: f32[N, 1], b: f32[1, N]", "a * b")) == "f32[N, N]"


def test_operator_precedence_follows_python():
    src = "func f(x: f32[N]) -> f32[N] {\n  return -x ** 2.0 + x * x - x / x\n}\n"
    names = [op.name.split(".")[1] for op in ops_of(parse_source(src))
             if op.name != "tensor.constant"]
    # -(x**2) + (x*x) - (x/x): pow, neg, then mul, add, div, sub
    assert names == ["pow", "neg", "mul", "add", "div", "sub", "return"]


def test_literal_takes_partner_dtype_without_promotion():
    src = "func f(x: f64[N]) -> f64[N] {\n  return x * 2 + 0.5\n}\n"
    consts = [op for op in ops_of(parse_source(src)) if op.name == "tensor.constant"]
    assert [(op["value"], str(op.result.type)) for op in consts] == [(2.0, "f64[]"), (0.5, "f64[]")]
    src_i = "func f(x: i32[N]) -> i32[N] {\n  return x * 3.0\n}\n"
    (c,) = [op for op in ops_of(parse_source(src_i)) if op.name == "tensor.constant"]
    assert (c["value"], str(c.result.type)) == (3, "i32[]")


def test_literals_fold_with_numpy_semantics():
    src = "func f(x: f32[N]) -> f32[N] {\n  k = 2 * 3 + 1\n  return x * k + -2 ** 2 + 1.0 / 0.0\n}\n"
    consts = [op["value"] for op in ops_of(parse_source(src)) if op.name == "tensor.constant"]
    assert consts == [7, -4.0, float("inf")]


def test_cast_of_literal_makes_a_typed_scalar_constant():
    src = "func f(x: f32[N]) -> f16 {\n  return cast(1.5, dtype=f16)\n}\n"
    (c, _ret) = ops_of(parse_source(src))
    assert (c.name, c["value"], str(c.result.type)) == ("tensor.constant", 1.5, "f16[]")


def test_scalar_parameter_is_rank_0():
    module = parse_source("func f(x: f32[N], a: f32) -> f32[N] {\n  return x * a\n}\n")
    assert [str(a.type) for a in module.funcs[0].args] == ["f32[N]", "f32[]"]


def test_several_functions_and_aliases():
    src = ("func a(x: f32[N]) -> f32[N] {\n  y = x\n  return y\n}\n"
           "func b(x: f32[N]) -> (f32[N], f32[N]) { return x, exp(x) }\n")
    module = parse_source(src)
    assert [f.sym_name for f in module.funcs] == ["a", "b"]
    assert module.funcs[0].return_op.operands[0] is module.funcs[0].args[0]


def test_docs_hold_the_current_generated_op_reference():
    docs = (ROOT / "docs" / "language.md").read_text()
    assert op_reference() in docs, "run: python -m mlfuse.frontend.reference docs/language.md"


def test_every_tensor_op_is_documented():
    docs = (ROOT / "docs" / "language.md").read_text()
    tensor_ops = [name for name in default_registry() if name.startswith("tensor.")]
    missing = [name for name in tensor_ops if f"`{name}`" not in docs]
    assert len(tensor_ops) > 30 and missing == []
