"""The decompose pass: composites become primitives that compute the same values."""
from __future__ import annotations

import numpy as np
import pytest

from mlfuse.dialects import tensor as T
from mlfuse.dialects.elementwise import ELEMENTWISE
from mlfuse.frontend import parse_source
from mlfuse.ir import OPAQUE, print_ir, verify
from mlfuse.dialects import default_registry, parse_ir
from mlfuse.transforms import get_pass
from mlfuse.ir.traits import COMPOSITE
from mlfuse.transforms.decompose import EXPANSIONS

COMPOSITES = ("tensor.softmax", "tensor.layernorm", "tensor.rmsnorm")


def decomposed(source: str):
    module = parse_source(source, "d.fuse")
    get_pass("decompose").run(module)
    verify(module)
    return module


def evaluate(func, args: list[np.ndarray]) -> list[np.ndarray]:
    """A NumPy evaluation of the primitive tensor ops the pass produces (the oracle)."""
    env = {id(a): v for a, v in zip(func.args, args)}
    for op in func.body.ops:
        xs = [env[id(v)] for v in op.operands]
        if op.name == "builtin.return":
            return xs
        if isinstance(op, T.ConstantOp):
            out = np.asarray(op["value"], dtype=op.result.type.dtype.replace("f", "float"))
        elif isinstance(op, T.ElementwiseOp):
            out = ELEMENTWISE[op.name.split(".")[1]].numpy(*xs)
        elif isinstance(op, T.ReduceOp):
            reduce = {"tensor.sum": np.sum, "tensor.max": np.max, "tensor.min": np.min,
                      "tensor.mean": np.mean}[op.name]
            out = reduce(xs[0], axis=tuple(op["axis"]), keepdims=op["keepdims"])
        else:
            raise AssertionError(f"not a primitive: {op.name}")
        env[id(op.result)] = out
    raise AssertionError("no return")


def test_every_composite_op_has_an_expansion():
    composites = {cls for name, cls in default_registry().items() if cls.has_trait(COMPOSITE)}
    assert composites == set(EXPANSIONS)
    assert all(cls.name.startswith("tensor.") and cls.fusion == OPAQUE for cls in composites)


def test_softmax_snapshot():
    module = decomposed("func f(x: f32[R, C]) -> f32[R, C] {\n  p = softmax(x, axis=1)\n  return p\n}\n")
    assert print_ir(module) == """\
func @f(%x: f32[R, C]) -> (f32[R, C]) {
  %p_max = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %p_shifted = tensor.sub %x, %p_max : f32[R, C]
  %p_exp = tensor.exp %p_shifted : f32[R, C]
  %p_sum = tensor.sum %p_exp {axis = [1], keepdims = true} : f32[R, 1]
  %p = tensor.div %p_exp, %p_sum : f32[R, C]
  return %p
}
"""


def test_no_composite_remains_and_locations_are_kept():
    src = ("func f(x: f32[B, T, 8], g: f32[8], h: f32[T, 8]) -> (f32[B, T, 8], f32[B, T, 8], f32[B, T, 8]) {\n"
           "  return softmax(x, axis=0), layernorm(x, h, h, axis=1), rmsnorm(x, g)\n}\n")
    module = decomposed(src)
    ops = module.funcs[0].body.ops
    assert not [op for op in ops if op.name in COMPOSITES]
    line = src.splitlines()[1]
    call_columns = {line.index(name) + 1 for name in ("softmax", "layernorm", "rmsnorm")}
    assert {(op.loc.line, op.loc.column) for op in ops if op.name != "builtin.return"} == {
        (2, c) for c in call_columns}
    text = print_ir(module)
    assert print_ir(parse_ir(text)) == text


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layernorm(x, g, b, axis, eps):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _rmsnorm(x, g, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * g


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_decomposed_ops_match_numpy_references(dtype):
    src = (f"func f(x: {dtype}[2, 3, 5], g: {dtype}[5], h: {dtype}[3, 5]) -> "
           f"({dtype}[2, 3, 5], {dtype}[2, 3, 5], {dtype}[2, 3, 5], {dtype}[2, 3, 5]) {{\n"
           "  return softmax(x, axis=-2), layernorm(x, g, g * 0.5, eps=1e-3), "
           "layernorm(x, h, h, axis=1), rmsnorm(x, g, eps=1e-4)\n}\n")
    np_dtype = np.dtype(dtype.replace("f", "float"))
    rng = np.random.default_rng(0)
    x, g, h = (rng.standard_normal(s).astype(np_dtype) for s in [(2, 3, 5), (5,), (3, 5)])
    got = evaluate(decomposed(src).funcs[0], [x, g, h])
    x64, g64, h64 = (a.astype(np.float64) for a in (x, g, h))
    want = [_softmax(x64, -2), _layernorm(x64, g64, g64 * 0.5, -1, 1e-3),
            _layernorm(x64, h64, h64, 1, 1e-5), _rmsnorm(x64, g64, 1e-4)]
    tol = 64 * np.finfo(np_dtype).eps
    for out, ref in zip(got, want):
        assert out.dtype == np_dtype
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


def test_decompose_keeps_other_ops_untouched():
    src = "func f(x: f32[N]) -> f32[N] {\n  return exp(x) * 2.0\n}\n"
    before = print_ir(parse_source(src))
    assert print_ir(decomposed(src)) == before
