"""A SIMT conv tile's gathered operand addressed once per tile (codegen/gather.py): the
position-only index ops before the K loop, per value a flat read at base + step with
32-bit index ops, and K-major weights read at lead + k. Numerics under the simulator at
tiny sizes (stride, padding, dilation, groups, ragged edges, split K) against the
interpreter; the generated text; ptxas for sm_90."""
import re

import pytest

import mlfuse
from helpers import assert_close
from mlfuse.codegen import generate
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs
from test_ptx import kernels, toolchain_problem


def conv_source(c=3, o=5, h=7, w=6, k=3, stride=1, pad=1, dilation=1, groups=1, dims="N"):
    oh = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    return f"""
func conv(x: f32[{dims}, {c}, {h}, {w}], w: f32[{o}, {c // groups}, {k}, {k}], b: f32[{o}]) -> f32[{dims}, {o}, {oh}, {ow}] {{
    y = conv2d(x, w, stride={stride}, padding={pad}, dilation={dilation}, groups={groups})
    return relu(y + reshape(b, [1, {o}, 1, 1]))
}}
"""


def _check(source, dims, sizes=None, splits=(1,)):
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=5)
    want = run_tensor(func, args)[0]
    ops, reduced = program_size(func)
    kernel = module.python_module.conv_0
    for split in splits:
        if sizes:  # (m, n, k, batch) -> the simulator's one tile, K in ``split`` shares
            kernel.tuned[sizes] = (16, 16, split)
        assert_close(module.conv(*args), want, ops, f"split {split}", reduced)


@pytest.mark.parametrize("stride,pad,dilation", [(1, 1, 1), (2, 1, 1), (1, 0, 1), (2, 3, 1),
                                                 (1, 2, 2)])
@pytest.mark.parametrize("batch", ["N", "2"])
def test_conv_gather_agrees_with_the_interpreter(stride, pad, dilation, batch):
    """Ragged everywhere: 5 output channels, 2 x 7 x 6 input pixels, K = 27 (not a
    multiple of the K step): the edge groups read zeros. A static batch addresses in
    32 bits, a symbolic one from a 64-bit base per slot."""
    _check(conv_source(stride=stride, pad=pad, dilation=dilation, dims=batch), {"N": 2})


def test_conv_gather_with_k_in_shares():
    """Split K: a share starts mid-tap (K = 36 in shares of whole K steps of 8)."""
    _check(conv_source(c=4, h=5, w=5), {"N": 1}, (5, 25, 36, 1), splits=(1, 2))


def test_grouped_conv_agrees():
    _check(conv_source(c=4, o=6, groups=2, h=5, w=6), {"N": 1})


def test_static_batch_addresses_in_32_bits():
    """A static shape under 2**31 elements: the whole offset in 32 bits; a symbolic batch:
    a 64-bit base per slot plus a 32-bit step; the pixel's unravel before the K loop."""
    static = generate(compile_text(conv_source(dims="2"), "t.fuse"), target="cuda")
    assert "x_flat[numba.uint32(x_base[" in static, static
    symbolic = generate(compile_text(conv_source(), "t.fuse"), target="cuda")
    assert "x_flat[numba.uint64(x_base[" in symbolic and "+ numba.int32(" in symbolic
    assert "if BM * BN < 128 * 128:" in symbolic  # 128 x 128 would spill the 64-bit bases
    k_loop = static[re.search(r"while \w+ < steps:", static).start():static.index("# epilogue")]
    assert "divmod(n," not in k_loop and "k_end[" in k_loop, k_loop
    # the K-major weights at 32-bit flat offsets planned once a tile (simt_fetch.py)
    assert "a_off = cuda.local.array(A_GROUPS, numba.uint32)" in static
    assert "_load_vector(w_flat, (a_off[" in k_loop


def test_conv_gather_compiles_for_the_gpu_without_spills(tmp_path):
    """resnet18's 64 -> 64 3x3 conv at 56 x 56 at 64 x 128 (K = 576 splits: both kernels)."""
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    path = tmp_path / "conv.fuse"
    path.write_text(conv_source(c=64, o=64, h=56, w=56))
    found = [k for k in kernels("--tile=64x128", str(path)) if "[64x128" in k["kernel"]]
    assert found and all(k["spill_bytes"] == 0 and k["stack_bytes"] == 0 for k in found), found
