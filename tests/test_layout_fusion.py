"""Layout changes that cost no kernel (issue 13): permutations and reshapes that move only
axes of one point fuse into the kernel computing their operand; an elementwise loss
reduced to a scalar keeps its prologue in the reduction's first stage. Each checked on
the fused IR and under the simulator against the NumPy interpreter."""
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import AllocOp
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close

TRANSPOSED_SUMS = ("func f(x: f32[R, C]) -> f32[1, R] {\n"
                   "    return transpose(sum(x, axis=1, keepdims=true)) }")
# rank 3, the reduction result moved and reshaped beside the normalized values
MOVED_MAX = ("func f(x: f32[B, R, C]) -> (f32[B, 1, R], f32[1, B, R], f32[B, R, C]) {\n"
             "    m = max(x, axis=2, keepdims=true)\n"
             "    return transpose(m, [0, 2, 1]), reshape(m, [1, B, R]), x / m }")
BCE_MEAN = ("func f(x: f32[N, C], t: f32[N, C]) -> f32[] {\n"
            "    l = maximum(x, 0.0) - x * t + log1p(exp(-abs(x)))\n"
            "    return mean(l) }")
BCE_F16 = BCE_MEAN.replace("f32", "f16")


def fused(source: str, dims: dict):
    return compile_text(source, "t.fuse", fuse_options={"dims": dims}).funcs[0]


def kernel_ops(func) -> list[KernelOp]:
    return [op for op in func.body.ops if isinstance(op, KernelOp)]


def buffers(func) -> list[str]:
    return [op.result.type.shape for op in func.body.ops if isinstance(op, AllocOp)]


@pytest.mark.parametrize("source, dims, outputs", [
    (TRANSPOSED_SUMS, {"R": 4096, "C": 4096}, 1),
    (MOVED_MAX, {"B": 8, "R": 512, "C": 1024}, 3),
])
def test_moving_axes_of_one_point_costs_no_kernel(source, dims, outputs):
    func = fused(source, dims)
    assert len(kernel_ops(func)) == 1
    assert len(buffers(func)) == outputs  # no intermediate [.., 1] buffer


def test_loss_reduced_to_a_scalar_is_never_stored():
    func = fused(BCE_MEAN, {"N": 16384, "C": 4096})
    (k,) = kernel_ops(func)
    assert k["schedule"] == "split-rows"  # two deterministic stages, one kernel op
    assert buffers(func) == [()]  # only the scalar: the [N, C] loss stays in registers
    assert {"l = tensor.add", "mean = tensor.mean"} <= set(k["sources"])


@pytest.mark.parametrize("source, dims", [
    (TRANSPOSED_SUMS, {"R": 5, "C": 37}),
    (MOVED_MAX, {"B": 2, "R": 3, "C": 33}),
    (BCE_MEAN, {"N": 5, "C": 41}),
    (BCE_F16, {"N": 3, "C": 40}),
], ids=["transposed_sums", "moved_max", "bce_mean", "bce_mean_f16"])
def test_agrees_with_numpy(source, dims):
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=7)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    got = module["f"](*inputs)
    assert_results_close(func, expected, got)
