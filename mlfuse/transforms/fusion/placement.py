"""Outputs stored through an index map: a kernel's point value written where a chain of
permutes and reshapes after it puts that value, so the chain costs no kernel and its
input is never written.

Attention's head merge is ``reshape(transpose(matmul(p, v), [0, 2, 1, 3]), [B, S, H*D])``:
the contraction's points are [B*H, S, D], its output is [B, S, H*D]. Each member of the
chain moves elements without changing them (a transpose, a reshape: an injective map of
the same number of elements), so the output element holding the point's value is found
by mapping the point forward through the chain: a transpose permutes the index, a
reshape linearizes and unravels it (``Emitter.reshape_index``). XLA and Inductor store a
matmul's result at the permuted index in its epilogue the same way.

The forward map is a guess at each step, made from the member's load of its input (the
indices its block arguments in some order: a permute; otherwise the same number of
elements: a reshape). The guess only decides *where* the kernel stores; the kernel
builder then inlines the output at that index as it inlines any consumer, so the value
stored is the output's value there whatever the member computes. That read folds back
to the kernel's own point only where the guess inverts the member
(index_algebra.IndexAlgebra: ``(q * s + r) // s == q`` and the rest); where it does not,
the contraction is read at another index than its point and the builder refuses
(CannotFuse). Each step is a bijection between index spaces of the same size, so the
kernel's points write every output element exactly once.
"""
from __future__ import annotations

from mlfuse.dialects.loops import LoadOp
from mlfuse.dialects.shapes import same_size
from mlfuse.ir.core import Block, Value

from mlfuse.transforms.fusion.graph import Nest
from mlfuse.transforms.fusion.spaces import Space, level
from mlfuse.transforms.loop_emitter import Emitter

MAX_CHAIN = 8  # members between the point and a placed output (a head merge has 3)


def _moved_input(nest: Nest, by_out: dict[int, Nest]) -> list[tuple[Nest, LoadOp]]:
    """The members ``nest`` reads with as many elements as it has (the inputs it may move
    element for element), with the load that reads each, in body order."""
    found = []
    for op in nest.op.body.ops:
        if isinstance(op, LoadOp):
            q = by_out.get(id(op.operands[0]))
            if q is not None and same_size(q.extents, nest.extents):
                found.append((q, op))
    return found


def placement_source(nest: Nest, members: list[Nest], space: Space, depth: int = 0,
                     root: str = "point") -> tuple[Nest, LoadOp] | None:
    """(q, load): the member whose element ``nest`` holds at each index, placed itself (at
    ``root``'s level of ``space``, spaces.level: a point value, or a value over the whole
    space that the broadcast-back epilogue computes; or in turn placed), and the load by
    which ``nest`` reads it; None where ``nest`` is no such move of a placed member (then
    it cannot be stored from the kernel's points, or from its epilogue's loop)."""
    if not nest.is_pointwise or depth >= MAX_CHAIN:
        return None
    by_out = {id(m.out): m for m in members if m.out is not None and m is not nest}
    for q, load in _moved_input(nest, by_out):
        if level(q.extents, space) == root or \
                placement_source(q, members, space, depth + 1, root) is not None:
            return q, load
    return None


def placement_root(nest: Nest, members: list[Nest], space: Space) -> str | None:
    """Where the chain that places ``nest`` starts: "point" (stored by the kernel's
    points), "row" (stored in the epilogue's loop: a transpose after a channel
    layernorm computed over NHWC), or None (not placed)."""
    for root in ("point", "row"):
        if placement_source(nest, members, space, root=root) is not None:
            return root
    return None


def forward_index(nest: Nest, load: LoadOp, source_index: list[Value], q: Nest,
                  block: Block) -> list[Value]:
    """The index in ``nest`` of the element it reads from ``q`` at ``source_index``:
    where the load's indices are ``nest``'s own in another order (over matching
    extents), the inverse permutation; otherwise ``q``'s index reshaped to ``nest``'s
    extents (index ops emitted into ``block``)."""
    args = list(nest.op.body.args)
    idx = list(load.operands[1:])
    if len(idx) == len(args) and all(any(v is a for a in args) for v in idx) and \
            len({id(v) for v in idx}) == len(args):
        out: list[Value | None] = [None] * len(args)
        for i, v in enumerate(idx):
            j = next(j for j, a in enumerate(args) if a is v)
            if nest.extents[j] != q.extents[i]:
                break
            out[j] = source_index[i]
        else:
            return out
    return Emitter(block, {}).reshape_index(source_index, q.extents, nest.extents)


__all__ = ["forward_index", "placement_root", "placement_source"]
