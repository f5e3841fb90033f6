"""SIMT contraction tiles on model shapes (branch convtiles): the tile model's price of
split-K and of gathered operands, and a Linear's K-major weight ([N, K], as nn.Linear and
ONNX Gemm with transB store it) read 16 bytes at a time."""
import pytest

import mlfuse
from helpers import assert_close
from mlfuse.codegen import generate
from mlfuse.codegen.contraction import CUDA_TILES, tile_model_inputs
from mlfuse.codegen.tile_model import GATHER_INSTRUCTIONS, _contraction_plan, _simt_shape
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs
from test_ptx import kernels, toolchain_problem

LINEAR = """
func linear(x: f32[B, 12], w: f32[20, 12], b: f32[20]) -> f32[B, 20] {
    return gelu(matmul(x, transpose(w)) + b)
}
"""
CONV = """
func conv(x: f32[N, 64, 56, 56], w: f32[64, 64, 3, 3], b: f32[64]) -> f32[N, 64, 56, 56] {
    return relu(conv2d(x, w, stride=1, padding=1) + reshape(b, [1, 64, 1, 1]))
}
"""


def _contraction(source):
    (kernel,) = [op for f in compile_text(source, "t.fuse").funcs for op in f.body.ops
                 if op.name == "fused.kernel" and op.attributes.get("schedule") == "contraction"]
    return kernel


def test_the_model_prices_a_gathered_operand_and_no_plain_load():
    """conv's im2col B side costs GATHER_INSTRUCTIONS a value; a matmul's plain loads
    (A [M, K], B [N, K] K-major too) cost nothing more."""
    assert tile_model_inputs(_contraction(CONV))["gather"] == (0, GATHER_INSTRUCTIONS)
    assert tile_model_inputs(_contraction(LINEAR))["gather"] == (0, 0)
    plain = _contraction_plan([(64, 128)], 64, 25088, 576, 1, 132, shape=_simt_shape)
    gathered = _contraction_plan([(64, 128)], 64, 25088, 576, 1, 132, shape=_simt_shape,
                                 gather=(0, GATHER_INSTRUCTIONS))
    # per FMA: gather / BM more, against ~1.3 instructions of the 4 x 8 thread tile: the
    # SASS's 869 instructions a K step against the matmul's 674 (codegen/gather.py)
    assert 1.15 < gathered[1] / plain[1] < 1.45, (plain, gathered)


@pytest.mark.parametrize("m, n, k", [
    (64, 25088, 576),    # resnet18 layer 1 (batch 8): the split's finish took 21-25 us
    (128, 6272, 64),     # a 1x1 downsample: K too short to pay for a second kernel
])
def test_the_model_prices_the_finish_kernel_as_measured(m, n, k):
    """Split-K's second kernel reads every share and stores at ~1 TB/s plus a launch: on
    these shapes the saved tail is worth less, so K stays whole."""
    (bm, bn, splits), us, why = _contraction_plan(
        CUDA_TILES, m, n, k, 1, 132, max_split=max(1, k // 128), shape=_simt_shape,
        gather=(0, GATHER_INSTRUCTIONS))
    assert splits == 1, why
    # the price of a split, as the model now states it: 2 shares of layer 1's 6.4 MB
    _, split_us, split_why = _contraction_plan([(bm, bn)], m, n, k, 1, 132, max_split=2,
                                               shape=_simt_shape)
    forced = _contraction_plan([(bm, bn)], m, n, k, 1, 132, max_split=1, shape=_simt_shape)
    assert split_us >= forced[1] or "partial sums" not in split_why


def test_decode_still_splits_k():
    """Few tiles (M = 32): the split fills the GPU whatever the second kernel costs."""
    plan, _, why = _contraction_plan(CUDA_TILES, 32, 4096, 4096, 1, 132, max_split=32,
                                     shape=_simt_shape)
    assert plan[2] >= 4, why


def test_a_k_major_weight_is_read_16_bytes_at_a_time():
    """The "cuda" module reads a [N, K] weight's 4 consecutive K as one vector load
    under VECTOR_B, which the host sets from K's multiple of 4 and the alignment."""
    source = generate(compile_text(LINEAR, "t.fuse"), target="cuda")
    # flat offsets planned once a tile (no unravel of K), a K step's loads at them
    assert "b_off[slot_1] = numba.uint32(i1 * 12 + k)" in source, source
    assert "_load_vector(w_flat, (b_off[slot_1],)" in source
    host = source[source.index("def linear("):]
    assert "_address(w) % 16 == 0" in host and "12" in host
    odd = LINEAR.replace("12", "10")  # K = 10: no whole 16-byte groups, no vector reads
    host = generate(compile_text(odd, "t.fuse"), target="cuda")
    host = host[host.index("def linear("):]
    assert "_address(x)" not in host and "_address(w)" not in host


def test_a_k_major_weight_agrees_under_the_simulator():
    """The simulator runs the scalar path of the same groups (4 consecutive K of one N):
    the interpreter's result, unsplit and with K in 2 shares."""
    module = mlfuse.compile_source(LINEAR, "t.fuse", target="simulator")
    func = parse_program(LINEAR).funcs[0]
    args = random_inputs(func, {"B": 5}, seed=3)
    want = run_tensor(func, args)[0]
    ops, reduced = program_size(func)
    kernel = module.python_module.linear_0
    for split in (1, 2):
        kernel.tuned[(5, 20, 12, 1)] = (16, 16, split)
        assert_close(module.linear(*args), want, ops, f"split {split}", reduced)


def test_a_k_major_weight_compiles_for_the_gpu_without_spills(tmp_path):
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    path = tmp_path / "linear.fuse"
    # K = 64: too short to split, so one kernel to compile (the split one is the same
    # fetch; ptx_report on examples compiles those)
    path.write_text(LINEAR.replace("12", "64").replace("20", "256"))
    found = kernels("--tile=128x64", str(path))
    tiles = [k for k in found if "[128x64" in k["kernel"]]
    assert tiles and all(k["spill_bytes"] == 0 and k["stack_bytes"] == 0 for k in tiles), found
    assert all(k["v4_loads"] > 0 for k in tiles)
