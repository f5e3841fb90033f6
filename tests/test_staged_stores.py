"""Strips over columns whose store runs along the reduced axis (layernorm of NCHW stored
NHWC): the registers kernel stages the strip's values in a shared tile and the block
copies it out a row at a time (codegen/strips_staged.py); every strips kernel takes one
strip a block, numbered over a 2-D grid (``_strip_grid``). Run under the simulator
against the NumPy interpreter: strips that end part-way, one channel, f16, two staged
outputs beside one that is not, the streaming kernel (staged or not) and staging
turned off."""
import dataclasses

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from mlfuse.codegen import generate
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.runtime.loader import load_source
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close, record_launches
from strategies import channels_last_programs, fuzz_settings, inputs_for

LAYERNORM_NHWC = """
func f(x: f32[N, C, H, W], g: f32[C], b: f32[C]) -> f32[N, H, W, C] {
    return layernorm(transpose(x, [0, 2, 3, 1]), g, b)
}"""
# the NHWC result and its double staged, the NCHW one stored as before (where valid)
THREE_OUTPUTS = """
func f(x: f32[N, C, H, W], g: f32[C], b: f32[C])
        -> (f32[N, H, W, C], f32[N, C, H, W], f32[N, H, W, C]) {
    y = layernorm(transpose(x, [0, 2, 3, 1]), g, b)
    return y, transpose(y, [0, 3, 1, 2]), y * 2.0
}"""
SIZES = {"N": 2, "C": 7, "H": 3, "W": 3}  # 18 points: the simulator's last strip of 4 ends part-way


def _module(source: str, name: str, **knobs):
    hw = dataclasses.replace(get_target(), **knobs)
    text = generate(compile_text(source, "t.fuse"), "simulator", hw)
    return text, load_source(text, name)


def _agrees(source: str, py, dims: dict, launched_kernel: str) -> None:
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=11)
    launched = record_launches(py, ["f_0", "f_0_streaming"])
    got = py.ENTRY_POINTS["f"](*inputs)
    assert launched == [launched_kernel]
    assert_results_close(func, run_tensor(func, inputs), got)


@pytest.mark.parametrize("source, dims", [
    (LAYERNORM_NHWC, SIZES),
    (LAYERNORM_NHWC, {"N": 1, "C": 1, "H": 2, "W": 3}),
    (LAYERNORM_NHWC.replace("f32", "f16"), {"N": 1, "C": 12, "H": 1, "W": 5}),
    (THREE_OUTPUTS, SIZES),
])
def test_a_store_along_the_reduced_axis_goes_through_a_shared_tile(source, dims):
    text, py = _module(source, "staged")
    kernel = text[text.index("def f_0("):text.index("def f_0_streaming(")]
    assert kernel.count("cuda.shared.array(STRIP_STAGE_VALUES") == (2 if "y * 2.0" in source else 1)
    assert "cuda.syncthreads()  # the tiles are whole" in kernel
    if "y * 2.0" in source:  # the NCHW result: stored directly, where the point is real
        assert "if valid:\n" in kernel
    _agrees(source, py, dims, "f_0")


def test_without_staging_the_store_is_direct_and_agrees():
    text, py = _module(LAYERNORM_NHWC, "unstaged", strip_staged_stores=False)
    assert "STRIP_STAGE_VALUES, " not in text
    _agrees(LAYERNORM_NHWC, py, SIZES, "f_0")


@pytest.mark.parametrize("stage_width", [1, 10**9])
def test_the_streaming_kernel_stages_a_wide_strip_and_agrees(stage_width):
    """The streaming kernel stages a tile's part of the rows at a time where its strip
    has STRIP_STAGE_WIDTH points or more, and stores directly otherwise: both agree."""
    text, py = _module(LAYERNORM_NHWC, "streamed")
    streaming = text[text.index("def f_0_streaming("):]
    streaming = streaming[:streaming.index("\ndef ")]
    assert "if staging:" in streaming and "cuda.syncthreads()  # copied out" in streaming
    py.STRIP_HELD_THREADS = 0  # no strip's values fit the registers kernel
    py.STRIP_STAGE_WIDTH = stage_width
    _agrees(LAYERNORM_NHWC, py, SIZES, "f_0_streaming")
    _agrees(LAYERNORM_NHWC, py, {"N": 1, "C": 300, "H": 1, "W": 5}, "f_0_streaming")


def test_strips_past_the_grids_x_limit_take_its_y_blocks():
    """Each block takes strip ``blockIdx.y * gridDim.x + blockIdx.x``: a grid of 2 x n/2
    blocks (here as _strip_grid would give past 2**31 - 1 strips) covers them all."""
    _, py = _module(LAYERNORM_NHWC, "two_d")
    assert py._strip_grid(5) == (5, 1)
    assert py._strip_grid(2**31 + 4) == (2**31 - 1, 2)
    py._strip_grid = lambda strips: (2, -(-strips // 2))
    _agrees(LAYERNORM_NHWC, py, SIZES, "f_0")


@fuzz_settings("channels_last")
@given(st.data())
def test_random_channels_last_reductions_agree_with_numpy(data):
    """Random reductions over the channels of NCHW stored NHWC (tests/strategies.py's
    ``channels_last_programs``), compiled for symbolic sizes, run by the registers kernel
    or the streaming one (staged, or stored directly where the strip is narrow): the
    kernels match the interpreter."""
    source, sizes = data.draw(channels_last_programs())
    kernel = data.draw(st.sampled_from(["registers", "streaming staged", "streaming direct"]))
    note(f"{source}sizes {sizes}, {kernel}")
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, sizes, special=False))
    expected = run_tensor(func, args)
    _, py = _module(source, "fuzz_channels_last")
    if kernel != "registers":
        py.STRIP_HELD_THREADS = 0
        py.STRIP_STAGE_WIDTH = 1 if kernel == "streaming staged" else 10**9
    assert_results_close(func, expected, py.ENTRY_POINTS["f"](*args))
