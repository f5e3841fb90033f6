"""flatten-column-nests (mlfuse/transforms/flatten_column_nests.py): a kernel over
columns whose reduced values lie over neighbouring axes (batch norm's [N, H, W] of
NHWC, a sequence's [N, L] of [N, L, C], centring over [H, W] of NHWC) walks each nest
as one loop, so the column plans of one reduced axis take it: fusion makes one kernel,
codegen addresses the merged axes at ``X * stride`` with no division per value, and the
values agree with the NumPy interpreter under the simulator."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_results_close, record_launches

import mlfuse
from mlfuse.codegen import generate
from mlfuse.dialects.fused import KernelOp
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN columns

BATCH_NORM_NHWC = """
func f(x: f32[N, H, W, C], g: f32[C], b: f32[C]) -> (f32[N, H, W, C], f32[C], f32[C]) {
    m = mean(x, axis=[0, 1, 2])
    d = x - m
    v = mean(d * d, axis=[0, 1, 2])
    return d * rsqrt(v + 1e-5) * g + b, m, v
}
"""
SPATIAL_NHWC = """
func f(x: f32[N, H, W, C]) -> f32[N, H, W, C] {
    return x - mean(x, axis=[1, 2], keepdims=true)
}
"""
BATCH_NORM_NLC = """
func f(x: f16[N, L, C]) -> f16[N, L, C] {
    d = x - mean(x, axis=[0, 1], keepdims=true)
    return d * rsqrt(mean(d * d, axis=[0, 1], keepdims=true) + 1e-5)
}
"""
# the sizes fusion plans for: columns that no strip holds on chip (column stages)
PLAN = {"dims": {"N": 32, "H": 56, "W": 56, "C": 64, "L": 4096}}


def _kernels(source):
    module = compile_text(source, "t.fuse", fuse_options=PLAN)
    return [o for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]


@pytest.mark.parametrize("source, nest", [(BATCH_NORM_NHWC, ["N", "H", "W"]),
                                          (SPATIAL_NHWC, ["H", "W"]),
                                          (BATCH_NORM_NLC, ["N", "L"])])
def test_nests_over_neighbouring_axes_make_one_kernel_with_column_stages(source, nest):
    (kernel,) = _kernels(source)
    assert kernel.attributes["flat_nests"] == [nest]
    assert (kernel["schedule"], kernel["strip"]) == ("strips", "columns")
    assert kernel.attributes.get("split_stages") == 1


def test_the_merged_axes_are_addressed_with_no_division_per_value():
    """The column stages' kernels step x and the output along the merged axes by the
    stride of C (``flat_rows._merged_step``): no ``%`` or ``//`` of a loop index, only
    the shift sample's unravel of 0, once a point."""
    text = generate(compile_text(BATCH_NORM_NHWC, "t.fuse", fuse_options=PLAN), "cuda")
    assert "x_flat = _flat(x)" in text and "x_flat[numba.uint64(cursor" in text
    divided = re.findall(r"_divmod_index\w*\((\w+),", text.split("def f_0(")[1])
    assert divided and set(divided) <= {"constant_1", "floordiv"}, divided
    assert not re.search(r"\bk\w* (?:%|//) ", text)


def _run(source, dims, inputs=None):
    """The kernels launched for a call whose strips fit on chip nowhere (the host's
    limits lowered to zero) and the results, checked against the interpreter."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = inputs or random_inputs(func, dims, seed=8)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=PLAN)
    py = module.python_module
    py.STRIP_SHARED_BYTES = py.STRIP_HELD_THREADS = 0
    names = [n for n in vars(py) if n.startswith("f_0") and hasattr(getattr(py, n), "py_func")]
    launched = record_launches(py, names)
    got = module["f"](*inputs)
    assert_results_close(func, run_tensor(func, inputs), got)
    return launched, got


@pytest.mark.parametrize("source, dims, epilogue", [
    (BATCH_NORM_NHWC, {"N": 3, "H": 5, "W": 7, "C": 8}, "f_0_epilogue_vector"),
    (BATCH_NORM_NHWC, {"N": 2, "H": 3, "W": 5, "C": 6}, "f_0_epilogue"),  # 4 does not divide C
    (SPATIAL_NHWC, {"N": 2, "H": 9, "W": 7, "C": 8}, "f_0_epilogue_lean"),  # (a mean only)
    (BATCH_NORM_NLC, {"N": 3, "L": 50, "C": 16}, "f_0_epilogue_vector"),
    (BATCH_NORM_NLC, {"N": 1, "L": 1, "C": 3}, "f_0_epilogue"),
])
def test_flattened_column_stages_agree_with_numpy(source, dims, epilogue):
    launched, _ = _run(source, dims)
    assert launched[1:] == ["f_0_combine", epilogue]


def test_a_nan_stays_in_its_channel():
    func = parse_program(BATCH_NORM_NHWC, "t.fuse").funcs[0]
    x, g, b = random_inputs(func, {"N": 2, "H": 3, "W": 5, "C": 8}, seed=3)
    x[1, 2, 3, 5] = np.nan
    _, (y, m, v) = _run(BATCH_NORM_NHWC, {}, [x, g, b])
    y, m, v = (np.asarray(a) for a in (y, m, v))
    assert np.isnan(y[..., 5]).all() and np.isnan(m[5]) and np.isnan(v[5])
    assert not np.isnan(np.delete(y, 5, axis=-1)).any()
