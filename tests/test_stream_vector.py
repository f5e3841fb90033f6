"""The streaming row kernel's vector twin (codegen/stream_vector.py): rows past
registers, not held, at calls with many rows, moved a tile of 16-byte vectors at a time.

Each case forces the streaming path (no registers rows, no held rows, no split plan, no
short-row plan) under the simulator, with VALUES_PER_THREAD at 8 so a tile is one vector
a thread (tiles of 128 values at 32 threads: several a row), and compares every result
with the NumPy interpreter, a NaN in the input. Rows of whole vectors take the twin;
others the scalar streaming kernel."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, record_launches

import mlfuse
from mlfuse.interp import run_tensor
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import program_size, random_inputs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LAYERNORM = """
func layernorm(x: f32[R, C], gamma: f32[C], beta: f32[C]) -> f32[R, C] {
    return layernorm(x, gamma, beta, axis=-1, eps=1e-5)
}
"""

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows


def _streamed(source: str, name: str, dims: dict) -> tuple[list[str], str]:
    """Run ``name`` on the streaming path against the interpreter; the kernels it
    launched and the module's source."""
    func = next(f for f in parse_program(source, "t.fuse").funcs if f.sym_name == name)
    inputs = random_inputs(func, dims, seed=3)
    inputs[0].reshape(-1)[5] = np.nan  # its row's statistics and outputs NaN, as NumPy's
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    py = module.python_module
    launched = record_launches(py, [k for k in vars(py) if k.startswith(f"{name}_0")])
    py.REGISTER_ROW_THREADS = py.SHORT_ROW_VALUES = py.SHORT_ROW_SCALARS = 0
    py.VALUES_PER_THREAD, py.STREAM_ROW_THREADS = 8, 32
    if hasattr(py, "_shared_row_plan"):
        py._shared_row_plan = lambda *args: (1024, 1 << 40)  # (no held rows: never fit)
    if hasattr(py, "_split_stages"):
        py._split_stages = lambda points, extent, reread: False
    got = module[name](*inputs)
    got = got if isinstance(got, tuple) else (got,)
    n_ops, reduced = program_size(func)
    for g, r in zip(got, run_tensor(func, inputs)):
        assert_close(np.asarray(g), r, n_ops, reduced=reduced)
    return launched, module.source


def test_plain_rows_of_whole_vectors_stream_as_vectors():
    launched, text = _streamed(LAYERNORM, "layernorm", {"R": 3, "C": 320})
    assert launched == ["layernorm_0_streaming_vector"]
    kernel = text[text.index("def layernorm_0_streaming_vector("):]
    assert "_load_vector(x_flat, (numba.uint64(row_base + first),)" in kernel[:kernel.index("\n\n\n")]


def test_f16_rows_stream_as_vectors():
    launched, _ = _streamed(LAYERNORM.replace("f32", "f16"), "layernorm", {"R": 2, "C": 256})
    assert launched == ["layernorm_0_streaming_vector"]


def test_odd_rows_stream_a_value_at_a_time():
    launched, _ = _streamed(LAYERNORM, "layernorm", {"R": 3, "C": 322})
    assert launched == ["layernorm_0_streaming"]


def test_instance_norm_flat_rows_stream_as_vectors():
    source = (EXAMPLES / "instance_norm.fuse").read_text()
    launched, _ = _streamed(source, "instance_norm", {"N": 2, "K": 2, "H": 10, "W": 30})
    assert launched == ["instance_norm_0_streaming_vector"]


def test_group_norm_rows_through_a_reshape_stream_as_vectors():
    """Rows of 2 channels of 150 values: vectors straddle the channel boundary at 150,
    where gamma[c] and beta[c] take each lane's own channel."""
    source = (EXAMPLES / "group_norm.fuse").read_text()
    launched, text = _streamed(source, "group_norm", {"N": 2, "C": 16, "H": 10, "W": 15})
    assert launched == ["group_norm_0_streaming_vector"]
    kernel = text[text.index("def group_norm_0_streaming_vector("):]
    assert "lanes_agree" in kernel[:kernel.index("\n\n\n")]


def test_batch_norm_segments_of_whole_vectors_stream_as_vectors():
    source = (EXAMPLES / "batchnorm_train.fuse").read_text()
    launched, _ = _streamed(source, "batchnorm_train", {"N": 30, "K": 2, "H": 2, "W": 6})
    assert launched == ["batchnorm_train_0_streaming_vector"]
