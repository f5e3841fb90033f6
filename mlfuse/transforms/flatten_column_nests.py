"""``flatten-column-nests``: a strips kernel over columns whose reduced values lie over
several neighbouring axes walks each of its loop nests as one loop over their product,
so the column plans of a single reduced axis serve it.

Batch norm's training step over NHWC reduces over [N, H, W]: fusion makes one kernel
over [C] whose reductions are nests ``reduce N { reduce H { reduce W { x[n, h, w, c] }
}}`` and whose epilogue is ``for N { for H { for W { ... } } }``. Viewed as [N*H*W, C],
x is the column standardisation that column stages run in one kernel (a split-columns
first stage, then the loops after the reductions, codegen/column_stages.py); as nests,
the kernel has no such plan (``why_not_staged``: "a loop over several axes") and
fusion cut it in three. The same holds for a sequence's [N, L, C] over [0, 1] and for
centring by spatial means over NHWC (``x[n, h, w, c]`` over [H, W], points [N, C]).

The rewrite, per nest, is flatten-row-nests' (``flatten_row_nests._flatten_nest``):

    reduce N { reduce H { reduce W { body(n, h, w) } } }
        ->  reduce N*H*W { body(X // W // H, X // W % H, X % W) }

It applies where every access that reads a level's index takes all the levels'
indices, in order, as neighbouring indices over dims of exactly the levels' extents
(and no other index reads them). Each such access is then the row-major unravel of X
over those axes (``index_forms.merged_view``): the element ``X * stride + ...``, which
the schedules' layout analysis and codegen read as one axis of the merged view, with
no division per value. The levels' digits stay in the body only where something else
reads them (an iota). Reduce nests over add, max and min sum the same values in the
same order.

The kernel's schedule is chosen again (fusion/schedules.apply_schedule); the flattened
kernel is kept where it is still over columns. The planner prices it so
(fusion/fuse.py), so fusion makes the one kernel.
"""
from __future__ import annotations

from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.index_forms import reads_any
from mlfuse.dialects.loops import ACCESSES, ForOp, ReduceOp, access_parts
from mlfuse.dialects.reductions import loop_levels
from mlfuse.ir.clone import clone_op
from mlfuse.ir.core import Block
from mlfuse.transforms.flatten_row_nests import _flatten_nest
from mlfuse.transforms.kernel_pass import KernelPass


def _neighbouring(levels: list) -> bool:
    """Whether every access in the nest that reads a level's index takes the levels'
    indices, in order, as neighbouring indices over dims of exactly their extents, and
    no other of its indices reads them."""
    indices = [lvl.body.args[0] for lvl in levels]
    ids = [id(k) for k in indices]
    extents = [repr(lvl["extent"]) for lvl in levels]
    n = len(levels)
    for op in levels[0].walk():
        if not isinstance(op, ACCESSES):
            continue
        buf, idx = access_parts(op)
        at = [j for j, v in enumerate(idx) if id(v) in ids]
        if not at:
            if any(reads_any(v, set(ids)) for v in idx):
                return False
            continue
        j = at[0]
        if [id(v) for v in idx[j:j + n]] != ids or \
                [repr(d) for d in buf.type.shape[j:j + n]] != extents:
            return False
        if any(reads_any(v, set(ids)) for v in idx[:j] + idx[j + n:]):
            return False
    return True


def flattened_columns(kernel: KernelOp, dims: dict, target) -> KernelOp | None:
    """A copy of ``kernel`` (over columns) with its nests flattened and its schedule
    chosen again, where every nest's levels are neighbouring indices of its accesses
    and the new choice is still over columns; None where not."""
    from mlfuse.transforms.fusion.schedules import apply_schedule
    nests = [loop_levels(op) for op in kernel.body.ops if isinstance(op, (ReduceOp, ForOp))]
    if not any(len(levels) > 1 for levels in nests) or \
            not all(_neighbouring(levels) for levels in nests if len(levels) > 1):
        return None
    holder = Block()
    clone_op(kernel, {}, into=holder)
    copy = holder.detach(holder.ops[0])
    nests = [loop_levels(op) for op in copy.body.ops if isinstance(op, (ReduceOp, ForOp))]
    flat = [[lvl["extent"] for lvl in levels] for levels in nests if len(levels) > 1]
    for levels in nests:
        if len(levels) > 1:
            _flatten_nest(levels, [])
    copy.attributes["flat_nests"] = list({repr(e): e for e in flat}.values())
    choice = apply_schedule(copy, dims, target)
    if choice.schedule == "split-columns" or (choice.schedule == "strips" and
                                              choice.strip == "columns"):
        return copy
    copy.erase()
    return None


def over_columns(kernel: KernelOp) -> bool:
    return kernel["schedule"] == "split-columns" or (
        kernel["schedule"] == "strips" and kernel.attributes.get("strip") == "columns")


class FlattenColumnNests(KernelPass):
    name = "flatten-column-nests"
    doc = ("Walk a kernel over columns whose nests index neighbouring axes (batch norm's "
           "statistics over [N, H, W] of NHWC) as one loop each, so the column plans of one "
           "reduced axis (column stages, split-columns) take it.")

    def rewrite(self, kernel: KernelOp) -> tuple[KernelOp, list[str]]:
        if not over_columns(kernel):
            return kernel, []
        copy = flattened_columns(kernel, self.dims, self.target)
        if copy is None:
            return kernel, []
        return copy, [f"its nests walked as one loop each ({copy['schedule']})"]


__all__ = ["FlattenColumnNests", "flattened_columns", "over_columns"]
