"""Reduction schedules chosen by shape (mlfuse/transforms/fusion/schedules.py): which one
the fuse pass picks and why, and each one's kernels under the simulator against the
NumPy interpreter (odd sizes so chunks and groups end part-way, ranks 1-4, several
axes, NaN and inf)."""
import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs
from mlfuse.tools.explain import explain_module, format_text

from helpers import assert_results_close, record_launches


def kernels(source: str, dims: dict) -> list[KernelOp]:
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims})
    return [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]


def schedules(source: str, dims: dict) -> list[str]:
    return [k["schedule"] for k in kernels(source, dims)]


SUMSQ = "func f(x: f32[N]) -> f32[] { return sum(x * x) }"
COLSUM = "func f(x: f32[R, C]) -> f32[C] { return sum(x, axis=0) }"
SHORT_SOFTMAX = "func f(x: f32[R, 16]) -> f32[R, 16] { return softmax(x, axis=1) }"
MEAN_ALL = "func f(x: f32[R, C]) -> f32[] { return mean(exp(x) * 2.0) }"


@pytest.mark.parametrize("source, dims, expected", [
    (SUMSQ, {"N": 1 << 26}, ["split-rows"]),
    (SUMSQ, {}, ["split-rows"]),  # unbound: the host decides how many chunks
    (MEAN_ALL, {"R": 8192, "C": 8192}, ["split-rows"]),  # prologue, reduction, epilogue: 1
    (COLSUM, {"R": 16384, "C": 4096}, ["split-columns"]),  # measured faster than strips
    (COLSUM, {"R": 1024, "C": 1024}, ["strips"]),  # short columns: a block per strip
    (COLSUM, {"R": 1 << 20, "C": 8}, ["split-columns"]),  # few columns, long: two kernels
    (SHORT_SOFTMAX, {"R": 1 << 20}, ["warp-rows"]),
    ("func f(x: f32[R, C]) -> f32[R, C] { return softmax(x, axis=1) }",
     {"R": 16384, "C": 4096}, ["row"]),
    ("func f(x: f32[R, C]) -> f32[R] { return sum(x, axis=1) }", {"R": 4, "C": 1 << 24},
     ["split-rows"]),  # few long rows
])
def test_schedule_chosen_by_shape(source, dims, expected):
    assert schedules(source, dims) == expected


def test_no_one_thread_schedule_for_a_large_space():
    """A whole-tensor reduction never runs in one thread: split when it can be, else one
    block (here the second statistic needs the first: mean of squared deviations)."""
    var_all = ("func f(x: f32[R, C]) -> f32[] { m = mean(x)\n"
               "return mean((x - m) * (x - m)) }")
    for source in (SUMSQ, MEAN_ALL, var_all):
        for k in kernels(source, {"R": 4096, "C": 4096, "N": 1 << 24}):
            assert not (k["schedule"] == "pointwise" and not k.extent_list), source


def test_explain_names_the_schedule_and_why():
    module = compile_text(MEAN_ALL, "t.fuse", level="loops")
    text = format_text(explain_module(module, {"R": 8192, "C": 8192}))
    assert "[split-rows over []]" in text
    assert "schedule: 1 point(s) cannot fill" in text
    assert "kernels:       3 -> 1" in text


CASES = [
    # split-rows: full reductions (ranks 1-3), long rows; odd sizes end chunks part-way
    (SUMSQ, {"N": 3001}),
    (MEAN_ALL, {"R": 37, "C": 41}),
    ("func f(x: f32[A, B, C]) -> f32[] { return max(x) }", {"A": 3, "B": 17, "C": 29}),
    ("func f(x: f32[2, C]) -> (f32[2], f32[2]) { return sum(x, axis=1), min(x, axis=1) }",
     {"C": 2500}),
    ("func f(x: f32[N]) -> f32[] { m = mean(x)\n return sqrt(m * m + 1.0) }", {"N": 2049}),
    ("func f(x: f64[N]) -> f64[] { return sum(x) }", {"N": 1999}),
    ("func f(x: i32[N]) -> i32[] { return sum(x) }", {"N": 1999}),
    # split-columns: reduced axes ahead of the innermost, ranks 2-4, planned at sizes
    # where few columns have long reductions
    (COLSUM, {"R": 301, "C": 7}, {"R": 1 << 20, "C": 7}),
    ("func f(x: f32[R, C], b: f32[C]) -> f32[C] { return max(x + b, axis=0) * 2.0 }",
     {"R": 300, "C": 5}, {"R": 1 << 20, "C": 5}),
    ("func f(x: f32[A, B, C]) -> f32[C] { return mean(x, axis=[0, 1]) }", {"A": 9, "B": 31, "C": 3},
     {"A": 1024, "B": 1024, "C": 3}),
    ("func f(x: f32[A, B, C, D]) -> f32[B, D] { return sum(x, axis=[0, 2]) }",
     {"A": 7, "B": 2, "C": 19, "D": 3}, {"A": 1024, "B": 2, "C": 1024, "D": 3}),
    # warp-rows: short rows, one and several reductions, an epilogue along the row
    (SHORT_SOFTMAX, {"R": 37}),
    ("func f(x: f32[R, 5], g: f32[5]) -> f32[R, 5] { return layernorm(x, g, g, axis=-1, eps=1e-5) }",
     {"R": 19}),
    ("func f(x: f32[A, B, 3]) -> f32[A, B] { return sum(x * x, axis=2) }", {"A": 5, "B": 7}),
]


def _run(source, dims, inputs=None, plan=None):
    """Run ``source`` at ``dims`` under the simulator against NumPy; the fuse pass plans
    for the sizes ``plan`` (default: the target's default size for each dim)."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = inputs or random_inputs(func, dims, seed=3)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                   fuse_options={"dims": plan} if plan else None)
    got = module[func.sym_name](*inputs)
    got = assert_results_close(func, expected, got)
    return module, got


@pytest.mark.parametrize("source, dims, plan", [c + (None,) * (3 - len(c)) for c in CASES],
                         ids=[f"case{i}" for i in range(len(CASES))])
def test_schedule_agrees_with_numpy(source, dims, plan):
    module, _ = _run(source, dims, plan=plan)
    found = {k["schedule"] for f in module.ir.funcs for k in f.body.ops if isinstance(k, KernelOp)}
    assert found & {"split-rows", "split-columns", "warp-rows"}, found


def test_split_runs_several_chunks_and_is_deterministic():
    """The simulator's launch sizes still cut these reductions into several chunks; two
    calls give the same bits (partials combined in a fixed order, no atomics)."""
    module, first = _run(SUMSQ, {"N": 3001})
    assert module.python_module._split_rows(1, 3001) > 1
    columns = mlfuse.compile_source(COLSUM, "t.fuse", target="simulator", fuse_options=FEW_COLUMNS)
    py = columns.python_module
    assert py._split_columns(7, 301, py.SM_COUNT, py.VALUES_PER_THREAD) > 1
    func = parse_program(SUMSQ, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"N": 3001}, seed=3)
    again = module["f"](*inputs)
    assert np.asarray(again).tobytes() == np.asarray(first[0]).tobytes()


FEW_COLUMNS = {"dims": {"R": 1 << 20, "C": 3}}  # planned for: long columns, few of them


def test_split_launches_both_stages():
    module = mlfuse.compile_source(COLSUM, "t.fuse", target="simulator", fuse_options=FEW_COLUMNS)
    py = module.python_module
    launched = record_launches(py, ["f_0", "f_0_combine"])
    py.ENTRY_POINTS["f"](*[py.cuda.to_device(a) for a in
                           random_inputs(parse_program(COLSUM, "t").funcs[0], {"R": 70, "C": 3})])
    assert launched == ["f_0", "f_0_combine"]


@pytest.mark.parametrize("source, dims", [
    (SUMSQ.replace("sum(", "max("), {"N": 2100}),
    (COLSUM.replace("sum(", "min("), {"R": 90, "C": 3}),
    (SHORT_SOFTMAX, {"R": 9}),
    ("func f(x: f32[A, B, C]) -> f32[A, B, C] { return softmax(x, axis=1) }",
     {"A": 2, "B": 9, "C": 5}),  # strips
])
def test_nan_and_inf_follow_numpy(source, dims):
    func = parse_program(source, "t.fuse").funcs[0]
    (x,) = random_inputs(func, dims, seed=5)
    flat = x.reshape(-1)
    flat[[3, 50]] = np.nan  # max/min propagate NaN as NumPy's do
    flat[[7, 60]] = [np.inf, -np.inf]
    _run(source, dims, [x])


def test_group_reduction_twin_matches_shuffle_semantics():
    """The simulator's group reduction is the GPU's xor butterfly: lane l combines with
    l ^ offset for offset = width/2 .. 1. Check the twin against that on NumPy."""
    from mlfuse.codegen.helpers import helper_sources
    text = helper_sources({"_group_reduce_add"}, "simulator")[0]
    assert "tid ^ offset" in text and "value + partner" in text
    cuda_text = helper_sources({"_group_reduce_add"}, "cuda")[0]
    assert "shfl_xor_sync(0xFFFFFFFF, value, offset)" in cuda_text
    assert "value + cuda.shfl_xor_sync" in cuda_text  # same operand order: same bits


def test_hardware_knobs_exist():
    hw = get_target()
    assert hw.split_min_extent > hw.row_min_extent and hw.split_blocks_per_sm >= 1


def test_split_columns_walks_a_column_by_cursor():
    """The split-columns first stage reads a column's values at row_base + k * stride
    through a flat view, a cursor stepped by the stride a value, and guards a tile's
    slots by one 32-bit count: no 2-D index (with its wraparound selects) per value.
    Numerics at odd sizes (chunks ending part-way, a NaN column) under the simulator."""
    from mlfuse.codegen import generate
    source = generate(compile_text(COLSUM, "t.fuse", fuse_options={"dims": {"R": 1 << 20, "C": 8}}),
                      "cuda")
    first = source.split("def f_0(")[1].split("\ndef ")[0]
    assert "x_flat[numba.uint64(cursor)]" in first and "cursor += stride0" in first
    assert "x[" not in first and "n_here = numba.int32(min(hi - tile, VALUES_PER_THREAD))" in first
    middle = "func f(x: f32[A, B, C]) -> f32[A, C] { return max(x * 2.0, axis=1) }"
    func = parse_program(middle, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"A": 3, "B": 301, "C": 5}, seed=5)
    inputs[0][1, 7, 2] = np.nan
    module = mlfuse.compile_source(middle, "t.fuse", target="simulator",
                                   fuse_options={"dims": {"A": 3, "B": 1 << 20, "C": 5}})
    assert {k["schedule"] for k in module.ir.funcs[0].body.ops if isinstance(k, KernelOp)} \
        == {"split-columns"}
    got = assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))
    assert np.isnan(np.asarray(got[0])[1, 2]) and not np.isnan(np.asarray(got[0])[1, 1])


MASKED_POOL = """
func f(x: f32[B, S, D], m: f32[B, S, 1]) -> f32[B, D] {
    w = sigmoid(m)
    return sum(x * w, axis=1) / sum(w, axis=1)
}"""


def test_split_columns_computes_what_sibling_reduces_share_once():
    """sum(x * w) and sum(w) walk one loop: the first stage loads m and computes
    sigmoid(m) once a value, not once a reduce (masked mean pool 64x2048x1024: 0.343 ->
    0.214 ms with the wave fill below, H100). Numerics under the simulator."""
    from mlfuse.codegen import generate
    planned = {"dims": {"B": 64, "S": 2048, "D": 1024}}
    source = generate(compile_text(MASKED_POOL, "t.fuse", fuse_options=planned), "cuda")
    first = source.split("def f_0(")[1].split("\ndef ")[0]
    assert first.count("math.exp(") == 1 and first.count("m_flat[") == 1
    func = parse_program(MASKED_POOL, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"B": 2, "S": 150, "D": 5}, seed=4)
    module = mlfuse.compile_source(MASKED_POOL, "t.fuse", target="simulator",
                                   fuse_options=planned)
    assert [k["schedule"] for k in module.ir.funcs[0].body.ops if isinstance(k, KernelOp)] \
        == ["split-columns"]
    assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))


@pytest.mark.parametrize("points, extent", [(65536, 2048), (4096, 16384), (100000, 4096),
                                            (200000, 4096), (1, 1 << 26), (65536, 16),
                                            (7, 301), (135168 * 3, 8192), (16, 1 << 22),
                                            (1056, 1 << 20), (1057, 1 << 20)])
def test_split_columns_fills_its_last_wave(points, extent):
    """The chunk count leaves the last wave of resident threads fullest among every count
    that runs in at most 4 waves (65536 points: 2 chunks, 0.97 of a wave; 3 made 1.45),
    up to 128 chunks (a thread combines them), or many more where fewer points than fill
    a wave at 128 take a block to combine each (16 columns: 8448 chunks, a wave)."""
    from mlfuse.strip_plan import split_columns
    sms, values = 132, 16
    threads = sms * 1024
    cap = 128 if points * 128 >= threads else 65536
    most = max(1, min(extent // (4 * values), cap))

    def fill(n):
        return points * n / (-(-points * n // threads) * threads)
    n = split_columns(points, extent, sms, values)
    assert 1 <= n <= most
    rivals = [k for k in range(1, most + 1) if -(-points * k // threads) <= 4]
    if rivals:  # (more than 4 waves of points: one chunk)
        best = max(fill(k) for k in rivals)
        assert n == min(k for k in rivals if fill(k) == best)  # the fewest chunks on a tie
    else:
        assert n == 1
    if (points, extent) == (65536, 2048):
        assert n == 2
    if (points, extent) == (16, 1 << 22):
        assert n == 8448


def test_few_columns_of_many_rows_take_many_chunks_each_combined_by_a_block():
    """Column sums of 2 columns: more chunks than a thread of the second kernel combines
    (the simulator's one SM leaves 2 x 128 threads most of a wave idle); the blocks'
    combine agrees with NumPy and gives the same bits on every call."""
    module = mlfuse.compile_source(COLSUM, "t.fuse", target="simulator", fuse_options=FEW_COLUMNS)
    py = module.python_module
    assert py._split_columns(2, 9000, py.SM_COUNT, py.VALUES_PER_THREAD) > py.THREAD_COMBINE_CHUNKS
    launched = record_launches(py, [n for n in vars(py) if n.startswith("f_0")])
    func = parse_program(COLSUM, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"R": 9000, "C": 2}, seed=5)
    got = module["f"](*inputs)
    assert launched == ["f_0", "f_0_combine_blocks"]
    assert_results_close(func, run_tensor(func, inputs), got)
    assert np.asarray(module["f"](*inputs)).tobytes() == np.asarray(got).tobytes()


def test_split_columns_of_no_points_is_one_chunk():
    from mlfuse.strip_plan import split_columns
    assert split_columns(0, 300, 132, 16) == 1  # (the cost model may price an empty space)
