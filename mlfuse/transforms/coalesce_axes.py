"""``coalesce-axes``: neighbouring axes of a kernel that every access indexes together
become one axis (MLIR's "collapse dims").

NCHW -> NHWC over [N, H, W, C] reads ``x[n, c, h, w]`` and stores ``y[n, h, w, c]``: H and
W are neighbours, in that order, in the space and in both accesses, so the kernel is
really [N, H*W, C] -> reading ``x`` as [N, C, H*W]. A transpose-tiles kernel tiles the
permuted loads' axis (W) with the innermost (C); at 14x14 spatial sizes its reads would
run 14 values (56 bytes) where the merged axis runs 196.

Axes d and d+1 merge when both move (neither extent is the literal 1), their indices are
used only as indices of loads and stores (no arithmetic on them), and every access that
uses either takes both, as neighbouring indices in the space's order, the later one over
a buffer dim equal to axis d+1's extent (so ``i_d * e_{d+1} + i_{d+1}`` is the element's
place along the two dims). An operand that indexes one alone (a bias ``b[w]``) keeps them
apart. Runs of such pairs merge whole.

The rewrite is IR: the kernel's space gets one index X per run, of the product extent,
and the old indices become the row-major unravel of X at the top of the body (``h = X //
W``, ``w = X % W``), so every interpreter runs it unchanged; codegen reads such indices
as one index over the product of the dims (dialects/index_forms.merged_view). The kernel
records the original extents of each new axis in ``coalesced`` (explain states the
merge). Only transpose-tiles kernels are rewritten: their codegen addresses merged
views; the lean pointwise path already collapses accesses onto the space's trailing axes
(codegen/addressing.py) and the others would divide per value.
"""
from __future__ import annotations

from mlfuse.dialects.arith import ConstantOp, FloorDivOp, ModOp
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import DimOp, LoadOp, MaskedLoadOp, StoreOp
from mlfuse.dialects.permute import load_indices
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.core import Block, Operation, Value
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.types import INDEX, product_dim


def _access_indices(op: Operation) -> list[Value] | None:
    """The indices of a load, masked load or store (None for other ops)."""
    if isinstance(op, (LoadOp, MaskedLoadOp)):
        return load_indices(op)
    if isinstance(op, StoreOp):
        return list(op.operands[2:])
    return None


def _index_uses_only(kernel: KernelOp, arg: Value) -> bool:
    """Whether ``arg`` is used only as an index of loads and stores."""
    for user, i in arg.uses:
        indices = _access_indices(user)
        first = len(user.operands) - len(indices) if indices is not None else None
        if first is None or i < first:
            return False
    return True


def _mergeable(kernel: KernelOp, d: int) -> bool:
    """Whether axes d and d+1 of ``kernel`` can be one (the module doc)."""
    args, extents = kernel.body.args, kernel.extent_list
    outer, inner = args[d], args[d + 1]
    if 1 in (extents[d], extents[d + 1]):
        return False
    if not (_index_uses_only(kernel, outer) and _index_uses_only(kernel, inner)):
        return False
    users = {id(u): u for a in (outer, inner) for u, _ in a.uses}
    for op in users.values():
        idx = _access_indices(op)
        shape = (op.operands[1] if isinstance(op, StoreOp) else op.operands[0]).type.shape
        at = [p for p, v in enumerate(idx) if v is outer]
        after = [p for p, v in enumerate(idx) if v is inner]
        if len(at) != 1 or after != [at[0] + 1] or shape[at[0] + 1] != extents[d + 1]:
            return False
    return True


def axis_groups(kernel: KernelOp) -> list[list[int]]:
    """The kernel's axes in runs that merge (each run one axis after the rewrite)."""
    n = len(kernel.extent_list)
    groups = [[0]] if n else []
    for d in range(n - 1):
        if _mergeable(kernel, d):
            groups[-1].append(d + 1)
        else:
            groups.append([d + 1])
    return groups


def coalesce(kernel: KernelOp) -> list[list[int]]:
    """Rewrite ``kernel`` over its merged axes (the module doc); its groups."""
    groups = axis_groups(kernel)
    if all(len(g) == 1 for g in groups):
        return groups
    old = kernel.body
    extents = kernel.extent_list
    block = Block([INDEX] * len(groups), [old.args[g[0]].name_hint if len(g) == 1 else
                                          "_".join(old.args[d].name_hint or f"i{d}" for d in g)
                                          for g in groups])
    ops: list[Operation] = []
    for arg, group in zip(block.args, groups):
        if len(group) == 1:
            old.args[group[0]].replace_all_uses_with(arg)
            continue
        rest = arg  # the row-major unravel, innermost first (index_forms.unravel_form)
        for d in reversed(group[1:]):
            size = extents[d]
            radix = DimOp(attributes={"sym": size}) if isinstance(size, str) else \
                ConstantOp(result_types=[INDEX], attributes={"value": int(size)})
            ops.append(radix)
            ops.append(ModOp([rest, radix.result], result_names=[old.args[d].name_hint]))
            old.args[d].replace_all_uses_with(ops[-1].result)
            ops.append(FloorDivOp([rest, radix.result], result_names=[
                old.args[group[0]].name_hint if d == group[1] else None]))
            rest = ops[-1].result
        old.args[group[0]].replace_all_uses_with(rest)
    for op in ops + list(old.ops):
        if op.parent is not None:
            old.detach(op)
        block.append(op)
    kernel.regions[0].blocks[0] = block
    block.parent = kernel.regions[0]
    kernel.attributes["extents"] = [product_dim([extents[d] for d in g]) for g in groups]
    kernel.attributes["coalesced"] = [[extents[d] for d in g] for g in groups]
    if kernel.attributes.get("tile_axes"):
        kernel.attributes["tile_axes"] = [next(n for n, g in enumerate(groups) if d in g)
                                          for d in kernel["tile_axes"]]
    return groups


class CoalesceAxes(Pass):
    name = "coalesce-axes"
    doc = "Merge neighbouring axes every access of a transpose-tiles kernel indexes together."

    def __init__(self):
        self._remarks: list[str] = []

    def run(self, module: ModuleOp) -> None:
        self._remarks = []
        for kernel in module.walk():
            if isinstance(kernel, KernelOp) and kernel["schedule"] == "transpose-tiles":
                groups = coalesce(kernel)
                if any(len(g) > 1 for g in groups):
                    self._remarks.append(f"{kernel['kernel_name']}: {merged_text(kernel)}")

    def remarks(self) -> list[str]:
        return list(self._remarks)


def merged_text(kernel: KernelOp, size=None) -> str:
    """What explain says of a kernel's merged axes ("" where none merged); ``size``: a
    dim's value, where known."""
    parts = [f"{', '.join(map(str, g))} move together: one axis of "
             f"{size(product_dim(g)) if size else product_dim(g)}"
             for g in kernel.attributes.get("coalesced", []) if len(g) > 1]
    return "; ".join(parts)


__all__ = ["CoalesceAxes", "axis_groups", "coalesce", "merged_text"]
