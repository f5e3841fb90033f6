"""The IR core: printing and parsing round-trip, the verifier, use-def chains."""
import pytest
from hypothesis import given, settings, strategies as st

from mlfuse.dialects import tensor
from mlfuse.errors import MlfuseError
from mlfuse.ir import (FuncOp, ModuleOp, ReturnOp, TensorType, VerifyError, print_ir,
                       verify)
from mlfuse.dialects import parse_ir

CHAIN = """\
func @chain(%x: f32[N], %b: f32[N]) -> (f32[N]) {
  %c = tensor.constant {value = 2.0} : f32[]
  %0 = tensor.mul %x, %c : f32[N]
  %1 = tensor.add %0, %b : f32[N]
  %2 = tensor.relu %1 : f32[N]
  return %2
}
"""


def test_print_parse_round_trip_keeps_text_identical():
    assert print_ir(parse_ir(CHAIN)) == CHAIN


def test_attribute_values_round_trip_exactly():
    text = """\
func @f(%x: f64[2, 3]) -> (f64[2, 1], f64[]) {
  %c = tensor.constant {value = -inf} : f64[]
  %n = tensor.constant {value = 1e-05} : f64[]
  %0 = tensor.max %x {axis = [1], keepdims = true} : f64[2, 1]
  %1 = tensor.add %0, %n : f64[2, 1]
  return %1, %c
}
"""
    m = parse_ir(text)
    assert print_ir(m) == text
    const = m.funcs[0].body.ops[0]
    assert const["value"] == float("-inf")
    assert m.funcs[0].body.ops[1]["value"] == 1e-05


def test_use_def_chains_and_replace_all_uses():
    m = parse_ir(CHAIN)
    f = m.funcs[0]
    mul, add = f.body.ops[1], f.body.ops[2]
    assert mul.result.users() == [add]
    x = f.args[0]
    mul.replace_with([x])
    assert add.operands[0] is x
    assert mul not in f.body.ops
    assert [op.name for op, _ in x.uses] == ["tensor.add"]
    verify(m)


def test_erase_refuses_an_op_whose_result_is_used():
    m = parse_ir(CHAIN)
    with pytest.raises(VerifyError, match="still used"):
        m.funcs[0].body.ops[1].erase()


@pytest.mark.parametrize("body, message", [
    ("%0 = tensor.add %x : f32[N]\n  return %0", "takes 2 operand"),
    ("%0 = tensor.add %x, %x : f32[M]\n  return %0", "does not match the inferred"),
    ("%0 = tensor.sum %x {axis = [0], bogus = 1} : f32[]\n  return %0", "no attribute 'bogus'"),
    ("%0 = tensor.sum %x {axis = 1} : f32[]\n  return %0", "must be ints"),
    ("%0 = tensor.sum %x : f32[]\n  return %0", "needs attribute 'axis'"),
    ("return %y", "undefined value %y"),
    ("%0 = tensor.nope %x : f32[N]\n  return %0", "unknown op 'tensor.nope'"),
    ("%0 = tensor.exp %x : f32[N]\n  %0 = tensor.exp %x : f32[N]\n  return %0", "defined twice"),
    ("%0 = tensor.exp %x : f32[N]\n  return %x, %0", "returns (f32[N], f32[N]) but declares"),
    ("%0 = tensor.sum %x {axis = [5]} : f32[]\n  return %0", "axis 5 is out of range for rank 1"),
    ("%0 = tensor.transpose %x {perm = [1]} : f32[N]\n  return %0", "not a permutation"),
    ("%0 = tensor.reshape %x {shape = [3]} : f32[3]\n  return %0", "cannot reshape"),
])
def test_verifier_rejects_malformed_ir_with_a_position(body, message):
    text = f"func @f(%x: f32[N]) -> (f32[N]) {{\n  {body}\n}}\n"
    with pytest.raises(MlfuseError) as info:
        parse_ir(text, "bad.mlir")
    assert message in str(info.value)
    assert info.value.loc is not None and info.value.loc.file == "bad.mlir"
    assert info.value.loc.line in (2, 3, 4)


def test_parse_error_has_line_column_and_caret():
    with pytest.raises(MlfuseError) as info:
        parse_ir("func @f(%x: f32[N]) -> (f32[N]) {\n  %0 = tensor.exp %x : f32[N\n}\n", "t.mlir")
    text = str(info.value)
    assert text.startswith("t.mlir:3:1: error: unexpected")
    assert text.splitlines()[-1].strip() == "^"


def test_verifier_checks_dominance_of_hand_built_ir():
    f = FuncOp.build("f", [TensorType("f32", (4,))], ["x"], [TensorType("f32", (4,))])
    x = f.args[0]
    e1 = tensor.ELEMENTWISE_OPS["exp"]([x])
    e2 = tensor.ELEMENTWISE_OPS["exp"]([e1.result])
    f.body.append(e2)  # uses e1 before e1 is in the block
    f.body.append(e1)
    f.body.append(ReturnOp([e2.result]))
    m = ModuleOp(result_types=[])
    m.body.append(f)
    with pytest.raises(VerifyError, match="not defined before"):
        verify(m)


def test_terminator_must_be_last():
    text = ("func @f(%x: buf<f32[4]>) -> () {\n  loops.parallel {extents = [4]} (%i: index) {\n"
            "    loops.yield\n    %v = loops.load %x, %i : f32\n  }\n  return\n}\n")
    with pytest.raises(MlfuseError, match="must be last"):
        parse_ir(text)


# -- property: every generated module prints, parses back and prints the same ---------
# the modules are of float values: the ops that take floats (not the bool-only logical ops)
UNARY = sorted(n for n, op in tensor.ELEMENTWISE_OPS.items()
               if op.spec.arity == 1 and op.spec.accepts != "bool")
BINARY = sorted(n for n, op in tensor.ELEMENTWISE_OPS.items()
                if op.spec.arity == 2 and not op.spec.result_bool and op.spec.accepts != "bool")

dims = st.sampled_from([1, 3, 4, "N", "M"])


@st.composite
def modules(draw):
    module = ModuleOp(result_types=[])
    for fi in range(draw(st.integers(1, 2))):
        shape = tuple(draw(st.lists(dims, min_size=0, max_size=3)))
        dtype = draw(st.sampled_from(["f32", "f64", "f16"]))
        t = TensorType(dtype, shape)
        nparams = draw(st.integers(1, 3))
        f = FuncOp.build(f"f{fi}", [t] * nparams, [draw(st.sampled_from(["x", "y", None]))
                                                   for _ in range(nparams)], [])
        values = list(f.args)
        for _ in range(draw(st.integers(0, 6))):
            kind = draw(st.sampled_from(["unary", "binary", "const", "reduce"]))
            a = draw(st.sampled_from(values))
            hint = draw(st.sampled_from([None, "h", "x", "v1"]))
            if kind == "unary":
                op = tensor.ELEMENTWISE_OPS[draw(st.sampled_from(UNARY))]([a], result_names=[hint])
            elif kind == "binary":
                b = draw(st.sampled_from([v for v in values if v.type.shape == a.type.shape]))
                op = tensor.ELEMENTWISE_OPS[draw(st.sampled_from(BINARY))]([a, b], result_names=[hint])
            elif kind == "const":
                value = draw(st.floats(allow_nan=True, allow_infinity=True, width=32))
                op = tensor.ConstantOp([], [TensorType(dtype, ())], {"value": value})
            else:
                if a.type.rank == 0:
                    continue
                axis = sorted(set(draw(st.lists(st.integers(0, a.type.rank - 1), min_size=1))))
                op = tensor.REDUCE_OPS["sum"]([a], attributes={
                    "axis": axis, "keepdims": draw(st.booleans())})
            f.body.append(op)
            values.append(op.result)
        results = draw(st.lists(st.sampled_from(values), min_size=1, max_size=2))
        f.attributes["result_types"] = [v.type for v in results]
        f.body.append(ReturnOp(results))
        module.body.append(f)
    return module


@settings(max_examples=150, deadline=None)
@given(modules())
def test_round_trip_property_over_generated_modules(module):
    verify(module)
    text = print_ir(module)
    again = parse_ir(text)
    assert print_ir(again) == text
