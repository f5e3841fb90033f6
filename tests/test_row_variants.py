"""Row-family kernel variants against the NumPy interpreter under the simulator (tiny
sizes): warp-rows' vector variant (a group of lanes per short row, its values in
vectors, the group's reductions by shuffles; tests/test_row_groups.py has the choice) and the row schedule's streaming tiles (a tile of loads in
flight per thread); plus what the GPU build of the short-row kernel is (ptxas)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numba import cuda

import mlfuse
from mlfuse.codegen import generate
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.runtime.loader import load_source
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close, assert_results_close, record_launches

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows

SHORT_SOFTMAX = "func f(x: {t}[R, {n}]) -> {t}[R, {n}] {{ return softmax(x, axis=1) }}"
SHORT_LAYERNORM = ("func f(x: f32[R, 12], g: f32[12], b: f32[12]) -> f32[R, 12] {\n"
                   "    return layernorm(x, g, b, axis=-1, eps=1e-5)\n}")
SHORT_SUMSQ = "func f(x: f32[A, B, 20]) -> f32[A, B] { return sum(x * x, axis=2) }"


def _check(source: str, dims: dict, poison=None):
    """Run ``source`` under the simulator (its kernels' launches recorded) against NumPy;
    ``poison(inputs)`` may put NaN and infinities into the inputs first."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=5)
    if poison:
        poison(inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    kernels = [n for n in dir(module.python_module) if n.startswith("f_")]
    launched = record_launches(module.python_module, kernels)
    got = module["f"](*inputs)
    n_ops, reduced = program_size(func)
    assert_close(np.asarray(got), run_tensor(func, inputs)[0], n_ops, reduced=reduced)
    return module, launched


def _nan_rows(inputs):
    x = inputs[0]
    x[1, 3] = np.nan          # a NaN row: NaN everywhere in it, as NumPy gives
    x[2, :] = -np.inf         # a row of -inf: NaN (0/0), as NumPy gives
    x[4, 0] = np.inf


@pytest.mark.parametrize("dtype, width, load", [("f32", 4, "_load_vector"),
                                               ("f16", 2, "_load_halves")])
def test_short_softmax_splits_each_row_over_a_group_in_vectors(dtype, width, load):
    """Rows of 16: a lane per 16-byte vector (4 f32 lanes, 2 of 8 halves), the group's
    reductions by shuffles (their simulator twin here); NaN and infinite rows as NumPy."""
    module, launched = _check(SHORT_SOFTMAX.format(t=dtype, n=16), {"R": 37}, _nan_rows)
    assert launched == ["f_0_vector"]
    source = module.source
    kernel = source[source.index("def f_0_vector("):]
    kernel = kernel[:kernel.index("\n\n")]
    assert f"width = {width}" in kernel and "_group_reduce_max" in kernel
    assert kernel.count(f"{load}(x,") == 1 and kernel.count("_store_") == 1


def test_a_thread_per_row_where_a_group_may_be_one_thread():
    """short_row_lanes 1: rows of 16 f32 take a thread each (no shuffles), as before."""
    softmax = compile_text(SHORT_SOFTMAX.format(t="f32", n=16), "t.fuse", level="fused")
    hw = dataclasses.replace(get_target(), short_row_lanes=1)
    text = generate(softmax, "simulator", hw)
    kernel = text[text.index("def f_0_vector("):]
    kernel = kernel[:kernel.index("\n\n")]
    assert "width = 1" in kernel and "_group_reduce" not in kernel


CONCAT_SOFTMAX = ("func f(x: f32[R, 5], y: f32[R, 3]) -> f32[R, 8] {\n"
                  "    return softmax(concat([exp(x), y * 2.0], axis=1))\n}")


@pytest.mark.parametrize("source, dims, vector", [
    (SHORT_LAYERNORM, {"R": 23}, True), (SHORT_SUMSQ, {"A": 3, "B": 11}, True),
    (SHORT_SOFTMAX.format(t="f32", n=5), {"R": 9}, False), (CONCAT_SOFTMAX, {"R": 9}, True)])
def test_short_rows_of_other_lengths_match_numpy(source, dims, vector):
    """Rows of 12 (4 lanes, the last idle), of 20 (5 vectors on 8 lanes: a group
    reduction of 8 lanes, 3 of them masked), of 5 (no whole vectors: only the
    scalar kernel), of 8 gathered from two inputs (loads one by one, whose later copies
    feed only kept values and are not issued; the store a vector)."""
    module, launched = _check(source, dims)
    assert ("f_0_vector" in module.source) == vector
    assert launched == (["f_0_vector"] if vector else ["f_0"])
    if "20]" in source:
        assert "width = 8" in module.source and "_group_reduce_add" in module.source


def test_unaligned_rows_fall_back_on_the_scalar_kernel():
    source = SHORT_SOFTMAX.format(t="f32", n=16)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    launched = record_launches(module.python_module, ["f_0", "f_0_vector"])
    x = np.random.default_rng(2).standard_normal(16 * 9 + 1).astype(np.float32)
    view = cuda.to_device(x)[1:].reshape(9, 16)  # rows 4 bytes off a 16-byte boundary
    got = module["f"](view)
    e = np.exp(x[1:].reshape(9, 16) - x[1:].reshape(9, 16).max(axis=1, keepdims=True))
    assert_close(np.asarray(got), e / e.sum(axis=1, keepdims=True), n_ops=5, reduced=16)
    assert launched == ["f_0"]


def test_streaming_rows_walk_tiles_of_loads():
    """Rows longer than a register-held row: tiles of VALUES_PER_THREAD // 2 values per
    thread, the tile's loads first; several tiles per row and a partial last one."""
    softmax = compile_text(SHORT_SOFTMAX.format(t="f32", n="C"), "t.fuse", level="fused")
    hw = dataclasses.replace(get_target(), vector_width=1, row_values_per_thread=4,
                             row_threads=32, short_row_values=4,
                             shared_row_bytes=0)  # (else held in shared memory)
    text = generate(softmax, "simulator", hw)
    module = load_source(text, "streaming_tiles")
    assert "for base in range(0, C, max(1, VALUES_PER_THREAD // 2) * nthreads):" in text
    module._split_stages = lambda points, extent, reread: False  # (3 rows: else split)
    launched = record_launches(module, ["f_0", "f_0_streaming"])
    x = np.random.default_rng(4).standard_normal((3, 301)).astype(np.float32)
    x[1, 7] = np.nan
    got = module.f(cuda.to_device(x)).copy_to_host()
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(got, e / e.sum(axis=1, keepdims=True), n_ops=5, reduced=301)
    assert launched == ["f_0_streaming"]


def test_short_softmax_kernel_for_sm90_uses_16_byte_accesses_and_shuffles(tmp_path):
    """What the H100 runs for rows of 16 f32: one 16-byte load a lane, the group's
    shuffles, no spills, and at most 32 registers (4 blocks of 512 threads per SM)."""
    from test_ptx import kernels, toolchain_problem
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    path = tmp_path / "short.fuse"
    path.write_text(SHORT_SOFTMAX.format(t="f32", n=16).replace("func f", "func short"))
    found = {k["kernel"]: k for k in kernels(str(path))}
    vector = found["short_0_vector"]
    assert vector["v4_loads"] > 0 and vector["shuffles"], vector
    assert vector["spill_bytes"] == 0 and vector["f64"] == [], vector
    assert vector["registers"] <= 32, vector


def _schedules(source: str, dims=None) -> list[str]:
    from mlfuse.dialects.fused import KernelOp
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims} if dims else None)
    return [k["schedule"] for k in module.funcs[0].body.ops if isinstance(k, KernelOp)]


COLSUM = "func f(x: f32[R, C]) -> f32[C] { return sum(x, axis=0) }"
MIDDLE_SOFTMAX = "func f(x: f32[B, S, D]) -> f32[B, S, D] { return softmax(x, axis=1) }"


def test_column_sums_of_unknown_length_are_sized_per_call():
    """Unbound R: split-columns, whose chunks the host sizes from each call (strips,
    best at the default 1024 x 1024, measured slower at 16384 x 4096); bound, the cost
    model decides."""
    assert _schedules(COLSUM) == ["split-columns"]
    assert _schedules(COLSUM, {"R": 16384, "C": 4096}) == ["split-columns"]
    assert _schedules(COLSUM, {"R": 1024, "C": 1024}) == ["strips"]


def test_a_thread_per_column_pays_for_its_rereads():
    """Softmax over a middle axis: one thread per point walks its column three times, and
    the columns of the threads in flight pass L2, so the model counts the re-reads from
    DRAM as it does for strips: strips at the default size and at the benchmark's."""
    assert _schedules(MIDDLE_SOFTMAX) == ["strips"]
    assert _schedules(MIDDLE_SOFTMAX, {"B": 64, "S": 256, "D": 2048}) == ["strips"]


RESIDUAL_LAYERNORM = (
    "func f(x: f32[R, C], r: f32[R, C], g: f32[C], b: f32[C]) -> (f32[R, C], f32[R, C]) {\n"
    "    h = x + r\n    return h, layernorm(h, g, b, axis=-1, eps=1e-5)\n}")


def _kernel(source: str, name: str) -> str:
    kernel = source[source.index(f"def {name}("):]
    return kernel[:kernel.index("\n\n\n")]


@pytest.mark.parametrize("c, kernel", [(520, "f_0_vector"), (522, "f_0_peeled")])
def test_a_residual_row_keeps_its_sum_not_both_operands(c, kernel):
    """h = x + r, then layernorm(h): three row loops read h. Computing it again in each
    would hold x and r for all three (two arrays a thread); the first loop keeps h
    instead (one array), later loops read it there, and x and r are read in the first
    loop only. Both results as NumPy gives them, NaN and infinities too, from the
    registers kernel (rows of 520: whole vectors; 522: their ends peeled off)."""
    func = parse_program(RESIDUAL_LAYERNORM, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"R": 3, "C": c}, seed=7)
    inputs[0][1, 5], inputs[1][2, 9] = np.nan, np.inf
    module = mlfuse.compile_source(RESIDUAL_LAYERNORM, "t.fuse", target="simulator")
    launched = record_launches(module.python_module, ["f_0", "f_0_vector", "f_0_peeled"])
    got = module["f"](*inputs)
    assert launched == [kernel]
    assert_results_close(func, run_tensor(func, inputs), got)
    text = _kernel(module.source, kernel)
    parts = 2 if kernel == "f_0_peeled" else 1  # (a row loop's vectors, then its ends)
    assert text.count("= x_vals[slot]") == parts and text.count("= r_vals[slot]") == parts
    assert text.count("h_vals[slot] = h_1") == parts and text.count("= h_vals[slot]") == 2 * parts


def test_a_held_rows_kernel_computes_the_sum_again():
    """The shared-memory variants compute h again in their shared parts; a kept array
    would be registers on top of the held values' (it spilled), so they keep none."""
    module = mlfuse.compile_source(RESIDUAL_LAYERNORM, "t.fuse", target="simulator")
    text = _kernel(module.source, "f_0_shared")
    assert "h_vals[slot] = h_1" not in text and text.count("h_2 = x_v_1 + r_v_1") == 2


def test_parameter_vectors_are_read_just_before_their_lanes():
    """gamma[k] and beta[k] are the same for every row (L2 holds them): the epilogue
    reads one vector of each just before that vector's lanes, not all of the thread's
    ahead with the row's loads (their registers pushed residual + layernorm in f16 to
    112 a thread); the row's own loads still go ahead of any use."""
    module = mlfuse.compile_source(RESIDUAL_LAYERNORM, "t.fuse", target="simulator")
    text = _kernel(module.source, "f_0_vector")
    epilogue = text[text.rindex("for vec in range"):]
    assert epilogue.index("_load_vector(g, (first,)") < epilogue.index("for lane in")
    assert epilogue.index("_load_vector(b, (first,)") < epilogue.index("for lane in")
    first = text[:text.index("for lane in")]  # x and r: every vector ahead of the lanes
    assert first.count("for vec in range") == 2 and "_load_vector(x," in first


def test_the_scalar_fallback_asks_for_two_resident_blocks():
    """Odd or misaligned rows take the scalar registers kernel, whose address a value
    left ptxas at 146-166 registers (one block an SM); it asks for two blocks (128
    registers): on the H100 1.8x faster at f16 layernorm 16384 x 4094."""
    text = generate(compile_text(RESIDUAL_LAYERNORM, "t.fuse", level="fused"), "cuda")
    assert "@cuda.jit(launch_bounds=(REGISTER_ROW_THREADS, 2))\ndef f_0(" in text
    assert "@cuda.jit(launch_bounds=REGISTER_ROW_THREADS)\ndef f_0_vector(" in text
