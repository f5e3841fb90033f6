"""Rows walked as one contiguous range (mlfuse/codegen/flat_rows.py): group norm's rows
read through a reshape and instance norm's rows over [H, W] are addressed at
``row_base + step`` in a flat view, in both the registers and the streaming variant,
and agree with the NumPy interpreter under the simulator (tiny, odd sizes, NaN);
reads of another form keep their indices."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import mlfuse
from mlfuse.interp import run_tensor
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close, record_launches

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GROUPS_AS_DIM = """
func gn(x: f32[N, C, H, W], groups: f32[G]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, G, C / G * H * W])
    m = mean(rows, axis=2, keepdims=true)
    d = rows - m
    return reshape(d * rsqrt(mean(d * d, axis=2, keepdims=true) + 1e-5), [N, C, H, W])
}
"""
# rows of a reshaped transpose: the reads are not along memory (not flat), still right
TRANSPOSED_ROWS = """
func tr(x: f32[N, C, P]) -> f32[N, P, C] {
    rows = reshape(transpose(x, [0, 2, 1]), [N, 2, P * C / 2])
    return reshape(rows - mean(rows, axis=2, keepdims=true), [N, P, C])
}
"""


def _kernel_text(source: str, name: str) -> str:
    text = source[source.index(f"def {name}("):]
    return text[:text.index("\n\n")]


def _run(source: str, name: str, dims: dict, streaming: bool, poison=None, plan_dims=None):
    """Run ``name`` under the simulator in one variant against the NumPy interpreter;
    returns the module's source. ``plan_dims``: the sizes the fusion planner prices."""
    func = next(f for f in parse_program(source, "t.fuse").funcs if f.sym_name == name)
    inputs = random_inputs(func, dims, seed=7)
    if poison:
        poison(inputs[0])
    module = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                   fuse_options={"dims": plan_dims} if plan_dims else None)
    py = module.python_module
    kernel = f"{name}_0"
    launched = record_launches(py, [k for k in (kernel, f"{kernel}_streaming") if hasattr(py, k)])
    py.SHORT_ROW_VALUES = py.SHORT_ROW_SCALARS = 0  # a block per row (no short-row plan)
    if streaming:
        py.REGISTER_ROW_THREADS = py.STRIP_HELD_THREADS = 0  # the host picks streaming
        if hasattr(py, "_shared_row_plan"):  # (not held rows either: test_shared_rows)
            py._shared_row_plan = lambda *args: (1024, 1 << 40)
        py._split_stages = lambda points, extent, reread: False  # (few rows: else split)
    got = module[name](*inputs)
    n_ops, reduced = program_size(func)
    assert_close(np.asarray(got), run_tensor(func, inputs)[0], n_ops, reduced=reduced)
    assert launched == [f"{kernel}_streaming" if streaming else kernel]
    return module.source


def _nan(x):
    x.reshape(-1)[7] = np.nan  # its group's (row's) statistics and outputs are NaN


@pytest.mark.parametrize("streaming", [False, True])
def test_group_norm_rows_are_flat_ranges(streaming):
    source = (EXAMPLES / "group_norm.fuse").read_text()
    text = _run(source, "group_norm", {"N": 2, "C": 8, "H": 3, "W": 5}, streaming, _nan)
    kernel = _kernel_text(text, "group_norm_0_streaming" if streaming else "group_norm_0")
    assert "x_flat[numba.uint64(row_base" in kernel and "add_flat[numba.uint64(row_base" in kernel
    # the row's shift sample (variance's shifted sums, moments.py) is read once per row
    # at its row base, with no unravel; in the row loops x and the output are addressed
    # without unravelling too, only gamma/beta's channel divides
    assert "x[" not in kernel and "x_flat[numba.uint64(row_base)]" in kernel
    assert "_divmod_index(add" not in kernel[:kernel.index("    for ", kernel.index("row_base"))]
    loops = kernel[kernel.index("    for ", kernel.index("row_base")):]
    assert "% W" not in loops and "% H" not in loops


@pytest.mark.parametrize("streaming", [False, True])
def test_groups_as_a_dim_are_flat_ranges(streaming):
    text = _run(GROUPS_AS_DIM, "gn", {"N": 2, "C": 6, "G": 3, "H": 3, "W": 5}, streaming)  # 30: no vectors
    kernel = _kernel_text(text, "gn_0_streaming" if streaming else "gn_0")
    loops = kernel[kernel.index("    for ", kernel.index("row_base")):]  # (after the shift)
    assert not re.search(r"(//|%) [WH]\b|_divmod_index", loops)  # no division per value


@pytest.mark.parametrize("streaming", [False, True])
def test_instance_norm_rows_over_two_axes_take_the_flat_index(streaming):
    source = (EXAMPLES / "instance_norm.fuse").read_text()
    name = "instance_norm"
    text = _run(source, name, {"N": 2, "K": 3, "H": 5, "W": 7}, streaming, _nan)
    kernel = _kernel_text(text, f"{name}_0_streaming" if streaming else f"{name}_0")
    assert "x_flat[numba.uint64(row_base" in kernel
    assert "carry" not in kernel and "divmod(per" not in kernel  # the nest's digits go


def test_a_transposed_read_keeps_its_indices():
    # priced at its own small sizes, the transpose fuses into the row kernel (at the
    # default sizes the planner keeps it apart: streamed rows read through a transpose)
    dims = {"N": 2, "C": 3, "P": 4}
    text = _run(TRANSPOSED_ROWS, "tr", dims, streaming=False, plan_dims=dims)
    assert "x_flat" not in _kernel_text(text, "tr_0")


def test_streaming_passes_alternate_direction_over_several_tiles():
    """Rows of 45 values in tiles of 32 (one value per thread, 32 threads): the second
    pass walks the tiles from the last (a partial one) back to the first, the third
    forward again; the statistics and outputs still agree with NumPy."""
    source = (EXAMPLES / "group_norm.fuse").read_text()
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"N": 1, "C": 8, "H": 5, "W": 9}, seed=11)
    _nan(inputs[0])
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    py = module.python_module
    kernel = _kernel_text(module.source, "group_norm_0_streaming")
    assert kernel.count(", -1, -span") == 1  # the second of two passes runs backwards
    launched = record_launches(py, ["group_norm_0", "group_norm_0_streaming"])
    py.REGISTER_ROW_THREADS, py.VALUES_PER_THREAD = 0, 2  # streaming, tiles of 1 value
    py._shared_row_plan = lambda *args: (1024, 1 << 40)  # (no held rows: they never fit)
    py.SHORT_ROW_VALUES = py.SHORT_ROW_SCALARS = 0  # (no short-row plan)
    py._row_threads = lambda extent, most=1024: 32
    py._split_stages = lambda points, extent, reread: False  # (one row: else split)
    got = module["group_norm"](*inputs)
    n_ops, reduced = program_size(func)
    assert_close(np.asarray(got), run_tensor(func, inputs)[0], n_ops, reduced=reduced)
    assert launched == ["group_norm_0_streaming"]
