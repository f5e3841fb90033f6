"""Strips over columns held in shared memory (mlfuse/codegen/strips_shared.py): the
vector strips kernel whose values read again by a later loop stay on chip, under the
simulator against the NumPy interpreter: strips ending part-way, several tiles, f16,
NaN and inf per lane, a budget too small for the widest strip (narrower strips) or for
any (the other kernels), points that whole vectors do not cover (the scalar shared
kernel), the geometry of mlfuse/strip_plan.py, and which programs have the variant
(strip_shared_min_rereads: values read again by two later loops or more, by default)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlfuse
from mlfuse.api import CompiledModule
from mlfuse.codegen import generate
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.runtime.loader import load_source
from mlfuse.codegen.schedule_strips import top_loops
from mlfuse.strip_plan import held_planes, strip_shared
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close, record_launches
from test_strips import MIDDLE_SOFTMAX, PLAN, _strips

CENTRING = "func f(x: f32[R, C]) -> f32[R, C] { return x - mean(x, axis=0, keepdims=true) }"
F16_SOFTMAX = "func f(x: f16[A, B, C]) -> f16[A, B, C] { return softmax(x, axis=1) }"
NCHW_SOFTMAX = "func f(x: f32[N, C, H, W]) -> f32[N, C, H, W] { return softmax(x, axis=1) }"
# planned at 512 rows: a strip's values (two planes of them too) fit the 40 KB budget at the
# planned sizes, so the model keeps one kernel
PLAN_SHARED = {"dims": {**PLAN["dims"], "R": 512}}
# two buffers read again (two planes), and a reduction of their product
TWO_INPUTS = ("func f(x: f32[R, C], y: f32[R, C]) -> f32[R, C] {\n"
              " s = sum(x * y, axis=0, keepdims=true)\n return x * s - y }")


def _compile(source, rereads=1):
    """The program planned at PLAN_SHARED's sizes, generated for the simulator with
    strip_shared_min_rereads ``rereads``: 1, the shared kernel wherever a later loop reads
    a value again (column centring's one re-read too: these tests check its mechanics)."""
    ir = compile_text(source, "t.fuse", level="fused", fuse_options=PLAN_SHARED)
    text = generate(ir, "simulator",
                    dataclasses.replace(get_target(), strip_shared_min_rereads=rereads))
    return CompiledModule(ir, text, "simulator", load_source(text, "t"))


def _run(source, dims, inputs=None, budget=None, widen=False):
    """The launched kernel's variant, having checked the results. ``widen``: the host
    may widen strips past the widest line at these tiny sizes (one block an SM is
    enough: strip_plan's short reduced axes)."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = inputs or random_inputs(func, dims, seed=8)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = run_tensor(func, inputs)
    module = _compile(source)
    (kernel,) = _strips(module)
    py = module.python_module
    if budget is not None:
        py.STRIP_SHARED_BYTES = budget
    if widen:
        py.SM_COUNT = py.STRIP_BLOCKS_PER_SM = 1
    name = kernel["kernel_name"]
    launched = record_launches(py, [n for n in (name, f"{name}_streaming", f"{name}_vector",
                                                f"{name}_shared", f"{name}_shared_scalar")
                                    if hasattr(py, n)])
    assert_results_close(func, expected, module["f"](*inputs))
    assert len(launched) == 1
    return launched[0].removeprefix(name) or "_registers"


@pytest.mark.parametrize("source, dims", [
    (MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}),  # 16 points: 2 strips of 2 vectors
    (CENTRING, {"R": 13, "C": 12}),  # 3 vectors: the last strip ends part-way
    (F16_SOFTMAX, {"A": 2, "B": 7, "C": 16}),  # 8 halves a vector
    (NCHW_SOFTMAX, {"N": 2, "C": 3, "H": 2, "W": 8}),  # channels: points H*W a batch
    (TWO_INPUTS, {"R": 11, "C": 8}),  # two planes
    (MIDDLE_SOFTMAX, {"A": 2, "B": 2, "C": 8}),  # 2 threads a point combine 4 lanes
    (F16_SOFTMAX, {"A": 1, "B": 3, "C": 16}),  # 4 threads a point, 8 lanes
])
def test_shared_strips_agree_with_numpy(source, dims):
    assert _run(source, dims) == "_shared"


@pytest.mark.parametrize("source, dims, kind", [
    (MIDDLE_SOFTMAX, {"A": 2, "B": 3, "C": 64}, "_shared"),  # 3 values: strips of 16 vectors
    (F16_SOFTMAX, {"A": 2, "B": 5, "C": 64}, "_shared"),  # f16: 8 lanes a vector
    (CENTRING, {"R": 6, "C": 30}, "_shared_scalar"),  # a point a thread, 30 wide
])
def test_short_reduced_axes_take_wide_strips(source, dims, kind):
    """A reduced axis shorter than a thread's share: the strip widens to the block's
    threads (strip_plan._strip_shared: half the block), its lanes combined in a scratch
    of twice the block a lane."""
    assert _run(source, dims, widen=True) == kind


def test_shared_strips_take_several_tiles():
    # 70 reduced values over 8 threads a point (simulator: 16 threads, strips of 2
    # vectors): 9 values a thread, tiles of 4, the last part-way
    assert _run(CENTRING, {"R": 70, "C": 8}) == "_shared"


@pytest.mark.parametrize("source, dims", [
    (CENTRING, {"R": 5, "C": 6}),  # 6 points: VECTOR_WIDTH does not divide them
    (NCHW_SOFTMAX, {"N": 2, "C": 3, "H": 2, "W": 6}),  # rows of 24 bytes: unaligned vectors
    (F16_SOFTMAX, {"A": 2, "B": 3, "C": 4}),  # 4 halves: not a whole 8-half vector
])
def test_ragged_points_take_the_scalar_shared_kernel(source, dims):
    assert _run(source, dims) == "_shared_scalar"


def test_a_small_budget_narrows_the_strip_then_gives_up():
    # 9 values a point (simulator: 16 threads a block): a strip of 2 vectors takes 8
    # threads a point, 2 vectors each (2 x 8 x 2 x 4 floats, 512 bytes); a strip of 1 vector
    # 16 threads, 1 vector each (256 bytes)
    assert strip_shared(4, 9, 2, 1, 16, 4, 1, 4, 512, 0, 0) == (2, 8, 512)
    assert strip_shared(4, 9, 2, 1, 16, 4, 1, 4, 511, 0, 0) == (1, 16, 256)
    assert _run(MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}, budget=256) == "_shared"
    # the scalar kernel: a point a thread, 2 points x 8 threads, 2 values each (128 bytes),
    # 1 point x 16 threads (64)
    assert _run(MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}, budget=255) == "_shared_scalar"
    assert _run(MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}, budget=64) == "_shared_scalar"
    assert _run(MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}, budget=63) == "_registers"


def test_nan_and_inf_stay_in_their_lane():
    func = parse_program(MIDDLE_SOFTMAX, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"A": 2, "B": 5, "C": 8}, seed=7)
    x[0, 3, 1] = np.nan
    x[1, 2, 2], x[1, 4, 7] = np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        assert _run(MIDDLE_SOFTMAX, {}, [x]) == "_shared"


@pytest.mark.parametrize("dims, kind", [
    ({"A": 2, "B": 9, "C": 8}, "_shared"),  # m a value a thread, its vector's lanes share it
    ({"A": 2, "B": 5, "C": 6}, "_shared_scalar"),  # 6 points a row: a point a thread
])
def test_a_mask_one_value_a_row_of_points_is_read_not_held(dims, kind):
    """A middle softmax's mask m[a, b, 0]: read again by each loop from global memory (one
    value for the strip's row of points), x alone held: one plane."""
    source = ("func f(x: f32[A, B, C], m: f32[A, B, 1]) -> f32[A, B, C] "
              "{ return softmax(x * 0.5 + m, axis=1) }")
    func = parse_program(source, "t.fuse").funcs[0]
    x, m = random_inputs(func, dims, seed=5)
    m[1, 3, 0] = np.inf
    with np.errstate(invalid="ignore"):
        assert _run(source, dims, [x, m]) == kind
    module = _compile(source)
    (kernel,) = _strips(module)
    assert held_planes(top_loops(kernel))[2] == 1


def test_loops_reading_nothing_again_have_no_shared_variant():
    # a plain column sum: one loop, nothing read twice
    module = mlfuse.compile_source(
        "func f(x: f32[R, C]) -> f32[C] { return sum(x, axis=0) }", "t.fuse",
        target="simulator", fuse_options=PLAN)
    for kernel in _strips(module):
        assert not hasattr(module.python_module, f"{kernel['kernel_name']}_shared")


@pytest.mark.parametrize("source, shared", [
    (CENTRING, False),  # the epilogue reads x again: one pass saved
    (TWO_INPUTS, False),  # x and y again, in one loop
    (MIDDLE_SOFTMAX, True),  # the sum and the epilogue: two passes saved
    (NCHW_SOFTMAX, True),
])
def test_the_shared_variant_needs_two_later_loops_reading_again(source, shared):
    """With one pass saved, a kernel reading x twice ran faster than a strip held in
    shared memory at every shape measured (hardware.strip_shared_min_rereads): by
    default only programs whose held values two later loops read have the variant, and
    the host falls through to the registers, column-stage or streaming kernels."""
    module = _compile(source, rereads=get_target().strip_shared_min_rereads)
    (kernel,) = _strips(module)
    py = module.python_module
    for suffix in ("_shared", "_shared_scalar"):
        assert hasattr(py, kernel["kernel_name"] + suffix) == shared
    assert (f"{kernel['kernel_name']}_shared[" in module.source) == shared


def _shared_source(module) -> str:
    """The vector shared kernel's source."""
    (kernel,) = _strips(module)
    text = module.source.split(f"def {kernel['kernel_name']}_shared(")[1]
    return text.split("\n\n\n")[0]


@pytest.mark.parametrize("source, dims, exps", [
    # softmax: the sum loop keeps exp(x - max) in x's plane, the epilogue reads it
    (MIDDLE_SOFTMAX, {"A": 2, "B": 9, "C": 8}, 1),
    # the epilogue reads x itself too: its plane stays x's, each loop computes its exp
    ("func f(x: f32[A, B, C]) -> f32[A, B, C] {\n m = max(x, axis=1, keepdims=true)\n"
     " e = exp(x - m)\n return e / sum(e, axis=1, keepdims=true) * x }",
     {"A": 2, "B": 9, "C": 8}, 2),
])
def test_a_costly_value_two_loops_compute_is_kept_in_a_plane(source, dims, exps):
    """strip_shared_reuse: the exp is computed once a value where a plane is free for it,
    with the same results."""
    assert _run(source, dims) == "_shared"
    kernel = _shared_source(_compile(source))
    assert kernel.count("exp(") == exps * 4, kernel  # (a line per lane of a vector)


def test_geometry():
    # softmax over 256 of [64, 256, 2048] f32 (H100 knobs): 128-byte rows, 32 KB, 16 threads a point
    assert strip_shared(64 * 2048 // 4, 256, 8, 2, 128, 4, 1, 4, 40 * 1024, 132, 4) == \
        (8, 16, 256 * 32 * 4)
    # 512 values of f16 vectors (8 lanes, held in 16 bits): 32 points fit 40 KB (64 do
    # not), 16 points give the grid its 4 blocks an SM
    assert strip_shared(16 * 1024 // 8, 512, 8, 2, 128, 8, 1, 2, 40 * 1024, 0, 0) == \
        (4, 32, 512 * 32 * 2)
    assert strip_shared(16 * 1024 // 8, 512, 8, 2, 128, 8, 1, 2, 40 * 1024, 132, 4) == \
        (2, 64, 512 * 16 * 2)
    # short extents: wider strips, fewer threads a point, until a thread holds 8 of the
    # reduced values, or the strip is half the block wide: 32 values of [512, 32, 1024]
    # by 4 threads of 8 (was 16 threads of 2: 32768 blocks of little work), 3 by two
    # threads (one of 2, one of 1): the reductions' scratch stays 2 x threads a lane
    assert strip_shared(512 * 1024 // 4, 32, 8, 2, 128, 4, 1, 4, 40 * 1024, 132, 4) == \
        (32, 4, 8 * 128 * 4 * 4)
    assert strip_shared(1 << 20, 3, 8, 2, 128, 4, 1, 4, 40 * 1024, 132, 4) == (64, 2, 2 * 128 * 4 * 4)
    # a block too narrow for the narrowest strip at half its threads: none
    assert strip_shared(1 << 20, 64, 8, 2, 2, 4, 1, 4, 40 * 1024, 132, 4) is None
    # too long for the narrowest strip: none
    assert strip_shared(1 << 20, 16384, 8, 2, 128, 4, 1, 4, 40 * 1024, 132, 4) is None


@settings(max_examples=4, deadline=None)
@given(st.sampled_from([MIDDLE_SOFTMAX, CENTRING, F16_SOFTMAX]), st.integers(1, 20),
       st.sampled_from([8, 16]), st.sampled_from([64, 256, 1 << 20]), st.integers(0, 99))
def test_any_extent_and_budget_agree(source, reduced, columns, budget, seed):
    """Whichever kernel the budget leaves (shared at some width, or another), the result
    is NumPy's: the reduced extent below, at or past a tile, the strip part-way."""
    dims = {"R": reduced, "C": columns} if source is CENTRING else \
        {"A": 2, "B": reduced, "C": columns}
    func = parse_program(source, "t.fuse").funcs[0]
    _run(source, dims, random_inputs(func, dims, seed=seed), budget=budget)
