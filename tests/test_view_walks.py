"""Reductions over several axes of a reshaped view (group norm written through a 4-d or
5-d reshape): the nest reads its input through the view's index arithmetic, which
index_forms.access_walk sees as a row-major walk of the nest from a base that is a
whole number of rows. The view's copy is then fused into the row kernel, and
flatten-row-nests walks each nest as one loop whose reads codegen addresses at
row_base + r. Checked on the index forms, on the fused IR at benchmark sizes, and
under the simulator against the NumPy interpreter at small ones."""
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from strategies import fuzz_settings, grouped_view_programs, inputs_for

import mlfuse
from mlfuse.codegen import generate
from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.index_forms import ADD, MUL, access_walk, row_walk
from mlfuse.dialects.loops import AllocOp, DimOp
from mlfuse.interp import run_tensor
from mlfuse.ir.core import Block
from mlfuse.ir.types import INDEX
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close

GROUP_NORM_4D = """
func f(x: f32[N, C, H, W]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, 8, C / 8, H * W])
    m = mean(rows, axis=[2, 3], keepdims=true)
    d = rows - m
    v = mean(d * d, axis=[2, 3], keepdims=true)
    return reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
}
"""
GROUP_NORM_5D_AFFINE = """
func f(x: f32[N, C, H, W], g: f32[C], b: f32[C]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, 4, C / 4, H, W])
    m = mean(rows, axis=[2, 3, 4], keepdims=true)
    d = rows - m
    v = mean(d * d, axis=[2, 3, 4], keepdims=true)
    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
    return y * reshape(g, [C, 1, 1]) + reshape(b, [C, 1, 1])
}
"""
GROUP_MEAN = """
func f(x: f16[N, C, H, W]) -> f16[N, 8, 1, 1] {
    return mean(reshape(x, [N, 8, C / 8, H * W]), axis=[2, 3], keepdims=true)
}
"""
BIG = {"N": 32, "C": 256, "H": 64, "W": 64}


class Index:
    """Index arithmetic built into one block, for the forms' own tests."""

    def __init__(self):
        self.block = Block([INDEX] * 5, ["g", "k0", "k1", "k2", "q"])

    def arg(self, n):
        return self.block.args[n]

    def dim(self, sym):
        return self._op(DimOp(attributes={"sym": sym}))

    def const(self, value):
        return self._op(ConstantOp(result_types=[INDEX], attributes={"value": value}))

    def add(self, a, b):
        return self._op(ADD([a, b]))

    def mul(self, a, b):
        return self._op(MUL([a, b]))

    def _op(self, op):
        self.block.append(op)
        return op.result


def test_a_view_of_rows_is_a_row_major_walk_from_a_whole_row():
    ix = Index()
    g, k0, k1 = ix.arg(0), ix.arg(1), ix.arg(2)
    flat = ix.add(ix.mul(ix.add(ix.mul(g, ix.dim("C/8")), k0), ix.dim("H*W")), k1)
    start, terms = row_walk(flat, [k0, k1], ["C/8", "H*W"])
    assert start == 0 and [(t is g, c) for t, c in terms] == [(True, "C*H*W/8")]


@pytest.mark.parametrize("case", ["window", "columns", "twice", "product"])
def test_walks_that_are_not_rows(case):
    ix = Index()
    g, k0, k1, q = ix.arg(0), ix.arg(1), ix.arg(2), ix.arg(4)
    hw = ix.dim("H*W")
    flat = {
        # groups one channel apart: sliding windows of C/8 channels overlap
        "window": lambda: ix.add(ix.mul(ix.add(g, k0), hw), k1),
        # k0 steps a whole H*W, k1 steps by C/8: a column walk
        "columns": lambda: ix.add(ix.mul(k1, ix.dim("C/8")), k0),
        # k1 counted twice
        "twice": lambda: ix.add(ix.add(ix.mul(k0, hw), k1), k1),
        # a step times a value: no linear form
        "product": lambda: ix.add(ix.mul(ix.mul(q, k0), hw), k1),
    }[case]()
    assert row_walk(flat, [k0, k1], ["C/8", "H*W"]) is None


def test_an_access_walks_the_nest_through_its_buffer_strides():
    """x[n, g * C/4 + k0, k1, k2] of x[N, C, H, W]: element B + ravel(k0, k1, k2) of the
    axes [C, H, W] (the 5-d view's read), B = g * C*H*W/4; the same access with k1 and
    k2 swapped walks nothing."""
    ix = Index()
    g, k0, k1, k2, n = (ix.arg(d) for d in range(5))
    c = ix.add(ix.mul(g, ix.dim("C/4")), k0)
    shape, extents = ["N", "C", "H", "W"], ["C/4", "H", "W"]
    walk = access_walk([n, c, k1, k2], shape, [k0, k1, k2], extents)
    assert (walk.at, walk.start) == (1, 0) and [(t is g, d) for t, d in walk.terms] == \
        [(True, "C*H*W/4")]
    assert access_walk([n, c, k2, k1], shape, [k0, k1, k2], extents) is None


def kernels(source: str, dims: dict) -> tuple[list[KernelOp], list]:
    func = compile_text(source, "t.fuse", fuse_options={"dims": dims}).funcs[0]
    ks = [op for op in func.body.ops if isinstance(op, KernelOp)]
    return ks, [list(op.result.type.shape) for op in func.body.ops if isinstance(op, AllocOp)]


@pytest.mark.parametrize("source", [GROUP_NORM_4D, GROUP_NORM_5D_AFFINE], ids=["4d", "5d_affine"])
def test_group_norm_through_a_view_is_one_row_kernel_over_flat_rows(source):
    (k,), allocs = kernels(source, BIG)
    assert k["schedule"] == "row" and k.attributes.get("flat_nests")
    assert allocs == [["N", "C", "H", "W"]]  # the view's copy is never written
    assert "rows = tensor.reshape" in k["sources"]


def test_group_statistics_through_a_view_split_across_blocks_read_flat_rows():
    (k,), _ = kernels(GROUP_MEAN, BIG)
    assert k["schedule"] == "split-rows" and k["flat_nests"] == [["C/8", "H*W"]]
    source = generate(compile_text(GROUP_MEAN, "t.fuse", fuse_options={"dims": BIG}), "cuda")
    assert "x_flat[numba.uint64(row_base + " in source  # no unravel of each value's index


@pytest.mark.parametrize("source, dims", [
    (GROUP_NORM_4D, {"N": 2, "C": 16, "H": 3, "W": 5}),
    (GROUP_NORM_5D_AFFINE, {"N": 3, "C": 8, "H": 2, "W": 3}),
    (GROUP_MEAN, {"N": 2, "C": 8, "H": 5, "W": 7}),
], ids=["4d", "5d_affine", "mean_f16"])
@pytest.mark.parametrize("compiled_for", ["symbols", "sizes"])
def test_agrees_with_numpy(source, dims, compiled_for):
    """Compiled for symbolic sizes and for benchmark sizes (the plans chosen there:
    the split reduction for the statistics alone), run at small ones."""
    options = {"dims": BIG} if compiled_for == "sizes" else None
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=7)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator", fuse_options=options)
    assert_results_close(func, expected, module["f"](*inputs))


@fuzz_settings("grouped_views")
@given(st.data())
def test_random_grouped_views_agree_with_numpy(data):
    """Random group statistics and norms through a 4-d or 5-d view of NCHW
    (tests/strategies.py's ``grouped_view_programs``), compiled for symbolic sizes, for
    the sizes they run at, or for benchmark sizes (a split reduction, a row kernel with
    its split plan), run at small sizes: the kernels match the interpreter."""
    source, sizes = data.draw(grouped_view_programs())
    plan = data.draw(st.sampled_from(["symbols", "sizes", "big"]))
    note(f"{source}sizes {sizes}, compiled for {plan}")
    options = {"symbols": None, "sizes": {"dims": sizes},
               "big": {"dims": {"N": 2, "C": 512, "H": 64, "W": 64}}}[plan]
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, sizes, special=False))
    expected = run_tensor(func, args)
    got = mlfuse.compile_source(source, "fuzz.fuse", target="simulator", fuse_options=options)
    assert_results_close(func, expected, got["f"](*args))
