"""Split-columns' vector twin (codegen/split_columns_vector.py): a thread per (chunk,
vector of neighbouring points), what the points share loaded and computed once a vector.
Which kernels get one, when the host runs it, and its numbers under the simulator
against the NumPy interpreter (the scalar kernel where the points do not divide)."""
import dataclasses

import numpy as np
import pytest
from helpers import assert_results_close, record_launches
from hypothesis import given, settings
from hypothesis import strategies as st
from mlfuse.dialects.fused import KernelOp

import mlfuse
from mlfuse.codegen import generate
from mlfuse.codegen.split_columns_vector import column_vector_plan
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

POOL = """
func f(x: {t}[B, S, D], m: {t}[B, S, 1]) -> {t}[B, D] {{
    w = sigmoid(m)
    return sum(x * w, axis=1) / sum(w, axis=1)
}}"""
COLSUM = "func f(x: f32[R, C]) -> f32[C] { return sum(x, axis=0) }"
# z read at [b, 0, d] on every step: a load of the point's own element (hoisted out of
# the nest), a sample that each lane loads at its own index before the walk
FIXED = "func f(x: f32[B, S, D], z: f32[B, 1, D]) -> f32[B, D] { return sum(x * z, axis=1) }"
# exp(z) computed of the point's own element: a lane's own value that is no load
COMPUTED = "func f(x: f32[B, S, D], z: f32[B, 1, D]) -> f32[B, D] { return sum(x * exp(z), axis=1) }"
PLANNED = {"dims": {"B": 64, "S": 2048, "D": 1024}}


def _kernel(source, plan=PLANNED):
    module = compile_text(source, "t.fuse", fuse_options=plan)
    (kernel,) = [o for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]
    assert kernel["schedule"] == "split-columns"
    return kernel


def test_which_kernels_have_a_vector_twin():
    plan = column_vector_plan(_kernel(POOL.format(t="f32")), get_target())
    assert [o.operands[0].name_hint for o in plan.stepped] == ["x"]  # m is shared
    assert plan.lanes == "VECTOR_WIDTH"
    assert column_vector_plan(_kernel(POOL.format(t="f16")), get_target()).lanes == \
        "VECTOR_WIDTH_16"
    fixed = column_vector_plan(_kernel(FIXED), get_target())
    assert [o.operands[0].name_hint for o in fixed.samples] == ["z"]
    assert column_vector_plan(_kernel(COMPUTED), get_target()) is None
    assert column_vector_plan(_kernel(POOL.format(t="f32")), dataclasses.replace(get_target(), vector_width=1)) is None


def test_shared_values_are_loaded_and_computed_once_a_vector():
    source = generate(compile_text(POOL.format(t="f32"), "t.fuse", fuse_options=PLANNED), "cuda")
    twin = source.split("def f_0_vector(")[1].split("\ndef ")[0]
    assert twin.count("_load_vector(x_flat") == 1 and twin.count("m_flat[") == 1
    assert twin.count("math.exp(") == 1
    # the lanes' loops: their accumulators' start, a value's step, their partials' store
    start, step, _store = twin.split("for lane in range(VECTOR_WIDTH):")[1:]
    assert "math.exp" in start and "math.exp" not in step  # once a value, before the lanes


def _run(source, dims, plan=PLANNED, seed=4):
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=seed)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=plan)
    py = module.python_module
    launched = record_launches(py, ["f_0", "f_0_vector", "f_0_combine"])
    got = module["f"](*inputs)
    assert_results_close(func, run_tensor(func, inputs), got)
    return launched, got, inputs, module


@pytest.mark.parametrize("dtype, dims, twin", [
    ("f32", {"B": 2, "S": 150, "D": 8}, True),
    ("f32", {"B": 3, "S": 37, "D": 4}, True),   # a chunk ending part-way through a tile
    ("f32", {"B": 2, "S": 150, "D": 6}, False),  # 4 does not divide D: a point a thread
    ("f16", {"B": 2, "S": 70, "D": 16}, True),
    ("f16", {"B": 2, "S": 70, "D": 12}, False),  # 8 does not divide D
])
def test_vector_twin_agrees_with_numpy(dtype, dims, twin):
    launched, *_ = _run(POOL.format(t=dtype), dims)
    assert launched == (["f_0_vector"] if twin else ["f_0"]) + ["f_0_combine"]


@pytest.mark.parametrize("dims", [{"B": 2, "S": 150, "D": 8}, {"B": 3, "S": 37, "D": 12}])
def test_a_sample_is_each_lanes_own(dims):
    # z[b, 0, d] differs between a vector's lanes: each reads its own (a shared value
    # would give every lane the first lane's z)
    launched, *_ = _run(FIXED, dims)
    assert launched == ["f_0_vector", "f_0_combine"]


def test_vector_twin_nan_and_determinism():
    source = POOL.format(t="f32")
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"B": 2, "S": 90, "D": 8}, seed=6)
    inputs[0][1, 40, 5] = np.nan
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=PLANNED)
    first = np.asarray(module["f"](*inputs))
    assert np.isnan(first[1, 5]) and not np.isnan(first[1, 4]) and not np.isnan(first[0, 5])
    assert np.asarray(module["f"](*inputs)).tobytes() == first.tobytes()


def test_many_chunks_of_vectors_take_the_scalar_kernel():
    """Few vectors of long columns: the twin's chunk count would pass two of the
    combining thread's tiles (2 x VALUES_PER_THREAD), so the host runs the scalar kernel."""
    plan = {"dims": {"R": 1 << 20, "C": 8}}
    launched, *_, module = _run(COLSUM, {"R": 2200, "C": 8}, plan)
    py = module.python_module
    assert py._split_columns(2, 2200, py.SM_COUNT, py.VALUES_PER_THREAD) > 2 * py.VALUES_PER_THREAD
    assert launched == ["f_0", "f_0_combine"]
    launched, *_ = _run(COLSUM, {"R": 300, "C": 8}, plan)
    assert launched == ["f_0_vector", "f_0_combine"]


def test_sixteen_bit_columns_take_vectors_however_many_chunks():
    """A scalar 16-bit load moves 2 bytes: f16 columns take the twin's vectors of 8 even
    where its chunk count passes two of the combining thread's tiles."""
    plan = {"dims": {"R": 1 << 20, "C": 16}}
    launched, *_, module = _run(COLSUM.replace("f32", "f16"), {"R": 2200, "C": 16}, plan)
    py = module.python_module
    assert py._split_columns(2, 2200, py.SM_COUNT, py.VALUES_PER_THREAD) > 2 * py.VALUES_PER_THREAD
    assert launched == ["f_0_vector", "f_0_combine"]


@settings(max_examples=6, deadline=None, derandomize=True)
@given(a=st.integers(1, 3), b=st.integers(1, 90), vectors=st.integers(1, 3),
       combiner=st.sampled_from(["sum", "max", "min", "mean"]),
       prologue=st.sampled_from(["x * w", "exp(x) - w", "x + w * w"]))
def test_vector_twin_property(a, b, vectors, combiner, prologue):
    """Any extents (chunks ending part-way, one value a chunk), combiners and a prologue
    mixing a vector load with a shared one: the twin runs and agrees with NumPy."""
    source = (f"func f(x: f32[B, S, D], m: f32[B, S, 1]) -> f32[B, D] {{\n"
              f"    w = sigmoid(m)\n    return {combiner}({prologue}, axis=1)\n}}")
    launched, *_ = _run(source, {"B": a, "S": b, "D": 4 * vectors})
    assert launched == ["f_0_vector", "f_0_combine"]


@pytest.mark.parametrize("cumsum", ["reverse=true", "exclusive=true",
                                    "exclusive=true, reverse=true"])
def test_a_body_reading_the_reduced_index_sees_each_values_own(cumsum):
    """A cumsum over columns is a masked sum whose body reads the reduced index (k >= i0).
    The twin's compute pass read the load pass's last index, so every value of a tile took
    the same mask (long fuzz profile: cumsum(x, axis=1, exclusive=true, reverse=true) over
    [1, 2, 4] of ones gave [2, 0] where NumPy gives [1, 0])."""
    source = f"func f(x: f32[R, C]) -> f32[R, C] {{ return cumsum(x, axis=0, {cumsum}) }}"
    launched, *_ = _run(source, {"R": 5, "C": 8}, plan=None)
    assert launched[0] == "f_0_vector"
    func = parse_program(source, "t.fuse").funcs[0]
    ones = [np.ones((2, 4), np.float32)]
    got = mlfuse.compile_source(source, "t.fuse", target="simulator")["f"](*ones)
    assert_results_close(func, run_tensor(func, ones), got)


def test_a_thread_per_point_combine_walks_every_reduces_partials_at_once():
    # the pool's two sums: one loop over the chunks' tiles, both partials' loads first
    # (a round trip a tile for all of them), then both sums in chunk order
    source = generate(compile_text(POOL.format(t="f32"), "t.fuse", fuse_options=PLANNED), "cuda")
    combine = source.split("def f_0_combine(")[1].split("\ndef ")[0]
    assert combine.count("for tile in range(0, n_split, VALUES_PER_THREAD):") == 1
    load, add = combine.split("for tile in range(0, n_split, VALUES_PER_THREAD):")[1] \
        .split("for slot in range(VALUES_PER_THREAD):")[1:3]
    assert "sum_vals[slot] = sum_partials[" in load and \
        "sum_vals_1[slot] = sum_partials_1[" in load
    assert "sum = sum + sum_vals[slot]" in add and "sum_1 = sum_1 + sum_vals_1[slot]" in add
    # a block per point combines each reduce in turn (the block's reduction after each)
    blocks = source.split("def f_0_combine_blocks(")[1].split("\ndef ")[0]
    assert blocks.count("range(tid, n_split,") == 2
