"""The loops/fused interpreter on hand-written loops and fused IR."""
import numpy as np
import pytest

from mlfuse.errors import MlfuseError
from mlfuse.interp import run_loops
from mlfuse.dialects import parse_ir

from helpers import assert_close, random_inputs


def run(text, args, verify=True):
    return run_loops(parse_ir(text, verify=verify).funcs[0], args)


ROW_REDUCE = """func @f(%x: buf<{dt}[R, C]>) -> (buf<{dt}[R]>) {{
  %out = loops.alloc : buf<{dt}[R]>
  loops.parallel {{extents = [R]}} (%i: index) {{
    %init = arith.constant {{value = {init}}} : {dt}
    %r = loops.reduce %init {{combiner = "{combiner}", extent = C}} : {dt} (%k: index) {{
      %v = loops.load %x, %i, %k : {dt}
      loops.yield %v
    }}
    loops.store %r, %out, %i
  }}
  return %out
}}
"""


@pytest.mark.parametrize("combiner,init,reference", [
    ("add", "0.0", np.sum), ("max", "-inf", np.max), ("min", "inf", np.min)])
def test_reduce_combines_along_its_extent_with_nan_propagation(combiner, init, reference):
    x = np.array([[1, 5, -2], [np.nan, 0, 3], [np.inf, 1, 2]], np.float32)
    (got,) = run(ROW_REDUCE.format(dt="f32", combiner=combiner, init=init), [x])
    assert_close(got, reference(x, axis=1), n_ops=3)
    assert np.isnan(got[1])


def test_integer_reduce_is_exact():
    x = np.array([[3, -7, 2], [2 ** 30, 2 ** 30, -5]], np.int32)
    (got,) = run(ROW_REDUCE.format(dt="i32", combiner="max", init="-2147483648"), [x])
    np.testing.assert_array_equal(got, [3, 2 ** 30])
    assert got.dtype == np.int32


ROW_SOFTMAX_NUMERATOR = """func @f(%x: buf<f32[R, C]>) -> (buf<f32[R, C]>) {
  %out = loops.alloc : buf<f32[R, C]>
  fused.kernel {extents = [R], schedule = "row"} (%i: index) {
    %ninf = arith.constant {value = -inf} : f32
    %m = loops.reduce %ninf {combiner = "max", extent = C} : f32 (%k: index) {
      %v = loops.load %x, %i, %k : f32
      loops.yield %v
    }
    loops.for {extent = C} (%k2: index) {
      %v2 = loops.load %x, %i, %k2 : f32
      %d = arith.sub %v2, %m : f32
      %e = arith.exp %d : f32
      loops.store %e, %out, %i, %k2
    }
  }
  return %out
}
"""


def test_fused_row_kernel_runs_reduce_then_loop_per_row():
    f = parse_ir(ROW_SOFTMAX_NUMERATOR).funcs[0]
    (x,) = random_inputs(f, {"R": 4, "C": 7})
    (got,) = run_loops(f, [x])
    assert_close(got, np.exp(x - x.max(1, keepdims=True)), n_ops=4)


def test_masked_load_yields_other_where_the_mask_is_off_even_out_of_range():
    text = """func @f(%x: buf<f32[4]>) -> (buf<f32[6]>) {
  %out = loops.alloc : buf<f32[6]>
  loops.parallel {extents = [6]} (%i: index) {
    %one = arith.constant {value = 1} : index
    %four = arith.constant {value = 4} : index
    %zero = arith.constant {value = 0} : index
    %j = arith.sub %i, %one : index
    %lo = arith.ge %j, %zero : bool
    %hi = arith.lt %j, %four : bool
    %ok = arith.and %lo, %hi : bool
    %v = loops.masked_load %x, %ok, %j {other = -1.0} : f32
    loops.store %v, %out, %i
  }
  return %out
}"""
    (got,) = run(text, [np.array([10, 11, 12, 13], np.float32)])
    np.testing.assert_array_equal(got, [-1, 10, 11, 12, 13, -1])


def test_loop_indices_are_checked_because_numpy_would_wrap_negatives():
    text = """func @f(%x: buf<f32[4]>) -> (buf<f32[4]>) {
  %out = loops.alloc : buf<f32[4]>
  loops.parallel {extents = [4]} (%i: index) {
    %one = arith.constant {value = 1} : index
    %j = arith.sub %i, %one : index
    %v = loops.load %x, %j : f32
    loops.store %v, %out, %i
  }
  return %out
}"""
    with pytest.raises(MlfuseError, match=r"loops.load: index -1 out of range \[0, 4\)"):
        run(text, [np.zeros(4, np.float32)])


def test_index_arithmetic_and_symbolic_dims_gather_like_a_reshape():
    # out[i] = x[i // C, i % C] with out of size R*C: a flattening reshape
    text = """func @f(%x: buf<f32[R, C]>) -> (buf<f32[M]>) {
  %out = loops.alloc : buf<f32[M]>
  loops.parallel {extents = [M]} (%i: index) {
    %c = loops.dim {sym = "C"} : index
    %r = arith.floordiv %i, %c : index
    %q = arith.mod %i, %c : index
    %v = loops.load %x, %r, %q : f32
    loops.store %v, %out, %i
  }
  return %out
}"""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(MlfuseError, match="symbolic dim M is not bound"):
        run(text, [x])
    (got,) = run(text.replace("M", "12"), [x])
    np.testing.assert_array_equal(got, x.ravel())


def test_rank0_nest_and_zero_extent_nest():
    text = """func @f(%s: buf<f64[]>, %x: buf<f64[N]>) -> (buf<f64[]>, buf<f64[N]>) {
  %t = loops.alloc : buf<f64[]>
  loops.parallel {extents = []} () {
    %v = loops.load %s : f64
    %w = arith.mul %v, %v : f64
    loops.store %w, %t
  }
  %u = loops.alloc : buf<f64[N]>
  loops.parallel {extents = [N]} (%i: index) {
    %a = loops.load %x, %i : f64
    loops.store %a, %u, %i
  }
  return %t, %u
}"""
    square, empty = run(text, [3.0, np.zeros(0)])
    assert square.shape == () and square == 9.0
    assert empty.shape == (0,)


def test_unwritten_elements_stay_nan_and_arguments_are_not_modified():
    text = """func @f(%x: buf<f32[3]>) -> (buf<f32[3]>) {
  %out = loops.alloc : buf<f32[3]>
  loops.parallel {extents = [2]} (%i: index) {
    %v = loops.load %x, %i : f32
    loops.store %v, %out, %i
    %z = arith.constant {value = 0.0} : f32
    loops.store %z, %x, %i
  }
  return %out
}"""
    x = np.array([1, 2, 3], np.float32)
    (got,) = run(text, [x])
    assert_close(got, np.array([1, 2, np.nan], np.float32))
    np.testing.assert_array_equal(x, [1, 2, 3])


def test_cast_follows_numpy_astype():
    text = """func @f(%x: buf<f32[3]>) -> (buf<i32[3]>) {
  %out = loops.alloc : buf<i32[3]>
  loops.parallel {extents = [3]} (%i: index) {
    %v = loops.load %x, %i : f32
    %c = arith.cast %v {dtype = "i32"} : i32
    loops.store %c, %out, %i
  }
  return %out
}"""
    x = np.array([1.7, -2.5, 3.0], np.float32)
    (got,) = run(text, [x])
    np.testing.assert_array_equal(got, x.astype(np.int32))


def test_unknown_op_is_an_error_naming_it():
    text = """func @f(%x: buf<f32[2]>) -> (buf<f32[2]>) {
  %y = tensor.constant {value = 1.0} : f32[]
  return %x
}"""
    with pytest.raises(MlfuseError, match="does not know op 'tensor.constant'"):
        run(text, [np.zeros(2, np.float32)], verify=False)
