"""Epilogue outputs stored through a permute (fusion/placement.py, root "row"), and a
mask computed from iotas fused into the reduction that reads it (fusion/fuse.py's second
look at a producer whose own group grew). Checked on the fused IR at benchmark sizes and
under the simulator against the NumPy interpreter at small ones."""
import dataclasses

import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import AllocOp
from mlfuse.hardware import get_target, target_in_effect
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close

# ConvNeXt's channels-first LayerNorm written through its channels-last form: the
# epilogue's values over [N, H, W, C] stored at [N, C, H, W], along the strip's points
CHANNEL_LAYERNORM = """
func f(x: f32[N, C, H, W], g: f32[C], b: f32[C]) -> f32[N, C, H, W] {
    return transpose(layernorm(transpose(x, [0, 2, 3, 1]), g, b), [0, 3, 1, 2])
}
"""
# a layernorm over rows stored transposed: each block's row would be a column of the
# output, a value per 32-byte sector; the transpose keeps its own tiles
LAYERNORM_TRANSPOSED = """
func f(x: f32[R, C], g: f32[C], b: f32[C]) -> f32[C, R] {
    return transpose(layernorm(x, g, b))
}
"""
SOFTMAX_COLUMNS_TRANSPOSED = """
func f(x: f32[R, C]) -> f32[C, R] {
    return transpose(softmax(x, axis=0))
}
"""
CAUSAL = """
func f(s: f32[B, S, S]) -> f32[B, S, S] {
    i = iota([S, S], axis=0)
    j = iota([S, S], axis=1)
    return softmax(where(j <= i, s, -1e30), axis=-1)
}
"""


def kernels(source: str, dims: dict) -> tuple[list[KernelOp], list]:
    func = compile_text(source, "t.fuse", fuse_options={"dims": dims}).funcs[0]
    ks = [op for op in func.body.ops if isinstance(op, KernelOp)]
    return ks, [list(op.result.type.shape) for op in func.body.ops if isinstance(op, AllocOp)]


@pytest.mark.parametrize("dims", [{"N": 32, "C": 96, "H": 56, "W": 56},
                                  {"N": 32, "C": 384, "H": 14, "W": 14}])
def test_a_transposed_back_epilogue_is_stored_by_the_reduction_kernel(dims):
    ks, allocs = kernels(CHANNEL_LAYERNORM, dims)
    (k,) = ks
    assert k["schedule"] == "strips" and k["extents"] == ["N", "H", "W"]
    assert allocs == [["N", "C", "H", "W"]]  # the NHWC layernorm is never written
    assert sum(s.endswith("tensor.transpose") for s in k["sources"]) == 2  # both in it


def test_an_epilogue_stored_scattered_keeps_its_transpose_kernel():
    ks, _ = kernels(SOFTMAX_COLUMNS_TRANSPOSED, {"R": 4096, "C": 8192})
    assert [k["schedule"] for k in ks][-1] == "transpose-tiles" and len(ks) == 2


def test_a_row_epilogue_stored_along_the_points_is_staged_in_one_kernel():
    """A layernorm over rows stored transposed writes each row as a column: with the
    target's row_staged_stores on, a block of neighbouring rows, a warp each, stages it
    (codegen/staged_rows.py); off (the default), the transpose keeps its tiles."""
    ks, _ = kernels(LAYERNORM_TRANSPOSED, {"R": 16384, "C": 1024})
    assert [k["schedule"] for k in ks] == ["row", "transpose-tiles"]
    with target_in_effect(dataclasses.replace(get_target(), row_staged_stores=True)):
        (k,), allocs = kernels(LAYERNORM_TRANSPOSED, {"R": 16384, "C": 1024})
    assert k["schedule"] == "warp-rows" and k["staged_rows"] == 1 and allocs == [["C", "R"]]


def test_a_causal_mask_from_iotas_is_computed_in_the_softmax_kernel():
    ks, allocs = kernels(CAUSAL, {"B": 64, "S": 1024})
    (k,) = ks
    assert k["schedule"] == "row" and allocs == [["B", "S", "S"]]
    assert {"i = tensor.iota", "j = tensor.iota", "le = tensor.le"} <= set(k["sources"])


@pytest.mark.parametrize("source, dims", [
    (CHANNEL_LAYERNORM, {"N": 2, "C": 5, "H": 3, "W": 4}),
    (LAYERNORM_TRANSPOSED, {"R": 5, "C": 7}),
    (SOFTMAX_COLUMNS_TRANSPOSED, {"R": 6, "C": 5}),
    (CAUSAL, {"B": 2, "S": 9}),
], ids=["channel_layernorm", "layernorm_transposed", "softmax_columns_transposed", "causal"])
@pytest.mark.parametrize("compiled_for", ["symbols", "sizes"])
def test_agrees_with_numpy(source, dims, compiled_for):
    """Compiled for symbolic sizes and for the first test's sizes (the plans chosen
    there), run at small ones."""
    big = {"N": 32, "C": 96, "H": 56, "W": 56, "R": 16384, "B": 64, "S": 1024}
    options = {"dims": {k: big[k] for k in dims}} if compiled_for == "sizes" else None
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=5)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=options)
    assert_results_close(func, expected, module["f"](*inputs))
