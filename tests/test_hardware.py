"""The hardware description's helpers that probes and reports use."""
import dataclasses

import pytest

from mlfuse.hardware import get_target, hw_setting, target_in_effect
from mlfuse.ir.printer import print_ir
from mlfuse.pipeline import compile_text

CENTRING = "func f(x: f32[R, C]) -> f32[R, C] { return x - mean(x, axis=0, keepdims=true) }"


def test_a_target_in_effect_reaches_the_schedule_choice_and_is_restored():
    """Compiled for symbols, column centring gets column stages; with the knob off in
    effect it does not, and the default target is back afterwards."""
    assert "split_stages = 1" in print_ir(compile_text(CENTRING, "t.fuse"))
    off = dataclasses.replace(get_target(), strip_column_stages=False)
    with target_in_effect(off):
        assert get_target() is off and get_target(off.name) is off
        assert "split_stages" not in print_ir(compile_text(CENTRING, "t.fuse"))
    assert get_target().strip_column_stages
    assert "split_stages = 1" in print_ir(compile_text(CENTRING, "t.fuse"))


@pytest.mark.parametrize("text, expected", [
    ("split_stage_min_blocks=4", ("split_stage_min_blocks", 4)),
    ("strip_column_stages=false", ("strip_column_stages", False)),
    ("column_lanes_rows=one", ("column_lanes_rows", "one")),
])
def test_hw_setting_reads_ints_booleans_and_text(text, expected):
    assert hw_setting(text) == expected


def test_hw_setting_refuses_a_name_that_is_no_field():
    with pytest.raises(ValueError, match="no hardware field 'nonsense'"):
        hw_setting("nonsense=3")
