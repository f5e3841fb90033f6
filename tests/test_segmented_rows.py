"""Rows of segments (codegen/flat_rows.SegmentedAccess): a statistic over axes that are
not all trailing (batch norm's [N, H, W] of NCHW, [N, L] of [N, C, L]) flattened by
flatten-row-nests into a row kernel, its index segments of the trailing axes' product.

Each launch path the host may take (warp-rows, a block per row, the split plan; scalar
and 16-byte vectors) agrees with the NumPy interpreter under the simulator, NaN and inf
included; the scalar loops count their segments with cursors (no division a value), the
vector loops divide once a vector, and the host runs the vector kernels only where the
segment is whole vectors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, record_launches

import mlfuse
from mlfuse.codegen import generate
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows

BATCHNORM = (Path(__file__).resolve().parent.parent / "examples" / "batchnorm_train.fuse").read_text()
BATCHNORM_1D = """
func batchnorm_1d(x: f32[N, C, L]) -> f32[N, C, L] {
    m = mean(x, axis=[0, 2], keepdims=true)
    return (x - m) * rsqrt(mean((x - m) * (x - m), axis=[0, 2], keepdims=true) + 1e-5)
}
"""


def _compiled(source):
    return mlfuse.compile_source(source, "t.fuse", target="simulator")


def _run(module, source, name, dims, force=None):
    """Run ``name`` against the NumPy interpreter (every result); ``force``: module
    globals to set first (the host's size rules). Returns the kernels it launched."""
    func = next(f for f in parse_program(source, "t.fuse").funcs if f.sym_name == name)
    inputs = random_inputs(func, dims, seed=5)
    x = inputs[0]
    x.reshape(-1)[1] = np.nan  # channel 0's statistics and outputs NaN, as NumPy's
    x.reshape(-1)[x.size - 2] = np.inf  # the last channel's: inf - inf
    py = module.python_module
    kernels = [k for k in dir(py) if k.startswith(f"{name}_0")]
    saved = {k: getattr(py, k) for k in (force or {})}
    for k, v in (force or {}).items():
        setattr(py, k, v)
    try:
        launched = record_launches(py, kernels)
        got = module[name](*inputs)
    finally:
        for k, v in saved.items():
            setattr(py, k, v)
    got = got if isinstance(got, tuple) else (got,)
    n_ops, reduced = program_size(func)
    for g, r in zip(got, run_tensor(func, inputs)):
        assert_close(np.asarray(g), r, n_ops, reduced=reduced)
    return launched


def _kernel_text(source, kernel):
    text = generate(compile_text(source, "t.fuse"), target="cuda")
    body = text[text.index(f"def {kernel}("):]
    return text, body[:body.index("\n\n\n")]


def test_batch_statistics_flatten_to_a_row_kernel_with_a_split_plan():
    ir = compile_text(BATCHNORM, "t.fuse")
    kernel = next(k for f in ir.funcs for k in f.body.ops if k.name == "fused.kernel")
    assert kernel["schedule"] == "row" and kernel["split_stages"] == 1
    assert kernel["flat_nests"] == [["N", "H", "W"]]
    # variance in the mean's pass (moments.py): the split plan is 2 kernels, not 3
    text = generate(ir, target="cuda")
    assert "def batchnorm_train_0_stage0(" in text and "stage1" not in text


def test_scalar_loops_count_segments_with_cursors():
    """A value's place is a carry from the last one's: the loop's loads and stores read
    at a place cursor (``row_base + segment * stride + in_segment`` at the tile's first
    value, then a step's offset and a carry's added), with a division only per tile,
    shared by a tile's loops, and the step's planned once before the rows."""
    _, stage = _kernel_text(BATCHNORM, "batchnorm_train_0_stage0")
    head, rows = stage.split("for flat in range(")
    assert "segment_step, in_segment_step = _divmod_index(nthreads, H * W)" in head
    assert "place_step = segment_step * stride0 + in_segment_step" in head
    assert "carry_step = stride0 - (H * W)" in head
    assert "place = row_base + first_segment * stride0 + first_in_segment" in rows
    assert "x_flat[numba.uint64(place)]" in rows
    assert "_divmod_index(k," not in rows and "nthreads, H * W" not in rows  # none a value
    assert "if in_segment >= H * W:  # carry" in rows and "place += carry_step" in rows
    _, epilogue = _kernel_text(BATCHNORM, "batchnorm_train_0_epilogue")
    # the tile's loads of x and stores of y: one division, a place cursor each
    assert epilogue.count("_divmod_index(base + tid, H * W)") == 1
    assert "y_flat[numba.uint64(place_1)] = " in epilogue
    assert "place_1 = row_base_1 + first_segment * stride0_1 + first_in_segment" in epilogue


def test_vector_twins_divide_once_a_vector_where_segments_are_whole_vectors():
    text, stage = _kernel_text(BATCHNORM, "batchnorm_train_0_stage0_vector")
    assert "_load_vector(x_flat, (numba.uint64(row_base + _divmod_index32(first, H * W)[0] " \
        "* stride0 + _divmod_index32(first, H * W)[1]),)" in stage
    host = text[text.index("def batchnorm_train(x, g, b):"):]
    assert "H * W % VECTOR_WIDTH == 0" in host  # a vector lies in one segment


STREAMED = {"_split_stages": lambda p, e, r: False, "SHORT_ROW_SCALARS": 0,
            "SHORT_ROW_VALUES": 0, "REGISTER_ROW_THREADS": 0, "STREAM_ROW_THREADS": 32}


@pytest.mark.parametrize("dims, force, expected", [
    # 3 x 5 x 7: segments of 35, no whole vectors
    ({"N": 3, "K": 2, "H": 5, "W": 7}, {"_split_stages": lambda p, e, r: True},
     ["batchnorm_train_0_stage0", "batchnorm_train_0_epilogue"]),
    ({"N": 2, "K": 3, "H": 4, "W": 4}, {"_split_stages": lambda p, e, r: True},
     ["batchnorm_train_0_stage0_vector", "batchnorm_train_0_epilogue_vector"]),
    ({"N": 3, "K": 2, "H": 5, "W": 7}, {"_split_stages": lambda p, e, r: False,
                                        "SHORT_ROW_SCALARS": 0, "SHORT_ROW_VALUES": 0},
     ["batchnorm_train_0"]),
    ({"N": 3, "K": 2, "H": 4, "W": 8}, {"_split_stages": lambda p, e, r: False,
                                        "SHORT_ROW_SCALARS": 0, "SHORT_ROW_VALUES": 0},
     ["batchnorm_train_0_vector"]),
    ({"N": 2, "K": 3, "H": 3, "W": 3}, None, ["batchnorm_train_0_short"]),
    # rows of 315 streamed by blocks of 32 threads: two tiles of 256 values a pass, the
    # tiles' and the steps' carries across segments of 35, the second pass backwards;
    # indices under 2**31: the 32-bit twin (stream_narrow.py)
    ({"N": 9, "K": 2, "H": 5, "W": 7}, STREAMED, ["batchnorm_train_0_streaming_narrow"]),
    # segments of 16 (whole vectors): the streaming kernel's vector twin, two tiles of
    # 256 values a pass (rows of 320)
    ({"N": 20, "K": 2, "H": 4, "W": 4}, {"_split_stages": lambda p, e, r: False,
                                         "SHORT_ROW_SCALARS": 0, "SHORT_ROW_VALUES": 0,
                                         "REGISTER_ROW_THREADS": 0, "STREAM_ROW_THREADS": 32},
     ["batchnorm_train_0_streaming_vector"]),
])
def test_batch_norm_training_agrees_on_every_launch_path(dims, force, expected):
    module = _compiled(BATCHNORM)
    assert _run(module, BATCHNORM, "batchnorm_train", dims, force) == expected


def test_the_streaming_kernel_has_a_32_bit_twin_for_indices_under_2_31():
    """stream_narrow.py: the same kernel with 32-bit cursors, steps, carries and slot
    bounds, launched under the 31-bit tests; the 64-bit kernel elsewhere. Both agree
    with the interpreter (the 64-bit one run in the twin's place)."""
    text, narrow = _kernel_text(BATCHNORM, "batchnorm_train_0_streaming_narrow")
    assert "place = numba.uint32(row_base + first_segment * stride0 + first_in_segment)" in narrow
    assert "place = numba.uint32(place + carry_step)" in narrow
    assert "if in_segment >= numba.uint32(H * W):  # carry" in narrow
    assert "if k < numba.uint32((H * N * W)):" in narrow and "_divmod_index(" not in narrow
    _, wide = _kernel_text(BATCHNORM, "batchnorm_train_0_streaming")
    assert "place += carry_step" in wide and "numba.uint32(place" not in wide
    host = text[text.index("def batchnorm_train(x, g, b):"):]
    branch = host[host.index("# every index fits 31 bits"):]
    assert "N * K * H * W < 2**31" in host[:host.index("# every index fits 31 bits")]
    assert branch.index("batchnorm_train_0_streaming_narrow[") < branch.index("else:") < \
        branch.index("batchnorm_train_0_streaming[")
    module = _compiled(BATCHNORM)
    wide_kernel = module.python_module.batchnorm_train_0_streaming
    assert _run(module, BATCHNORM, "batchnorm_train", {"N": 9, "K": 2, "H": 5, "W": 7},
                {**STREAMED, "batchnorm_train_0_streaming_narrow": wide_kernel}) == \
        ["batchnorm_train_0_streaming_narrow"]  # (the 64-bit kernel, in the twin's place)


def test_statistics_over_leading_and_last_axes_of_a_rank_3_tensor():
    """[N, L] of [N, C, L]: one trailing axis in the segment (x[X // L, c, X % L])."""
    text = generate(compile_text(BATCHNORM_1D, "t.fuse"), target="cuda")
    assert "first_segment * stride0 + first_in_segment" in text
    module = _compiled(BATCHNORM_1D)
    launched = _run(module, BATCHNORM_1D, "batchnorm_1d", {"N": 3, "C": 2, "L": 11},
                    {"_split_stages": lambda p, e, r: True})
    assert launched == ["batchnorm_1d_0_stage0", "batchnorm_1d_0_epilogue"]


def test_streaming_blocks_stay_small_while_their_rows_in_flight_fit_l2():
    """mlfuse/row_stream.py: the streaming kernel's block, read by the generated host
    (its own copy of the function) and by the cost model."""
    from mlfuse.hardware import H100
    from mlfuse.row_stream import stream_row_threads
    # batch norm over [256, 1024, 7, 7]: rows of 12544 f32, x re-read: four blocks an
    # SM hold 528 rows, 26 MB
    assert stream_row_threads(12544, 4, H100) == 256
    # rows of 80000 f32: 528 rows in flight would re-read 169 MB, 264 84 MB, past 50 MB
    assert stream_row_threads(80000, 4, H100) == 1024
    assert stream_row_threads(80000, 0, H100) == 256  # read once: nothing re-read
    assert stream_row_threads(40000, 4, H100) == 512  # 264 rows: 42 MB
    assert stream_row_threads(100, 4, H100) == 128  # (the least power of two holding it)
    text = generate(compile_text(BATCHNORM, "t.fuse"), target="cuda")
    assert "batchnorm_train_0_streaming[_row_blocks(K), _stream_row_threads((H * N * W), 4, " \
        "STREAM_ROW_THREADS, SM_COUNT, L2_BYTES)]" in text
    assert "STREAM_ROW_THREADS = 256" in text
