"""flatten-row-nests (mlfuse/transforms/flatten_row_nests.py): a rows kernel over several
trailing axes (instance norm's [H, W], a global average pool) walks each nest as one
loop, so the host runs short rows a group of lanes each; the values agree with the NumPy
interpreter under the simulator (odd sizes, NaN and inf), and the registers variant for
long rows loads each value of the row once for all its loops."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, assert_results_close, record_launches
from hypothesis import given, settings
from hypothesis import strategies as st

import mlfuse
from mlfuse.codegen import generate
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
INSTANCE_NORM = (EXAMPLES / "instance_norm.fuse").read_text()
POOL = """
func pool(x: f32[N, C, H, W]) -> f32[N, C] {
    return mean(relu(x), axis=[2, 3])
}
"""


def _kernel(module_ir, name):
    return next(k for f in module_ir.funcs for k in f.body.ops
                if k.name == "fused.kernel" and k["kernel_name"] == name)


def _run(source, name, dims, kernels, poison=None):
    """Run ``name`` under the simulator against the NumPy interpreter; returns the names
    of the kernels (of ``kernels``) it launched."""
    func = next(f for f in parse_program(source, "t.fuse").funcs if f.sym_name == name)
    inputs = random_inputs(func, dims, seed=3)
    if poison:
        poison(inputs[0])
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    py = module.python_module
    launched = record_launches(py, [k for k in kernels if hasattr(py, k)])
    got = module[name](*inputs)
    n_ops, reduced = program_size(func)
    assert_close(np.asarray(got), run_tensor(func, inputs)[0], n_ops, reduced=reduced)
    return launched


def _nan_and_inf(x):
    x[0, 0, 0, 1] = np.nan  # that row's statistics and outputs are NaN, as NumPy's
    x[1, 1, 1, 0] = np.inf


def test_instance_norm_nests_become_one_loop_with_a_short_row_plan():
    ir = compile_text(INSTANCE_NORM, "t.fuse")
    kernel = _kernel(ir, "instance_norm_0")
    assert kernel["schedule"] == "row" and kernel.attributes.get("warp_rows") == 1
    loops = [o for o in kernel.body.ops if o.name in ("loops.reduce", "loops.for")]
    assert loops and all(o["extent"] == "H*W" for o in loops)
    assert not any(o.name in ("loops.reduce", "loops.for") for loop in loops
                   for o in loop.body.ops)  # no nest left


@pytest.mark.parametrize("dims", [{"N": 2, "K": 3, "H": 3, "W": 5},   # 15 values a row
                                  {"N": 3, "K": 2, "H": 1, "W": 7}])  # H of 1
def test_short_instance_norm_rows_run_as_lane_groups_and_agree(dims):
    launched = _run(INSTANCE_NORM, "instance_norm", dims,
                    ["instance_norm_0", "instance_norm_0_short", "instance_norm_0_streaming"],
                    _nan_and_inf if dims["H"] > 1 else None)
    assert launched == ["instance_norm_0_short"]


def test_a_global_pool_runs_its_short_rows_as_lane_groups():
    launched = _run(POOL, "pool", {"N": 3, "C": 4, "H": 3, "W": 5},  # 15: no whole vectors
                    ["pool_0", "pool_0_short", "pool_0_short_vector", "pool_0_streaming"],
                    _nan_and_inf)
    assert launched == ["pool_0_short"]


def test_long_rows_load_each_value_once_for_every_loop():
    """The registers variant (rows longer than a warp holds): the flattened loops'
    loads of x at the same unravelled index share one local array, filled once."""
    source = generate(compile_text(INSTANCE_NORM, "t.fuse"), target="cuda")
    text = source[source.index("def instance_norm_0("):]
    text = text[:text.index("\n\n")]
    assert text.count("x_flat[numba.uint64(row_base + ") == 1
    launched = _run(INSTANCE_NORM, "instance_norm", {"N": 1, "K": 2, "H": 17, "W": 35},
                    ["instance_norm_0", "instance_norm_0_vector", "instance_norm_0_short",
                     "instance_norm_0_short_vector", "instance_norm_0_streaming"])
    assert launched == ["instance_norm_0"]  # (595 values: no whole vectors)


def test_long_flat_rows_move_16_byte_vectors_along_the_flat_row():
    """Rows whose length and bases VECTOR_WIDTH divides: the registers variant's vector
    twin loads and stores x and the output 16 bytes at a time at row_base + first."""
    source = generate(compile_text(INSTANCE_NORM, "t.fuse"), target="cuda")
    text = source[source.index("def instance_norm_0_vector("):]
    text = text[:text.index("\n\n")]
    assert "_load_vector(x_flat, (numba.uint64(row_base + first),)" in text
    assert "_store_vector(mul_flat, (numba.uint64(row_base_1 + first),)" in text
    host = source[source.index("def instance_norm(x):"):]
    assert "K * H * W % VECTOR_WIDTH == 0" in host  # the row bases: whole vectors apart
    # 560 values a row (past the short rows' 512), W = 14: rows 56 bytes apart, the row
    # bases (560 apart) whole vectors: only the buffers' starts need aligning
    launched = _run(INSTANCE_NORM, "instance_norm", {"N": 2, "K": 2, "H": 40, "W": 14},
                    ["instance_norm_0", "instance_norm_0_vector", "instance_norm_0_short",
                     "instance_norm_0_short_vector", "instance_norm_0_streaming"], _nan_and_inf)
    assert launched == ["instance_norm_0_vector"]


@pytest.mark.parametrize("source, name, dims", [
    (INSTANCE_NORM, "instance_norm", {"N": 2, "K": 3, "H": 4, "W": 4}),
    (POOL, "pool", {"N": 3, "C": 2, "H": 2, "W": 6}),  # rows 24 bytes apart, bases 48
])
def test_short_flat_rows_move_16_byte_vectors(source, name, dims):
    """Short rows of whole vectors: the short-row plan's vector kernel loads along the
    flat row at row_base + first (the host checking the row bases), and agrees."""
    text = generate(compile_text(source, "t.fuse"), target="cuda")
    kernel = text[text.index(f"def {name}_0_short_vector("):]
    assert "_load_vector(x_flat, (numba.uint64(row_base" in kernel[:kernel.index("\n\n")]
    launched = _run(source, name, dims, [f"{name}_0", f"{name}_0_short", f"{name}_0_short_vector",
                                         f"{name}_0_streaming"], _nan_and_inf)
    assert launched == [f"{name}_0_short_vector"]


@settings(max_examples=6, deadline=None)
@given(rank=st.integers(3, 4), reduced=st.integers(2, 3), dtype=st.sampled_from(["f32", "f16"]),
       combiner=st.sampled_from(["sum", "max", "mean"]), sizes=st.lists(
           st.integers(1, 5), min_size=4, max_size=4), seed=st.integers(0, 99))
def test_flattened_reductions_over_trailing_axes_agree_with_numpy(rank, reduced, dtype,
                                                                  combiner, sizes, seed):
    """Any reduction over the trailing axes of a rank 3-4 tensor with its result broadcast
    back (centring, max-shift), at odd and size-1 extents, f32 and f16, NaN in a row:
    the flattened kernel (short rows, a block per row, vectors where whole) is NumPy's."""
    reduced = min(reduced, rank - 1)
    names = "ABCD"[:rank]
    axes = list(range(rank - reduced, rank))
    source = (f"func f(x: {dtype}[{', '.join(names)}]) -> {dtype}[{', '.join(names)}] {{\n"
              f"    return x - {combiner}(x, axis={axes}, keepdims=true)\n}}\n")
    dims = dict(zip(names, sizes))
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=seed)
    if inputs[0].size > 1:
        inputs[0].reshape(-1)[seed % inputs[0].size] = np.nan
    with np.errstate(invalid="ignore"):
        expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    (kernel,) = [k for k in module.ir.funcs[0].body.ops if k.name == "fused.kernel"]
    assert kernel.attributes.get("flat_nests") == [[names[a] for a in axes]]
    assert_results_close(func, expected, module["f"](*inputs))
