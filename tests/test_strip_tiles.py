"""Strips through tiles (codegen/schedule_strip_tiles.py): reductions that read some
values along a reduced axis and the others along the innermost point axis
(``sum(transpose(a) + b, axis=1)``, a channel-wise dot of NCHW against NHWC over the
spatial axes) are one kernel whose blocks walk squares of a strip of points and the
reduced axis, the former loads through shared tiles, and give what the program says
(the NumPy interpreter of the program as written) in f32, f16 and bf16, at ragged
sizes, several strips and squares, with an epilogue after the reductions."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mlfuse
from mlfuse.dialects import parse_ir
from mlfuse.dialects.reductions import strip_tiles
from mlfuse.hardware import get_target, target_in_effect
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_compiled_agrees, assert_drawn_program_agrees
from strategies import fuzz_settings, tiled_reduction_programs

PROGRAMS = {
    # a row sum of a transpose plus a tensor of its shape
    "row_sum": """
func g(a: {dt}[C, R], b: {dt}[R, C]) -> {dt}[R] {
    return sum(transpose(a) + b, axis=1)
}""",
    # a channel-wise dot of NCHW against NHWC over the spatial axes
    "spatial_dot": """
func g(a: {dt}[N, C, H, W], b: {dt}[N, H, W, C]) -> {dt}[N, C] {
    return sum(transpose(a, [0, 2, 3, 1]) * b, axis=[1, 2])
}""",
    # two reductions of one product, one scaled per point after it
    "sum_and_max_scaled": """
func g(a: {dt}[C, R], b: {dt}[R, C], s: {dt}[R]) -> ({dt}[R], {dt}[R]) {
    p = transpose(a) * b
    return sum(p, axis=1) * s, max(p, axis=1)
}""",
}
DTYPES = ("f32", "f16", "bf16")
BIG = {"R": 65536, "C": 1024, "N": 64, "H": 32, "W": 32}
# ragged strips and squares (the simulator's are 8 wide), several of each
SMALL = {"R": 70, "C": 21, "N": 2, "H": 3, "W": 9}
LEVELS = {"spatial_dot": [1, 1]}  # [P, K]: the points' axis C, the nest's level W


def _source(name: str, dt: str) -> str:
    return PROGRAMS[name].strip().replace("{dt}", dt) + "\n"


def _one_sm():
    """A target of one SM: strips of 32 points fill it at the simulator's sizes (the
    choice asks for a strip an SM)."""
    return target_in_effect(dataclasses.replace(get_target(), sm_count=1))


def _kernels(source: str, dims: dict | None) -> list:
    module = compile_text(source, "t.fuse", level="fused",
                          fuse_options={"dims": dims} if dims else None)
    return [op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_mixed_reads_of_many_points_are_one_kernel_through_tiles(name):
    for dt in DTYPES:
        (kernel,) = _kernels(_source(name, dt), BIG)
        assert kernel["schedule"] == "strip-tiles"
        assert kernel["strip_tiles"] == LEVELS.get(name, [0, 0])


def test_few_points_keep_a_block_each():
    """Fewer strips than SMs: a block per point (the row schedule), one kernel."""
    (kernel,) = _kernels(_source("row_sum", "f32"), {"R": 1024, "C": 65536})
    assert kernel["schedule"] == "row"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("dt", DTYPES)
def test_strips_through_tiles_agree_with_the_program_as_written(name, dt):
    source = _source(name, dt)
    dims = {d: SMALL[d] for d in ("R", "C", "N", "H", "W") if d in source}
    with _one_sm():
        assert _kernels(source, dims)[0]["schedule"] == "strip-tiles"
        args = random_inputs(parse_program(source, "t.fuse").funcs[0], dims, seed=4)
        assert_compiled_agrees(source, args, dims, name, fuse_options={"dims": dims})


# b read at [i // 2, k]: the index i // 2 computed inside the reduction, or before it
PAIRED = """
func @f(%a: buf<f32[C, R]>, %b: buf<f32[Q, C]>) -> (buf<f32[R]>) {{
  %out = loops.alloc : buf<f32[R]>
  fused.kernel {{extents = [R], kernel_name = "f_0", schedule = "row"}} (%i: index) {{
    %0 = arith.constant {{value = 0.0}} : f32
    %two = arith.constant {{value = 2}} : index
    {outside}
    %s = loops.reduce %0 {{combiner = "add", extent = C}} : f32 (%k: index) {{
      {inside}
      %1 = loops.load %a, %k, %i : f32
      %2 = loops.load %b, %q, %k : f32
      %3 = arith.add %1, %2 : f32
      loops.yield %3
    }}
    loops.store %s, %out, %i
  }}
  return %out
}}
"""


def test_tiled_loads_indices_follow_the_fills_points():
    """The fill loads the tiles at its own points: a tiled load's index that follows the
    points' axis must be computed inside the reduction (where the fill computes it again),
    not before it (once, at the thread's point of the second phase)."""
    def kernel(text):
        module = parse_ir(text, "t.mlir")
        return next(o for o in module.funcs[0].body.ops if o.name == "fused.kernel")
    inside = kernel(PAIRED.format(outside="", inside="%q = arith.floordiv %i, %two : index"))
    assert strip_tiles(inside) is not None
    outside = kernel(PAIRED.format(outside="%q = arith.floordiv %i, %two : index", inside=""))
    assert strip_tiles(outside) is None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_strips_through_tiles_keep_nan_and_inf_where_numpy_has_them():
    source = _source("sum_and_max_scaled", "f32")
    dims = {"R": 70, "C": 21}
    a, b, s = random_inputs(parse_program(source, "t.fuse").funcs[0], dims, seed=5)
    a[3, 7] = np.inf     # point 7: the sum and the max inf
    b[9, 2] = -np.inf    # point 9: with a[2, 9], the sum -inf or nan
    a[5, 60] = np.nan    # point 60: nan both
    with _one_sm():
        assert_compiled_agrees(source, [a, b, s], dims, "nan", fuse_options={"dims": dims})


def test_generated_kernel_combines_each_points_rows_in_order():
    with _one_sm():
        module = mlfuse.compile_source(_source("row_sum", "f32"), "t.fuse", target="simulator",
                                       fuse_options={"dims": {"R": 70, "C": 21}})
    text = module.source
    assert "b_tile = cuda.shared.array((8, 9), numba.float32)" in text
    assert "b_tile[lane_v, row] = b[i0, k0]" in text        # the fill: lanes along k
    assert "b_v = b_tile[row, lane_v]" in text               # the walk: lanes along r
    assert "for r in range(1, 2):" in text                   # a point's 2 rows of threads
    assert "g_0[min(((R + 7) // 8), MAX_BLOCKS), 16]" in text


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@fuzz_settings("split_tiles")
@given(st.data())
def test_random_mixed_reductions_agree_with_numpy(data):
    """Random reductions of a transpose combined with a tensor of its shape over some
    trailing axes (tests/strategies.py's ``tiled_reduction_programs``), planned for one
    SM so that strips through tiles are chosen where they apply: the kernels match."""
    program = data.draw(tiled_reduction_programs(keep_points=True))
    with _one_sm():
        assert_drawn_program_agrees(data, program)
