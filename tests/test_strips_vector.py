"""Strips over columns in 16-byte vectors (mlfuse/codegen/strips_vector.py): each
thread's VEC neighbouring points (4 f32 / 8 f16) a vector, under the simulator against
the NumPy interpreter: the vector kernel where VEC divides the points (middle softmax,
column centring, f16) and the strip streams, NaN and inf per lane, and the scalar kernels
where it does not."""
import numpy as np
import pytest

import mlfuse
from mlfuse.interp import run_tensor
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close, record_launches
from test_strips import CASES, MIDDLE_SOFTMAX, PLAN, _strips
from test_strips import _strips_over_rows  # noqa: F401  (autouse: the strips kernel over rows)

CENTRING = "func f(x: f32[R, C]) -> f32[R, C] { return x - mean(x, axis=0, keepdims=true) }"
F16_MAX = "func f(x: f16[A, B, C]) -> f16[A, B, C] { return x - max(x, axis=1, keepdims=true) }"
# a middle softmax with a mask read at m[a, b, 0]: one value for a thread's VEC points
MASKED = ("func f(x: {dt}[A, B, C], m: {dt}[A, B, 1]) -> {dt}[A, B, C] "
          "{ return softmax(x * 0.5 + m, axis=1) }")


def _run(source, dims, inputs=None, held=False):
    """The launched kernel's variant, having checked the results. The vector kernel
    stands in for the streaming one only, so unless ``held``, the host is made to find
    no strip held in registers (the simulator's sizes are all small enough)."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = inputs or random_inputs(func, dims, seed=6)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=PLAN)
    (kernel,) = _strips(module)
    py = module.python_module
    py.STRIP_SHARED_BYTES = 0  # none in shared memory (test_strips_shared.py)
    py.COLUMN_STAGES = False  # the streaming kernels (test_column_stages.py: the stages)
    if not held:
        py.STRIP_HELD_THREADS = 0  # no block holds its strip's values: stream them
    name = kernel["kernel_name"]
    launched = record_launches(py, [n for n in (name, f"{name}_streaming", f"{name}_vector")
                                    if hasattr(py, n)])
    assert_results_close(func, expected, module["f"](*inputs))
    assert len(launched) == 1
    return launched[0].removeprefix(name) or "_registers"


@pytest.mark.parametrize("source, dims", [
    (MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}),  # 16 points: 4 threads of 4
    (CENTRING, {"R": 13, "C": 12}),  # 3 vectors: the strip ends part-way
    (F16_MAX, {"A": 2, "B": 7, "C": 16}),  # 8 halves a vector
])
def test_vector_strips_agree_with_numpy(source, dims):
    assert _run(source, dims) == "_vector"


def test_vector_strips_stream_several_tiles():
    # 70 reduced values over 16 threads a point (simulator): several tiles, the last part-way
    assert _run(CENTRING, {"R": 70, "C": 8}) == "_vector"


@pytest.mark.parametrize("source, dims", [
    (CENTRING, {"R": 5, "C": 6}),  # 6 points: VECTOR_WIDTH does not divide them
    (F16_MAX, {"A": 2, "B": 3, "C": 4}),  # 4 halves: not a whole 8-half vector
])
def test_ragged_points_take_the_scalar_kernel(source, dims):
    assert _run(source, dims) != "_vector"


def test_a_strip_held_in_registers_keeps_the_held_kernel():
    """The held kernel reads x once; the vector kernel streams it once per loop."""
    assert _run(MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}, held=True) == "_registers"


def test_nan_and_inf_stay_in_their_lane():
    func = parse_program(MIDDLE_SOFTMAX, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"A": 2, "B": 5, "C": 8}, seed=7)
    x[0, 3, 1] = np.nan
    x[1, 2, 2], x[1, 4, 7] = np.inf, -np.inf
    assert _run(MIDDLE_SOFTMAX, {}, [x]) == "_vector"



@pytest.mark.parametrize("dt, dims", [
    ("f32", {"A": 2, "B": 9, "C": 8}),  # 16 points: 4 threads of 4, m a value a thread
    ("f32", {"A": 3, "B": 5, "C": 4}),  # a vector a row of points: each its own m
    ("f16", {"A": 2, "B": 7, "C": 16}),  # 8 halves a vector
])
def test_a_load_of_one_value_for_a_threads_points_keeps_the_vector_kernel(dt, dims):
    """m[a, b, 0] holds no point's last index: a scalar load a slot that the thread's
    lanes share, the other buffers still in vectors; m's NaN and inf reach every lane
    of their row."""
    source = MASKED.replace("{dt}", dt)
    func = parse_program(source, "t.fuse").funcs[0]
    x, m = random_inputs(func, dims, seed=4)
    m[0, 1, 0], m[1, 2, 0] = np.nan, -np.inf
    with np.errstate(invalid="ignore"):
        assert _run(source, {}, [x, m]) == "_vector"


@pytest.mark.parametrize("case", [3, 4])
def test_kernels_without_whole_vectors_have_no_vector_variant(case):
    # batch-norm statistics walk a nest over [N, H, W]; the masked mean stores its
    # quotient outside the loops (a top-level store: a lane's point indices not named)
    module = mlfuse.compile_source(CASES[case][0], "t.fuse", target="simulator",
                                   fuse_options=PLAN)
    (kernel,) = _strips(module)
    assert not hasattr(module.python_module, f"{kernel['kernel_name']}_vector")
