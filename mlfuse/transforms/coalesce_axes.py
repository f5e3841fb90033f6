"""``coalesce-axes``: neighbouring axes of a kernel that every access indexes together
become one axis (MLIR's "collapse dims").

NCHW -> NHWC over [N, H, W, C] reads ``x[n, c, h, w]`` and stores ``y[n, h, w, c]``: H and
W are neighbours, in that order, in the space and in both accesses, so the kernel is
really [N, H*W, C] -> reading ``x`` as [N, C, H*W]. A transpose-tiles kernel tiles the
permuted loads' axis (W) with the innermost (C); at 14x14 spatial sizes its reads would
run 14 values (56 bytes) where the merged axis runs 196.

Axes d and d+1 merge when both move (neither extent is the literal 1) and every access
that uses either index takes them together, in the space's order, in one of two forms:
- as neighbouring indices, the later over a buffer dim equal to axis d+1's extent (so
  ``i_d * e_{d+1} + i_{d+1}`` is the element's place along the two dims);
- as one index ``i_d * e_{d+1} + i_{d+1}`` (the ravel a reshape leaves: x[N, C, S] read
  as [N, C, 16, S/16] and transposed), nowhere else in that access.
Their indices have no other use (no other arithmetic). An operand that indexes one alone
(a bias ``b[w]``) keeps them apart. Runs of such pairs merge whole, and the rewrite is
repeated until nothing merges (a ravel of a merged axis and the next).

The rewrite is IR: the kernel's space gets one index X per run, of the product extent;
a ravel becomes X, and the old indices, where still used, the row-major unravel of X at
the top of the body (``h = X // W``, ``w = X % W``), so every interpreter runs it
unchanged; codegen reads such indices as one index over the product of the dims
(dialects/index_forms.merged_view). The kernel records the original extents of each
axis in ``coalesced`` (explain states the merge).

Which kernels: transpose-tiles kernels (their codegen addresses merged views), and
loop-free pointwise kernels that become transpose-tiles once merged (a reshape's ravel
hid the permuted read: fusion saw no single axis its last index follows), their tiles
chosen as fusion would (fusion/tiles.py); other pointwise kernels are left as they are
(their lean addressing collapses trailing axes itself, codegen/addressing.py). And
split-columns kernels whose points include a ravel's axes (group norm over
channels-last's column statistics over [N, G, C/G], reading x at g * C/G + c): merged,
the loads' last index is the points' last, which split-columns' vector twin needs
(codegen/split_columns_vector.py: 16-byte vectors of neighbouring channels, where C/G
alone need not be a multiple of 4).
"""
from __future__ import annotations

from mlfuse.dialects.arith import ConstantOp, FloorDivOp, ModOp
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.index_forms import ADD, MUL, op_of, size_of
from mlfuse.dialects.loops import (
    ACCESSES,
    DimOp,
    ForOp,
    ReduceOp,
    access_parts,
)
from mlfuse.ir.clone import clone_op
from mlfuse.ir.core import Block, Operation, Value
from mlfuse.ir.types import INDEX, product_dim
from mlfuse.transforms.fusion.tiles import choose_tiles, merged_text
from mlfuse.transforms.kernel_pass import KernelPass


def access_indices(op: Operation) -> list[Value] | None:
    """The indices of a load, masked load or store (None for other ops)."""
    return access_parts(op)[1] if isinstance(op, ACCESSES) else None


def _as_index(user: Operation, i: int) -> bool:
    """Whether operand ``i`` of ``user`` is one of an access's indices."""
    indices = access_indices(user)
    return indices is not None and i >= len(user.operands) - len(indices)


def _ravel_of(v: Value, extent) -> tuple[Value, Value] | None:
    """(a, b) where ``v`` is ``a * E + b`` (operands in either order) with E of size
    ``extent``; else None."""
    op = op_of(v)
    if not isinstance(op, ADD):
        return None
    for times, b in (op.operands, op.operands[::-1]):
        m = op_of(times)
        if isinstance(m, MUL):
            for a, size in (m.operands, m.operands[::-1]):
                if size_of(size) == extent:
                    return a, b
    return None


def _ravels(kernel: KernelOp, d: int) -> list[Value]:
    """The values ``i_d * e_{d+1} + i_{d+1}`` in the kernel's body."""
    outer, inner = kernel.body.args[d], kernel.body.args[d + 1]
    extent = kernel.extent_list[d + 1]
    found = {id(u.result): u.result for u, _ in inner.uses
             if isinstance(u, ADD) and _ravel_of(u.result, extent) == (outer, inner)}
    return list(found.values())


def _mergeable(kernel: KernelOp, d: int) -> bool:
    """Whether axes d and d+1 of ``kernel`` can be one (the module doc)."""
    args, extents = kernel.body.args, kernel.extent_list
    outer, inner = args[d], args[d + 1]
    if 1 in (extents[d], extents[d + 1]):
        return False
    ravels = _ravels(kernel, d)
    adds = {id(r.op) for r in ravels}
    for user, i in outer.uses:  # an index, or the product of a ravel
        if not (_as_index(user, i) or (isinstance(user, MUL) and user.result.uses and all(
                id(u) in adds for u, _ in user.result.uses))):
            return False
    if not all(_as_index(u, i) or id(u) in adds for u, i in inner.uses):
        return False
    if not all(_as_index(u, i) for r in ravels for u, i in r.uses):
        return False
    ids = {id(r) for r in ravels}
    users = {id(u): u for v in (outer, inner, *ravels) for u, i in v.uses if _as_index(u, i)}
    for op in users.values():
        idx = access_indices(op)
        if any(id(v) in ids for v in idx):  # the ravel form: one index, nothing else
            if sum(id(v) in ids for v in idx) != 1 or any(v is outer or v is inner for v in idx):
                return False
            continue
        shape = access_parts(op)[0].type.shape
        at = [p for p, v in enumerate(idx) if v is outer]
        after = [p for p, v in enumerate(idx) if v is inner]
        if len(at) != 1 or after != [at[0] + 1] or shape[at[0] + 1] != extents[d + 1]:
            return False
    return True


def _ravel_merges(kernel: KernelOp) -> bool:
    """Whether two neighbouring axes that a ravel ``i_d * e_{d+1} + i_{d+1}`` reads merge."""
    return any(_ravels(kernel, d) and _mergeable(kernel, d)
               for d in range(len(kernel.extent_list) - 1))


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


def _rewrite(kernel: KernelOp, groups: list[list[int]]) -> None:
    """The kernel over one index per group (the module doc)."""
    old = kernel.body
    extents = kernel.extent_list
    names = [old.args[g[0]].name_hint if len(g) == 1 else
             "_".join(old.args[d].name_hint or f"i{d}" for d in g) for g in groups]
    block = Block([INDEX] * len(groups), names)
    made: list[Operation] = []
    for arg, group in zip(block.args, groups):
        if len(group) == 1:
            old.args[group[0]].replace_all_uses_with(arg)
            continue
        if len(group) == 2:  # a ravel of the two is the merged index itself
            for r in _ravels(kernel, group[0]):
                r.replace_all_uses_with(arg)
        rest = arg  # the row-major unravel, innermost first (index_forms.unravel_form)
        for d in reversed(group[1:]):
            size = extents[d]
            radix = DimOp(attributes={"sym": size}) if isinstance(size, str) else \
                ConstantOp(result_types=[INDEX], attributes={"value": int(size)})
            made.append(radix)
            made.append(ModOp([rest, radix.result], result_names=[old.args[d].name_hint]))
            old.args[d].replace_all_uses_with(made[-1].result)
            made.append(FloorDivOp([rest, radix.result], result_names=[
                old.args[group[0]].name_hint if d == group[1] else None]))
            rest = made[-1].result
        old.args[group[0]].replace_all_uses_with(rest)
    for op in made + list(old.ops):
        if op.parent is not None:
            old.detach(op)
        block.append(op)
    _drop_dead_indices(block)
    kernel.regions[0].blocks[0] = block
    block.parent = kernel.regions[0]
    before = kernel.attributes.get("coalesced") or [[e] for e in extents]
    kernel.attributes["extents"] = [product_dim([extents[d] for d in g]) for g in groups]
    kernel.attributes["coalesced"] = [[e for d in g for e in before[d]] for g in groups]
    if kernel.attributes.get("tile_axes"):
        kernel.attributes["tile_axes"] = [next(n for n, g in enumerate(groups) if d in g)
                                          for d in kernel["tile_axes"]]


def _drop_dead_indices(block: Block) -> None:
    """Erase index arithmetic (and dims, index constants) no op uses any more: a ravel's
    product and sum, an unravel nothing reads."""
    for op in reversed(list(block.ops)):
        if op.results and all(r.type == INDEX and not r.uses for r in op.results) and \
                isinstance(op, (ADD, MUL, ModOp, FloorDivOp, DimOp, ConstantOp)):
            op.erase()


def coalesce(kernel: KernelOp) -> bool:
    """Rewrite ``kernel`` over its merged axes until nothing more merges; whether any
    did."""
    changed = False
    while True:
        groups = axis_groups(kernel)
        if all(len(g) == 1 for g in groups):
            return changed
        _rewrite(kernel, groups)
        changed = True


def _tiled_copy(kernel: KernelOp, dims: dict, target) -> KernelOp | None:
    """A loop-free pointwise kernel merged, where that makes it transpose-tiles (its
    tiles chosen as fusion would); None where it does not."""
    if any(isinstance(o, (ReduceOp, ForOp)) for o in kernel.body.ops):
        return None
    # only a ravel hides a permuted read: merging neighbouring plain indices leaves each
    # load's last index following the axis it followed (fusion's verdict stands)
    if not _ravel_merges(kernel):
        return None
    holder = Block()
    clone_op(kernel, {}, into=holder)
    copy = holder.detach(holder.ops[0])
    coalesce(copy)
    tiles = choose_tiles(copy, dims, target)
    if tiles is None:
        copy.erase()
        return None
    copy.attributes["schedule"], copy.attributes["tile_axes"] = "transpose-tiles", tiles[0]
    return copy


class CoalesceAxes(KernelPass):
    name = "coalesce-axes"
    doc = ("Merge neighbouring axes every access of a transpose-tiles kernel (or a split-columns "
           "kernel's ravel) indexes together.")

    def rewrite(self, kernel: KernelOp) -> tuple[KernelOp, list[str]]:
        remarks = []
        if kernel["schedule"] == "transpose-tiles":
            changed = coalesce(kernel)
        elif kernel["schedule"] == "split-columns" and _ravel_merges(kernel):
            changed = coalesce(kernel)
        elif kernel["schedule"] == "pointwise" and \
                (copy := _tiled_copy(kernel, self.dims, self.target)) is not None:
            kernel, changed = copy, True
            remarks.append("transpose-tiles once merged")
        else:
            changed = False
        if changed:
            remarks.append(merged_text(kernel))
        return kernel, remarks


__all__ = ["CoalesceAxes", "access_indices", "axis_groups", "coalesce"]
