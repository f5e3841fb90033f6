"""mlfuse/strip_plan.py: a strips kernel's geometry over columns, picked per call.

The host of a generated module, codegen and the cost model all call ``_strip_columns``;
these tests pin its choices at the shapes the benchmarks run (H100: 132 SMs, 4 blocks
an SM wanted, blocks of 256 threads, 512 streaming, 16 values a thread held) and its
invariants at any shape."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mlfuse.hardware import H100
from mlfuse.strip_plan import (
    _strip_columns,
    line_points,
    most_slots,
    narrowest_points,
    source,
)

WIDEST, LEAST, MOST, VALUES = H100.strip_points, H100.strip_threads, H100.strip_block_threads, \
    H100.row_values_per_thread
DEEPEST = H100.strip_stream_threads
SMS, PER_SM = H100.sm_count, H100.strip_blocks_per_sm
FILL = SMS * PER_SM  # 528 blocks
F32, F16 = narrowest_points(4, WIDEST), narrowest_points(2, WIDEST)


def plan(points, extent, narrowest=F32, line=None):
    line = line or line_points(4 if narrowest == F32 else 2, WIDEST)
    return _strip_columns(points, extent, WIDEST, narrowest, line, LEAST, MOST, DEEPEST,
                          VALUES, SMS, PER_SM)


def test_narrowest_strip_is_one_sector_a_row():
    assert (F32, F16) == (8, 16)  # 32 bytes of f32 / f16 values
    assert narrowest_points(8, WIDEST) == 4 and narrowest_points(1, 16) == 16  # capped at widest
    assert line_points(4, WIDEST) == 32 and line_points(2, WIDEST) == 32  # a line, capped
    assert line_points(4, WIDEST, 64) == 16


def test_column_centring_keeps_whole_lines_and_adds_rows():
    # 16384 rows held nowhere (16 x 512 < 16384): streamed, so the strip stays a 128-byte
    # line a row (32 f32) and takes 16 threads a point (512 a block) instead of narrowing
    # (round 1's 8-point strips measured 0.406 ms against 0.325 for 32 x 16, H100)
    assert plan(4096, 16384) == (32, 16)
    assert plan(16384, 4096) == (32, 16)
    # with 64-byte lines allowed (a knob, hardware.strip_line_bytes) it narrows to 16
    assert plan(4096, 16384, line=16) == (16, 32)
    # 1024 columns: 32 whole-line strips would leave 100 of 132 SMs idle: below half the
    # SMs, narrower rows (down to a sector) cost less than idle SMs
    assert plan(1024, 4096) == (8, 64)
    assert plan(2048, 4096) == (8, 64)  # 64 blocks of 32 < 66: down to the fill rule


def test_middle_softmax_takes_the_widest_strip_that_holds_its_values():
    # softmax over S=256 of [64, 256, 2048]: 32 points x 8 threads hold 128 of 256 values,
    # 16 points x 16 threads all 256 (registers variant), with 8192 blocks
    assert plan(64 * 2048, 256) == (16, 16)
    # S=64: 32 points x 8 threads x 16 values hold 128 >= 64: the widest strip
    assert plan(8 * 32768, 64) == (32, 8)


def test_f16_streaming_strips_stay_widest():
    # f16 column centring 16384 x 8192: a line of f16 is 64 values, past the widest strip
    assert plan(8192, 16384, F16) == (32, 16)
    # held f16 values may still narrow to a sector (16): softmax over 256 of f16
    assert plan(64 * 2048, 256, F16) == (16, 16)


def test_small_calls_take_the_narrowest_strip():
    assert plan(100, 3) == (8, 32)  # held: narrowed to a sector
    assert plan(1, 1) == (8, 32)
    assert plan(0, 0) == (8, 32)  # an empty call still gets a launchable shape


@settings(max_examples=200, deadline=None)
@given(points=st.integers(0, 1 << 22), extent=st.integers(0, 1 << 16),
       narrow=st.sampled_from([F32, F16, 4, WIDEST]), line=st.sampled_from([8, 16, 32]))
def test_invariants(points, extent, narrow, line):
    width, per = plan(points, extent, narrow, line)
    held = _held(width, extent)
    whole = max(narrow, min(line, WIDEST))
    floor = narrow if held or -(-points // whole) < SMS // 2 else whole
    # a power-of-two width between the floor and the widest strip
    assert floor <= width <= WIDEST and width & (width - 1) == 0
    # a power of two of threads a point; blocks of LEAST to MOST threads, deeper
    # (up to DEEPEST) only where streamed
    assert per >= 1 and per & (per - 1) == 0
    assert LEAST <= width * per <= (MOST if held else DEEPEST)
    # the registers variant's condition: a held strip is never deeper than MOST
    assert not (per * VALUES >= extent and width * per > MOST)
    blocks = -(-points // width)
    # narrower only while the grid was short of FILL blocks (or to hold the values)
    if width < WIDEST:
        assert -(-points // (2 * width)) < FILL or (held and not _held(2 * width, extent))
    # the floor, or enough blocks to fill the GPU
    assert width == floor or blocks >= FILL


def _held(width, extent):
    """Whether a strip of ``width`` holds every value of its points in registers."""
    per = max(1, LEAST // width)
    while per * width < MOST and per * VALUES < extent:
        per *= 2
    return per * VALUES >= extent


@settings(max_examples=100, deadline=None)
@given(extent=st.integers(1, 1 << 14))
def test_most_slots_covers_every_width(extent):
    """The registers variant's slots for a constant extent hold a thread's values at any
    width a call may pick, and never more than VALUES."""
    slots = most_slots(extent, WIDEST, F32, LEAST, MOST, VALUES)
    assert 1 <= slots <= VALUES
    for width in (32, 16, 8):
        _, per = _strip_columns(1 << 62, extent, width, width, width, LEAST, MOST, DEEPEST,
                                VALUES, 0, 0)
        if per * VALUES >= extent:
            assert -(-extent // per) <= slots


def test_source_is_standalone():
    namespace: dict = {}
    exec(source(), namespace)  # the generated module's copy runs without mlfuse
    assert namespace["_strip_columns"](4096, 16384, WIDEST, F32, 32, LEAST, MOST, DEEPEST,
                                       VALUES, SMS, PER_SM) == (32, 16)
