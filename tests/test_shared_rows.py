"""Long rows held in registers and shared memory (codegen/shared_rows.py): on the
simulator with a register budget small enough (4 values x 32 threads) that rows of a
few hundred values need the shared part, each held kernel agrees with NumPy and is
what the host launches; rows the variant cannot take (not whole vectors, misaligned,
few rows with a split plan) go to the other plans; the cost model and explain say so."""
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from mlfuse.codegen import generate
from mlfuse.dialects import parse_ir
from mlfuse.hardware import get_target
from mlfuse.pipeline import compile_text
from mlfuse.runtime.loader import load_source
from mlfuse.tools.explain import explain_module, format_text

from helpers import assert_close, record_launches
from test_codegen import NORM, SOFTMAX
from test_codegen_vector import offset_by_one

# registers hold 4 values x 32 threads: rows past 128 values are held in shared memory too
TINY = dataclasses.replace(get_target(), row_values_per_thread=4, row_threads=32,
                           shared_row_threads=32)
SOFTMAX_FUSE = "func softmax(x: {t}[R, C]) -> {t}[R, C] {{ return softmax(x, axis=1) }}"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def _module(module_ir, hw=TINY):
    """The simulator module of ``module_ir`` and the list its kernels note launches in."""
    source = generate(module_ir, "simulator", hw)
    # rows a warp holds take the short-row plan first (codegen/short_rows.py): these tiny
    # rows are meant to be held by a block, as the long rows this variant is for
    source = re.sub(r"^SHORT_ROW_(VALUES|SCALARS) = \d+", r"SHORT_ROW_\1 = 0", source, flags=re.M)
    module = load_source(source, "shared_rows_test")
    kernels = re.findall(r"^@cuda\.jit(?:\(launch_bounds=[^\n]*\))?\ndef (\w+)\(", source,
                         flags=re.MULTILINE)
    return module, record_launches(module, kernels)


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_rows_past_registers_are_held_and_match_numpy():
    from numba import cuda
    module, launched = _module(parse_ir(SOFTMAX))
    x = np.random.default_rng(0).standard_normal((3, 400)).astype(np.float32)
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    assert launched == ["softmax_0_shared"]
    assert_close(got, _softmax(x).astype(np.float32), n_ops=5, reduced=400)


def test_a_row_loop_reading_broadcast_operands_holds_only_the_row():
    """NORM: x read by both loops (held), g by the second only (a vector at a time)."""
    from numba import cuda
    module, launched = _module(parse_ir(NORM))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 392)).astype(np.float32)
    g = rng.standard_normal(392).astype(np.float32)
    got = module.norm(cuda.to_device(x), cuda.to_device(g)).copy_to_host()
    assert launched == ["norm_0_shared"]
    assert_close(got, (x - x.sum(axis=1, keepdims=True)) * g, n_ops=4, reduced=392)
    source = generate(parse_ir(NORM), "simulator", TINY)
    kernel = source[source.index("def norm_0_shared("):source.index("def norm_0_shared_peeled")]
    assert kernel.count("_cp_async(") == 1 and "g_tile" in kernel  # x copied; g not held


def test_f16_rows_are_held_as_f16():
    from numba import cuda
    module_ir = compile_text(SOFTMAX_FUSE.format(t="f16"), "s.fuse", level="fused")
    # no split plan for few rows (SPLIT_STAGE_ROWS 0): two rows are enough here
    module, launched = _module(module_ir, dataclasses.replace(TINY, split_stage_rows_per_sm=0))
    x = np.random.default_rng(2).standard_normal((2, 264)).astype(np.float16)
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    assert launched == ["softmax_0_shared"]
    assert "cuda.shared.array(0, numba.types.float16)" in generate(module_ir, "simulator", TINY)
    assert_close(got, _softmax(x).astype(np.float16), n_ops=5, reduced=264)


def test_f16_rows_move_16_byte_vectors_through_shared_memory():
    """16-bit rows take vectors of 8 values (16 bytes, as f32 rows' 4) in registers, in
    their cp.async copies and in their shared reads (8 values a thread in registers
    here: rows past 256 values held in shared memory too); rows of a multiple of 4 but
    not 8 values go to the peeled variant (peeled_rows.py), rows sliced out of wider
    ones to the scalar variant. NaN and infinite rows as NumPy."""
    from numba import cuda
    module_ir = compile_text(SOFTMAX_FUSE.format(t="f16"), "s.fuse", level="fused")
    hw = dataclasses.replace(TINY, row_values_per_thread=8, split_stage_rows_per_sm=0)
    source = generate(module_ir, "simulator", hw)
    kernel = source[source.index("def softmax_0_shared("):source.index("def softmax_0_shared_scalar")]
    assert "_cp_async(held_" in kernel and ", 16)" in kernel and "_load_held_halves(" in kernel
    module, launched = _module(module_ir, hw)
    x = np.random.default_rng(4).standard_normal((3, 524)).astype(np.float16)
    x[1, 7], x[2, 300] = np.nan, np.inf
    for cols, shift in ((520, 0), (516, 0), (512, 4)):
        part = x[:, shift:shift + cols]
        arg = cuda.to_device(x[:, :shift + cols].copy())[:, shift:] if shift else \
            cuda.to_device(part.copy())
        got = module.softmax(arg).copy_to_host()
        assert_close(got, _softmax(part).astype(np.float16), n_ops=5, reduced=cols)
    assert launched == ["softmax_0_shared", "softmax_0_shared_peeled", "softmax_0_shared_scalar"]


def test_rows_not_of_whole_aligned_vectors_are_held_a_value_at_a_time():
    """Misaligned rows: the scalar variant (shared_rows_scalar.py), its values past
    registers copied by 4-byte cp.async; odd lengths: the peeled variant."""
    from numba import cuda
    module, launched = _module(parse_ir(SOFTMAX))
    x = np.random.default_rng(3).standard_normal((2, 139)).astype(np.float32)
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    assert_close(got, _softmax(x).astype(np.float32), n_ops=5, reduced=139)
    x = x[:, :136].copy()
    got = module.softmax(offset_by_one(x)).copy_to_host()
    assert_close(got, _softmax(x).astype(np.float32), n_ops=5, reduced=136)
    assert launched == ["softmax_0_shared_peeled", "softmax_0_shared_scalar"]


def test_slots_past_registers_are_walked_by_stepped_cursors():
    """The scalar variant's slots past registers: k and place start at the first such
    slot and step by the block's threads while k is in the row (no slot range, no index
    test, no products a value: softmax 4000 x 12289 on the H100 0.314 -> 0.213 ms)."""
    source = generate(parse_ir(SOFTMAX), "simulator", TINY)
    kernel = source[source.index("def softmax_0_shared_scalar("):]
    kernel = kernel[:kernel.index("\n\n\n")]
    walks = re.findall(r"^ +while (\w+) < C:$", kernel, flags=re.M)
    assert len(walks) == 4  # the copies, then the shared part of each of the three loops
    assert kernel.count("place += numba.uint32(nthreads)") == 4
    assert "range(4, n_vectors" not in kernel and "[numba.uint32(x_at + place)]" in kernel


def test_odd_f16_rows_are_held_by_plain_copies():
    """2-byte values: no cp.async moves them, a load and a store each instead (rows off
    a vector boundary: odd ones that are aligned take the peeled variant)."""
    module_ir = compile_text(SOFTMAX_FUSE.format(t="f16"), "s.fuse", level="fused")
    module, launched = _module(module_ir, dataclasses.replace(TINY, split_stage_rows_per_sm=0))
    x = np.random.default_rng(5).standard_normal((2, 133)).astype(np.float16)
    got = module.softmax(offset_by_one(x)).copy_to_host()
    assert launched == ["softmax_0_shared_scalar"]
    assert_close(got, _softmax(x).astype(np.float16), n_ops=5, reduced=133)


def test_odd_rows_with_a_broadcast_operand_hold_only_the_row():
    """NORM at an odd length, x off a vector boundary: x copied into shared memory
    (4-byte cp.async), g read from memory in the shared part."""
    from numba import cuda
    module, launched = _module(parse_ir(NORM))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 201)).astype(np.float32)
    g = rng.standard_normal(201).astype(np.float32)
    got = module.norm(offset_by_one(x), cuda.to_device(g)).copy_to_host()
    assert launched == ["norm_0_shared_scalar"]
    assert_close(got, (x - x.sum(axis=1, keepdims=True)) * g, n_ops=4, reduced=201)
    source = generate(parse_ir(NORM), "simulator", TINY)
    kernel = source[source.index("def norm_0_shared_scalar"):]
    assert kernel[:kernel.index("\ndef ")].count("_cp_async(") == 1  # x only


def test_held_blocks_split_while_an_sms_rows_fit_shared_memory():
    from mlfuse.row_hold import shared_row_plan
    most = 226 * 1024
    # layernorm 1024 x 32768 f32: 1024 threads and 64 KB, or two blocks of 512 and 96 KB
    assert shared_row_plan(32768, 4, 16, 1024, 4) == (1024, 65536)
    assert shared_row_plan(32768, 4, 16, 1024, 4, most) == (512, 98304)
    # 65536 values: 512 threads would take 224 KB a block; two of them do not fit
    assert shared_row_plan(65536, 4, 16, 1024, 4, most) == (1024, 196608)
    assert shared_row_plan(4000, 4, 16, 1024, 4, most) == (256, 0)  # (not a full block)
    # 5120 values: registers of 512 threads hold them, but four blocks of 256 (4 KB of
    # shared memory each) keep four rows an SM; never below a quarter of the threads
    assert shared_row_plan(5120, 4, 16, 1024, 4) == (512, 0)
    assert shared_row_plan(5120, 4, 16, 1024, 4, most) == (256, 4096)
    # f16 rows of 16384 (2 bytes a value, 8 halves a vector): four blocks of 256, 24 KB each
    assert shared_row_plan(16384, 2, 16, 1024, 8, most) == (256, 24576)
    # 48 KB a block at 256 threads would not let four fit 100 KB: two of 512
    assert shared_row_plan(16384, 4, 16, 1024, 4, 100 * 1024) == (512, 32768)
    from numba import cuda
    module, launched = _module(parse_ir(SOFTMAX), dataclasses.replace(
        TINY, shared_row_threads=64, shared_row_split=True))
    x = np.random.default_rng(8).standard_normal((2, 300)).astype(np.float32)
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    assert launched == ["softmax_0_shared"]
    assert_close(got, _softmax(x).astype(np.float32), n_ops=5, reduced=300)


def test_rows_past_shared_memory_stream():
    from numba import cuda
    module, launched = _module(parse_ir(SOFTMAX), dataclasses.replace(TINY, shared_row_bytes=256))
    x = np.random.default_rng(6).standard_normal((1, 197)).astype(np.float32)
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    assert launched == ["softmax_0_streaming"]
    assert_close(got, _softmax(x).astype(np.float32), n_ops=5, reduced=197)


@pytest.mark.parametrize("rows, plan", [(3, "softmax_0_stage0_vector"), (5, "softmax_0_shared")])
def test_few_rows_split_unless_held_rows_are_faster(rows, plan):
    """8 SMs, softmax's 3 stages: the split plan moves 2x the held kernel's bytes; 3 rows
    held leave 5 of 8 SMs idle (2.7x), 5 rows 1.6x."""
    from numba import cuda
    module_ir = compile_text(SOFTMAX_FUSE.format(t="f32"), "s.fuse", level="fused")
    hw = dataclasses.replace(TINY, sm_count=8, split_stage_rows_per_sm=2)
    module, launched = _module(module_ir, hw)
    x = np.random.default_rng(4).standard_normal((rows, 256)).astype(np.float32)
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    assert launched[0] == plan
    assert_close(got, _softmax(x).astype(np.float32), n_ops=5, reduced=256)


def _softmax_report(rows: int, cols: int) -> str:
    loops = compile_text(SOFTMAX_FUSE.format(t="f32"), "s.fuse", level="loops")
    return format_text(explain_module(loops, {"R": rows, "C": cols}))


def test_explain_says_which_rows_are_held():
    held = _softmax_report(512, 65536)
    assert "held in registers and shared memory at these sizes: 1024 threads x 16 values " \
           "and 192 KB" in held
    # 256 rows of 32768 on 132 SMs: held (2 rows on the busiest SM against 1.94 a SM);
    # 32 rows: the split plan (100 SMs idle)
    assert "held in registers and shared memory" in _softmax_report(256, 32768)
    assert "shared memory" not in _softmax_report(32, 65536)
    assert "held a value at a time" in _softmax_report(4000, 12289)
    assert "shared memory" not in _softmax_report(512, 262144)  # 1 MB rows: past it


def test_the_cost_model_prices_a_held_row_below_a_streamed_one():
    from mlfuse.transforms.fusion.cost import kernel_cost
    dims = {"R": 512, "C": 65536}
    module = compile_text(SOFTMAX_FUSE.format(t="f32"), "s.fuse", level="fused",
                          fuse_options={"dims": dims})
    (kernel,) = [op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]
    streamed = dataclasses.replace(get_target(), shared_row_bytes=0)
    held = kernel_cost(kernel, dims, get_target()).seconds_total
    before = kernel_cost(kernel, dims, streamed).seconds_total
    # x read once and the output written once (268 MB at 2.81 TB/s: 96 us), against the
    # streaming kernel's rereads at half the threads
    assert 95e-6 < held < 0.6 * before


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
INSTANCE_NORM = (EXAMPLES / "instance_norm.fuse").read_text()  # x: [N, K, H, W]
GROUP_NORM = (EXAMPLES / "group_norm.fuse").read_text()  # 8 groups


def _flat_rows_case(source: str, shapes, kernel: str, offset: bool = False) -> None:
    """``source``'s rows past TINY's registers (flat rows: over several axes, or through
    a reshape) on the simulator: ``kernel`` is what the host launches, and the results
    agree with the NumPy interpreter."""
    from numba import cuda
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    from helpers import assert_results_close
    func = parse_program(source, "t.fuse").funcs[0]
    module, launched = _module(compile_text(source, "t.fuse", level="fused"),
                               dataclasses.replace(TINY, split_stage_rows_per_sm=0))
    rng = np.random.default_rng(len(kernel))
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    args[0][0, 0, 1, 2], args[0][-1, -1, 0, 1] = np.nan, np.inf
    device = [offset_by_one(a) if offset and n == 0 else cuda.to_device(a)
              for n, a in enumerate(args)]
    got = module.ENTRY_POINTS[func.sym_name](*device)
    assert launched == [kernel]
    assert_results_close(func, run_tensor(func, args), got)


def test_rows_over_several_axes_are_held_in_vectors():
    """Instance norm's rows over [H, W] (flatten-row-nests: x[n, c, k // W, k % W]), 200
    values past TINY's 128: x copied to shared memory at row_base + k, no divisions."""
    _flat_rows_case(INSTANCE_NORM, [(2, 3, 10, 20)], "instance_norm_0_shared")
    source = generate(compile_text(INSTANCE_NORM, "t.fuse", level="fused"), "simulator", TINY)
    kernel = source[source.index("def instance_norm_0_shared("):]
    kernel = kernel[:kernel.index("\ndef ")]
    assert "_divmod_index(k" not in kernel and kernel.count("_cp_async(") == 1


@pytest.mark.parametrize("shape, offset", [((2, 3, 10, 21), False), ((2, 3, 10, 20), True)])
def test_flat_rows_of_no_whole_aligned_vectors_are_held_a_value_at_a_time(shape, offset):
    """210 values a row (no whole vectors), or x one element off a boundary: the host's
    flat-row tests (row bases as products, the buffer's start) send them to the scalar
    held kernel."""
    _flat_rows_case(INSTANCE_NORM, [shape], "instance_norm_0_shared_scalar", offset)


def test_rows_through_a_reshape_are_held():
    """Group norm's rows of reshape(x, [N, 8, C/8*H*W]), 200 values: held (a value at a
    time: gamma[c] divides each lane's index, so no vector variant), not streamed."""
    _flat_rows_case(GROUP_NORM, [(2, 16, 10, 10), (16,), (16,)], "group_norm_0_shared_scalar")
    # its channel divisions are 32-bit only, so the host runs it where indices fit 31 bits
    text = generate(compile_text(GROUP_NORM, "t.fuse"), target="cuda")
    kernel = text[text.index("def group_norm_0_shared_scalar("):]
    assert "_divmod_index32(" in kernel[:kernel.index("\n\n\n")] and \
        "_divmod_index(" not in kernel[:kernel.index("\n\n\n")]
    launch = text[text.index("group_norm_0_shared_scalar[") - 400:text.index("group_norm_0_shared_scalar[")]
    assert "N * C * H * W < 2**31" in launch and "(n_points) * (C_H_W_8) < 2**31" in launch


def test_explain_says_how_flat_rows_are_held():
    """Instance norm's rows over [H, W] move in whole vectors; group norm's (gamma[c]
    divides each value's index) a value at a time: the cost model and explain say so."""
    def report(source, dims):
        loops = compile_text(source, "t.fuse", level="loops")
        return format_text(explain_module(loops, dims))
    instance = report(INSTANCE_NORM, {"N": 32, "K": 64, "H": 128, "W": 128})
    assert "256 threads x 16 values and 48 KB of shared memory a block, in whole vectors" \
        in instance
    group = report(GROUP_NORM, {"N": 64, "C": 128, "H": 28, "W": 28})
    assert "threads x 8 values and 41 KB of shared memory a block, held a value at a time" in group


def test_rows_held_a_value_at_a_time_leave_few_rows_to_the_split_plan():
    """Few rows (8 of 200 values on 8 SMs, split_stage_rows_per_sm 2): softmax's held vector rows would
    pre-empt the split plan (test_few_rows_split_unless_held_rows_are_faster), group
    norm's rows, held only a value at a time, do not: its statistics' stage runs."""
    from numba import cuda
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    from helpers import assert_results_close
    func = parse_program(GROUP_NORM, "t.fuse").funcs[0]
    hw = dataclasses.replace(TINY, sm_count=8, split_stage_rows_per_sm=2)
    module, launched = _module(compile_text(GROUP_NORM, "t.fuse", level="fused"), hw)
    rng = np.random.default_rng(9)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(1, 40, 5, 8), (40,), (40,)]]
    got = module.group_norm(*[cuda.to_device(a) for a in args])
    assert launched[0].startswith("group_norm_0_stage0") and len(launched) == 2
    assert_results_close(func, run_tensor(func, args), got)
