"""Variance in the mean's pass (mlfuse/transforms/fusion/moments.py): the rewrite of a
centred sum of squares into shifted sums, the passes codegen walks
(dialects/reductions.sibling_passes), and numerics against the interpreter where the
mean is large next to the spread (x = 1e4 + N(0, 1): the textbook sum(x^2) - n m^2
loses every digit there), in the streaming, split and registers row kernels."""
import re

import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import ReduceOp
from mlfuse.dialects.reductions import sibling_passes
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs
from mlfuse.transforms.fusion.cost import stage_count

from helpers import assert_results_close, record_launches

LAYERNORM = """
func f(x: f32[R, C], g: f32[C], b: f32[C]) -> f32[R, C] {
    m = mean(x, axis=1, keepdims=true)
    d = x - m
    v = mean(d * d, axis=1, keepdims=true)
    return d * rsqrt(v + 1e-5) * g + b
}"""
INSTANCE_NORM = """
func f(x: f32[N, C, H, W]) -> f32[N, C, H, W] {
    m = mean(x, axis=[2, 3], keepdims=true)
    d = x - m
    return d * rsqrt(mean(d * d, axis=[2, 3], keepdims=true) + 1e-5)
}"""
# the variance alone: the normalised output's error at x = 1e4 + N(0, 1) is the mean's
# rounding (an f32 ulp of 1e4 is 1e-3 of a standard deviation) whatever the formula
VARIANCE = """
func f(x: f32[R, C]) -> f32[R, 1] {
    m = mean(x, axis=1, keepdims=true)
    d = x - m
    return mean(d * d, axis=1, keepdims=true)
}"""
# a centred square whose centre reads no reduce: nothing to save, left alone
FIXED_CENTRE = "func f(x: f32[R, C]) -> f32[R, 1] { return sum((x - 3.0) * (x - 3.0), axis=1, keepdims=true) }"


def _kernel(source: str, dims=None) -> KernelOp:
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims} if dims else None)
    (kernel,) = [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]
    return kernel


def test_variance_becomes_a_sibling_of_the_mean():
    kernel = _kernel(LAYERNORM, {"C": 65536})  # rows longer than registers hold
    reduces = [o for o in kernel.body.ops if isinstance(o, ReduceOp)]
    assert len(reduces) == 3  # sum(x - s), sum((x - s)^2), sum(x)
    passes = sibling_passes(kernel.body.ops)
    assert [len(p) for p in passes] == [3, 1]  # the three in one walk, then the epilogue
    assert stage_count(kernel) == 2


def test_unbound_rows_priced_at_the_default_size_are_left_alone():
    """C unbound: the planner takes it at the target's default size (1024), which
    registers hold, so the registers variant keeps the two-pass variance (the shift
    costs it extra sums and block reductions: layernorm 16384 x 4096 0.214 ms with it,
    0.181 without, H100)."""
    reduces = [o for o in _kernel(LAYERNORM).body.ops if isinstance(o, ReduceOp)]
    assert len(reduces) == 2


def test_rows_held_in_registers_and_fixed_centres_are_left_alone():
    kernel = _kernel(LAYERNORM.replace("R, C]", "R, 768]").replace("f32[C]", "f32[768]"))
    assert sum(isinstance(o, ReduceOp) for o in kernel.body.ops) == 2
    assert stage_count(kernel) == 3
    fixed = _kernel(FIXED_CENTRE)
    assert sum(isinstance(o, ReduceOp) for o in fixed.body.ops) == 1


def _large_mean_inputs(source, dims, seed=1):
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=seed)
    rng = np.random.default_rng(seed)
    inputs[0] = (1e4 + rng.standard_normal(inputs[0].shape)).astype(np.float32)
    return func, inputs


@pytest.mark.parametrize("split", [True, False])
def test_large_mean_variance_split_and_streaming(split):
    """Rows of 4200 (past the simulator target's registers rows): the split plan's two
    kernels, or the streaming kernel's one pass (its vector twin: rows of whole vectors)."""
    func, inputs = _large_mean_inputs(VARIANCE, {"R": 2, "C": 4200})
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(VARIANCE, "t.fuse", target="simulator",
                                   fuse_options={"dims": {"C": 65536}})  # priced as long rows
    py = module.python_module
    py._split_stages = lambda points, extent, reread: split
    names = [n for n in vars(py) if re.search(r"^f_0((_stage\d+|_epilogue|_streaming)(_vector)?)?$", n)]
    launched = record_launches(py, names)
    assert_results_close(func, expected, module["f"](*inputs))
    # (rows of whole vectors: the split plan's vector twins)
    # the epilogue stores one value a row (no row loop, no vector): its scalar kernel
    assert launched == (["f_0_stage0_vector", "f_0_epilogue"] if split else ["f_0_streaming_vector"])


def test_instance_norm_registers():
    func, inputs = _large_mean_inputs(INSTANCE_NORM, {"N": 1, "C": 2, "H": 6, "W": 20})
    inputs[0] -= np.float32(1e4 - 3)  # mean 3: the output's error is not the mean's ulp
    assert_results_close(func, run_tensor(func, inputs),
                         mlfuse.compile_source(INSTANCE_NORM, "t.fuse", target="simulator")["f"](*inputs))


def test_inf_and_nan_rows_follow_the_interpreter():
    func = parse_program(LAYERNORM, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"R": 3, "C": 1100}, seed=2)
    inputs[0][0, 0] = np.inf  # the shift itself infinite
    inputs[0][1, 500] = np.nan
    inputs[0][2, 9] = -np.inf
    module = mlfuse.compile_source(LAYERNORM, "t.fuse", target="simulator",
                                   fuse_options={"dims": {"C": 65536}})  # priced as long rows
    module.python_module._split_stages = lambda points, extent, reread: True
    assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_sixteen_bit_variance_is_shifted_in_f32(dtype):
    """A 16-bit float's mean adds up in f32 (lower_to_loops), so its centred squares are
    cast to f32 before the sum: the rewrite still takes them, and shifts and squares in
    f32 (the kernels' arithmetic). Split plan in two kernels, as f32's; the results
    (mean 100 + N(0, 1), past what f16 sums of squares hold) follow the interpreter."""
    source = VARIANCE.replace("f32", dtype)
    kernel = _kernel(LAYERNORM.replace("f32", dtype), {"C": 65536})
    reduces = [o for o in kernel.body.ops if isinstance(o, ReduceOp)]
    assert [o.result.type.dtype for o in reduces] == ["f32"] * 3
    assert stage_count(kernel) == 2
    func = parse_program(source, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"R": 2, "C": 4200}, seed=4)
    x[...] = 100 + np.random.default_rng(4).standard_normal(x.shape)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                   fuse_options={"dims": {"C": 65536}})
    module.python_module._split_stages = lambda points, extent, reread: True
    assert_results_close(func, run_tensor(func, [x]), module["f"](x))
