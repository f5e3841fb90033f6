"""Transposes through shared-memory tiles ("transpose-tiles": dialects/permute.py,
mlfuse/transforms/fusion/tiles.py, mlfuse/codegen/schedule_tiles.py): which loads are
permuted, when the schedule is chosen and why, and its kernels under the simulator
against the NumPy interpreter (8 x 8 squares there, so odd sizes cover several squares
and their edges; ranks 2-4; f32, f16, i32; several tiled loads; direct loads beside)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.permute import permuted_loads
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs
from mlfuse.tools.explain import explain_module, format_text

from helpers import (assert_close, assert_drawn_program_agrees, assert_results_close,
                     record_launches)
from strategies import fuzz_settings, permuted_programs

TRANSPOSE_ADD = "func f(x: f32[N, M], y: f32[M, N]) -> f32[M, N] { return transpose(x) + y }"


def kernels(source: str, dims: dict) -> list[KernelOp]:
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims})
    return [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]


@pytest.mark.parametrize("source, dims, expected", [
    (TRANSPOSE_ADD, {"N": 8192, "M": 8192}, ("transpose-tiles", [0, 1])),
    (TRANSPOSE_ADD, {}, ("transpose-tiles", [0, 1])),  # unbound: sized at run time
    (TRANSPOSE_ADD, {"N": 8192, "M": 4}, ("transpose-tiles", [0, 1])),  # thin tiles
    (TRANSPOSE_ADD, {"N": 8192, "M": 1}, ("pointwise", None)),  # nothing to transpose
    # NCHW -> NHWC: x's last index w follows axis 2 of the [N, H, W, C] output; H and W
    # move together in every access, so coalesce-axes makes them axis 1 of [N, H*W, C]
    ("func f(x: f32[B, C, H, W]) -> f32[B, H, W, C] { return transpose(x, [0, 2, 3, 1]) * 2.0 }",
     {"B": 8, "C": 64, "H": 56, "W": 56}, ("transpose-tiles", [1, 2])),
    # the innermost axis kept (attention's heads): coalesced as it is
    ("func f(x: f32[B, S, H, D]) -> f32[B, H, S, D] { return transpose(x, [0, 2, 1, 3]) }",
     {"B": 8, "S": 512, "H": 16, "D": 64}, ("pointwise", None)),
    # a broadcast over the innermost axis is no permuted read
    ("func f(x: f32[R, C], b: f32[R, 1]) -> f32[R, C] { return x * b }",
     {"R": 4096, "C": 4096}, ("pointwise", None)),
])
def test_schedule_chosen_from_the_reads(source, dims, expected):
    (k,) = kernels(source, dims)
    assert (k["schedule"], k.attributes.get("tile_axes")) == expected


def test_permuted_loads_follow_the_moving_index():
    """The fastest-varying index is the last one that moves: trailing indices over axes of
    one point (a [1, C, 1, 1] reshape) or constants do not."""
    source = ("func f(g: f32[C], x: f32[C, R]) -> (f32[1, C, 1, 1], f32[R, C]) {\n"
              "    return reshape(g, [1, C, 1, 1]) * 2.0, transpose(x) }")
    module = compile_text(source, "t.fuse", level="loops")
    nests = [op for op in module.funcs[0].body.ops if op.name == "loops.parallel"]
    found = [[(o.operands[0].name_hint, axis) for o, axis in permuted_loads(n)] for n in nests]
    assert [f for f in found if f] == [[("x", 0)]]


def test_explain_names_the_tiles_and_why():
    module = compile_text(TRANSPOSE_ADD, "t.fuse", level="loops")
    text = format_text(explain_module(module, {"N": 8192, "M": 8192}))
    assert "[transpose-tiles over ['M', 'N']]" in text
    assert "schedule: reads of %x step along axis 0 (M), the stores along axis 1 (N): " \
           "32x32 shared-memory tiles (64x64 moving 16-byte vectors where they divide both; " \
           "thin ones where a side is under 16 at run time) make both coalesced" in text
    thin = format_text(explain_module(module, {"N": 8192, "M": 3}))
    assert "thin 8192x3 tiles (the short side whole, the long one up to 341 values: 1024 " \
           "points a block)" in thin
    assert "kernels:       2 -> 1" in text


def test_cost_model_counts_strided_reads_unless_tiled():
    from mlfuse.hardware import get_target
    from mlfuse.transforms.fusion.cost import kernel_cost
    dims = {"N": 8192, "M": 8192}
    (k,) = kernels(TRANSPOSE_ADD, dims)
    target = get_target()
    tiled = kernel_cost(k, dims, target)
    k.attributes["schedule"] = "pointwise"
    strided = kernel_cost(k, dims, target)
    assert tiled.strided_bytes == 0 and strided.strided_bytes == 4 * 8192 * 8192
    assert tiled.bytes == strided.bytes  # the same bytes move; only their cost differs
    assert strided.seconds(target) > 1.5 * tiled.seconds(target)


CASES = [
    (TRANSPOSE_ADD, {"N": 19, "M": 17}),
    ("func f(x: f32[N, M], y: f32[M, N]) -> f32[M, N] { return transpose(x) + y }",
     {"N": 16, "M": 16}),  # whole squares only
    (TRANSPOSE_ADD, {"N": 20, "M": 28}),  # whole vectors, part of a square at both edges
    # batched, with a broadcast bias along the innermost axis
    ("func f(x: f32[B, M, N], b: f32[M]) -> f32[B, N, M] { return transpose(x, [0, 2, 1]) + b }",
     {"B": 2, "M": 18, "N": 17}),
    ("func f(x: f32[B, M, N], b: f32[M]) -> f32[B, N, M] { return transpose(x, [0, 2, 1]) + b }",
     {"B": 1, "M": 20, "N": 28}),
    # rank 4, f16: NCHW -> NHWC with a per-channel bias (C = 24: vectors of 8 f16, 16 bytes;
    # C = 17: the scalar kernel)
    ("func f(x: f16[B, C, H, W], b: f16[C]) -> f16[B, H, W, C] {\n"
     "    return relu(transpose(x, [0, 2, 3, 1]) + b) }", {"B": 1, "C": 17, "H": 2, "W": 16}),
    ("func f(x: f16[B, C, H, W], b: f16[C]) -> f16[B, H, W, C] {\n"
     "    return relu(transpose(x, [0, 2, 3, 1]) + b) }", {"B": 1, "C": 24, "H": 2, "W": 16}),
    # NHWC -> NCHW with a broadcast along the loads' axis (a per-row scale read once a square)
    ("func f(x: f32[B, H, W, C], s: f32[B, C, 1, 1]) -> f32[B, C, H, W] {\n"
     "    return transpose(x, [0, 3, 1, 2]) * s }", {"B": 1, "H": 2, "W": 16, "C": 20}),
    # two tiled loads and a direct one; i32
    ("func f(x: f32[N, M], z: f32[N, M], y: f32[M, N]) -> f32[M, N] {\n"
     "    return transpose(x) * transpose(z) - y }", {"N": 17, "M": 20}),
    ("func f(x: f32[N, M], z: f32[N, M], y: f32[M, N]) -> f32[M, N] {\n"
     "    return transpose(x) * transpose(z) - y }", {"N": 16, "M": 20}),
    ("func f(x: i32[N, M], y: i32[M, N]) -> i32[M, N] { return transpose(x) * 3 + y }",
     {"N": 20, "M": 16}),
    # a bool read permuted too: it stays a direct load beside the tiled one
    ("func f(c: bool[N, M], x: f32[N, M]) -> f32[M, N] {\n"
     "    return where(transpose(c), transpose(x), 0.0) }", {"N": 16, "M": 20}),
    # bf16 moves no vectors: in the vector kernel its accesses go value by value
    ("func f(x: f32[N, M], y: bf16[M, N]) -> f32[M, N] {\n"
     "    return transpose(x) + cast(y, dtype=f32) }", {"N": 20, "M": 16}),
]
# cases whose tiled extents vector_width divides: the host launches the vector kernel
VECTOR_CASES = [1, 2, 4, 6, 7, 9, 10, 11, 12]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_tiles_agree_with_numpy(case):
    """Each case's kernel as the host picks it: the vector kernel where the tiled extents
    are multiples of vector_width (and the buffers aligned), the scalar one elsewhere;
    and, where the vector kernel ran, the scalar one too (buffers taken as misaligned)."""
    source, dims = CASES[case]
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=11)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                   fuse_options={"dims": dims})
    tiled = [k["kernel_name"] for f in module.ir.funcs for k in f.body.ops
             if isinstance(k, KernelOp) and k["schedule"] == "transpose-tiles"]
    assert tiled
    python = module.python_module
    vectors = [f"{name}_vector" for name in tiled if hasattr(python, f"{name}_vector")]
    launched = record_launches(python, tiled + vectors)
    assert_results_close(func, expected, module[func.sym_name](*inputs))
    assert launched == (vectors if case in VECTOR_CASES else tiled)
    if vectors:  # the host's alignment test failing: the scalar kernel
        python._vector_ready = lambda *arrays, width=None: False
        del launched[:]
        assert_results_close(func, expected, module[func.sym_name](*inputs))
        assert launched == tiled


def test_thread_layouts_move_every_value_once_without_bank_conflicts():
    """thread_layout's formulas (evaluated as the kernels write them): each step's
    threads take every (vector, row) of their ROWS rows once, and each warp's shared
    accesses of one value of its vectors fall on 32 different banks, in both phases."""
    from mlfuse.codegen.schedule_tiles import thread_layout
    for tile, threads, width in [(32, 256, 1), (32, 128, 4), (32, 256, 4), (64, 256, 4),
                                 (64, 512, 4), (64, 128, 4), (64, 256, 2), (32, 64, 1),
                                 (8, 16, 1), (8, 8, 4), (64, 256, 8), (8, 8, 8)]:
        lane_v, lane_r, rows = thread_layout(tile, threads, width)
        spots = [(eval(lane_v, {"t": t}), eval(lane_r, {"t": t})) for t in range(threads)]
        assert sorted(spots) == [(v, r) for v in range(tile // width) for r in range(rows)]
        if tile < 32:
            continue  # the simulator's squares: no banks to spare
        for warp in range(threads // 32):
            for k in range(width):
                lanes = spots[32 * warp: 32 * warp + 32]
                fill = {((width * v + k) * (tile + 1) + r) % 32 for v, r in lanes}
                compute = {(r * (tile + 1) + width * v + k) % 32 for v, r in lanes}
                assert len(fill) == len(compute) == 32, (tile, threads, width, warp)
    with pytest.raises(ValueError, match="cannot move"):
        thread_layout(64, 32, 4)


@fuzz_settings("permute")
@given(st.data())
def test_random_permutations_agree_with_numpy(data):
    """Random rank 2-4 transposes fused with elementwise work, maybe reduced
    (tests/strategies.py's ``permuted_programs``), in f32, f16 and bf16: tiled or not,
    split through tiles or not, the kernels match."""
    assert_drawn_program_agrees(data, data.draw(permuted_programs()))


THIN_CASES = [
    # NCHW -> NHWC with C = 3 (B short): rectangles of 21 x 3 on the simulator, ragged
    ("func f(x: f32[B, C, H, W], g: f32[C]) -> f32[B, H, W, C] {\n"
     "    return transpose(x, [0, 2, 3, 1]) * g }", {"B": 2, "C": 3, "H": 2, "W": 30}),
    # NHWC -> NCHW with C = 3 (A short), a scale along the loads' axis
    ("func f(x: f32[B, H, W, C], s: f32[B, C, 1, 1]) -> f32[B, C, H, W] {\n"
     "    return transpose(x, [0, 3, 1, 2]) * s }", {"B": 2, "H": 2, "W": 25, "C": 3}),
    # an even short side (tile rows of 3), f16, a direct load beside
    (TRANSPOSE_ADD.replace("f32", "f16"), {"N": 45, "M": 2}),
    (TRANSPOSE_ADD, {"N": 1, "M": 70}),  # A short: one value
    # whole long sides stacked: H, W merge (coalesce-axes) into one of 30, stacked along B
    ("func f(x: f32[B, C, H, W], g: f32[C]) -> f32[B, H, W, C] {\n"
     "    return transpose(x, [0, 2, 3, 1]) * g }", {"B": 2, "C": 3, "H": 6, "W": 5}),
    ("func f(x: f32[B, H, W, C], s: f32[B, C, 1, 1]) -> f32[B, C, H, W] {\n"
     "    return transpose(x, [0, 3, 1, 2]) * s }", {"B": 1, "H": 7, "W": 6, "C": 2}),
    ("func f(x: f32[N, M], z: f32[N, M], y: f32[M, N]) -> f32[M, N] {\n"
     "    return transpose(x) * transpose(z) - y }", {"N": 3, "M": 50}),
]


@pytest.mark.parametrize("case", range(len(THIN_CASES)))
def test_thin_tiles_agree_with_numpy(case):
    """A tiled extent shorter than half a square (the simulator's: 4): the host launches
    the thin kernel (the short side whole, the long one filling a square's points)."""
    source, dims = THIN_CASES[case]
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=5)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")  # symbols unbound
    (name,) = [k["kernel_name"] for f in module.ir.funcs for k in f.body.ops
               if isinstance(k, KernelOp) and k["schedule"] == "transpose-tiles"]
    python = module.python_module
    launched = record_launches(python, [name, f"{name}_vector", f"{name}_thin"])
    assert_results_close(func, expected, module[func.sym_name](*inputs))
    assert launched == [f"{name}_thin"]


UNIT_AXES = """
func f(x: f32[N, K, 1], y: f32[N, 1, K]) -> f32[N] {
    return max(exp(transpose(x, [0, 2, 1]) * y), axis=[1, 2])
}
"""


@pytest.mark.parametrize("dims", [None, {"N": 468, "K": 612}], ids=["symbols", "sizes"])
def test_a_transpose_of_unit_axes_reads_as_the_reshape_it_is(dims):
    """[N, K, 1] -> [N, 1, K] moves no element: one kernel reading x along its rows (it
    was a copy kernel, then the reduction: x[i0, k, j] with j of one value last)."""
    module = compile_text(UNIT_AXES, "t.fuse", level="fused",
                          fuse_options={"dims": dims} if dims else None)
    kernels = [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]
    assert len(kernels) == 1 and not permuted_loads(kernels[0])
    func = parse_program(UNIT_AXES, "t.fuse").funcs[0]
    args = random_inputs(func, {"N": 5, "K": 37}, seed=1)
    got = mlfuse.compile_source(UNIT_AXES, "t.fuse", target="simulator")["f"](*args)
    assert_close(np.asarray(got), run_tensor(func, args)[0], 3)
