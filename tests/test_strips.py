"""The strips schedule (mlfuse/codegen/schedule_strips.py): reductions over leading,
middle and several trailing axes with their broadcast-back epilogue in one kernel, run
under the simulator against the NumPy interpreter (odd sizes so strips and tiles end
part-way, ranks 2-4, f16, NaN and inf), in both variants."""
import re

import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.interp import run_tensor
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close, record_launches

MIDDLE_SOFTMAX = "func f(x: f32[A, B, C]) -> f32[A, B, C] { return softmax(x, axis=1) }"
CASES = [
    (MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 5}),
    ("func f(x: f32[R, C]) -> f32[R, C] { return x - mean(x, axis=0, keepdims=true) }",
     {"R": 13, "C": 6}),
    ("func f(x: f32[N, C, H, W]) -> f32[N, C, H, W] { return softmax(x, axis=1) }",
     {"N": 2, "C": 3, "H": 3, "W": 3}),
    # (instance norm's rows over [H, W] walk one loop each since flatten-row-nests, a row
    # kernel: tests/test_flat_rows.py, tests/test_flatten_row_nests.py; batch norm's
    # statistics over [N, H, W] below too, as segments, but not here: _strips_over_rows)
    ("func f(x: f32[N, C, H, W]) -> (f32[N, C, H, W], f32[C], f32[C]) {\n"
     " m = mean(x, axis=[0, 2, 3], keepdims=true)\n"
     " v = mean((x - m) * (x - m), axis=[0, 2, 3], keepdims=true)\n"
     " return (x - m) * rsqrt(v + 1e-5), reshape(m, [C]), reshape(v, [C]) }",
     {"N": 2, "C": 3, "H": 3, "W": 5}),
    ("func f(x: f32[B, S, D], m: f32[B, S, 1]) -> f32[B, D] { return sum(x * m, axis=1) "
     "/ sum(m, axis=1) }", {"B": 2, "S": 5, "D": 7}),
    ("func f(x: f16[A, B, C]) -> f16[A, B, C] { return x - max(x, axis=1, keepdims=true) }",
     {"A": 3, "B": 7, "C": 5}),
]
# the fuse pass plans for sizes where strips pay; the simulator runs small ones
# (4096 columns: 1024 would give 128 strips of 8, too few blocks to fill an H100's 132
# SMs twice over, and the model splits the centring into a column reduction and its epilogue;
# the masked mean pool over S = 32: at 128, split-columns' two chunks a point price lower)
PLAN = {"dims": {"A": 32, "B": 128, "C": 4096, "R": 4096, "N": 32, "H": 56, "W": 56,
                 "S": 32, "D": 1024}}


@pytest.fixture(autouse=True)
def _strips_over_rows(monkeypatch):
    """Batch norm's statistics over [N, H, W] (CASES[3]) are a row kernel of segments
    since flatten-row-nests takes nests that are not consecutive (tests/test_segmented_rows.py);
    here flattening is off, so they test the strips kernel over rows that walks a nest
    over several axes with carries (a kernel flatten-row-nests leaves, as it leaves
    nests whose flattened kernel is not a row kernel)."""
    from mlfuse.transforms import flatten_row_nests
    monkeypatch.setattr(flatten_row_nests, "flattened", lambda *args, **kwargs: None)


def _strips(module) -> list[KernelOp]:
    return [k for f in module.ir.funcs for k in f.body.ops
            if isinstance(k, KernelOp) and k["schedule"] == "strips"]


def _run(source, dims, inputs=None, streaming=False):
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = inputs or random_inputs(func, dims, seed=4)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=PLAN)
    (kernel,) = _strips(module)  # one kernel, and it is a strips kernel
    assert sum(isinstance(k, KernelOp) for k in module.ir.funcs[0].body.ops) == 1
    py = module.python_module
    py.STRIP_SHARED_BYTES = 0  # the scalar kernels (test_strips_shared.py: the shared one)
    if streaming:
        py.STRIP_HELD_THREADS = 0  # the host then launches the streaming variant
        py.COLUMN_STAGES = False  # (not the column stages: test_column_stages.py)
    launched = record_launches(py, list(kernel_names(py, kernel)))
    got = module["f"](*inputs)
    got = assert_results_close(func, expected, got)
    assert launched and launched[0].endswith("_streaming") == streaming
    return got


def kernel_names(py, kernel):
    name = kernel["kernel_name"]
    return [n for n in (name, f"{name}_streaming") if hasattr(py, n)]


@pytest.mark.parametrize("source, dims", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_strips_agree_with_numpy(source, dims):
    _run(source, dims)


@pytest.mark.parametrize("source, dims", [
    (MIDDLE_SOFTMAX, {"A": 2, "B": 70, "C": 5}),  # two tiles of 4 x 16 values, the last part-way
    (CASES[3][0], {"N": 3, "C": 2, "H": 9, "W": 11}),  # rows of 297 values over 3 axes
])
def test_streaming_variant_agrees_with_numpy(source, dims):
    _run(source, dims, streaming=True)


def test_nan_and_inf_follow_numpy():
    func = parse_program(MIDDLE_SOFTMAX, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"A": 2, "B": 9, "C": 5}, seed=5)
    x[0, 3, 1] = np.nan
    x[1, 2, 2], x[1, 5, 3] = np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        _run(MIDDLE_SOFTMAX, {}, [x])


INSTANCE_NORM_NHWC = """
func f(x: f32[N, H, W, C], g: f32[C], b: f32[C]) -> f32[N, H, W, C] {
    m = mean(x, axis=[1, 2], keepdims=true)
    d = x - m
    return d * rsqrt(mean(d * d, axis=[1, 2], keepdims=true) + 1e-5) * g + b
}"""


def test_columns_compiled_for_symbols_keep_a_plan_sized_per_call():
    """Compiled for symbols, instance norm over NHWC was priced at the default sizes'
    million points, where one thread per point fills the GPU and beat streaming strips by
    their measured 9%; a call at [16, 64, 64, 128] has 2048 points. Its reductions now
    run as strips (and split-columns), which the host sizes per call; the kernels agree."""
    from mlfuse.pipeline import compile_text
    module = compile_text(INSTANCE_NORM_NHWC, "t.fuse")
    schedules = [o["schedule"] for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]
    assert "pointwise" not in schedules and "strips" in schedules
    func = parse_program(INSTANCE_NORM_NHWC, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"N": 2, "H": 3, "W": 5, "C": 6}, seed=3)
    got = mlfuse.compile_source(INSTANCE_NORM_NHWC, "t.fuse", target="simulator")["f"](*inputs)
    assert_results_close(func, run_tensor(func, inputs), got)


CHANNEL_LAYERNORM = """
func f(x: f32[N, C, H, W], g: f32[C], b: f32[C]) -> f32[N, C, H, W] {
    return transpose(layernorm(transpose(x, [0, 2, 3, 1]), g, b), [0, 3, 1, 2])
}"""


@pytest.mark.parametrize("dims", [
    {"N": 2, "C": 6, "H": 3, "W": 5},
    {"N": 1, "C": 37, "H": 2, "W": 3},  # several slots a thread, the last part-filled
])
def test_a_one_axis_operand_of_the_reduced_axis_is_stepped_by_a_cursor(dims):
    """Layernorm over the channels of NCHW: gamma and beta, 1-D over the reduced axis, are
    read at a cursor stepped a slot at a time like the columns (g[k] cost a wraparound
    test and a 64-bit multiply a value), in the registers variant the host launches."""
    func = parse_program(CHANNEL_LAYERNORM, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=6)
    inputs[0][0, 1, 0, 0] = np.nan
    module = mlfuse.compile_source(CHANNEL_LAYERNORM, "t.fuse", target="simulator")
    kernel = module.source[module.source.index("def f_0("):]
    kernel = kernel[:kernel.index("\n\n\n")]
    assert "g_flat[numba.uint64(cursor" in kernel and "b_flat[numba.uint64(cursor" in kernel
    assert not re.search(r"\b[gb]\[", kernel)
    launched = record_launches(module.python_module, ["f_0", "f_0_streaming"])
    with np.errstate(invalid="ignore"):
        assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))
    assert launched == ["f_0"]


def test_a_one_axis_operand_stepped_in_the_streaming_variant_agrees_with_numpy():
    """The streaming strips kernel steps gamma by the same cursors, from each tile's
    start (``thread_base + tile * stride``)."""
    func = parse_program(CHANNEL_LAYERNORM, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"N": 2, "C": 70, "H": 3, "W": 2}, seed=7)
    module = mlfuse.compile_source(CHANNEL_LAYERNORM, "t.fuse", target="simulator")
    py = module.python_module
    py.STRIP_HELD_THREADS = 0  # the host then launches the streaming variant
    py.COLUMN_STAGES = False
    kernel = module.source[module.source.index("def f_0_streaming("):]
    assert "g_flat[numba.uint64(cursor" in kernel[:kernel.index("\n\n\n")]
    launched = record_launches(py, ["f_0", "f_0_streaming"])
    assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))
    assert launched == ["f_0_streaming"]
