"""Strips over columns split in two stages (codegen/column_stages.py): which kernels the
schedule choice gives the plan, and its kernels under the simulator against the NumPy
interpreter where the host takes them (a strip's values fit neither shared memory nor
registers: here the host's limits are lowered to zero)."""
import numpy as np
import pytest
from helpers import assert_results_close, record_launches
from hypothesis import given, note
from hypothesis import strategies as st
from strategies import (COLUMN_LEVEL_DIMS, COLUMN_MOMENT_DIMS, column_level_programs,
                        column_moments_programs, fuzz_settings, inputs_for)
from mlfuse.dialects.fused import KernelOp

import mlfuse
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs
from mlfuse.dialects.reductions import why_not_column_staged

CENTRING = "func f(x: f32[R, C]) -> f32[R, C] { return x - mean(x, axis=0, keepdims=true) }"
# the column means returned too: stored once a point, by its first chunk's thread
BOTH = ("func f(x: f32[R, C]) -> (f32[R, C], f32[1, C]) {\n"
        " m = mean(x, axis=0, keepdims=true)\n return x - m, m }")
# centred over a middle axis, scaled per channel: points (a, c), gamma read at c
MIDDLE = ("func f(x: f32[A, B, C], g: f32[C]) -> f32[A, B, C] {\n"
          " return (x - mean(x, axis=1, keepdims=true)) * g }")
SOFTMAX = "func f(x: f32[A, B, C]) -> f32[A, B, C] { return softmax(x, axis=1) }"
PLAN = {"dims": {"R": 1024, "C": 1024, "A": 16, "B": 1024}}


def _kernel(source):
    module = compile_text(source, "t.fuse", fuse_options=PLAN)
    (kernel,) = [o for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]
    return kernel


def test_which_strips_get_column_stages():
    kernel = _kernel(CENTRING)
    assert (kernel["schedule"], kernel["strip"]) == ("strips", "columns")
    assert kernel.attributes.get("split_stages") == 1
    assert _kernel(BOTH).attributes.get("split_stages") == 1
    # softmax's sum reads its max: two levels of partials, a stage and a combine each
    softmax = _kernel(SOFTMAX)
    assert softmax["schedule"] == "strips" and softmax.attributes.get("split_stages") == 1
    assert why_not_column_staged(softmax) is None


def test_compiled_for_symbols_a_column_variance_joins_its_means_pass():
    """A call's columns may be long: compiled with R unbound, the standardisation's
    variance is shifted into the mean's pass (moments.py), so the strips kernel has
    column stages for calls whose columns fit on chip nowhere."""
    source = ("func f(x: f32[R, C]) -> f32[R, C] {\n m = mean(x, axis=0, keepdims=true)\n"
              " d = x - m\n return d * rsqrt(mean(d * d, axis=0, keepdims=true) + 1e-5) }")
    (kernel,) = [o for o in compile_text(source, "t.fuse").funcs[0].body.ops
                 if isinstance(o, KernelOp)]
    assert (kernel["schedule"], kernel["strip"]) == ("strips", "columns")
    assert kernel.attributes.get("split_stages") == 1
    assert why_not_column_staged(kernel) is None


def _run(source, dims, inputs=None, force=None):
    """The kernels the host launched for a call whose strips fit on chip nowhere
    (``force``: more module globals to set first)."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = inputs or random_inputs(func, dims, seed=8)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=PLAN)
    py = module.python_module
    py.STRIP_SHARED_BYTES = py.STRIP_HELD_THREADS = 0  # neither shared memory nor registers
    for name, value in (force or {}).items():
        setattr(py, name, value)
    names = [n for n in vars(py) if n.startswith("f_0") and hasattr(getattr(py, n), "py_func")]
    launched = record_launches(py, names)
    got = module["f"](*inputs)
    assert_results_close(func, run_tensor(func, inputs), got)
    return launched, got


CENTRING_F16 = CENTRING.replace("f32", "f16")
# a per-row scale read once for a vector's points (a shared load), centred columns
ROW_SCALED = ("func f(x: f32[R, C], s: f32[R, 1]) -> f32[R, C] {\n"
              " return (x - mean(x, axis=0, keepdims=true)) * s }")
# two statistics, the second over the first's centred values is not one stage: the
# variance here is of x itself, both returned beside the normalised values
STATS_BOTH = ("func f(x: f32[R, C]) -> (f32[R, C], f32[1, C], f32[1, C]) {\n"
              " m = mean(x, axis=0, keepdims=true)\n"
              " q = mean(x * x, axis=0, keepdims=true)\n"
              " return (x - m) * rsqrt(q - m * m + 1e-5), m, q }")


# the epilogue's vector twin: lean where the points' values are their means
# (column_epilogue_lean.lean_epilogue_pays), bands of rows a thread elsewhere
@pytest.mark.parametrize("source, dims, first, epilogue", [
    (CENTRING, {"R": 300, "C": 8}, "f_0_stage0_vector", "f_0_epilogue_lean"),
    (CENTRING, {"R": 301, "C": 6}, "f_0_stage0", "f_0_epilogue"),  # 4 does not divide C
    (CENTRING_F16, {"R": 70, "C": 16}, "f_0_stage0_vector", "f_0_epilogue_lean"),
    (CENTRING_F16, {"R": 70, "C": 12}, "f_0_stage0", "f_0_epilogue"),  # 8 does not divide
    (BOTH, {"R": 97, "C": 12}, "f_0_stage0_vector", "f_0_epilogue_lean"),
    (STATS_BOTH, {"R": 61, "C": 8}, "f_0_stage0_vector", "f_0_epilogue_vector"),
    (ROW_SCALED, {"R": 90, "C": 8}, "f_0_stage0_vector", "f_0_epilogue_lean"),
    (MIDDLE, {"A": 2, "B": 130, "C": 5}, "f_0_stage0", "f_0_epilogue"),
    (MIDDLE, {"A": 3, "B": 70, "C": 8}, "f_0_stage0_vector", "f_0_epilogue_lean"),
])
def test_column_stages_agree_with_numpy(source, dims, first, epilogue):
    launched, _ = _run(source, dims)
    assert launched == [first, "f_0_combine", epilogue]


COLUMN_SOFTMAX = "func f(x: f32[R, C]) -> f32[R, C] { return softmax(x, axis=0) }"
# the variance of the centred values, compiled where strips hold the columns (R = 1024):
# two levels, the mean's and the variance's, left as written
CENTRED_VARIANCE = ("func f(x: f32[R, C]) -> (f32[R, C], f32[1, C]) {\n"
                    " m = mean(x, axis=0, keepdims=true)\n d = x - m\n"
                    " v = mean(d * d, axis=0, keepdims=true)\n return d * rsqrt(v + 1e-5), v }")


@pytest.mark.parametrize("source, dims, epilogue", [
    (SOFTMAX, {"A": 2, "B": 70, "C": 8}, "f_0_epilogue_lean"),
    (SOFTMAX, {"A": 2, "B": 33, "C": 5}, "f_0_epilogue"),
    (COLUMN_SOFTMAX, {"R": 300, "C": 8}, "f_0_epilogue_lean"),
    (CENTRED_VARIANCE, {"R": 129, "C": 8}, "f_0_epilogue_vector"),
])
@pytest.mark.parametrize("chunks", [None, 0])
def test_levels_of_reductions_take_a_stage_and_a_combine_each(source, dims, epilogue, chunks):
    """A reduction reading another's result (softmax's sum of exp(x - max)) is a level
    above it: each level's stage reads the lower levels' combined results and walks its
    own reductions, then its combine (by a block a point where THREAD_COMBINE_CHUNKS
    is 0), then the epilogue; the values match the interpreter."""
    force = None if chunks is None else {"THREAD_COMBINE_CHUNKS": chunks}
    launched, _ = _run(source, dims, force=force)
    combine = "f_0_combine" if chunks is None else "f_0_combine_blocks"
    assert launched == ["f_0_stage0", combine, "f_0_stage1", f"{combine}1", epilogue]


@pytest.mark.parametrize("source, dims", [(CENTRING, {"R": 300, "C": 8}),
                                          (STATS_BOTH, {"R": 300, "C": 8}),
                                          (MIDDLE, {"A": 2, "B": 130, "C": 5})])
def test_many_chunks_a_point_are_combined_by_a_block(source, dims):
    """Where a point's chunks pass what a thread combines (THREAD_COMBINE_CHUNKS, 1
    here), a block per point combines them into the first chunk's place, every reduce's
    (two in STATS_BOTH), and the epilogue reads them as before."""
    launched, _ = _run(source, dims, force={"THREAD_COMBINE_CHUNKS": 1})
    assert launched[1] == "f_0_combine_blocks" and len(launched) == 3


def test_column_stages_nan_stays_in_its_column_and_runs_repeat():
    func = parse_program(CENTRING, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"R": 200, "C": 8}, seed=3)
    x[150, 5] = np.nan
    launched, got = _run(CENTRING, {}, [x])
    out = np.asarray(got[0] if isinstance(got, tuple) else got)
    assert np.isnan(out[:, 5]).all() and not np.isnan(np.delete(out, 5, axis=1)).any()
    _, again = _run(CENTRING, {}, [x])
    again = np.asarray(again[0] if isinstance(again, tuple) else again)
    assert again.tobytes() == out.tobytes()


@pytest.mark.parametrize("rows", ["bands", "interleaved", "one"])
@pytest.mark.parametrize("source, dims", [(CENTRING, {"R": 301, "C": 8}),
                                          (ROW_SCALED, {"R": 90, "C": 8}),
                                          (STATS_BOTH, {"R": 61, "C": 8}),
                                          (MIDDLE, {"A": 3, "B": 70, "C": 8})])
def test_column_epilogue_rows_apart_or_one_a_thread_agree(rows, source, dims):
    """Each of the epilogue's row plans (hw.column_lanes_rows) wherever "auto" would
    pick another: a chunk's consecutive rows, its rows n_chunks apart, and the lean
    epilogue's row a thread."""
    import dataclasses

    from mlfuse.codegen import generate
    from mlfuse.hardware import get_target
    from mlfuse.runtime.loader import load_source
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=5)
    hw = dataclasses.replace(get_target(), column_lanes_rows=rows)
    text = generate(compile_text(source, "t.fuse", fuse_options=PLAN), "simulator", hw)
    py = load_source(text, f"rows_{rows}")
    py.STRIP_SHARED_BYTES = py.STRIP_HELD_THREADS = 0
    name = "f_0_epilogue_lean" if rows == "one" else "f_0_epilogue_vector"
    launched = record_launches(py, [name])
    got = py.ENTRY_POINTS["f"](*inputs)
    assert launched == [name]
    assert_results_close(func, run_tensor(func, inputs), got)


def test_an_unknown_row_order_for_the_column_epilogue_is_refused():
    import dataclasses

    from mlfuse.hardware import get_target
    with pytest.raises(ValueError, match="column_lanes_rows"):
        dataclasses.replace(get_target(), column_lanes_rows="diagonal")


# a column standardisation: the variance reads the mean, two levels of partials, until
# moments.py makes it shifted sums in the mean's pass (columns longer than a strip's
# threads hold, 16 x 512 values); then one level: column stages, reading x twice
STANDARDISE = ("func f(x: f32[R, C]) -> (f32[R, C], f32[1, C]) {\n"
               " m = mean(x, axis=0, keepdims=true)\n d = x - m\n"
               " v = mean(d * d, axis=0, keepdims=true)\n return d * rsqrt(v + 1e-5), v }")
LONG = {"dims": {"R": 100352, "C": 64}}


def test_column_variance_joins_the_means_pass_where_strips_hold_no_column():
    from mlfuse.dialects.loops import ReduceOp
    from mlfuse.transforms.fusion.cost import stage_count
    module = compile_text(STANDARDISE, "t.fuse", fuse_options=LONG)
    (kernel,) = [o for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]
    assert (kernel["schedule"], kernel["strip"], kernel["split_stages"]) == ("strips", "columns", 1)
    assert sum(isinstance(o, ReduceOp) for o in kernel.body.ops) == 3  # x - s, its square, x
    assert stage_count(kernel) == 2
    # columns a strip's threads hold: two passes over values in registers, unchanged
    held = _kernel(STANDARDISE)
    assert sum(isinstance(o, ReduceOp) for o in held.body.ops) == 2
    assert stage_count(held) == 3  # (its column stages: a level each)


@pytest.mark.parametrize("dims, first, epilogue", [
    # the first stage's sums read each column's sample, a lane's own value: the vector
    # first stage loads it for each lane (split_columns_vector.py); 4 not dividing C,
    # the scalar one, a thread a point
    ({"R": 300, "C": 8}, "f_0_stage0_vector", "f_0_epilogue_vector"),
    ({"R": 77, "C": 6}, "f_0_stage0", "f_0_epilogue"),
])
def test_column_variance_in_one_pass_agrees_with_numpy(dims, first, epilogue):
    """Against the interpreter; then at x = 1e4 + N(0, 1) the variance against float64:
    a sum of squares less n m^2 would lose every digit there, shifted by a sample of each
    column it keeps them (moments.py). (The normalised values there carry the mean's f32
    rounding, a thousandth of a standard deviation, whatever the formula.)"""
    func = parse_program(STANDARDISE, "t.fuse").funcs[0]
    (x,) = random_inputs(func, dims, seed=11)
    module = mlfuse.compile_source(STANDARDISE, "t.fuse", target="simulator", fuse_options=LONG)
    py = module.python_module
    py.STRIP_SHARED_BYTES = py.STRIP_HELD_THREADS = 0
    launched = record_launches(py, [n for n in vars(py) if n.startswith("f_0")
                                    and hasattr(getattr(py, n), "py_func")])
    assert_results_close(func, run_tensor(func, [x]), module["f"](x))
    assert launched == [first, "f_0_combine", epilogue]
    far = (1e4 + x).astype(np.float32)
    variance = np.asarray(module["f"](far)[1]).ravel()
    assert np.allclose(variance, far.astype(np.float64).var(axis=0), rtol=1e-3)


def test_column_variance_alone_is_one_split_pass_and_agrees_with_numpy():
    """With no loop after them, the shifted sums are a split plan's one level of
    partials (split-columns: chunks, then their combine), x read once."""
    source = ("func f(x: f32[R, C]) -> f32[1, C] {\n m = mean(x, axis=0, keepdims=true)\n"
              " d = x - m\n return mean(d * d, axis=0, keepdims=true) }")
    module = compile_text(source, "t.fuse", fuse_options=LONG)
    (kernel,) = [o for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]
    assert kernel["schedule"] == "split-columns"
    func = parse_program(source, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"R": 203, "C": 5}, seed=4)
    got = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=LONG)["f"](x)
    assert_results_close(func, run_tensor(func, [x]), got)


@fuzz_settings("column_moments")
@given(st.data())
def test_random_column_moments_agree_with_numpy(data):
    """Random variances over leading and middle axes (tests/strategies.py's
    ``column_moments_programs``) compiled for columns no strip holds, run where the
    host takes the plan of one level of partials (column stages, or split-columns for
    the variance alone): the kernels match the interpreter."""
    kernel, _ = _run_drawn(data, column_moments_programs(), COLUMN_MOMENT_DIMS)
    assert kernel["schedule"] in ("strips", "split-columns")


def _run_drawn(data, programs, dims: dict, watch=()):
    """A program drawn from ``programs`` compiled for ``dims``, run where the host takes
    its plan of partials (the strips' limits lowered to zero) against the interpreter;
    returns its kernel and the launches of the kernels ``watch``."""
    source, sizes = data.draw(programs)
    note(f"{source}sizes {sizes}")
    func = parse_program(source, "fuzz.fuse").funcs[0]
    # finite values, as the other strips properties draw: a centred zero against a
    # rounding residue of the mean (summed in another order), times an infinite scale, is
    # NaN against inf, which no agreement rule decides; NaN and inf in x: the next test
    args = data.draw(inputs_for(func, sizes, special=False))
    module = mlfuse.compile_source(source, "fuzz.fuse", target="simulator",
                                   fuse_options={"dims": dims})
    (kernel,) = module.kernels("f")
    py = module.python_module
    py.STRIP_SHARED_BYTES = py.STRIP_HELD_THREADS = 0
    launched = record_launches(py, list(watch))
    assert_results_close(func, run_tensor(func, args), module["f"](*args))
    return kernel, launched


@fuzz_settings("column_levels")
@given(st.data())
def test_random_column_levels_agree_with_numpy(data):
    """Random reductions over leading and middle axes of which one reads another's
    result (tests/strategies.py's ``column_level_programs``), run where the host takes
    column stages (strips' limits lowered to zero): a stage and a combine per level,
    then the epilogue, matching the interpreter."""
    kernel, launched = _run_drawn(data, column_level_programs(), COLUMN_LEVEL_DIMS,
                                  ["f_0_stage1"])
    assert kernel.attributes.get("split_stages") == 1
    assert launched == ["f_0_stage1"]


def test_column_moments_in_one_pass_keep_nan_and_inf_in_their_columns():
    """A NaN and an infinity in x: their columns' statistics and values are NaN, as the
    interpreter's two passes give (inf - inf), and the other columns are untouched."""
    func = parse_program(STANDARDISE, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"R": 90, "C": 8}, seed=2)
    x[40, 2], x[7, 5] = np.nan, np.inf
    module = mlfuse.compile_source(STANDARDISE, "t.fuse", target="simulator", fuse_options=LONG)
    py = module.python_module
    py.STRIP_SHARED_BYTES = py.STRIP_HELD_THREADS = 0
    y, v = (np.asarray(a) for a in module["f"](x))
    assert_results_close(func, run_tensor(func, [x]), (y, v))
    assert np.isnan(y[:, [2, 5]]).all() and np.isnan(v[0, [2, 5]]).all()
    assert not np.isnan(np.delete(y, [2, 5], axis=1)).any()


@pytest.mark.parametrize("dims, epilogue", [({"R": 301, "C": 8}, "f_0_epilogue_lean"),
                                            ({"R": 301, "C": 6}, "f_0_epilogue")])
def test_lean_epilogue_where_its_vectors_fit_else_the_scalar_one(dims, epilogue):
    """The lean epilogue (hw.column_lanes_rows "one") runs where VECTOR_WIDTH divides
    the points (its offsets 32-bit); elsewhere the host runs the scalar epilogue."""
    import dataclasses

    from mlfuse.codegen import generate
    from mlfuse.hardware import get_target
    from mlfuse.runtime.loader import load_source
    func = parse_program(CENTRING, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=11)
    hw = dataclasses.replace(get_target(), column_lanes_rows="one")
    text = generate(compile_text(CENTRING, "t.fuse", fuse_options=PLAN), "simulator", hw)
    assert "n_chunks" not in text[text.index("def f_0_epilogue_lean("):]
    py = load_source(text, f"lean_{dims['C']}")
    py.STRIP_SHARED_BYTES = py.STRIP_HELD_THREADS = 0
    launched = record_launches(py, ["f_0_epilogue_lean", "f_0_epilogue"])
    got = py.ENTRY_POINTS["f"](*inputs)
    assert launched == [epilogue]
    assert_results_close(func, run_tensor(func, inputs), got)
