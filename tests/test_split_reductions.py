"""split-reductions: a reduction whose axes a kept axis separates (group norm over
channels-last) runs as a coalesced column reduction then one over the shorter inner
axes, and gives what the program says (the NumPy interpreter of the program as
written, before the pass) in f32, f16 and bf16, NaN and inf included."""
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from mlfuse.dialects import tensor as T
from mlfuse.ir.types import symbols_of
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs
from mlfuse.transforms.split_reductions import split_axes

from helpers import assert_compiled_agrees
from strategies import fuzz_settings, inputs_for, interleaved_reduction_programs

PROGRAMS = {
    # group norm over channels-last, 4 groups of C/4 channels, scaled and shifted
    "group_norm_nhwc": """
func g(x: {dt}[N, H, W, C], gamma: {dt}[C], beta: {dt}[C]) -> {dt}[N, H, W, C] {
    r = reshape(x, [N, H * W, 4, C / 4])
    m = mean(r, axis=[1, 3], keepdims=true)
    d = r - m
    v = mean(d * d, axis=[1, 3], keepdims=true)
    return reshape(d * rsqrt(v + 1e-5), [N, H, W, C]) * gamma + beta
}""",
    # the same over a 5-d view, the spatial axes apart, statistics also returned
    "group_norm_nhwc_5d_stats": """
func g(x: {dt}[N, H, W, C]) -> ({dt}[N, H, W, C], {dt}[N, 1, 1, 2, 1]) {
    r = reshape(x, [N, H, W, 2, C / 2])
    m = mean(r, axis=[1, 2, 4], keepdims=true)
    v = mean((r - m) * (r - m), axis=[1, 2, 4], keepdims=true)
    return reshape((r - m) * rsqrt(v + 1e-5), [N, H, W, C]), v
}""",
    # sums, maxima and minima over [0, 2] of [B, S, D], keepdims false
    "associative_kinds": """
func g(x: {dt}[B, S, 4]) -> ({dt}[S], {dt}[S], {dt}[S]) {
    return sum(x, axis=[0, 2]), max(x, axis=[0, 2]), min(x * 2.0, axis=[0, 2])
}""",
    # squared deviations from a value that is no mean of them
    "deviation_from_parameter": """
func g(x: {dt}[B, S, 4], c: {dt}[1, S, 1]) -> {dt}[1, S, 1] {
    return mean((x - c) * (x - c), axis=[0, 2], keepdims=true)
}""",
}
DTYPES = ("f32", "f16", "bf16")
TINY = {"N": 2, "H": 3, "W": 5, "C": 8, "B": 17, "S": 3}


def _source(name: str, dt: str) -> str:
    return PROGRAMS[name].strip().replace("{dt}", dt) + "\n"


def _dims(func, sizes: dict) -> dict:
    return {d: sizes[d] for a in func.args for d in symbols_of(a.type.shape)}


def _agrees(source: str, args: list) -> None:
    func = parse_program(source, "t.fuse").funcs[0]
    assert_compiled_agrees(source, args, _dims(func, TINY), source.split("(")[0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("dt", DTYPES)
def test_split_reduction_agrees_with_the_program_as_written(name, dt):
    source = _source(name, dt)
    func = parse_program(source, "t.fuse").funcs[0]
    _agrees(source, random_inputs(func, _dims(func, TINY), seed=5))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_split_reductions_keep_nan_and_inf_where_numpy_has_them():
    source = _source("associative_kinds", "f32")
    func = parse_program(source, "t.fuse").funcs[0]
    (x,) = random_inputs(func, _dims(func, TINY), seed=6)
    x[3, 0, 1] = np.nan      # column 0: every result nan
    x[5, 1, 2] = np.inf      # column 1: sum and max inf
    x[9, 2, 0] = -np.inf     # column 2: sum and min -inf
    _agrees(source, [x])


def _tensor_reductions(source: str, dims: dict | None) -> list:
    options = {"dims": dims} if dims else None
    module = compile_text(source, "t.fuse", level="tensor", fuse_options=options)
    return [op for op in module.funcs[0].body.ops if isinstance(op, T.ReduceOp)]


@pytest.mark.parametrize("sized", [False, True], ids=["symbols", "sizes"])
def test_group_norm_over_channels_last_reduces_columns_then_groups(sized):
    source = _source("group_norm_nhwc", "f32")
    # (4 groups of 10 channels: runs of 40 bytes, as 32 groups of C = 320)
    dims = {"N": 16, "H": 64, "W": 64, "C": 40} if sized else None
    reductions = _tensor_reductions(source, dims)
    assert all(split_axes(op) is None for op in reductions)  # none over [1, 3] is left
    assert sorted(op["axis"] for op in reductions) == [[1], [1], [3], [3]]
    module = compile_text(source, "t.fuse", level="fused",
                          fuse_options={"dims": dims} if dims else None)
    kernels = [op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]
    # the columns' mean and variance in one pass (split-columns: its partials, then
    # their combine), the groups' statistics from them, the normalisation
    assert [k["schedule"] for k in kernels] == ["split-columns", "row", "pointwise"]


def test_outer_extents_not_sixteen_times_the_inner_stay_one_reduction():
    # batch norm over [0, 2, 3] of NCHW at 7 x 7 (N = 256: split, it ran 1.3-5.7x
    # slower on an H100), and group statistics of a view whose outer reduced extent (2)
    # would leave the first stage half its operand
    bn = "func g(x: f32[N, C, H, W]) -> f32[1, C, 1, 1] {\n    return mean(x, axis=[0, 2, 3], keepdims=true)\n}\n"
    for n, hw in ((32, 56), (256, 7), (96, 9)):
        (op,) = _tensor_reductions(bn, {"N": n, "C": 64, "H": hw, "W": hw})
        assert op["axis"] == [0, 2, 3]
    short = "func g(x: f32[N, 2, G, 4]) -> f32[N, 1, G, 1] {\n    return sum(x, axis=[1, 3], keepdims=true)\n}\n"
    (op,) = _tensor_reductions(short, None)
    assert op["axis"] == [1, 3]


@pytest.mark.parametrize("source, dims", [
    # batch norm over [N, C, L] of a sequence: runs of L = 16 f32 (64 bytes)
    ("func g(x: f32[N, C, L]) -> f32[1, C, 1] {\n    return mean(x, axis=[0, 2], keepdims=true)\n}\n",
     {"N": 4096, "C": 64, "L": 16}),
    # batch norm over NCHW at 4 x 4 (64 bytes)
    ("func g(x: f32[N, C, H, W]) -> f32[1, C, 1, 1] {\n    return mean(x, axis=[0, 2, 3], keepdims=true)\n}\n",
     {"N": 512, "C": 256, "H": 4, "W": 4})], ids=["nlc", "4x4"])
def test_runs_of_two_sectors_stay_one_reduction(source, dims):
    """Sixteen times longer outside, but the inner axes' values are runs of at least 64
    bytes (whole sectors): one reduction, one kernel."""
    (op,) = _tensor_reductions(source, dims)
    assert split_axes(op) is not None and op["axis"] == ([0, 2] if len(dims) == 3 else [0, 2, 3])
    module = compile_text(source, "t.fuse", level="fused", fuse_options={"dims": dims})
    assert len([op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]) == 1


@fuzz_settings("split_reductions")
@given(st.data())
def test_random_interleaved_reductions_agree_with_numpy(data):
    """Random reductions whose axes a kept axis separates (tests/strategies.py's
    ``interleaved_reduction_programs``), compiled for symbols (split at the default
    sizes), run at small sizes with infinities, NaN and signed zeros among the values:
    the kernels match the interpreter of the program as written."""
    source, sizes = data.draw(interleaved_reduction_programs())
    note(f"{source}sizes {sizes}")
    func = parse_program(source, "fuzz.fuse").funcs[0]
    assert any(split_axes(op) is not None for op in func.body.ops if isinstance(op, T.ReduceOp))
    args = data.draw(inputs_for(func, sizes))
    assert_compiled_agrees(source.replace("func f(", "func g("), args, sizes, "fuzz")


def test_explain_says_which_reductions_were_split(tmp_path, capsys):
    from mlfuse.cli.main import main
    path = tmp_path / "gn.fuse"
    path.write_text(_source("group_norm_nhwc", "f32"))
    assert main(["explain", str(path), "--dim", "N=16", "--dim", "H=64", "--dim", "W=64",
                 "--dim", "C=40"]) == 0
    text = capsys.readouterr().out
    assert "rewritten: split-reductions: m: tensor.mean over [1, 3] as over [1] (columns, " \
           "coalesced) then [3]: the mean of the columns' results" in text
    assert "rewritten: split-reductions: v: tensor.mean over [1, 3]" in text and \
           "parallel-axis identity" in text
    # at a size where H*W is not 16 times C/4, the statistics stay whole and explain is silent
    assert main(["explain", str(path), "--dim", "H=2", "--dim", "W=2", "--dim", "C=64"]) == 0
    assert "rewritten" not in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_batch_norm_split_at_sizes_agrees_with_numpy(dt):
    """A batch norm's training step compiled for sizes where its statistics split (runs
    of 4 values, a batch of 64): the statistics, stored as [C] by the row kernel that
    computes them from the columns' (a point of [C] read at [0, c, 0, 0]), and the
    normalised values match the interpreter."""
    source = """
func g(x: {dt}[N, C, H, W]) -> ({dt}[N, C, H, W], {dt}[C], {dt}[C]) {
    m = mean(x, axis=[0, 2, 3], keepdims=true)
    v = mean((x - m) * (x - m), axis=[0, 2, 3], keepdims=true)
    return (x - m) * rsqrt(v + 1e-5), reshape(m, [C]), reshape(v, [C])
}""".strip().replace("{dt}", dt) + "\n"
    dims = {"N": 64, "C": 4, "H": 2, "W": 2}
    assert any(o["axis"] == [0] for o in _tensor_reductions(source, dims))  # split
    func = parse_program(source, "t.fuse").funcs[0]
    assert_compiled_agrees(source, random_inputs(func, dims, seed=5), dims, f"batch norm {dt}",
                           fuse_options={"dims": dims})
