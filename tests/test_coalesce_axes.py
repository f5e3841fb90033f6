"""coalesce-axes (mlfuse/transforms/coalesce_axes.py): neighbouring axes that every access
of a transpose-tiles kernel indexes together (neighbouring indices, or a reshape's ravel)
become one axis; codegen addresses the merged view (dialects/index_forms.merged_view). The decision at the IR level is pinned by
tests/ir/coalesce-axes/; here: which axes merge, the kernels' numerics under the
simulator (square, vector and thin kernels; merged and unmerged) and the loops
interpreter on the rewritten IR, both against the tensor interpreter, and the generated
code (no per-value division for a merged axis)."""
import pytest

import mlfuse
from mlfuse.dialects.arith import FloorDivOp, ModOp
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.index_forms import merged_view
from mlfuse.dialects.permute import load_indices
from mlfuse.interp import run_loops, run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close, record_launches

NCHW_NHWC = ("func f(x: f32[N, C, H, W], g: f32[C]) -> f32[N, H, W, C] {\n"
             "    return transpose(x, [0, 2, 3, 1]) * g }")
NHWC_NCHW = ("func f(x: f32[N, H, W, C], s: f32[N, C, 1, 1]) -> f32[N, C, H, W] {\n"
             "    return transpose(x, [0, 3, 1, 2]) * s }")
NCDHW = ("func f(x: f16[N, C, D, H, W]) -> f16[N, D, H, W, C] {\n"
         "    return transpose(x, [0, 2, 3, 4, 1]) * 2.0 }")
# a reshape's ravel: x[n, c, i1 * (S/4) + i2] merges i1, i2 into one axis of S (tiled)
RESHAPED = ("func f(x: f32[N, C, S], g: f32[C]) -> f32[N, 4, S/4, C] {\n"
            "    return transpose(reshape(x, [N, C, 4, S/4]), [0, 2, 3, 1]) * g }")
# ... unless the 4 axis is read alone too (a scale s[i1]): pointwise, nothing merged
RESHAPED_SCALED = ("func f(x: f32[N, C, S], s: f32[4, 1, 1]) -> f32[N, 4, S/4, C] {\n"
                   "    return transpose(reshape(x, [N, C, 4, S/4]), [0, 2, 3, 1]) * s }")
BIAS_W = ("func f(x: f32[N, C, H, W], b: f32[W, 1]) -> f32[N, H, W, C] {\n"
          "    return transpose(x, [0, 2, 3, 1]) + b }")


def tiled_kernel(source: str) -> KernelOp:
    module = compile_text(source, "t.fuse")
    (k,) = [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]
    assert k["schedule"] == "transpose-tiles"
    return k


@pytest.mark.parametrize("source, extents, coalesced, tile_axes", [
    (NCHW_NHWC, ["N", "H*W", "C"], [["N"], ["H", "W"], ["C"]], [1, 2]),
    (NHWC_NCHW, ["N", "C", "H*W"], [["N"], ["C"], ["H", "W"]], [1, 2]),
    (NCDHW, ["N", "D*H*W", "C"], [["N"], ["D", "H", "W"], ["C"]], [1, 2]),
    (BIAS_W, ["N", "H", "W", "C"], [], [2, 3]),  # b[w] alone keeps H and W apart
    (RESHAPED, ["N", "S", "C"], [["N"], [4, "S/4"], ["C"]], [1, 2]),
])
def test_axes_merge_where_every_access_takes_them_together(source, extents, coalesced,
                                                           tile_axes):
    k = tiled_kernel(source)
    assert (k.extent_list, k["coalesced"], k["tile_axes"]) == (extents, coalesced, tile_axes)
    if coalesced:  # each access of a merged kernel reads as one index per merged axis
        for op in k.body.ops:
            if op.name in ("loops.load", "loops.store"):
                buf, idx = (op.operands[0], load_indices(op)) if op.name == "loops.load" \
                    else (op.operands[1], list(op.operands[2:]))
                view, _ = merged_view(idx, list(buf.type.shape))
                assert not any(isinstance(getattr(v, "op", None), (FloorDivOp, ModOp))
                               for v in view)


CASES = [  # (source, dims, the kernel the host launches: "" square, "_vector", "_thin")
    (NCHW_NHWC, {"N": 2, "C": 17, "H": 3, "W": 5}, ""),          # H*W = 15: ragged squares
    (NCHW_NHWC, {"N": 2, "C": 20, "H": 2, "W": 8}, "_vector"),   # H*W = 16: whole vectors
    (NCHW_NHWC, {"N": 3, "C": 3, "H": 3, "W": 5}, "_thin"),      # C short, H*W = 15 whole
    (NHWC_NCHW, {"N": 2, "H": 3, "W": 5, "C": 17}, ""),
    (NCDHW, {"N": 1, "C": 9, "D": 2, "H": 3, "W": 3}, ""),       # D*H*W = 18
    (BIAS_W, {"N": 2, "C": 17, "H": 3, "W": 5}, ""),             # no merge: W by itself
    (RESHAPED, {"N": 2, "C": 9, "S": 20}, ""),                    # the ravel merged: S = 20
    (RESHAPED, {"N": 2, "C": 12, "S": 16}, "_vector"),
    (RESHAPED, {"N": 2, "C": 3, "S": 28}, "_thin"),
]


def test_a_ravel_read_alone_elsewhere_keeps_its_axes():
    module = compile_text(RESHAPED_SCALED, "t.fuse")
    (k,) = [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]
    assert (k["schedule"], k["coalesced"], len(k.extent_list)) == ("pointwise", [], 4)
    func = parse_program(RESHAPED_SCALED, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"N": 2, "C": 5, "S": 12}, seed=2)
    got = mlfuse.compile_source(RESHAPED_SCALED, "t.fuse", target="simulator").f(*inputs)
    assert_results_close(func, run_tensor(func, inputs), got)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_merged_kernels_agree_with_numpy(case):
    """The simulator's kernel (8 x 8 squares, 64-point thin rectangles) and the loops
    interpreter on the coalesced IR, each against the tensor interpreter."""
    source, dims, variant = CASES[case]
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=3)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    (name,) = [k["kernel_name"] for f in module.ir.funcs for k in f.body.ops
               if isinstance(k, KernelOp)]
    python = module.python_module
    launched = record_launches(python, [name, f"{name}_vector", f"{name}_thin"])
    assert_results_close(func, expected, module.f(*inputs))
    assert launched == [name + variant]
    assert_results_close(func, expected, tuple(run_loops(module.ir.funcs[0], inputs)))


def test_merged_axis_is_addressed_without_divisions():
    """The unravel of H*W is only in the IR's indices: the kernels address x and the
    result by flat offsets along the merged axis, dividing by nothing per value."""
    module = mlfuse.compile_source(NCHW_NHWC, "t.fuse", target="simulator")
    source = module.source
    kernels = source[source.index("def f_0("):source.index("def f(")]
    assert "% W" not in kernels and "// W" not in kernels
    assert "(H * W)" in kernels


def test_explain_states_the_merge():
    from mlfuse.tools.explain import explain_module, format_text
    loops = compile_text(NCHW_NHWC, "t.fuse", level="loops")
    text = format_text(explain_module(loops, dims={"N": 64, "C": 512, "H": 14, "W": 14}))
    assert "H, W move together: one axis of 196 (coalesce-axes); reads of %x step along " \
           "axis 1 (H*W)" in text
