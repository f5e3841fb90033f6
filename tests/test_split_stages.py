"""Few long rows split across blocks (mlfuse/codegen/split_stages.py): the schedule's
choice and the cost model's (explain), the stages' kernels under the simulator
against the NumPy interpreter (several chunks per row, NaN and inf, f16, a statistic
also returned), and deterministic results."""
import re
from pathlib import Path

import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs
from mlfuse.tools.explain import explain_module, format_text

from hypothesis import given, note, strategies as st

from helpers import assert_results_close, record_launches
from strategies import fuzz_settings, inputs_for, split_stage_programs

GROUP_NORM = (Path(__file__).resolve().parent.parent / "examples" / "group_norm.fuse").read_text()
SOFTMAX = "func f(x: f32[R, C]) -> f32[R, C] { return softmax(x, axis=1) }"
LAYERNORM_F16 = """
func f(x: f16[R, C], g: f16[C], b: f16[C]) -> f16[R, C] {
    return layernorm(x, g, b, axis=-1, eps=1e-5)
}"""
L2NORM_BOTH = """
func f(x: f32[R, C]) -> (f32[R, 1], f32[R, C]) {
    n = sqrt(sum(x * x, axis=1, keepdims=true))
    return n, x / (n + 1e-6)
}"""


def _kernels(source: str, dims: dict | None) -> list[KernelOp]:
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims} if dims else None)
    return [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]


def _explain(source: str, dims: dict) -> str:
    return format_text(explain_module(compile_text(source, "t.fuse", level="loops"), dims))


@pytest.mark.parametrize("source, dims", [
    (GROUP_NORM, {"N": 32, "C": 256, "H": 64, "W": 64}),  # 256 rows of 131072
    (GROUP_NORM, {}),  # unbound: the host decides per call
    (SOFTMAX, {"R": 64, "C": 262144}),
])
def test_few_long_rows_keep_one_kernel_with_a_split_plan(source, dims):
    (kernel,) = _kernels(source, dims)
    assert kernel["schedule"] == "row" and kernel["split_stages"] == 1


def test_explain_says_when_the_rows_split_and_prices_it():
    text = _explain(GROUP_NORM, {"N": 32, "C": 256, "H": 64, "W": 64})
    assert "kernels:       13 -> 1" in text
    assert "a call with fewer than 264 rows longer than a block holds splits each across " \
           "blocks (2 kernels" in text
    # priced as the split plan: x read by each of two stages (mean and variance share
    # the first: moments.py), the output written once
    assert "bytes moved:   2.0 GiB -> 384.0 MiB" in text


def test_many_rows_that_fit_l2_stay_one_streaming_kernel():
    """512 rows of 65536 (softmax_long): the rows in flight fit L2, the streaming row
    kernel runs them (measured at eager's speed); the split plan is not priced in."""
    from mlfuse.hardware import get_target
    from mlfuse.transforms.fusion.cost import kernel_cost, row_split
    (kernel,) = _kernels(SOFTMAX, {"R": 512, "C": 65536})
    assert not row_split(kernel, {"R": 512, "C": 65536}, get_target())
    assert kernel_cost(kernel, {"R": 512, "C": 65536}, get_target()).launches == 1


def test_a_row_kernel_that_streams_from_dram_is_priced_so():
    """Without its split plan, group norm's fused row kernel at [32, 256, 64, 64] streams
    132 rows of 512 KB at once (past L2): x read three times at half occupancy, as
    measured (0.389 ms on the H100) before variance shared the mean's pass
    (moments.py); now read twice, ~0.29 ms."""
    from mlfuse.hardware import get_target
    from mlfuse.transforms.fusion.cost import kernel_cost
    dims = {"N": 32, "C": 256, "H": 64, "W": 64}
    (kernel,) = _kernels(GROUP_NORM, dims)
    kernel.attributes.pop("split_stages")
    seconds = kernel_cost(kernel, dims, get_target()).seconds(get_target())
    assert 0.25e-3 < seconds < 0.33e-3


def _run_split(source: str, dims: dict, inputs=None, seed=3):
    """Run ``source`` with its row kernels' split plan forced (the simulator's sizes are
    small) against the interpreter; returns the results and the kernels launched."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = inputs or random_inputs(func, dims, seed=seed)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    py = module.python_module
    py._split_stages = lambda points, extent, reread: True
    names = [n for n in vars(py) if re.search(r"(_stage\d+|_epilogue)(_vector)?$", n)]
    launched = record_launches(py, names)
    got = assert_results_close(func, expected, module[func.sym_name](*inputs))
    return got, launched, module


def test_group_norm_split_across_blocks_matches_the_interpreter():
    # rows of 2 * 5 * 110 = 1100 values: 2 chunks a row under the simulator's 64 threads
    # rows of 1100: VECTOR_WIDTH divides them and their bases, so the vector twins run
    got, launched, module = _run_split(GROUP_NORM, {"N": 1, "C": 16, "H": 5, "W": 110})
    assert launched == ["group_norm_0_stage0_vector", "group_norm_0_epilogue_vector"]
    assert module.python_module._split_stage_rows(8, 1100, 2) == 2


def _kernel(source: str, name: str) -> str:
    text = source[source.index(f"def {name}("):]
    return text[:text.index("\n\n\n")]


def test_stages_alternate_direction_over_their_chunks_and_combine_partials_in_one_loop():
    """Each stage walks its chunk the other way from the stage before it (the epilogue
    first re-reads what stage 0 read last: in L2 where the rows fit); the partials of a
    level are combined in one loop over the chunks. Rows of 1500 values in two chunks of
    tiles of 512 (the last partial): walked backwards, the partial tile comes first."""
    got, launched, module = _run_split(SOFTMAX, {"R": 3, "C": 1500})
    assert launched == ["f_0_stage0_vector", "f_0_stage1_vector", "f_0_epilogue_vector"]
    backwards = "lo - 1, -span):"
    for name, back in (("stage0", False), ("stage1", True), ("epilogue", False)):
        for twin in ("", "_vector"):
            kernel = _kernel(module.source, f"f_0_{name}{twin}")
            assert (backwards in kernel) == back, (name, twin)
    epilogue = _kernel(module.source, "f_0_epilogue_vector")
    # max's partials (level 0), then sum's (level 1): a loop each, both after the stages
    assert epilogue.count("in range(n_split):") == 2
    _, _, module = _run_split(GROUP_NORM, {"N": 1, "C": 16, "H": 5, "W": 110})
    epilogue = _kernel(module.source, "group_norm_0_epilogue_vector")
    assert backwards in epilogue
    loop = epilogue[epilogue.index("in range(n_split):"):]
    # the sum and the shifted sum of squares (both level 0) in the one loop
    assert epilogue.count("in range(n_split):") == 1
    assert loop.index("acc_partials[") < loop.index("acc_partials_1[") < loop.index("\n        m")


@pytest.mark.parametrize("dims", [
    {"N": 1, "C": 16, "H": 1, "W": 2},  # channels of 2 values: every vector spans two
    {"N": 1, "C": 16, "H": 3, "W": 6},  # channels of 18: some vectors cross, most do not
])
def test_group_norm_vector_lanes_share_the_channel_division_where_they_agree(dims):
    # the epilogue twin divides once per vector (lane_uniform.py); its lanes divide again
    # only across a channel boundary, and the result is the interpreter's either way
    _, launched, module = _run_split(GROUP_NORM, dims)
    assert launched == ["group_norm_0_stage0_vector", "group_norm_0_epilogue_vector"]
    text = module.source[module.source.index("def group_norm_0_epilogue_vector"):]
    lanes = text[text.index("for lane in range"):]
    assert "lanes_agree = " in text and "if not lanes_agree:" in lanes
    assert text.index("lanes_agree = ") < text.index("for lane in range")


def test_split_stage_vector_twins_divide_in_32_bits_only_where_every_index_fits():
    # the twins' index divisions are 32-bit only (no 64-bit path: its registers cost group
    # norm's epilogue its second vector in flight); the host runs them only where every
    # buffer and the space of row values have fewer than 2**31 values
    _, launched, module = _run_split(GROUP_NORM, {"N": 1, "C": 16, "H": 5, "W": 110})
    assert launched == ["group_norm_0_stage0_vector", "group_norm_0_epilogue_vector"]
    source = module.source
    twin = source[source.index("def group_norm_0_epilogue_vector"):]
    twin = twin[:twin.index("\n\n\n")]
    scalar = source[source.index("def group_norm_0_epilogue("):]
    scalar = scalar[:scalar.index("\n\n\n")]
    assert "_divmod_index32(" in twin and "_divmod_index(" not in twin
    assert "_divmod_index(" in scalar and "_divmod_index32(" not in scalar
    test = next(line for line in source.splitlines() if "whole vectors, aligned" in line)
    # x and the output [N, C, H, W], gamma and beta [C], the rows' space
    for fits in ("N * C * H * W < 2**31", " C < 2**31", "(n_points) * (C_H_W_8) < 2**31"):
        assert fits in test


def test_group_norm_split_rows_not_whole_vectors_take_the_scalar_stages():
    # rows of 2 * 1 * 3 = 6 values: not whole vectors, so the scalar stages run
    _, launched, _ = _run_split(GROUP_NORM, {"N": 1, "C": 16, "H": 1, "W": 3})
    assert launched == ["group_norm_0_stage0", "group_norm_0_epilogue"]


def test_split_stage_vectors_on_a_misaligned_buffer_take_the_scalar_stages():
    # x one float past a 16-byte boundary: the host's check takes the scalar stages (the
    # simulated vector access would fault there, as the GPU's would)
    from numba import cuda
    func = parse_program(SOFTMAX, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"R": 2, "C": 1200}, seed=2)
    shifted = cuda.to_device(np.concatenate([np.zeros(1, x.dtype), x.ravel()]))[1:].reshape(x.shape)
    module = mlfuse.compile_source(SOFTMAX, "t.fuse", target="simulator")
    py = module.python_module
    py._split_stages = lambda points, extent, reread: True
    launched = record_launches(py, [n for n in vars(py) if re.search(r"_stage\d|_epilogue", n)])
    assert_results_close(func, run_tensor(func, [x]), module["f"](shifted))
    assert launched == ["f_0_stage0", "f_0_stage1", "f_0_epilogue"]


def test_softmax_split_with_nan_and_inf_follows_numpy_and_is_deterministic():
    func = parse_program(SOFTMAX, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"R": 3, "C": 1500}, seed=5)
    x[0, [3, 1400]] = np.nan  # a NaN in one chunk spreads over its whole row
    x[1, 7] = np.inf
    x[2, 1499] = -np.inf
    first, launched, module = _run_split(SOFTMAX, {}, [x])
    assert launched == ["f_0_stage0_vector", "f_0_stage1_vector", "f_0_epilogue_vector"]
    again = module["f"](x)
    assert np.asarray(again).tobytes() == np.asarray(first[0]).tobytes()


def test_layernorm_f16_split():
    _run_split(LAYERNORM_F16, {"R": 2, "C": 1100})


def test_a_statistic_also_returned_is_stored_once_per_row():
    got, launched, _ = _run_split(L2NORM_BOTH, {"R": 3, "C": 1300})
    assert launched == ["f_0_stage0_vector", "f_0_epilogue_vector"]


FULL_RETURNED = """
func f(x: f32[N]) -> (f32[N], f32[]) {
    y = x * 2.0 + 1.0
    return y, mean(y)
}"""
ROWS_RETURNED = """
func f(x: f32[R, C], r: f32[R, C]) -> (f32[R, C], f32[R, 1]) {
    h = x + r
    return h, sum(h * h, axis=1, keepdims=true)
}"""


@pytest.mark.parametrize("source, dims, vector", [
    (FULL_RETURNED, {"N": 3000}, "_vector"),  # whole vectors: the twin
    (FULL_RETURNED, {"N": 2999}, "_vector"),  # one point: its last vector a lane at a time
    (ROWS_RETURNED, {"R": 3, "C": 1300}, "_vector"),
    (ROWS_RETURNED, {"R": 2, "C": 1299}, ""),  # rows off vectors: the scalar stage
])
def test_a_prologue_value_also_returned_is_stored_in_the_reductions_pass(source, dims, vector):
    """The for storing y reads no reduction: stage 0 stores it as its chunk is reduced
    (one walk of x), and the epilogue only combines the partials."""
    _, launched, module = _run_split(source, dims)
    assert launched == [f"f_0_stage0{vector}", "f_0_epilogue"]
    for twin in ("", "_vector"):
        stage = _kernel(module.source, f"f_0_stage0{twin}")
        assert "(storing as it goes)" in stage
        assert stage.count("for base in range(") == 1  # one walk of the chunk
    epilogue = _kernel(module.source, "f_0_epilogue")
    assert "for base in" not in epilogue and "x[" not in epilogue and "x_flat[" not in epilogue
    assert "f_0_epilogue_vector" not in module.source  # (it moves no vector)


class _Grids:
    """A kernel that notes the grid of each launch."""

    def __init__(self, kernel):
        self.kernel, self.grids = kernel, []

    def __getitem__(self, config):
        self.grids.append(config[0])
        return self.kernel[config]


@pytest.mark.parametrize("source, dims, points", [(FULL_RETURNED, {"N": 3000}, 1),
                                                  (ROWS_RETURNED, {"R": 3, "C": 1300}, 3)])
def test_an_epilogue_that_only_combines_takes_a_block_per_point(source, dims, points):
    """Its loops stored in stage 0, the epilogue is a block per point whose threads
    combine the partials (more chunks than threads here), not a block per (point,
    chunk) each thread of which combined all of them."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=4)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    py = module.python_module
    py._split_stages = lambda points, extent, reread: True
    py._split_stage_rows = lambda points, extent, blocks: 70
    py.f_0_epilogue = epilogue = _Grids(py.f_0_epilogue)
    assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))
    assert epilogue.grids == [points]
    assert "a block per point combines the partials" in _kernel(module.source, "f_0_epilogue")


@fuzz_settings("split_stages")
@given(st.data())
def test_random_split_plans_with_values_stored_as_reduced_agree_with_numpy(data):
    """Random reductions (whole tensors, a few rows) returned beside their prologue's
    value (tests/strategies.py's ``split_stage_programs``), run with the split plan
    forced: the kernels match the interpreter, and without a value reading the reduction
    one kernel's split plan whose epilogue walks x no more."""
    source, sizes = data.draw(split_stage_programs())
    note(f"{source}sizes {sizes}")
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, sizes, special=False))
    _, launched, module = _run_split(source, sizes, args)
    if "y - s" not in source:  # (with it, the plan is the cost model's: any kernels)
        assert launched[0].startswith("f_0_stage0")
        assert "for base in" not in _kernel(module.source, "f_0_epilogue")


@pytest.mark.parametrize("n", [1, 3, 2997, 3001])
def test_one_point_off_whole_vectors_runs_the_vector_twin_its_last_vector_by_lanes(n):
    """A whole tensor's sum of N values, N no multiple of VECTOR_WIDTH: the one point's
    row starts aligned, so the vector stages run, the vector that passes N moved a value
    a lane (loads, stores) and its lanes past N idle; the results as the interpreter's."""
    source = FULL_RETURNED.replace("return y, mean(y)", "return y, sqrt(sum(y * y))")
    _, launched, module = _run_split(source, {"N": n})
    assert launched == ["f_0_stage0_vector", "f_0_epilogue"]
    stage = _kernel(module.source, "f_0_stage0_vector")
    assert stage.count("if first + VECTOR_WIDTH <= hi:") == 2  # the fill and the drain
    assert "if k0 < hi:" in stage


def test_a_for_reading_a_statistic_stays_in_the_epilogue():
    """Layernorm's output reads both statistics: its for is the epilogue's, while a
    centred value stored beside it (it reads only the mean) needs the mean's level."""
    source = """
func f(x: f32[R, C]) -> (f32[R, C], f32[R, C]) {
    d = x - mean(x, axis=1, keepdims=true)
    return d, d / sqrt(mean(d * d, axis=1, keepdims=true) + 1e-5)
}"""
    _, launched, module = _run_split(source, {"R": 2, "C": 1100})
    assert launched[-1] == "f_0_epilogue_vector"
    assert "for base in" in _kernel(module.source, "f_0_epilogue")


def test_a_stage_without_whole_vectors_keeps_its_scalar_kernel_in_the_vector_plan():
    """The sum over f64 values moves no vector (f64 has none), the epilogue's f32
    stores do: the vector plan runs the scalar stage 0, then the epilogue's twin (its
    chunks cut at whole vectors: the partials still cover each row once)."""
    source = ("func f(x: f64[R, C]) -> f32[R, C] {\n"
              "    y = cast(x, dtype=f32)\n"
              "    return y * sum(y, axis=1, keepdims=true)\n}\n")
    _, launched, module = _run_split(source, {"R": 2, "C": 1100})
    assert launched == ["f_0_stage0", "f_0_epilogue_vector"]
    assert not hasattr(module.python_module, "f_0_stage0_vector")


def test_bf16_stages_move_vectors_of_its_bits_widened_and_rounded_as_scalars_are():
    """bf16 loads and stores are vectors of 8 words (16 bytes), widened to f32 and
    rounded back as ``_bf16_load`` / ``_bf16_store`` do: results as the interpreter's."""
    source = ("func f(x: bf16[R, C]) -> bf16[R, C] {\n"
              "    y = cast(x, dtype=f32)\n"
              "    return cast(y * sum(y, axis=1, keepdims=true), dtype=bf16)\n}\n")
    _, launched, _ = _run_split(source, {"R": 2, "C": 1104})
    assert launched == ["f_0_stage0_vector", "f_0_epilogue_vector"]


@pytest.mark.parametrize("points, extent, blocks, chunks", [
    (256, 131072, 2, 1),  # 256 blocks: a wave of 264 already
    (128, 65536, 2, 2),  # 256 blocks (_split_rows' 5 chunks made 640: 2.4 waves)
    (64, 131072, 2, 4),  # (its 9: 576 blocks, 2.2 waves)
    (1, 2 ** 26, 2, 264),
    (1, 2 ** 26, 4, 528),  # four blocks resident an SM: a wave of 528
    (8, 1100, 2, 1),  # a chunk is at least a pass of the block's threads
])
def test_split_stage_chunks_fill_one_wave(points, extent, blocks, chunks):
    # H100's constants: 132 SMs, ``blocks`` blocks of 512 threads resident an SM (the
    # stages' launch bounds). Each epilogue block first combines its row's partials, so
    # one wave of longer chunks beat more waves of shorter ones (docs/perf-notes.md)
    from mlfuse.codegen.helpers import _SPLIT_STAGE_ROWS
    space = {"SM_COUNT": 132, "THREADS_PER_BLOCK": 512, "VALUES_PER_THREAD": 16}
    exec(_SPLIT_STAGE_ROWS, space)
    assert space["_split_stage_rows"](points, extent, blocks) == chunks


@pytest.mark.parametrize("source, constant", [
    (GROUP_NORM, "SPLIT_STAGE_MIN_BLOCKS"),  # its epilogue walks the rows: spills at 32
    (FULL_RETURNED, "SPLIT_COMBINE_PLAN_MIN_BLOCKS"),  # its epilogue only combines
])
def test_the_plan_resident_blocks_follow_what_its_epilogue_walks(source, constant):
    """The stages' launch bounds and the host's chunks name one constant per plan: more
    blocks of fewer registers only where the epilogue walks nothing again."""
    from mlfuse.codegen import generate
    source = generate(compile_text(source, "t.fuse"), target="cuda")
    stages = re.findall(r"launch_bounds=\(THREADS_PER_BLOCK, (\w+)\)\)\ndef \w+_(?:stage\d|epilogue)\(",
                        source)
    assert stages and set(stages) == {constant}
    assert re.search(rf"_split_stage_rows\([^\n]*, {constant}\)", source)


MAX_AND_SQUARES = """
func f(x: f32[R, C]) -> f32[R] {
    y = x * 2.0
    return max(y, axis=1) + sum(y * y, axis=1)
}"""
MEAN_AND_MAX = "func f(x: f32[R, C]) -> f32[R] { return max(x, axis=1) - mean(x, axis=1) }"


@pytest.mark.parametrize("source", [MAX_AND_SQUARES, MEAN_AND_MAX])
def test_independent_reductions_walk_each_chunk_once(source):
    """Two reductions neither of which reads the other, an init or a division between
    them in the source's order (fusion/sibling_order.py makes them neighbours): the
    first stage walks each chunk once, reading x once a value, and matches the
    interpreter."""
    got, launched, module = _run_split(source, {"R": 3, "C": 1500})
    assert launched == ["f_0_stage0_vector", "f_0_epilogue"]
    for name in ("f_0_stage0", "f_0_stage0_vector"):
        kernel = _kernel(module.source, name)
        assert len(re.findall(r"x_flat[\[,]", kernel)) == 1, name
