"""Transposes through shared-memory tiles ("transpose-tiles": dialects/permute.py,
mlfuse/transforms/fusion/tiles.py, mlfuse/codegen/schedule_tiles.py): which loads are
permuted, when the schedule is chosen and why, and its kernels under the simulator
against the NumPy interpreter (8 x 8 squares there, so odd sizes cover several squares
and their edges; ranks 2-4; f32, f16, i32; several tiled loads; direct loads beside)."""
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.permute import permuted_loads
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs
from mlfuse.tools.explain import explain_module, format_text

from helpers import assert_close, assert_results_close, record_launches
from strategies import fuzz_settings, inputs_for, permuted_programs

TRANSPOSE_ADD = "func f(x: f32[N, M], y: f32[M, N]) -> f32[M, N] { return transpose(x) + y }"


def kernels(source: str, dims: dict) -> list[KernelOp]:
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims})
    return [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]


@pytest.mark.parametrize("source, dims, expected", [
    (TRANSPOSE_ADD, {"N": 8192, "M": 8192}, ("transpose-tiles", [0, 1])),
    (TRANSPOSE_ADD, {}, ("transpose-tiles", [0, 1])),  # unbound: sized at run time
    (TRANSPOSE_ADD, {"N": 8192, "M": 4}, ("pointwise", None)),  # a tile would idle
    # NCHW -> NHWC: x's last index w follows axis 2 of the [N, H, W, C] output
    ("func f(x: f32[B, C, H, W]) -> f32[B, H, W, C] { return transpose(x, [0, 2, 3, 1]) * 2.0 }",
     {"B": 8, "C": 64, "H": 56, "W": 56}, ("transpose-tiles", [2, 3])),
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
           "32x32 shared-memory tiles make both coalesced" in text
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
    # batched, with a broadcast bias along the innermost axis
    ("func f(x: f32[B, M, N], b: f32[M]) -> f32[B, N, M] { return transpose(x, [0, 2, 1]) + b }",
     {"B": 2, "M": 18, "N": 17}),
    # rank 4, f16: NCHW -> NHWC with a per-channel bias
    ("func f(x: f16[B, C, H, W], b: f16[C]) -> f16[B, H, W, C] {\n"
     "    return relu(transpose(x, [0, 2, 3, 1]) + b) }", {"B": 1, "C": 17, "H": 2, "W": 16}),
    # two tiled loads and a direct one; i32
    ("func f(x: f32[N, M], z: f32[N, M], y: f32[M, N]) -> f32[M, N] {\n"
     "    return transpose(x) * transpose(z) - y }", {"N": 17, "M": 20}),
    ("func f(x: i32[N, M], y: i32[M, N]) -> i32[M, N] { return transpose(x) * 3 + y }",
     {"N": 17, "M": 16}),
    # a bool read permuted too: it stays a direct load beside the tiled one
    ("func f(c: bool[N, M], x: f32[N, M]) -> f32[M, N] {\n"
     "    return where(transpose(c), transpose(x), 0.0) }", {"N": 16, "M": 19}),
]


@pytest.mark.parametrize("width", ["32", "64"])
@pytest.mark.parametrize("source, dims", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_tiles_agree_with_numpy(source, dims, width):
    """Both kernels of each case: the one with 32-bit offsets (which the host launches at
    these sizes) and its 64-bit twin (for 2**31 elements or more: swapped in here)."""
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=11)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                   fuse_options={"dims": dims})
    tiled = [k["kernel_name"] for f in module.ir.funcs for k in f.body.ops
             if isinstance(k, KernelOp) and k["schedule"] == "transpose-tiles"]
    assert tiled
    python = module.python_module
    if width == "64":
        for name in tiled:
            setattr(python, name, getattr(python, f"{name}_wide"))
    launched = record_launches(python, tiled)
    got = module[func.sym_name](*inputs)
    assert launched == tiled
    assert_results_close(func, expected, got)


@fuzz_settings("permute")
@given(st.data())
def test_random_permutations_agree_with_numpy(data):
    """Random rank 2-4 transposes fused with elementwise work (tests/strategies.py's
    ``permuted_programs``), in f32, f16 and bf16: tiled or not, the kernel matches."""
    program = data.draw(permuted_programs())
    source = program.source()
    note(source)
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, {}, special=False))
    expected = run_tensor(func, args)
    got = mlfuse.compile_source(source, "fuzz.fuse", target="simulator")["f"](*args)
    n_ops, reduced = program_size(func)
    assert_close(np.asarray(got), expected[0], n_ops, reduced=reduced)
