"""The contraction view of a ``fused.kernel`` with ``schedule = "contraction"``: the
analysis the schedule-contractions pass (mlfuse/transforms/contraction.py) writes into the
kernel's attributes, read back into its parts for codegen, which reads IR only.

    fused.kernel {extents = [M, N], schedule = "contraction", m_dims = [0], n_dims = [1],
                  variant = "mma-f16", ...}

- ``m_dims`` / ``n_dims`` / ``batch_dims``: positions in ``extents`` of the indices only
  the A operand reads (M side), only B reads (N side), and both or neither (batch).
- ``a_operand``: which operand (0 or 1) of the innermost reduce's product is A.
- ``variant``: how codegen tiles it: "simt" (f32/f64 FMAs) or "mma-<dtype>" (tensor
  cores, :data:`MMA_VARIANTS`), or for an f32 sum at a lower matmul precision
  "mma-tf32x3" (3xTF32) or "mma-tf32" (TF32) (mlfuse/matmul_precision.py).
- ``split_k``: into how many shares, at most, the K axis may be split across blocks
  (split-K: each share's partial sums go to a workspace and a second kernel adds them in
  order and runs the epilogue; the host picks the number per call,
  mlfuse/codegen/tile_model.py).
  A share holds at least :data:`MIN_SPLIT_K` values of K, so a K known to be short (an
  attention head's 64) gets 1: no split, and no second kernel is generated.

The reduction is the kernel's one top-level ``loops.reduce`` and the reduces nested in
it (their indices flatten into one K axis); the product is what the innermost yields.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.errors import MlfuseError
from mlfuse.ir.core import BlockArgument, Value
from mlfuse.matmul_precision import F32_VARIANT

from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, ReduceOp

# Operand dtype -> the tensor-core variant that multiplies it (f32 accumulation).
MMA_VARIANTS = {"f16": "mma-f16", "bf16": "mma-bf16"}
# f32 sums on tensor cores at the lower matmul precisions (TF32, 3xTF32)
TF32_VARIANTS = tuple(v for v in F32_VARIANT.values() if v != "simt")
VARIANTS = ("simt",) + tuple(MMA_VARIANTS.values()) + TF32_VARIANTS
# Split-K: a share of K is at least this long (its partial sums' traffic, M x N values
# per share, stays small against the operand reads of the share), and K is cut into at
# most MAX_SPLIT shares.
MIN_SPLIT_K = 128
MAX_SPLIT = 64


@dataclass
class Contraction:
    kernel: KernelOp
    reduces: list[ReduceOp]   # the nested reduce chain, outermost first
    a: Value                  # the operand read on the M side
    b: Value                  # the operand read on the N side
    m_dims: list[int]         # positions in the kernel's extents, in order
    n_dims: list[int]
    batch_dims: list[int]
    variant: str = "simt"

    @property
    def split_k(self) -> int:
        """The most shares K may be split into (see the module doc): K // MIN_SPLIT_K for
        a K known at compile time, MAX_SPLIT for one known only at the call."""
        k = 1
        for e in self.k_extents:
            if not isinstance(e, int):
                return MAX_SPLIT
            k *= e
        return max(1, min(MAX_SPLIT, k // MIN_SPLIT_K))

    @property
    def acc(self) -> Value:
        return self.reduces[0].result

    @property
    def k_extents(self) -> list:
        return [r["extent"] for r in self.reduces]

    def direct_load(self, side: str) -> LoadOp | None:
        """The operand's load when it is one plain load whose trailing indices are
        exactly the reduction indices over the buffer's trailing dims (M side: the
        flattened K is then contiguous, e.g. conv2d's OIHW weights), or whose last
        index is the only N index (N side), and no other index depends on them: then
        consecutive K (resp. N) positions are consecutive in memory, and tiles can be
        read 16 bytes at a time."""
        return self.k_major_load(side) if side == "a" else self._contiguous_load("b", False)

    def k_major_load(self, side: str) -> LoadOp | None:
        """The operand's plain load when its trailing indices are exactly the reduction
        indices over the buffer's trailing dims and no other index depends on them: the
        flattened K is contiguous (conv2d's OIHW weights on the M side; on the N side a
        weight stored [N, K], as nn.Linear's and ONNX Gemm's transB read it)."""
        return self._contiguous_load(side, True)

    def _contiguous_load(self, side: str, along_k: bool) -> LoadOp | None:
        value = self.a if side == "a" else self.b
        op = getattr(value, "op", None)
        if not isinstance(op, LoadOp):
            return None
        indices, shape = op.operands[1:], op.operands[0].type.shape
        if along_k:
            fast = [r.body.args[0] for r in self.reduces]
            if list(shape[len(shape) - len(fast):]) != self.k_extents:
                return None
        else:
            if len(self.n_dims) != 1:
                return None
            fast = [self.kernel.body.args[self.n_dims[0]]]
        lead = len(indices) - len(fast)
        if lead < 0 or any(a is not b for a, b in zip(indices[lead:], fast)):
            return None
        if any(f in arg_deps(v) for v in indices[:lead] for f in fast):
            return None
        return op


def arg_deps(value: Value, memo: dict | None = None) -> frozenset:
    """The block arguments (loop indices) ``value`` is computed from."""
    memo = {} if memo is None else memo
    key = id(value)
    if key in memo:
        return memo[key]
    if isinstance(value, BlockArgument):
        deps = frozenset([value])
    else:
        op = value.op
        operands = op.operands[1:] if isinstance(op, (LoadOp, MaskedLoadOp)) else op.operands
        deps = frozenset().union(*(arg_deps(v, memo) for v in operands)) if operands else frozenset()
    memo[key] = deps
    return deps


def reduce_chain(kernel: KernelOp) -> list[ReduceOp]:
    """The kernel's top-level reduce and the reduces nested in it, outermost first."""
    chain = [o for o in kernel.body.ops if isinstance(o, ReduceOp)][:1]
    while chain:
        inner = [o for o in chain[-1].body.ops if isinstance(o, ReduceOp)]
        if not inner:
            break
        chain.append(inner[0])
    return chain


def write_contraction(c: Contraction) -> None:
    """Record ``c`` in its kernel's attributes (and mark the kernel a contraction)."""
    product = c.reduces[-1].body.ops[-1].operands[0].op
    attributes = c.kernel.attributes
    attributes.update(schedule="contraction", m_dims=list(c.m_dims), n_dims=list(c.n_dims),
                      batch_dims=list(c.batch_dims), variant=c.variant,
                      a_operand=0 if product.operands[0] is c.a else 1,
                      split_k=c.split_k)


def contraction_of(kernel: KernelOp) -> Contraction:
    """The contraction the kernel's attributes describe (see the module doc)."""
    chain = reduce_chain(kernel)
    product = getattr(chain[-1].body.ops[-1].operands[0], "op", None) if chain else None
    if product is None or product.name != "arith.mul" or not kernel["m_dims"] \
            or not kernel["n_dims"] or kernel["variant"] not in VARIANTS:
        raise MlfuseError("codegen: a kernel marked contraction lacks its analysis (m_dims, "
                          "n_dims, variant) or is not a sum of products; run "
                          "schedule-contractions", kernel.loc)
    a = kernel["a_operand"]
    return Contraction(kernel, chain, product.operands[a], product.operands[1 - a],
                       list(kernel["m_dims"]), list(kernel["n_dims"]),
                       list(kernel["batch_dims"]), kernel["variant"])


__all__ = ["Contraction", "MAX_SPLIT", "MIN_SPLIT_K", "MMA_VARIANTS", "TF32_VARIANTS", "VARIANTS",
           "arg_deps", "contraction_of", "reduce_chain", "write_contraction"]
