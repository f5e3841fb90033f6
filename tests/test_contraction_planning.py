"""Fusion around contractions: a kernel holds at most one sum of products unless the
cost model finds one thread per point walking them cheaper (tiny sizes); the walker's
price counts every load its threads execute (fusion/reduction_cost.py); and the split
programs compute what the NumPy interpreter does, under the simulator."""
import math

import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.hardware import get_target
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs
from mlfuse.transforms.contraction import match_contraction, sums_of_products
from mlfuse.transforms.fusion.cost import kernel_cost
from mlfuse.transforms.fusion.reduction_cost import tiled_contraction, walked_bytes

from helpers import assert_close

# A residual block's downsampling tail (a 3x3 conv, and the 1x1 stride-2 shortcut conv
# of the block's input, added, relu) and two matmuls added: channels small enough for
# the simulator; N is planned at the target's default size, where two kernels win.
DOWNSAMPLE = """\
func f(h: f32[N, 16, 4, 4], x: f32[N, 8, 8, 8], w3: f32[16, 16, 3, 3], w1: f32[16, 8, 1, 1],
       b: f32[16]) -> f32[N, 16, 4, 4] {
    a = conv2d(h, w3, padding=1) + reshape(b, [1, 16, 1, 1])
    return relu(a + conv2d(x, w1, stride=2))
}
"""
TWO_MATMULS = """\
func f(x: f32[M, K], w: f32[K, N], h: f32[M, J], v: f32[J, N]) -> f32[M, N] {
    return relu(matmul(x, w) + matmul(h, v))
}
"""


def kernels(source: str, **kw) -> list[KernelOp]:
    module = compile_text(source, "t.fuse", **kw)
    return [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]


@pytest.mark.parametrize("source", [DOWNSAMPLE, TWO_MATMULS], ids=["downsample", "matmuls"])
def test_each_sum_of_products_is_its_own_contraction_and_one_keeps_the_epilogue(source):
    ks = kernels(source)
    assert [k["schedule"] for k in ks] == ["contraction", "contraction"]
    assert [len(sums_of_products(k)) for k in ks] == [1, 1]
    assert "r = tensor.relu" not in str(ks[0]["sources"])
    assert any("relu" in s for s in ks[1]["sources"])  # the add and relu: an epilogue


def test_tiny_sums_of_products_share_one_walker_kernel():
    (k,) = kernels(TWO_MATMULS, fuse_options={"dims": {"M": 8, "N": 8, "K": 4, "J": 4}})
    assert k["schedule"] == "pointwise" and len(sums_of_products(k)) == 2
    assert match_contraction(k) is None


def test_walked_bytes_count_every_load_each_point_executes():
    """A conv alone, priced as a walker would be: points x K x input bytes, and the
    weights' once a warp (its lanes differ in h and w, not in the output channel);
    and as the tiled contraction it is: its multiply-adds at the tiled rate."""
    (k,) = kernels("func f(x: f32[N, 4, 6, 6], w: f32[8, 4, 3, 3]) -> f32[N, 8, 6, 6] {\n"
                   "    return conv2d(x, w, padding=1)\n}\n")
    target, dims = get_target(), {"N": 2}
    points, reduced = 2 * 8 * 6 * 6, 4 * 3 * 3
    # the input's values differ along the lanes (w, h); a weight is one value a warp
    assert walked_bytes(k, points, dims, target) == points * reduced * 4 + \
        points * reduced * 4 // 32
    seconds, flops, variant = tiled_contraction(k, dims, target)
    assert variant == "simt" and flops >= 2 * points * reduced
    assert seconds >= points * reduced / target.simt_fmas_per_s
    cost = kernel_cost(k, dims, target)
    assert cost.tiled_s == seconds and cost.walked_bytes == 0


def test_the_two_sums_walker_is_priced_by_its_loads_not_its_dram_bytes():
    """The walker holding both convs of a resnet18 downsample block at batch 8 (the
    kernel the planner made before): its threads load 4.0 GB (the weights once a warp),
    0.67 ms at the target's walker rate (the H100 ran such kernels in 0.65-0.74 ms; DRAM-once pricing said
    0.01 ms); the two contraction kernels the planner makes instead cost far less."""
    source = (DOWNSAMPLE.replace("[N, 16, 4, 4]", "[N, 128, 28, 28]")
              .replace("[N, 8, 8, 8]", "[N, 64, 56, 56]")
              .replace("[16, 16, 3, 3]", "[128, 128, 3, 3]")
              .replace("[16, 8, 1, 1]", "[128, 64, 1, 1]").replace("[16]", "[128]")
              .replace("[1, 16, 1, 1]", "[1, 128, 1, 1]"))
    target, dims = get_target(), {"N": 8}
    k = _one_kernel(source, dims)
    assert len(sums_of_products(k)) == 2 and match_contraction(k) is None
    points = 8 * 128 * 28 * 28
    walked = walked_bytes(k, points, dims, target)
    # the inputs every lane, the weights and the bias once a warp (lanes differ in h, w)
    assert walked == pytest.approx(points * (128 * 9 + 64) * 4 * (1 + 1 / 32) + points * 4 / 32)
    assert 0.6e-3 < walked / target.walker_bytes_per_s < 0.75e-3  # as measured
    walker = kernel_cost(k, dims, target).seconds(target)
    assert math.isclose(walker, walked / target.walker_bytes_per_s + target.launch_s)
    split = sum(kernel_cost(k, dims, target).seconds(target)
                for k in kernels(source, fuse_options={"dims": dims}))
    assert split < walker / 5


def _one_kernel(source: str, dims: dict) -> KernelOp:
    """The whole program as one kernel (a group of every nest), priced at ``dims``."""
    from mlfuse.transforms.fusion.fuse import Planner
    from mlfuse.transforms.fusion.graph import NestGraph
    from mlfuse.transforms.fusion.grouping import Group
    func = compile_text(source, "t.fuse", level="loops").funcs[0]
    planner = Planner(NestGraph(func), get_target(), dims, None)
    nests = planner.graph.nests
    whole = Group(list(nests), list(nests))
    return planner.kernel(whole, [whole])


@pytest.mark.parametrize("source, dims", [(DOWNSAMPLE, {"N": 1}),
                                          (TWO_MATMULS, {"M": 5, "N": 7, "K": 6, "J": 9})],
                         ids=["downsample", "matmuls"])
def test_split_contractions_agree_with_the_interpreter(source, dims):
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    assert [k["schedule"] for k in module.kernels("f")] == ["contraction", "contraction"]
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=5)
    (want,) = run_tensor(func, args)
    ops, reduced = program_size(func)
    assert_close(module.f(*args), want, ops, "split contractions", reduced)
