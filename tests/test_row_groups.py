"""Short rows split over a group of lanes (mlfuse/row_groups.py, the warp-rows vector
variant): the choice of threads per row and vectors per thread from the row length and
dtype, what explain says of it, and the kernels against the NumPy interpreter under the
simulator at tiny sizes (ragged groups, NaN and infinite rows, f16)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from mlfuse.dialects.fused import KernelOp
from mlfuse.hardware import get_target
from mlfuse.pipeline import compile_text
from mlfuse.row_groups import row_group, target_row_group

from helpers import assert_results_close
from strategies import fuzz_settings, inputs_for, short_row_programs
from test_row_variants import _check, _nan_rows

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows

SOFTMAX = "func f(x: {t}[R, {n}]) -> {t}[R, {n}] {{ return softmax(x, axis=1) }}"
LAYERNORM = ("func f(x: {t}[R, {n}], g: {t}[{n}], b: {t}[{n}]) -> {t}[R, {n}] {{\n"
             "    return layernorm(x, g, b, axis=-1, eps=1e-5)\n}}")
SUMSQ = "func f(x: f32[R, {n}]) -> f32[R] {{ return sum(x * x, axis=1) }}"


@pytest.mark.parametrize("row, lanes, width, vectors", [
    (8, 4, 2, 1), (16, 4, 4, 1), (24, 4, 8, 1), (64, 4, 8, 2), (100, 4, 8, 4),
    (256, 4, 16, 4), (512, 4, 32, 4), (16, 8, 2, 1), (64, 8, 8, 1), (512, 8, 32, 2)])
def test_group_reads_whole_lines_or_whole_rows(row, lanes, width, vectors):
    """A lane per vector up to 8 lanes (a warp load reads neighbouring rows whole, or
    128 bytes of each), then up to 16 values a lane; a warp at most."""
    group = row_group(row, lanes, most_values=16, fewest_lanes=8)
    assert (group.width, group.vectors) == (width, vectors)
    assert group.width * group.slots >= row > (group.width * group.vectors - group.width) * lanes


def test_no_group_without_whole_vectors_or_past_a_warp():
    assert row_group(10, 4, 16, 8) is None and row_group(1024, 4, 16, 8) is None
    hw = get_target()
    # f16 rows of 12: not whole 16-byte vectors, whole 8-byte ones (4 halves)
    assert target_row_group(12, ["f16"], hw).lanes == 4
    assert target_row_group(16, ["f16", "f32"], hw).lanes == 4  # mixed: 4 values a vector
    assert target_row_group(16, ["f32"], dataclasses.replace(hw, vector_width=1)) is None


def _kernel(source: str, dims: dict) -> KernelOp:
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims})
    (k,) = [o for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]
    return k


@pytest.mark.parametrize("source, reason", [
    (SOFTMAX.format(t="f32", n=8), ("2 threads per row, 1 vector(s) of 4 values each; a warp's "
                                    "vector load reads 16 whole neighbouring rows; a reduction "
                                    "takes 1 shuffle step")),
    (SOFTMAX.format(t="f32", n=16), ("4 threads per row, 1 vector(s) of 4 values each; a warp's "
                                     "vector load reads 8 whole neighbouring rows")),
    (SOFTMAX.format(t="f32", n=24), ("8 threads per row, 1 vector(s) of 4 values each, the last "
                                     "2 vector slot(s) masked")),
    (LAYERNORM.format(t="f32", n=100), ("8 threads per row, 4 vector(s) of 4 values each, the "
                                        "last 7 vector slot(s) masked; a warp's vector load "
                                        "reads 32 neighbouring values of each of its rows")),
    (SUMSQ.format(n=256), "16 threads per row, 4 vector(s) of 4 values each"),
    (SOFTMAX.format(t="f16", n=64), ("8 threads per row, 1 vector(s) of 8 values each; a warp's "
                                     "vector load reads 4 whole neighbouring rows; a reduction "
                                     "takes 3 shuffle steps")),
    (SOFTMAX.format(t="f32", n=34), "32 threads per row, each value by itself"),
])
def test_explain_states_the_group(source, reason):
    k = _kernel(source, {"R": 1 << 20})
    assert k["schedule"] == "warp-rows"
    from mlfuse.transforms.fusion.schedules import choose_schedule
    assert reason in choose_schedule(k, {"R": 1 << 20}, get_target()).reason


def test_rows_past_a_warp_take_a_block():
    """Rows of 1024 f32 (past 32 threads x 16 values) and of run-time length: "row"."""
    assert _kernel(SOFTMAX.format(t="f32", n=1024), {"R": 1 << 16})["schedule"] == "row"
    assert _kernel(SOFTMAX.format(t="f32", n="C"), {"R": 1 << 16, "C": 256})["schedule"] == "row"


def _nan_rows_f16_safe(inputs):
    _nan_rows(inputs)
    inputs[0][0, -1] = -np.inf  # a -inf in the last (masked-tail) lane's vector


@pytest.mark.parametrize("source, dims, width", [
    (SOFTMAX.format(t="f32", n=24), {"R": 9}, 8),        # 6 vectors on 8 lanes
    (SOFTMAX.format(t="f16", n=64), {"R": 6}, 8),        # 8 halves a vector, a lane each
    (LAYERNORM.format(t="f32", n=100), {"R": 5}, 8),     # 25 vectors: 4, 3, 3, ... a lane
    (SOFTMAX.format(t="f32", n=34), {"R": 5}, 32),       # scalar group: no whole vectors
])
def test_group_kernels_match_numpy(source, dims, width):
    """Ragged groups (lanes with fewer or no vectors), NaN, inf and -inf rows."""
    module, launched = _check(source, dims, _nan_rows_f16_safe if "softmax" in source else None)
    assert f"width = {width}" in module.source
    assert launched == (["f_0"] if width == 32 else ["f_0_vector"])


def test_sum_of_rows_of_256_matches_numpy():
    """16 lanes a row, 4 vectors each: the reduction of a whole half warp."""
    module, launched = _check(SUMSQ.format(n=256), {"R": 3})
    assert "width = 16" in module.source and launched == ["f_0_vector"]


@fuzz_settings("short_rows")
@given(st.data())
def test_random_short_rows_agree_with_numpy(data):
    """Random reductions over rows of 4..130 (tests/strategies.py's ``short_row_programs``)
    with NaN, infinities and signed zeros in the inputs: whatever group runs them, the
    kernel matches the interpreter."""
    import mlfuse
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    program = data.draw(short_row_programs())
    source = program.source()
    note(source)
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, {}))
    expected = run_tensor(func, args)
    got = mlfuse.compile_source(source, "fuzz.fuse", target="simulator")["f"](*args)
    assert_results_close(func, expected, got)


def test_f16_and_ragged_groups_compile_for_sm90_without_spills(tmp_path):
    """What the H100 runs: f16 rows of 64 in 16-byte vectors of 8 halves (one load a lane),
    layernorm over rows of 100 (8 lanes, the last vectors masked); shuffles, no spills."""
    from test_ptx import kernels, toolchain_problem
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    path = tmp_path / "groups.fuse"
    path.write_text(SOFTMAX.format(t="f16", n=64).replace("func f", "func half") + "\n" +
                    LAYERNORM.format(t="f32", n=100).replace("func f", "func ragged"))
    found = {k["kernel"]: k for k in kernels(str(path))}
    for name, loads in (("half_0_vector", 1), ("ragged_0_vector", 12)):
        k = found[name]
        assert k["v4_loads"] == loads and k["shuffles"], k
        assert k["spill_bytes"] == 0 and k["f64"] == [], k


@pytest.mark.parametrize("source, rows", [(SOFTMAX.format(t="f32", n=24), 37),
                                          (LAYERNORM.format(t="f32", n=100), 9),
                                          (SOFTMAX.format(t="f16", n=16), 70)])
def test_a_group_may_take_several_rows_a_step(source, rows):
    """short_row_batch 3: the first row loop's loads of 3 rows issued before any of them is
    reduced, each row's values in its own slots; rows past the end (not a multiple of a
    step's rows) masked; NaN and infinite rows as NumPy."""
    from mlfuse.codegen import generate
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    from mlfuse.runtime.loader import load_source
    from mlfuse.tools.checking import random_inputs
    from numba import cuda

    from helpers import record_launches
    hw = dataclasses.replace(get_target(), short_row_batch=3)
    text = generate(compile_text(source, "t.fuse", level="fused"), "simulator", hw)
    assert "rows_per_block = 3 * group_rows" in text and ", 3), THREADS_PER_BLOCK" in text
    module = load_source(text, "batched_rows")
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"R": rows}, seed=3)
    _nan_rows_f16_safe(inputs)
    launched = record_launches(module, ["f_0", "f_0_vector"])
    got = module.f(*[cuda.to_device(a) for a in inputs])
    assert launched == ["f_0_vector"]
    assert_results_close(func, run_tensor(func, inputs), got.copy_to_host())
