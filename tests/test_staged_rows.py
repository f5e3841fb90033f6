"""Row kernels storing along their points through a shared tile (codegen/staged_rows.py):
a layernorm or softmax over rows stored transposed is one kernel, a warp a row. Run
under the simulator against the NumPy interpreter at sizes where the block's last rows
and the row's last step are part-filled, compiled for large sizes and for constant
ones (the rows then held in registers), in f32, f16 and bf16, with NaN and inf."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.hardware import get_target, target_in_effect
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close, record_launches
from strategies import fuzz_settings, inputs_for

LAYERNORM_T = """
func f(x: {t}[R, C], g: {t}[C], b: {t}[C]) -> {t}[C, R] {{
    return transpose(layernorm(x, g, b))
}}"""
SOFTMAX_T = """
func f(x: {t}[R, C]) -> {t}[C, R] {{
    return transpose(softmax(x, axis=1))
}}"""
# points over two axes: each [S, D] slice's rows stored as [D, S]
LAYERNORM_3D = """
func f(x: f32[B, S, D], g: f32[D], b: f32[D]) -> f32[B, D, S] {
    return transpose(layernorm(x, g, b), [0, 2, 1])
}"""
# the softmax stored as it is (directly, where the row exists) beside its transpose
BOTH = """
func f(x: f32[R, C]) -> (f32[R, C], f32[C, R]) {
    y = softmax(x, axis=1)
    return y, transpose(y)
}"""
# a bool and an integer output stored transposed (their tiles: int32, int64)
MASKS = """
func f(x: f32[R, C]) -> (bool[C, R], i32[C, R]) {
    m = x > mean(x, axis=1, keepdims=true)
    return transpose(m), transpose(cast(m, i32) * 3 - 1)
}"""
# the row's index split over two axes of the output (out[k // 2, k % 2, r]): each value
# travels with its offset (no row start plus k times a stride)
REGROUPED = """
func f(x: f32[R, C]) -> f32[C / 2, 2, R] {
    return reshape(transpose(softmax(x, axis=1)), [C / 2, 2, R])
}"""
# constant sizes: rows of 40 held in registers (two slots a lane), 7 rows
HELD = """
func f(x: f32[7, 40], g: f32[40], b: f32[40]) -> f32[40, 7] {
    return transpose(layernorm(x, g, b))
}"""


@pytest.fixture(autouse=True)
def _staged_rows_on():
    """The target's row_staged_stores knob on (off by default until timed on the GPU)."""
    hw = dataclasses.replace(get_target(), row_staged_stores=True)
    with target_in_effect(hw):
        yield


# the fuse pass plans for sizes where a warp a row pays (at the default 1024 rows of 1024
# the model finds 1024 warps, a value a lane in flight, too few and keeps two kernels)
PLAN = {"dims": {"R": 16384, "C": 1024, "B": 64, "S": 256, "D": 1024}}


def staged_kernel(source: str) -> KernelOp:
    """The one kernel of ``source`` compiled for PLAN's sizes: staged rows."""
    func = compile_text(source, "t.fuse", fuse_options=PLAN).funcs[0]
    (k,) = [op for op in func.body.ops if isinstance(op, KernelOp)]
    assert k["schedule"] == "warp-rows" and k["staged_rows"] == 1
    return k


def run(source: str, dims: dict, nan: bool = False):
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=11)
    if nan:
        inputs[0][0, 1] = np.nan
        inputs[0][1, 2], inputs[0][2, 0] = np.inf, -np.inf
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=PLAN)
    name = staged_kernel(source)["kernel_name"]
    assert "stage_" in module.source  # the tiles and the copy-out are there
    launched = record_launches(module.python_module, [name])
    with np.errstate(invalid="ignore"):
        got = module["f"](*inputs)
        assert_results_close(func, run_tensor(func, inputs), got)
    assert launched == [name]


@pytest.mark.parametrize("source, dims", [
    (LAYERNORM_T.format(t="f32"), {"R": 5, "C": 70}),  # a block's last row past the end
    (LAYERNORM_T.format(t="f32"), {"R": 1, "C": 32}),  # one row, one whole step
    (LAYERNORM_T.format(t="f32"), {"R": 3, "C": 300}),  # two tiles of loads, the last short
    (SOFTMAX_T.format(t="f32"), {"R": 3, "C": 33}),
    (SOFTMAX_T.format(t="f16"), {"R": 4, "C": 45}),
    (LAYERNORM_T.format(t="bf16"), {"R": 3, "C": 37}),
    (LAYERNORM_3D, {"B": 2, "S": 3, "D": 36}),
    (BOTH, {"R": 3, "C": 40}),
    (MASKS, {"R": 3, "C": 37}),
    (REGROUPED, {"R": 3, "C": 38}),
], ids=["layernorm", "one_row", "two_tiles", "softmax", "softmax_f16", "layernorm_bf16", "points_3d",
        "stored_both_ways", "bool_and_int", "offsets_travel"])
def test_staged_rows_agree_with_numpy(source, dims):
    run(source, dims)


def test_nan_and_inf_follow_numpy():
    run(SOFTMAX_T.format(t="f32"), {"R": 3, "C": 35}, nan=True)


def test_rows_held_in_registers_are_staged_too():
    """Constant rows a warp holds (40 values: two slots a lane) take the held path, its
    fill phase before the staged loop; the steps are the slots."""
    run(HELD, {})


# constant rows of 300 held: 10 slots a lane, in stages of a streamed row's steps (4), the
# last part-filled
HELD_STAGES = """
func f(x: f32[5, 300]) -> f32[300, 5] {
    return transpose(softmax(x, axis=1))
}"""


def test_held_rows_past_a_stage_take_several():
    import re

    from mlfuse.codegen import generate
    src = generate(compile_text(HELD_STAGES, "t.fuse", fuse_options=PLAN), "cuda")
    steps = int(re.search(r"for stage in range\(0, 10, (\d+)\):", src).group(1))
    assert 1 < steps < 10 and 10 % steps
    assert f"stage_transpose = cuda.shared.array(({steps}, STAGED_ROW_TILE), numba.float32)" in src
    run(HELD_STAGES, {})


def test_the_generated_kernel_copies_a_column_of_the_blocks_rows_at_a_time():
    from mlfuse.codegen import generate
    src = generate(compile_text(LAYERNORM_T.format(t="f32"), "t.fuse", fuse_options=PLAN), "cuda")
    kernel = src[src.index("def f_0("):]
    kernel = kernel[:kernel.index("\n\n\n")]
    assert kernel.count("cuda.syncthreads()") == 2  # a stage: the tiles whole, then read
    assert "stage_transpose = cuda.shared.array((4, STAGED_ROW_TILE), numba.float32)" in kernel
    # out[k, r]: an element's offset is its row's start plus k times the stride of k's axis
    assert "transpose_row_starts[group] = numba.int64((0) * transpose.shape[1] + i0)" in kernel
    assert "at = transpose_row_start + out_k * transpose_k_stride" in kernel
    assert "stage_at_" not in kernel
    assert "out_row = numba.uint32(cuda.threadIdx.x % STAGED_ROWS)" in kernel
    assert "out_cell = numba.uint32(out_row * STAGED_ROW_PITCH + cuda.threadIdx.x // STAGED_ROWS)" \
        in kernel
    assert "STAGED_ROW_PITCH = 32 + 32 // STAGED_ROWS" in src
    assert "transpose_flat[numba.uint64(at)]" in kernel
    assert "f_0[_pointwise_blocks(R * 32, 1), THREADS_PER_BLOCK]" in src  # a warp a row


def test_with_the_knob_off_the_transpose_keeps_its_kernel():
    """``row_staged_stores`` off (the default until timed): the builder refuses the store
    along the points, as before, and the transpose keeps its tiles."""
    hw = dataclasses.replace(get_target(), row_staged_stores=False)
    with target_in_effect(hw):
        func = compile_text(LAYERNORM_T.format(t="f32"), "t.fuse", fuse_options=PLAN).funcs[0]
    kinds = [op["schedule"] for op in func.body.ops if isinstance(op, KernelOp)]
    assert kinds == ["row", "transpose-tiles"]
    with target_in_effect(hw):  # explain says what the knob would do
        from mlfuse.pipeline import lower
        from mlfuse.tools.explain import explain_module, format_text
        module = lower(parse_program(LAYERNORM_T.format(t="f32"), "t.fuse"), "loops")
        text = format_text(explain_module(module, PLAN["dims"]))
    assert "staged rows would write it coalesced: the target's row_staged_stores is off" in text


def test_a_staged_kernel_generated_with_the_knob_off_stores_directly():
    """IR that says staged_rows (``mlfuse opt`` text, or a module planned with the knob
    on) generated for a target with it off: the same warp-a-row kernel, its stores
    written directly (scattered, no tiles), the same numbers."""
    source = SOFTMAX_T.format(t="f32")
    module = compile_text(source, "t.fuse", fuse_options=PLAN)
    with target_in_effect(dataclasses.replace(get_target(), row_staged_stores=False)):
        compiled = mlfuse.compile_ir(module, "simulator")
    assert "Staged rows over [R]" in compiled.source and "stage_at_" not in compiled.source
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"R": 3, "C": 40}, seed=3)
    assert_results_close(func, run_tensor(func, inputs), compiled["f"](*inputs))


def test_compiled_for_symbols_the_transpose_keeps_its_kernel():
    """Rows whose count or length is known only at run time keep two kernels: a warp a
    row has no split plan, and a few long rows would leave it latency-bound."""
    func = compile_text(LAYERNORM_T.format(t="f32"), "t.fuse",
                        fuse_options={"dims": {"R": 16384}}).funcs[0]
    kinds = [op["schedule"] for op in func.body.ops if isinstance(op, KernelOp)]
    assert kinds == ["row", "transpose-tiles"]
    from mlfuse.pipeline import lower
    from mlfuse.tools.explain import explain_module, format_text
    module = lower(parse_program(LAYERNORM_T.format(t="f32"), "t.fuse"), "loops")
    text = format_text(explain_module(module, {"R": 16384}))
    assert "staged rows would write it coalesced: C known only at run time" in text


def test_a_store_that_follows_no_point_is_still_refused():
    """A column softmax stored transposed (strips over columns, the store along the
    reduced axis) keeps its transpose kernel: nothing here changes it."""
    src = "func f(x: f32[R, C]) -> f32[C, R] { return transpose(softmax(x, axis=0)) }"
    func = compile_text(src, "t.fuse", fuse_options={"dims": {"R": 4096, "C": 8192}}).funcs[0]
    kinds = [op["schedule"] for op in func.body.ops if isinstance(op, KernelOp)]
    assert kinds[-1] == "transpose-tiles" and not any(
        op.attributes.get("staged_rows") for op in func.body.ops if isinstance(op, KernelOp))


# a row statistic (or two) and an epilogue reading it, the result stored transposed
ROW_EPILOGUES = [
    "x - max(x, axis=1, keepdims=true)",
    "x / (sum(abs(x), axis=1, keepdims=true) + 1.0)",
    "(x - mean(x, axis=1, keepdims=true)) * rsqrt(mean(x * x, axis=1, keepdims=true) + 1e-3)",
    "exp(x - max(x, axis=1, keepdims=true)) * b",
    "softmax(x * b, axis=1)",
    "layernorm(x, b, b)",  # (a streamed row's variance: shifted sums in the mean's pass)
]


@fuzz_settings("staged_rows")
@given(st.data())
def test_random_row_epilogues_stored_transposed_agree_with_numpy(data):
    """Random row epilogues stored transposed, at sizes where blocks and steps end
    part-way: one staged kernel, the results as the interpreter's."""
    body = data.draw(st.sampled_from(ROW_EPILOGUES))
    dtype = data.draw(st.sampled_from(["f32", "f16", "bf16"]))
    # stored transposed (an element at its row's start plus k's stride), or with the
    # row's index split over two axes (each value with its offset)
    regrouped = data.draw(st.booleans())
    sizes = {"R": data.draw(st.integers(1, 5)),
             "C": 2 * data.draw(st.integers(1, 35)) if regrouped else data.draw(st.integers(1, 70))}
    out, result = f"transpose({body})", f"{dtype}[C, R]"
    if regrouped:
        out, result = f"reshape({out}, [C / 2, 2, R])", f"{dtype}[C / 2, 2, R]"
    source = (f"func f(x: {dtype}[R, C], b: {dtype}[C]) -> {result} {{\n"
              f"    return {out}\n}}")
    note(f"{source}\nsizes {sizes}")
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, sizes, special=False))
    module = mlfuse.compile_source(source, "fuzz.fuse", target="simulator", fuse_options=PLAN)
    (k,) = [o for o in module.ir.funcs[0].body.ops if isinstance(o, KernelOp)]
    assert k["staged_rows"] == 1
    with np.errstate(all="ignore"):
        assert_results_close(func, run_tensor(func, args), module["f"](*args))
