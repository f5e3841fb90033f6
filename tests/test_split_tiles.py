"""Split reductions through tiles (codegen/split_tiles.py): a reduction that reads a
transpose of what it reads otherwise (``sum(transpose(a) * b)``) is one split-rows
kernel walking squares of its two reduced axes, the permuted loads through shared
tiles, and gives what the program says (the NumPy interpreter of the program as
written) in f32, f16 and bf16, at sizes with ragged squares, several chunks, and NaN
and inf."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mlfuse
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_compiled_agrees, assert_drawn_program_agrees
from strategies import fuzz_settings, tiled_reduction_programs

PROGRAMS = {
    # a mean squared difference of a transpose and a tensor of its shape
    "mse_of_transpose": """
func g(a: {dt}[C, R], b: {dt}[R, C]) -> {dt}[] {
    d = transpose(a) - b
    return mean(d * d)
}""",
    # two reductions of the same product: one walk of the squares, two partials
    "sum_and_max": """
func g(a: {dt}[C, R], b: {dt}[R, C]) -> ({dt}[], {dt}[]) {
    p = transpose(a) * b
    return sum(p), max(p)
}""",
    # a batch of them: a point each, its reduced axes the last two
    "batched": """
func g(a: {dt}[N, C, R], b: {dt}[N, R, C]) -> {dt}[N] {
    return sum(transpose(a, [0, 2, 1]) * b, axis=[1, 2])
}""",
    # a nest of three levels: squares of the outer and inner, the middle fixed per square
    "three_levels": """
func g(a: {dt}[C, N, R], b: {dt}[R, N, C]) -> {dt}[] {
    return sum(abs(transpose(a, [2, 1, 0]) - b))
}""",
    # the difference also returned: stored as the squares are walked, along B
    "returned_difference": """
func g(a: {dt}[C, R], b: {dt}[R, C]) -> ({dt}[R, C], {dt}[]) {
    d = transpose(a) - b
    return d, mean(d * d)
}""",
    # a trailing axis of one value: squares of the levels before it, its index 0
    "trailing_one": """
func g(a: {dt}[C, R, 1], b: {dt}[R, C, 1]) -> {dt}[] {
    return sum(transpose(a, [1, 0, 2]) * b)
}""",
}
# the levels the squares take: the permuted loads' (R) and the innermost of more than one value
TILED_LEVELS = {"three_levels": [0, 2]}
DTYPES = ("f32", "f16", "bf16")
# ragged squares (13 and 19 are no multiple of the simulator's 8) ...
RAGGED = {"R": 19, "C": 13, "N": 3}
# ... and, over 40 x 48 values (past the simulator's 64 threads x 16 values a chunk),
# two chunks of squares a point
CHUNKS = {"R": 40, "C": 48, "N": 2}


def _source(name: str, dt: str) -> str:
    return PROGRAMS[name].strip().replace("{dt}", dt) + "\n"


def _kernels(source: str, dims: dict | None) -> list:
    module = compile_text(source, "t.fuse", level="fused",
                          fuse_options={"dims": dims} if dims else None)
    return [op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]


def _agrees(source: str, dims: dict, seed: int = 3, edit=None) -> None:
    func = parse_program(source, "t.fuse").funcs[0]
    args = random_inputs(func, dims, seed=seed)
    if edit is not None:
        edit(args)
    assert_compiled_agrees(source, args, dims, source.split("(")[0], fuse_options={"dims": dims})


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("sized", [False, True], ids=["symbols", "sizes"])
def test_reduction_of_a_transpose_is_one_kernel_through_tiles(name, sized):
    dims = {"R": 4096, "C": 1024, "N": 4} if sized else None
    for dt in DTYPES:
        (kernel,) = _kernels(_source(name, dt), dims)
        assert kernel["schedule"] == "split-rows"
        assert kernel["split_tiles"] == TILED_LEVELS.get(name, [0, 1])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("dt", DTYPES)
def test_split_through_tiles_agrees_with_the_program_as_written(name, dt):
    source = _source(name, dt)
    assert _kernels(source, RAGGED)[0]["split_tiles"]
    _agrees(source, RAGGED)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_chunks_of_squares_each_make_a_partial():
    source = _source("sum_and_max", "f32")
    module = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                   fuse_options={"dims": CHUNKS})
    # the host asks for two chunks at these sizes: each block walks half the squares
    assert "n_split = _split_rows(1, R * C)" in module.source
    assert module.python_module._split_rows(1, CHUNKS["R"] * CHUNKS["C"]) == 2
    _agrees(source, CHUNKS)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_split_through_tiles_keeps_nan_and_inf_where_numpy_has_them():
    def edit(args):
        a, b = args
        a[3, 7] = np.inf    # b[7, 3] finite: the product inf, the sum inf
        b[11, 2] = -np.inf  # with a[2, 11]: the sum inf - inf = nan, max stays inf
    _agrees(_source("sum_and_max", "f32"), RAGGED, edit=edit)


def test_a_short_side_walks_the_nest_flat():
    """Rows of 4: a warp's flat walk reads whole sectors of a already; a split
    reduction without tiles, one kernel."""
    source = _source("mse_of_transpose", "f32")
    (kernel,) = _kernels(source, {"R": 8192, "C": 4})
    assert kernel["schedule"] == "split-rows" and "split_tiles" not in kernel.attributes
    _agrees(source, {"R": 37, "C": 4})


def test_generated_first_stage_fills_a_tile_between_barriers():
    module = mlfuse.compile_source(_source("mse_of_transpose", "f16"), "t.fuse",
                                   target="simulator")
    text = module.source
    first = text[text.index("def g_0("):text.index("def g_0_combine(")]
    assert "a_tile = cuda.shared.array((8, 9), numba.float32)" in first
    assert first.count("cuda.syncthreads()") == 2
    assert "a_tile[lane_v, row] = np.float32(a[k1, k0])" in first
    assert "transpose = a_tile[row, lane_v]" in first


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@fuzz_settings("split_tiles")
@given(st.data())
def test_random_reductions_of_transposes_agree_with_numpy(data):
    """Random reductions of a transpose combined with a tensor of its shape (tests/
    strategies.py's ``tiled_reduction_programs``): through squares, split flat or
    otherwise, the kernels match."""
    assert_drawn_program_agrees(data, data.draw(tiled_reduction_programs()))
