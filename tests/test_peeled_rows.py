"""Rows held in registers whose length is no multiple of a vector (peeled_rows.py): the
peeled kernel takes each row's head and tail a value a thread and the rest as whole
aligned vectors. Numerics against the NumPy interpreter under the simulator (whose
vector moves raise on a misaligned address, as the GPU would fault), NaN and
infinities included; the host's choice; and the generated code."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from numba import cuda

import mlfuse
from mlfuse.codegen import generate
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.runtime.loader import load_source
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close, record_launches

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN rows

LAYERNORM = ("func f(x: {t}[R, C], g: {t}[C], b: {t}[C]) -> {t}[R, C] {{\n"
             "    return layernorm(x, g, b, axis=-1, eps=1e-5)\n}}")
RESIDUAL_LAYERNORM = (
    "func f(x: {t}[R, C], r: {t}[R, C], g: {t}[C], b: {t}[C]) -> ({t}[R, C], {t}[R, C]) {{\n"
    "    h = x + r\n    return h, layernorm(h, g, b, axis=-1, eps=1e-5)\n}}")
SOFTMAX = "func f(x: {t}[R, C]) -> {t}[R, C] {{ return softmax(x, axis=1) }}"
RMSNORM = ("func f(x: {t}[R, C], w: {t}[C]) -> {t}[R, C] {{\n"
           "    return x * rsqrt(mean(x * x, axis=1, keepdims=true) + 1e-6) * w\n}}")
THREE_D = "func f(x: {t}[A, B, C]) -> {t}[A, B, C] {{ return softmax(x, axis=2) }}"


def _module(source: str):
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    py = module.python_module
    py.SHORT_ROW_VALUES = py.SHORT_ROW_SCALARS = 0  # a block per row (no short-row plan)
    return module, record_launches(py, [n for n in dir(py) if n.startswith("f_0")])


def _poison(inputs):
    x = inputs[0]
    x.reshape(-1, x.shape[-1])[1, 2] = np.nan       # a NaN in a row's head or vectors
    x.reshape(-1, x.shape[-1])[-1, -1] = np.inf     # an infinity in a row's tail


@pytest.mark.parametrize("program, dtype, dims", [
    (LAYERNORM, "f16", {"R": 9, "C": 41}),            # rows at each of 8 phases
    (RESIDUAL_LAYERNORM, "f16", {"R": 9, "C": 83}),   # two outputs, a kept sum
    (RESIDUAL_LAYERNORM, "f32", {"R": 2, "C": 1023}),  # every slot of every thread used
    (SOFTMAX, "f32", {"R": 5, "C": 37}),
    (SOFTMAX, "f16", {"R": 9, "C": 5}),               # shorter than a vector: no vectors
    (RMSNORM, "bf16", {"R": 9, "C": 43}),
    (THREE_D, "f32", {"A": 2, "B": 3, "C": 39}),      # a row start from two indices
])
def test_odd_rows_take_the_peeled_kernel_and_match_numpy(program, dtype, dims):
    source = program.format(t=dtype)
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=11)
    _poison(inputs)
    module, launched = _module(source)
    got = module["f"](*inputs)
    assert launched == ["f_0_peeled"]
    assert_results_close(func, run_tensor(func, inputs), got)


def test_whole_vector_rows_keep_the_vector_kernel():
    source = LAYERNORM.format(t="f16")
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"R": 3, "C": 48}, seed=1)
    module, launched = _module(source)
    assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))
    assert launched == ["f_0_vector"]


def test_a_misaligned_buffer_falls_back_on_the_scalar_kernel():
    """A buffer starting 4 bytes off a vector boundary: no row of it has whole aligned
    vectors at the output's phase, so ``_peel_ready`` refuses it."""
    module, launched = _module(SOFTMAX.format(t="f32"))
    x = np.random.default_rng(2).standard_normal(7 * 41 + 1).astype(np.float32)
    rows = x[1:].reshape(7, 41)
    got = np.asarray(module["f"](cuda.to_device(x)[1:].reshape(7, 41)))
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert launched == ["f_0"]


def test_peel_ready_refuses_rows_with_gaps_between_them():
    """The generated module is standalone: its host checks what the runtime's argument
    checks also refuse (rows sliced out of wider ones, whose phases differ from a
    contiguous output's)."""
    module, _ = _module(SOFTMAX.format(t="f32"))
    ready = module.python_module._peel_ready
    wide = cuda.to_device(np.zeros((7, 41), np.float32))
    assert ready(wide)
    assert not ready(wide[:, :37]) and not ready(cuda.to_device(np.zeros(9, np.float32))[1:])


def _kernel(text: str, name: str) -> str:
    kernel = text[text.index(f"def {name}("):]
    return kernel[:kernel.index("\n\n\n")]


def test_the_peeled_kernel_moves_the_rows_phase_as_vectors_and_reads_parameters_in_place():
    """x and the output share the row's phase: 16-byte vectors from the row's first
    aligned value (``head``); gamma and beta (phase 0) are read where used, not held;
    each row loop then takes the thread's one value of the row's ends."""
    text = generate(compile_text(RESIDUAL_LAYERNORM.format(t="f16"), "t.fuse",
                                 level="fused"), "cuda")
    kernel = _kernel(text, "f_0_peeled")
    assert "@cuda.jit(launch_bounds=REGISTER_ROW_THREADS)\ndef f_0_peeled(" in text
    assert "head = min((VECTOR_WIDTH_16 - row_start % VECTOR_WIDTH_16) % VECTOR_WIDTH_16, C)" \
        in kernel
    assert "first = head + (tid + vec * nthreads) * VECTOR_WIDTH_16" in kernel
    for move in ("_load_halves(x, (i0, first)", "_load_halves(r, (i0, first)",
                 "_store_halves(h, (i0, first)", "_store_halves(add, (i0, first)"):
        assert move in kernel
    assert "g_vals" not in kernel and kernel.count("g_v = np.float32(g[k])") == 2
    assert kernel.count("= end  # this thread's value of the row's ends") == 3
    assert "x_vals = cuda.local.array(PEELED_ROW_SLOTS, numba.float32)" in kernel
    assert ("elif VALUES_PER_THREAD % VECTOR_WIDTH_16 == 0 and "
            "_peel_ready(x, r, h, add, width=VECTOR_WIDTH_16):") in text


def test_rows_of_constant_whole_vectors_have_no_peeled_kernel():
    text = generate(compile_text(SOFTMAX.format(t="f32").replace("C]", "64]"), "t.fuse",
                                 level="fused"), "cuda")
    assert "f_0_peeled" not in text and "f_0_vector" in text


# registers hold 8 values x 32 threads: rows past 256 values are held in shared memory too
TINY = dataclasses.replace(get_target(), row_values_per_thread=8, row_threads=32,
                           shared_row_threads=32, split_stage_rows_per_sm=0)


@pytest.mark.parametrize("program, dtype, dims", [
    (RESIDUAL_LAYERNORM, "f16", {"R": 9, "C": 301}),
    (SOFTMAX, "f32", {"R": 5, "C": 299}),
])
def test_odd_rows_past_registers_take_the_peeled_held_kernel_and_match_numpy(program, dtype,
                                                                             dims):
    """Rows past registers of odd length: the held-rows kernel's vectors in registers
    and in shared memory (cp.async of whole vectors only) shifted by the row's head, the
    ends a value a thread; both outputs as NumPy gives them, NaN and infinities too."""
    source = program.format(t=dtype)
    func = parse_program(source, "t.fuse").funcs[0]
    text = generate(compile_text(source, "t.fuse", level="fused"), "simulator", TINY)
    kernel = _kernel(text, "f_0_shared_peeled")
    assert "first < vectors_end, 16)" in kernel and "first = head + (tid + vec * nthreads)" in kernel
    text = re.sub(r"^SHORT_ROW_(VALUES|SCALARS) = \d+", r"SHORT_ROW_\1 = 0", text, flags=re.M)
    module = load_source(text, "peeled_held_test")
    launched = record_launches(module, [n for n in dir(module) if n.startswith("f_0")])
    inputs = random_inputs(func, dims, seed=13)
    _poison(inputs)
    got = module.f(*[cuda.to_device(a) for a in inputs])
    got = tuple(g.copy_to_host() for g in got) if isinstance(got, tuple) else got.copy_to_host()
    assert launched == ["f_0_shared_peeled"]
    assert_results_close(func, run_tensor(func, inputs), got)


@pytest.mark.parametrize("columns", [20, 21])
def test_values_per_thread_edited_below_a_vector_take_the_scalar_kernel(columns):
    """VALUES_PER_THREAD is a module constant one may edit: below a vector, the vector
    and peeled kernels would take no vectors (rows of 20 came back as garbage), so the
    host runs the scalar kernel."""
    source = SOFTMAX.format(t="f32")
    func = parse_program(source, "t.fuse").funcs[0]
    module, launched = _module(source)
    module.python_module.VALUES_PER_THREAD = 2
    inputs = random_inputs(func, {"R": 3, "C": columns}, seed=2)
    assert_results_close(func, run_tensor(func, inputs), module["f"](*inputs))
    assert launched == ["f_0"]
