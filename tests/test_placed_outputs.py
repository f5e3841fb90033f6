"""Outputs stored through an index map (fusion/placement.py): a permute or reshape of a
kernel's point values (attention's head merge after P·V, a transpose of a reduction's
result) is stored where it puts each value, in the kernel computing them, and its input
is never written. Checked on the fused IR and under the simulator against the NumPy
interpreter."""
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import AllocOp
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import random_inputs

from helpers import assert_results_close

HEAD_MERGE = ("func f(p: f32[B, H, S, S], v: f32[B, H, S, D]) -> f32[B, S, H*D] {\n"
              "    return reshape(transpose(matmul(p, v), [0, 2, 1, 3]), [B, S, H*D]) }")
# an epilogue between the contraction and the moves, and a rank-3 permute after them
SCALED_MERGE = ("func f(p: f32[B, H, S, S], v: f32[B, H, S, D], b: f32[D]) -> f32[H*D, S, B] {\n"
                "    o = transpose(matmul(p, v) * 0.5 + b, [0, 2, 1, 3])\n"
                "    return transpose(reshape(o, [B, S, H*D]), [2, 1, 0]) }")
HEAD_MERGE_F16 = HEAD_MERGE.replace("f32", "f16")  # tensor cores (mma-f16), the same store
# a whole attention block: the projections store the heads layout (the head index
# n // D of a point n < H*D is below H: index_algebra), P.V stores the head merge
ATTENTION = """\
func f(x: f32[B, S, E], wq: f32[E, H, D], wk: f32[E, H, D], wv: f32[E, H, D]) -> f32[B, S, H*D] {
    q = transpose(reshape(matmul(x, reshape(wq, [E, H*D])), [B, S, H, D]), [0, 2, 1, 3])
    k = transpose(reshape(matmul(x, reshape(wk, [E, H*D])), [B, S, H, D]), [0, 2, 3, 1])
    v = transpose(reshape(matmul(x, reshape(wv, [E, H*D])), [B, S, H, D]), [0, 2, 1, 3])
    p = softmax(matmul(q, k), axis=3)
    return reshape(transpose(matmul(p, v), [0, 2, 1, 3]), [B, S, H*D])
}
"""
# a reduction's result moved: rows of [B, H, S] sums stored as [B, S*H]
MOVED_SUMS = ("func f(x: f32[B, H, S, K]) -> f32[B, S*H] {\n"
              "    return reshape(transpose(sum(x, axis=3), [0, 2, 1]), [B, S*H]) }")
# the contraction read at its point and through a transpose: not one bijection, so the
# transpose is read from memory (two kernels), still right
SELF_TRANSPOSED = ("func f(a: f32[N, N], b: f32[N, N]) -> f32[N, N] {\n"
                   "    m = matmul(a, b)\n"
                   "    return transpose(m) + m }")


def fused(source: str, dims: dict):
    return compile_text(source, "t.fuse", fuse_options={"dims": dims}).funcs[0]


def kernel_ops(func) -> list[KernelOp]:
    return [op for op in func.body.ops if isinstance(op, KernelOp)]


def buffers(func) -> list:
    return [op.result.type.shape for op in func.body.ops if isinstance(op, AllocOp)]


@pytest.mark.parametrize("source", [HEAD_MERGE, SCALED_MERGE, HEAD_MERGE_F16])
def test_head_merge_is_the_contractions_store(source):
    func = fused(source, {"B": 8, "H": 16, "S": 1024, "D": 64})
    (k,) = kernel_ops(func)
    assert k["schedule"] == "contraction"
    assert k["variant"] == ("mma-f16" if "f16" in source else "simt")
    assert len(buffers(func)) == 1  # the output only: [B, H, S, D] is never written
    assert {"matmul = tensor.matmul", "transpose = tensor.transpose"} <= set(k["sources"])


def test_attention_has_no_copy_kernel_and_no_head_layout_prologue():
    func = fused(ATTENTION, {"B": 8, "S": 128, "E": 256, "H": 4, "D": 64})
    ks = kernel_ops(func)
    assert len(ks) == 6  # 3 projections, QK^T, softmax's statistics, P.V
    assert all(k["schedule"] in ("contraction", "row") for k in ks)
    (qk,) = [k for k in ks if k["extents"] == ["B*H", "S", "S"]]
    assert [s.split(" = ")[1] for s in qk["sources"]] == ["tensor.matmul"]  # plain operands
    heads = [k for k in ks if any(s.startswith(("q =", "k =", "v =")) for s in k["sources"])]
    assert len(heads) == 3 and all(k["schedule"] == "contraction" for k in heads)


def test_moved_reduction_result_is_stored_by_its_kernel():
    func = fused(MOVED_SUMS, {"B": 8, "H": 16, "S": 512, "K": 1024})
    (k,) = kernel_ops(func)
    assert k["extents"] == ["B", "H", "S"]  # the reduction's points, stored moved
    assert len(buffers(func)) == 1


def test_a_value_read_at_two_places_is_kept_in_memory():
    func = fused(SELF_TRANSPOSED, {"N": 1024})
    assert len(kernel_ops(func)) == 2


@pytest.mark.parametrize("source, dims", [
    (HEAD_MERGE, {"B": 2, "H": 3, "S": 5, "D": 4}),
    (HEAD_MERGE_F16, {"B": 2, "H": 2, "S": 4, "D": 8}),
    (SCALED_MERGE, {"B": 2, "H": 2, "S": 3, "D": 5}),
    (ATTENTION, {"B": 1, "S": 4, "E": 3, "H": 2, "D": 3}),
    (MOVED_SUMS, {"B": 2, "H": 3, "S": 2, "K": 3}),
    (SELF_TRANSPOSED, {"N": 6}),
], ids=["head_merge", "head_merge_f16", "scaled_merge", "attention", "moved_sums", "self_transposed"])
def test_agrees_with_numpy(source, dims):
    func = parse_program(source, "t.fuse").funcs[0]
    inputs = random_inputs(func, dims, seed=11)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    got = module["f"](*inputs)
    assert_results_close(func, expected, got)
