"""A row kernel's short-row plan (mlfuse/codegen/short_rows.py): rows whose length is a
symbol run, at a call whose rows a warp holds, as warp-rows kernels whose group the host
picks from the call's row length (row_groups.group_width, copied into the module).
Checked against the NumPy interpreter under the simulator at tiny sizes: lengths that
are no multiple of the vector width or of the lanes, NaN and infinite rows, f16, a
reduction whose result one lane stores, group norm's rows through a reshape."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from mlfuse.dialects.fused import KernelOp
from mlfuse.hardware import get_target
from mlfuse.pipeline import compile_text
from mlfuse.row_groups import group_width, row_group, runtime_row_group

from helpers import assert_results_close
from strategies import fuzz_settings, inputs_for, short_row_programs
from test_row_variants import _check, _nan_rows

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows

SOFTMAX = "func f(x: {t}[R, C]) -> {t}[R, C] {{ return softmax(x, axis=1) }}"
LAYERNORM = ("func f(x: f32[R, C], g: f32[C], b: f32[C]) -> f32[R, C] {\n"
             "    return layernorm(x, g, b, axis=-1, eps=1e-5)\n}")
SUMSQ = "func f(x: f32[R, C]) -> f32[R] { return sum(x * x, axis=1) }"
GROUP_NORM = """
func f(x: f32[N, C, H, W], gamma: f32[C], beta: f32[C]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, 8, C / 8 * H * W])
    m = mean(rows, axis=2, keepdims=true)
    d = rows - m
    v = mean(d * d, axis=2, keepdims=true)
    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
    return y * reshape(gamma, [1, C, 1, 1]) + reshape(beta, [1, C, 1, 1])
}
"""


@pytest.mark.parametrize("per_thread, fewest", [(4, 8), (2, 8), (8, 32), (16, 32)])
def test_the_one_geometry_function(per_thread, fewest):
    """group_width is the least power of two holding the row at ``per_thread`` a thread
    and at least ``fewest`` threads (or the row's units); 0 past a warp."""
    for units in range(1, 600):
        width = group_width(units, per_thread, fewest)
        if not width:
            assert -(-units // per_thread) > 32
            continue
        assert width * per_thread >= units and width >= min(fewest, units)
        assert width == 1 or width // 2 * per_thread < units or width // 2 < min(fewest, units)


def test_the_module_calls_the_same_function():
    import mlfuse
    module = mlfuse.compile_source(SOFTMAX.format(t="f32"), "t.fuse", target="simulator")
    body = inspect.getsource(group_width).split('"""')[-1]
    assert body in module.source and "def _short_row_width(" in module.source
    assert all(module.python_module._short_row_width(n, 4, 8) == group_width(n, 4, 8)
               for n in range(1, 200))


@pytest.mark.parametrize("row, dtypes, group", [
    (100, ["f32"], (4, 8, 4)), (24, ["f32"], (4, 8, 1)), (120, ["f16"], (8, 8, 2)),
    (101, ["f32"], (1, 16, 7)), (50, ["f32"], (1, 8, 7)), (512, ["f32"], (4, 32, 4)),
    (20, ["f16"], (1, 8, 3))])
def test_runtime_group(row, dtypes, group):
    """Vectors where they fill the row (8 halves where all are f16), else values one at
    a time, half as many a thread, at least short_row_lanes (8) lanes: few lanes holding
    several values each, not a warp of lanes holding 1-2."""
    g = runtime_row_group(row, dtypes, get_target())
    assert (g.lanes, g.width, g.vectors) == group
    assert runtime_row_group(513, ["f32"], get_target()) is None
    assert runtime_row_group(257, ["f32"], get_target()) is None  # no vectors: a block per row


def _kernel(source: str) -> KernelOp:
    module = compile_text(source, "t.fuse")
    (k,) = [o for o in module.funcs[0].body.ops if isinstance(o, KernelOp)]
    return k


def test_explain_says_the_group_at_the_call_sizes():
    from mlfuse.transforms.fusion.schedules import choose_schedule
    k = _kernel(SOFTMAX.format(t="f32"))
    assert k["schedule"] == "row" and k["warp_rows"] == 1
    reason = choose_schedule(k, {"R": 131072, "C": 100}, get_target()).reason
    assert reason.startswith("100 values a row at these sizes, a length known per call: "
                             "warp-rows, 8 threads per row, 4 vector(s) of 4 values each")
    assert "runs them as warp-rows" in choose_schedule(k, {"R": 64, "C": 4096},
                                                        get_target()).reason
    # constant rows take warp-rows outright: no plan
    assert not _kernel("func f(x: f32[R, 16]) -> f32[R, 16] { return softmax(x, axis=1) }"
                       ).attributes.get("warp_rows")


def test_the_cost_model_prices_the_plan():
    """Rows of 100 at the call: every value in flight (warp-rows), not 32-thread blocks."""
    from mlfuse.transforms.fusion.cost import kernel_cost
    hw = get_target()
    k = _kernel(SOFTMAX.format(t="f32"))
    dims = {"R": 131072, "C": 100}
    with_plan = kernel_cost(k, dims, hw).threads
    del k.attributes["warp_rows"]
    assert with_plan == 131072 * 100 >= kernel_cost(k, dims, hw).threads


def _nan_tail(inputs):
    _nan_rows(inputs)
    inputs[0][0, -1] = -np.inf  # in the last lane's (maybe masked-tail) vector


@pytest.mark.parametrize("source, dims, kernel, width", [
    (SOFTMAX.format(t="f32"), {"R": 6, "C": 100}, "f_0_short_vector", 8),  # ragged vectors
    (SOFTMAX.format(t="f32"), {"R": 9, "C": 24}, "f_0_short_vector", 8),   # 6 vectors, 8 lanes
    (SOFTMAX.format(t="f32"), {"R": 5, "C": 37}, "f_0_short", 32),         # no whole vectors
    (SOFTMAX.format(t="f16"), {"R": 6, "C": 120}, "f_0_short_vector", 8),  # 8 halves a vector
    (SOFTMAX.format(t="f16"), {"R": 5, "C": 20}, "f_0_short", 32),
    (SOFTMAX.format(t="f32"), {"R": 5, "C": 600}, "f_0_vector", None),     # past a warp
    (LAYERNORM, {"R": 5, "C": 100}, "f_0_short_vector", 8),
    (SUMSQ, {"R": 5, "C": 256}, "f_0_short_vector", 16),  # one lane stores the row's sum
])
def test_the_host_picks_per_call(source, dims, kernel, width):
    module, launched = _check(source, dims, _nan_tail if "softmax" in source else None)
    assert launched == [kernel]
    if width:
        assert module.python_module._short_row_width(
            *((dims["C"] // (8 if "f16" in source else 4), 16 // (8 if "f16" in source else 4),
               8) if kernel.endswith("vector") else (dims["C"], 8, 32))) == width


@pytest.mark.parametrize("dims", [{"N": 1, "C": 16, "H": 1, "W": 2},   # rows of 4
                                  {"N": 1, "C": 8, "H": 3, "W": 3}])   # rows of 9
def test_group_norm_rows_through_a_reshape(dims):
    """Rows of C/8*H*W read at row_base + k (flat_rows.py), gamma per channel."""
    import mlfuse
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    from mlfuse.tools.checking import random_inputs

    from helpers import record_launches
    func = parse_program(GROUP_NORM, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=7)
    module = mlfuse.compile_source(GROUP_NORM, "t.fuse", target="simulator")
    launched = record_launches(module.python_module, ["f_0", "f_0_short"])
    assert "x_flat[numba.uint64(row_base" in module.source
    assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))
    assert launched == ["f_0_short"]


@fuzz_settings("short_rows")
@given(st.data())
def test_random_runtime_short_rows_agree_with_numpy(data):
    """short_row_programs with the row length a symbol bound per call (4..130 values,
    f32 or f16, prologues and epilogues): whichever kernel the host picks, the
    interpreter's result."""
    import mlfuse
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    program, dims = data.draw(short_row_programs(symbolic=True))
    source = program.source()
    note(f"{source} {dims}")
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, dims))
    expected = run_tensor(func, args)
    got = mlfuse.compile_source(source, "fuzz.fuse", target="simulator")["f"](*args)
    assert_results_close(func, expected, got)


def test_row_group_is_unchanged_for_constant_rows():
    """The constant-row groups (row_groups.row_group) read the same function."""
    assert (row_group(100, 4, 16, 8).width, row_group(24, 4, 16, 8).width) == (8, 8)
