"""lower-tensor-to-loops: the loops interpreter on the lowered function agrees with
the tensor interpreter on the original, and the nests have the form fusion needs."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlfuse.dialects import tensor
from mlfuse.dialects.elementwise import ELEMENTWISE
from mlfuse.dialects.loops import AllocOp, LoadOp, ParallelOp, ReduceOp, StoreOp
from mlfuse.dialects.shapes import broadcast_shapes
from mlfuse.errors import MlfuseError
from mlfuse.interp import run_loops, run_tensor
from mlfuse.ir import (FuncOp, ModuleOp, ReturnOp, TensorType, VerifyError, print_ir,
                       verify)
from mlfuse.dialects import parse_ir
from mlfuse.transforms import get_pass

from helpers import assert_close, random_inputs


def lower(module: ModuleOp) -> ModuleOp:
    get_pass("lower-tensor-to-loops").run(module)
    verify(module)
    return module


def assert_nest_form(func: FuncOp) -> None:
    """Only allocs, parallels and return at top level; each parallel follows its own
    alloc and stores only there, once, at its block arguments; results are distinct allocs."""
    ops = func.body.ops
    for k, op in enumerate(ops[:-1]):
        assert isinstance(op, (AllocOp, ParallelOp)), op.name
        if isinstance(op, ParallelOp):
            stores = [s for s in op.walk() if isinstance(s, StoreOp)]
            assert len(stores) == 1 and stores[0].parent is op.body
            assert list(stores[0].operands[2:]) == list(op.body.args)
            assert stores[0].operands[1] is ops[k - 1].result
    returned = ops[-1].operands
    assert all(isinstance(v.owner, AllocOp) for v in returned)
    assert len({id(v) for v in returned}) == len(returned)


def check_lowering(text: str, dims=None, low=None, n_ops=4, inputs=None) -> FuncOp:
    """Lower ``text``; compare both interpreters, also after a print/parse round trip."""
    module = parse_ir(text)
    args = inputs if inputs is not None else random_inputs(module.funcs[0], dims, seed=11, low=low)
    expected = run_tensor(module.funcs[0], args)
    lowered = lower(module).funcs[0]
    assert_nest_form(lowered)
    printed = print_ir(module)
    assert print_ir(parse_ir(printed)) == printed
    for func in (lowered, parse_ir(printed).funcs[0]):
        got = run_loops(func, args)
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, n_ops=n_ops, what=f"result {k}")
    return lowered


def func_text(params: str, results: str, body: str, ret: str) -> str:
    return f"func @f({params}) -> ({results}) {{\n{body}  return {ret}\n}}\n"


# -- elementwise, broadcasting, constants, casts ---------------------------------------------
def elementwise_case(name):
    spec = ELEMENTWISE[name]
    dt = "i32" if name in ("eq", "ne") else "f32"  # integers too, where they mean something
    dt = "bool" if spec.accepts == "bool" else dt
    out = "bool" if spec.result_bool else dt
    if spec.arity == 1:
        params, operands = f"%x: {dt}[N, 3]", "%x"
    elif spec.arity == 2:  # y broadcasts along N
        params, operands = f"%x: {dt}[N, 3], %y: {dt}[3]", "%x, %y"
    else:
        params, operands = f"%c: bool[N, 1], %x: {dt}[N, 3], %y: {dt}[]", "%c, %x, %y"
    body = f"  %0 = tensor.{name} {operands} : {out}[N, 3]\n"
    return func_text(params, f"{out}[N, 3]", body, "%0")


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_every_elementwise_op_lowers_to_its_arith_op(name):
    low = 0.5 if name in ("log", "sqrt", "rsqrt", "pow") else None
    lowered = check_lowering(elementwise_case(name), {"N": 5}, low=low)
    assert f"arith.{name}" in {op.name for op in lowered.walk()}


@pytest.mark.parametrize("x_shape,y_shape,out", [
    ("N, 1", "1, 4", "N, 4"), ("2, 1, 3", "N, 1", "2, N, 3"), ("", "N, 3", "N, 3"),
    ("1", "N, 1", "N, 1"), ("3, 1, 5", "3, 4, 1", "3, 4, 5")])
def test_broadcast_reads_size_one_dims_at_index_zero(x_shape, y_shape, out):
    text = func_text(f"%x: f64[{x_shape}], %y: f64[{y_shape}]", f"f64[{out}]",
                     f"  %0 = tensor.sub %x, %y : f64[{out}]\n", "%0")
    check_lowering(text, {"N": 3})


def test_constants_are_materialized_in_each_reading_nest():
    text = func_text("%x: f32[7]", "f32[7], f32[]",
                     "  %c = tensor.constant {value = 2.5} : f32[]\n"
                     "  %0 = tensor.mul %x, %c : f32[7]\n  %1 = tensor.add %0, %c : f32[7]\n",
                     "%1, %c")
    lowered = check_lowering(text)
    nests = [op for op in lowered.body.ops if isinstance(op, ParallelOp)]
    assert len(nests) == 3  # mul, add, and the copy that gives the returned constant a buffer
    for nest in nests:
        assert [op["value"] for op in nest.body.ops if op.name == "arith.constant"] == [2.5]
    loaded = {op.operands[0].name_hint for op in lowered.walk() if isinstance(op, LoadOp)}
    assert loaded == {"x", "mul"}  # the constant is never a buffer


@pytest.mark.parametrize("src,dst", [("f32", "i32"), ("i32", "f64"), ("f32", "bool"),
                                     ("f64", "f16")])
def test_cast_lowers_to_arith_cast(src, dst):
    text = func_text(f"%x: {src}[4, 3]", f"{dst}[4, 3]",
                     f'  %0 = tensor.cast %x {{dtype = "{dst}"}} : {dst}[4, 3]\n', "%0")
    check_lowering(text)


def test_rank0_scalar_parameter_and_result():
    text = func_text("%s: f32[], %x: f32[N]", "f32[], f32[N]",
                     "  %0 = tensor.exp %s : f32[]\n  %1 = tensor.mul %x, %0 : f32[N]\n", "%0, %1")
    lowered = check_lowering(text, {"N": 6})
    first = next(op for op in lowered.body.ops if isinstance(op, ParallelOp))
    assert first["extents"] == [] and first.body.args == []


# -- reductions ---------------------------------------------------------------------------------
def reduce_shape(shape, axes, keepdims):
    return [1 if a in axes else d for a, d in enumerate(shape)] if keepdims else [
        d for a, d in enumerate(shape) if a not in axes]


@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("axes", [[0], [1], [2], [0, 2], [0, 1, 2]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_nests_one_reduce_per_axis(op, axes, keepdims):
    shape = ["N", 5, 3]
    out = ", ".join(map(str, reduce_shape(shape, axes, keepdims)))
    text = func_text("%x: f32[N, 5, 3]", f"f32[{out}]",
                     f"  %0 = tensor.{op} %x {{axis = {axes}, keepdims = {str(keepdims).lower()}}}"
                     f" : f32[{out}]\n", "%0")
    lowered = check_lowering(text, {"N": 4}, n_ops=60)
    reduces = [r for r in lowered.walk() if isinstance(r, ReduceOp)]
    assert [r["extent"] for r in reduces] == [shape[a] for a in axes]  # outermost first


@pytest.mark.parametrize("op,init", [("max", -2 ** 31), ("min", 2 ** 31 - 1), ("sum", 0)])
def test_integer_reductions_start_from_the_extreme_i32(op, init):
    text = func_text("%x: i32[3, 4]", "i32[3]", f"  %0 = tensor.{op} %x {{axis = [1]}} : i32[3]\n",
                     "%0")
    x = np.array([[2 ** 31 - 1] * 4, [-2 ** 31] * 4, [1, -2, 3, -4]], np.int32)
    lowered = check_lowering(text, inputs=[x])
    assert init in [c["value"] for c in lowered.walk() if c.name == "arith.constant"]


def test_nan_and_inf_propagate_through_lowered_nests():
    text = func_text("%x: f32[3, 4]", "f32[3], f32[3], f32[3, 4], f32[3, 4]",
                     "  %0 = tensor.max %x {axis = [1]} : f32[3]\n"
                     "  %1 = tensor.min %x {axis = [1]} : f32[3]\n"
                     "  %2 = tensor.relu %x : f32[3, 4]\n"
                     "  %3 = tensor.log %x : f32[3, 4]\n", "%0, %1, %2, %3")
    x = np.array([[1, np.nan, 3, 0], [-np.inf, 2, 0, -1], [np.inf, 5, 6, np.nan]], np.float32)
    check_lowering(text, inputs=[x])


def test_mean_over_a_symbolic_axis_divides_by_its_runtime_size():
    text = func_text("%x: f64[N, 3]", "f64[3]",
                     "  %0 = tensor.mean %x {axis = [0]} : f64[3]\n", "%0")
    lowered = check_lowering(text, {"N": 7}, n_ops=10)
    assert {op.name for op in lowered.walk()} >= {"loops.dim", "arith.cast", "arith.div"}


def test_f16_mean_over_more_values_than_f16_counts_is_numpys():
    # 65536 and more values: the count is inf in f16, so the mean adds up and divides in
    # f32 (the loops interpreter computes f16 as written: what the kernels compute)
    text = func_text("%x: f16[2, 70000]", "f16[2]",
                     "  %0 = tensor.mean %x {axis = [1]} : f16[2]\n", "%0")
    x = np.random.default_rng(3).uniform(0.5, 1.5, (2, 70000)).astype(np.float16)
    check_lowering(text, inputs=[x])
    (got,) = run_loops(lower(parse_ir(text)).funcs[0], [x])
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, x.mean(axis=1))


# -- data movement ------------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", [
    ("N, 6", "3, N, 2"), ("2, 3, 4", "4, 6"), ("6", "1, 6, 1"), ("N, 1, 4", "4, N"),
    ("1, 1", ""), ("5, 7", "35"), ("2, N, 3", "N, 6"), ("2, N, 12", "2, N, 3, 4"),
    ("N, 6, 5", "N, 3, 2, 5"), ("3, 4", "3, 4")])
def test_reshape_is_row_major_index_arithmetic(src, dst):
    text = func_text(f"%x: f32[{src}]", f"f32[{dst}]",
                     f"  %0 = tensor.reshape %x {{shape = [{dst}]}} : f32[{dst}]\n", "%0")
    check_lowering(text, {"N": 4})


def test_reshape_maps_shared_leading_and_trailing_dims_index_to_index():
    text = func_text("%x: f32[N, 6, 5]", "f32[N, 2, 3, 5]",
                     "  %0 = tensor.reshape %x {shape = [N, 2, 3, 5]} : f32[N, 2, 3, 5]\n", "%0")
    nest = next(op for op in check_lowering(text, {"N": 3}).body.ops if isinstance(op, ParallelOp))
    (load,) = [op for op in nest.walk() if isinstance(op, LoadOp)]
    i0, i1, i2, i3 = nest.body.args
    assert load.operands[1] is i0 and load.operands[3] is i3
    assert not any(op.name in ("arith.floordiv", "arith.mod") for op in nest.walk())


@pytest.mark.parametrize("perm,out", [([1, 0, 2], "N, 2, 3"), ([2, 0, 1], "3, 2, N"),
                                      ([0, 1, 2], "2, N, 3")])
def test_transpose_permutes_indices(perm, out):
    text = func_text("%x: f32[2, N, 3]", f"f32[{out}]",
                     f"  %0 = tensor.transpose %x {{perm = {perm}}} : f32[{out}]\n", "%0")
    check_lowering(text, {"N": 5})


@pytest.mark.parametrize("src,dst", [("3, 1", "2, 3, 4"), ("", "4, 2"), ("N", "3, N"),
                                     ("N, 1", "N, 5")])
def test_broadcast_to_reads_without_copying_input(src, dst):
    text = func_text(f"%x: f32[{src}]", f"f32[{dst}]",
                     f"  %0 = tensor.broadcast_to %x {{shape = [{dst}]}} : f32[{dst}]\n", "%0")
    check_lowering(text, {"N": 3})


# -- contractions -------------------------------------------------------------------------------
@pytest.mark.parametrize("a,b,out", [("M, 5", "5, 3", "M, 3"), ("2, 3, 7", "2, 7, 4", "2, 3, 4"),
                                     ("2, M, 5", "5, 3", "2, M, 3")])
def test_matmul_reduces_over_k(a, b, out):
    text = func_text(f"%a: f32[{a}], %b: f32[{b}]", f"f32[{out}]",
                     f"  %0 = tensor.matmul %a, %b : f32[{out}]\n", "%0")
    check_lowering(text, {"M": 3}, n_ops=16)


@pytest.mark.parametrize("xs,ws,attrs,out", [
    ("1, 2, 5, 5", "3, 2, 3, 3", "", "1, 3, 3, 3"),
    ("2, 1, 6, 5", "2, 1, 3, 2", "dilation = [1, 2], padding = [1, 0], stride = [2, 1]",
     "2, 2, 3, 3"),
    ("1, 2, 4, 4", "1, 2, 2, 2", "padding = [1, 1], stride = [1, 2]", "1, 1, 5, 3"),
    ("1, 1, N, 4", "2, 1, 3, 3", "padding = [1, 1]", "1, 2, N, 4"),
])
def test_conv2d_masks_taps_in_the_padding(xs, ws, attrs, out):
    attrs = f" {{{attrs}}}" if attrs else ""
    text = func_text(f"%x: f32[{xs}], %w: f32[{ws}]", f"f32[{out}]",
                     f"  %0 = tensor.conv2d %x, %w{attrs} : f32[{out}]\n", "%0")
    lowered = check_lowering(text, {"N": 5}, n_ops=40)
    has_padding = "padding" in attrs
    assert any(op.name == "loops.masked_load" for op in lowered.walk()) == has_padding


# -- returns, composites, the printed form ---------------------------------------------------
def test_returned_parameters_and_repeated_results_get_their_own_buffers():
    text = func_text("%x: f32[3]", "f32[3], f32[3], f32[3], f32[3]",
                     "  %0 = tensor.neg %x : f32[3]\n", "%x, %0, %0, %x")
    lowered = check_lowering(text)
    assert sum(isinstance(op, ParallelOp) for op in lowered.body.ops) == 4


def test_composite_ops_must_be_decomposed_first():
    text = func_text("%x: f32[2, 3]", "f32[2, 3]",
                     "  %0 = tensor.softmax %x : f32[2, 3]\n", "%0")
    message = "tensor.softmax is a composite op: run decompose first"
    with pytest.raises(MlfuseError, match=message) as err:
        lower(parse_ir(text, filename="net.ir"))
    assert str(err.value).startswith("net.ir:2:8: error:")


def test_lowering_twice_leaves_a_lowered_function_alone():
    module = lower(parse_ir(RELU_SNAPSHOT_INPUT))
    assert print_ir(lower(module)) == RELU_SNAPSHOT_LOOPS


RELU_SNAPSHOT_INPUT = """\
func @f(%x: f32[N, 4], %b: f32[4]) -> (f32[N, 4]) {
  %c = tensor.constant {value = 2.0} : f32[]
  %xs = tensor.mul %x, %c : f32[N, 4]
  %h = tensor.add %xs, %b : f32[N, 4]
  %y = tensor.relu %h : f32[N, 4]
  return %y
}
"""

RELU_SNAPSHOT_LOOPS = """\
func @f(%x: buf<f32[N, 4]>, %b: buf<f32[4]>) -> (buf<f32[N, 4]>) {
  %xs = loops.alloc : buf<f32[N, 4]>
  loops.parallel {extents = [N, 4], source = "tensor.mul"} (%i0: index, %i1: index) {
    %0 = loops.load %x, %i0, %i1 : f32
    %1 = arith.constant {value = 2.0} : f32
    %2 = arith.mul %0, %1 : f32
    loops.store %2, %xs, %i0, %i1
  }
  %h = loops.alloc : buf<f32[N, 4]>
  loops.parallel {extents = [N, 4], source = "tensor.add"} (%i0_1: index, %i1_1: index) {
    %3 = loops.load %xs, %i0_1, %i1_1 : f32
    %4 = loops.load %b, %i1_1 : f32
    %5 = arith.add %3, %4 : f32
    loops.store %5, %h, %i0_1, %i1_1
  }
  %y = loops.alloc : buf<f32[N, 4]>
  loops.parallel {extents = [N, 4], source = "tensor.relu"} (%i0_2: index, %i1_2: index) {
    %6 = loops.load %h, %i0_2, %i1_2 : f32
    %7 = arith.relu %6 : f32
    loops.store %7, %y, %i0_2, %i1_2
  }
  return %y
}
"""


def test_printed_loops_ir_of_relu_x_times_2_plus_b():
    module = lower(parse_ir(RELU_SNAPSHOT_INPUT))
    assert print_ir(module) == RELU_SNAPSHOT_LOOPS


# -- a property over random programs ---------------------------------------------------------------
SHAPES = [("N", 3), (3,), ("N", 1), (), (1, 3)]
UNARY = ["neg", "abs", "relu", "tanh", "sigmoid", "sin"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


@st.composite
def programs(draw):
    """A random tensor function of elementwise ops (with broadcasting), constants and
    reductions over shapes built from N and 3."""
    dtype = draw(st.sampled_from(["f32", "f64"]))
    shapes = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
    func = FuncOp.build("p", [TensorType(dtype, s) for s in shapes],
                        [f"x{k}" for k in range(len(shapes))], [])
    values = list(func.args)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "constant", "reduce"]))
        x = draw(st.sampled_from(values))
        if kind == "unary":
            op = tensor.ELEMENTWISE_OPS[draw(st.sampled_from(UNARY))]([x])
        elif kind == "binary":
            partners = [v for v in values if _broadcastable(x.type.shape, v.type.shape)]
            y = draw(st.sampled_from(partners))
            op = tensor.ELEMENTWISE_OPS[draw(st.sampled_from(BINARY))]([x, y])
        elif kind == "constant":
            c = tensor.ConstantOp(result_types=[TensorType(dtype, ())],
                                  attributes={"value": draw(st.sampled_from([0.5, -2.0, 3.0]))})
            func.body.append(c)
            op = tensor.ELEMENTWISE_OPS["mul"]([x, c.result])
        else:
            if x.type.rank == 0:
                continue
            axes = draw(st.lists(st.integers(0, x.type.rank - 1), min_size=1, unique=True))
            name = draw(st.sampled_from(sorted(tensor.REDUCE_OPS)))
            op = tensor.REDUCE_OPS[name]([x], attributes={"axis": sorted(axes),
                                                          "keepdims": draw(st.booleans())})
        func.body.append(op)
        values.append(op.result)
    results = [values[-1]] + draw(st.lists(st.sampled_from(values), max_size=2))
    func.body.append(ReturnOp(results))
    func.attributes["result_types"] = [v.type for v in results]
    module = ModuleOp(result_types=[])
    module.body.append(func)
    verify(module)
    return module, draw(st.integers(1, 4))


def _broadcastable(a, b) -> bool:
    try:
        broadcast_shapes(a, b)
        return True
    except VerifyError:
        return False


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_lowered_random_programs_agree_with_the_tensor_interpreter(case):
    module, n = case
    args = random_inputs(module.funcs[0], {"N": n}, seed=n)
    expected = run_tensor(module.funcs[0], args)
    lowered = lower(module).funcs[0]
    assert_nest_form(lowered)
    for k, (got, want) in enumerate(zip(run_loops(lowered, args), expected)):
        assert_close(got, want, n_ops=64, what=f"result {k}")
