"""``flatten-row-nests``: a row kernel whose reduced values lie over several trailing
axes walks each of its loop nests as one loop over their product, so the schedules of
single-axis rows (several short rows a warp, the host's group per call) serve it.

Instance norm over [N, C, H, W] reduces over [H, W]: fusion makes one kernel over [N, C]
whose reductions are nests ``reduce H { reduce W { x[n, c, h, w] } }`` and whose
epilogue is ``for H { for W { ... } }``. Such a kernel is "strips" over "rows": a block
per row. At 16 x 16 pixels that is 32768 blocks of 256 values, each two block-wide
reductions long; a warp per row does the same work in registers and shuffles.

The rewrite, per nest (a reduce nest: the same combiner, each inner level starting
from the combiner's identity, ``dialects/reductions.reduce_nest``; a for nest, each level
ending in the next, ``for_nest``):

    reduce H { reduce W { body(h, w) } }  ->  reduce H*W { body(X // W, X % W) }

with the levels' indices the row-major unravel of X (``index_forms.unravel_form``: the
form a reshape's read takes, which codegen addresses at ``row_base + X``,
codegen/flat_rows.py). The ops a level computes before its inner level move into the
one body (recomputed per value: pure index and load work). Reduce nests over add, max
and min are sums over the same values in the same order; the result is the same but for
the rounding of a different grouping, as any schedule's.

The kernel's schedule is then chosen again (fusion/schedules.apply_schedule). A kernel
whose nests walk consecutive elements is kept flattened only where the new choice holds
several short rows a warp (``warp-rows``, or a row kernel with its short-row plan): for
long rows a block per row walks the nest as one flat loop already, and the strips
kernel's 16-byte accesses along the last axis stay. Except over []: a whole tensor's
nests (a loss over [B, D] whose prologue value is also returned) as strips are one block,
as a row kernel its split plan (the planner prices the kernel so: fusion/fuse.py).

A nest whose values are not consecutive (batch norm's statistics over [N, H, W] of
NCHW: C lies between N and H) is kept flattened wherever the new choice is a row kernel.
Its index is then segments of H*W consecutive values, which codegen addresses by carry
cursors in scalar loops and one division a vector (codegen/flat_rows.SegmentedAccess),
and the row kernel brings what the strips kernel over rows lacks: the split plan, which
spreads few channels over the whole GPU (a block per channel left 64 channels on 64 of
132 SMs), variance in the mean's pass (fusion/moments.py: x read twice, not three
times), and 16-byte vectors. Batch norm's training step on an H100: [32, 256, 56, 56] 0.355 ->
0.120 ms, [256, 64, 28, 28] 0.345 -> 0.067 (torch.compile 0.153 and 0.094).

A nest that reads through a reshape's view (group norm over axes [2, 3] of
``reshape(x, [N, 8, C/8, H*W])``: ``x[n, X // (H*W), X // W % H, X % W]`` with
``X = (g * C/8 + k0) * (H*W) + k1``; over [2, 3, 4] of a 5-d view, ``x[n, g * C/4 + k0,
k1, k2]``) walks consecutive elements too where that index is ``B + ravel(k0, k1, ...)``
over the buffer's trailing axes, B a whole number of rows (``index_forms.access_walk``).
Flattened, such an access is given the unravel of ``B + r`` itself (``_rewalk``), the
form codegen addresses at ``row_base + r``; the old index arithmetic and the levels'
digits only it read are dropped. It is kept wherever the new choice is a row kernel or,
for a split reduction (the statistics alone, few rows), the split again, whose first
stage then reads at ``row_base + kf``. Group norm through a 4-d view on an H100:
[32, 256, 64, 64] 0.523 -> 0.150 ms (torch.compile 0.206): the view's copy went too.
"""
from __future__ import annotations

from mlfuse.dialects.arith import ConstantOp, FloorDivOp, ModOp
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.index_forms import ADD, MUL, access_walk
from mlfuse.dialects.loops import (
    ACCESSES,
    DimOp,
    ForOp,
    MaskedLoadOp,
    ReduceOp,
    YieldOp,
    access_parts,
)
from mlfuse.dialects.reductions import level_ops, loop_levels
from mlfuse.ir.clone import clone_op
from mlfuse.ir.core import Block, Operation, Region, Value
from mlfuse.ir.types import INDEX, product_dim
from mlfuse.transforms.cse import dead_code
from mlfuse.transforms.kernel_pass import KernelPass


def _radix(size) -> Operation:
    return DimOp(attributes={"sym": size}) if isinstance(size, str) else \
        ConstantOp(result_types=[INDEX], attributes={"value": int(size)})


def _contiguous(levels: list) -> list | None:
    """Whether the nest walks consecutive elements: every access in it that uses a
    level's index takes the levels' indices, in order, as its last indices, over
    trailing dims of the levels' extents, or addresses the buffer's trailing axes at
    a row-major walk of the whole nest (``index_forms.access_walk``: group norm over
    axes [2, 3] of ``reshape(x, [N, 8, C/8, H*W])`` reads ``x[n, X // (H*W), X // W %
    H, X % W]`` with ``X = (g * C/8 + k0) * (H*W) + k1``). The latter with their walks
    (an empty list where there are none); None where the nest is not contiguous
    (batch norm's statistics over [N, H, W] of NCHW: flattened, each value would be a
    divmod apart)."""
    indices = [lvl.body.args[0] for lvl in levels]
    ids = {id(k) for k in indices}
    extents = [lvl["extent"] for lvl in levels]
    n = len(levels)
    walks = []
    for op in levels[0].walk():
        if not isinstance(op, ACCESSES):
            continue
        buf, idx = access_parts(op)
        shape = list(buf.type.shape)
        if len(idx) >= n and [id(v) for v in idx[-n:]] == [id(k) for k in indices] and \
                not any(id(v) in ids for v in idx[:-n]) and shape[-n:] == extents:
            continue
        walk = None if isinstance(op, MaskedLoadOp) else access_walk(idx, shape, indices, extents)
        if walk is not None and walk.start == 0:
            walks.append((op, walk))
        elif any(id(v) in ids for v in idx):
            return None
    return walks


def _rewalk(op: Operation, walk, flat: Value) -> None:
    """Give access ``op`` (``_contiguous``'s walk) the indices of its element ``B +
    flat`` over its buffer's trailing axes, ``flat`` the nest's flat index: the row-
    major unravel that a reshape's read takes, which codegen addresses at ``row_base +
    flat`` (codegen/flat_rows.py) with no divmod of the flat index into the levels'
    indices and back."""
    buf, idx = access_parts(op)
    block = op.parent
    ops: list[Operation] = []

    def emit(new: Operation) -> Value:
        ops.append(new)
        return new.result

    total = flat
    for var, coefficient in walk.terms:  # B's terms: a variable times a dim, or a dim
        term = var if var is not None and coefficient == 1 else emit(_radix(coefficient))
        if var is not None and coefficient != 1:
            term = emit(MUL([var, term]))
        total = emit(ADD([term, total]))
    digits, rest = [], total
    for extent in reversed(buf.type.shape[walk.at + 1:]):
        radix = emit(_radix(extent))
        digits.insert(0, emit(ModOp([rest, radix])))
        rest = emit(FloorDivOp([rest, radix]))
    for new in ops:
        block.insert_before(op, new)
    first = len(op.operands) - len(idx) + walk.at
    for j, v in enumerate([rest] + digits):
        op.set_operand(first + j, v)


def _flatten_nest(levels: list, walks: list) -> None:
    """Rewrite the nest ``levels`` (of a kernel's top-level reduce or for; two or more,
    walking consecutive elements: ``_contiguous``, with the accesses ``walks`` that
    walk it through a reshape's view) as one loop over the product of its extents."""
    top = levels[0]
    extents = [lvl["extent"] for lvl in levels]
    name = "_".join(lvl.body.args[0].name_hint or f"k{d}" for d, lvl in enumerate(levels))
    body = Block([INDEX], [name])
    flat = body.args[0]
    kept = [d for d in range(len(levels)) if extents[d] != 1]
    for d in range(len(levels)):  # a level of one value is at 0 (no digit to unravel)
        if extents[d] == 1:
            zero = _radix(0)
            body.append(zero)
            levels[d].body.args[0].replace_all_uses_with(zero.result)
    rest = flat  # the row-major unravel, innermost first (index_forms.unravel_form)
    for d in reversed(kept[1:]):
        radix = _radix(extents[d])
        body.append(radix)
        digit = ModOp([rest, radix.result], result_names=[levels[d].body.args[0].name_hint])
        body.append(digit)
        levels[d].body.args[0].replace_all_uses_with(digit.result)
        rest_op = FloorDivOp([rest, radix.result],
                             result_names=[levels[kept[0]].body.args[0].name_hint
                                           if d == kept[1] else None])
        body.append(rest_op)
        rest = rest_op.result
    if kept:
        levels[kept[0]].body.args[0].replace_all_uses_with(rest)
    for d in range(len(levels)):
        for op in level_ops(levels, d):
            levels[d].body.detach(op)
            body.append(op)
    inner_yield = next((o for o in levels[-1].body.ops if isinstance(o, YieldOp)), None)
    if inner_yield is not None:
        levels[-1].body.detach(inner_yield)
        body.append(inner_yield)
    for access, walk in walks:
        _rewalk(access, walk, flat)
    if walks:
        dead_code(body)  # the old indices and the digits only they read
    attributes = {"extent": product_dim(extents)}
    if isinstance(top, ReduceOp):
        attributes["combiner"] = top["combiner"]
        loop = ReduceOp([top.operands[0]], result_types=[top.result.type], attributes=attributes,
                        regions=[Region([body])], result_names=[top.result.name_hint])
    else:
        loop = ForOp([], attributes=attributes, regions=[Region([body])])
    top.parent.insert_before(top, loop)
    if isinstance(top, ReduceOp):
        top.result.replace_all_uses_with(loop.result)
    top.erase()


def flattened(kernel: KernelOp, dims: dict, target) -> KernelOp | None:
    """A copy of ``kernel`` (a strips kernel over rows) with its nests flattened and its
    schedule chosen again, where that gives short rows (consecutive nests) or a row
    kernel (nests of segments); None where it does not."""
    from mlfuse.transforms.fusion.schedules import apply_schedule
    holder = Block()
    clone_op(kernel, {}, into=holder)
    copy = holder.detach(holder.ops[0])
    nests = [loop_levels(op) for op in copy.body.ops if isinstance(op, (ReduceOp, ForOp))]
    if not any(len(levels) > 1 for levels in nests):
        copy.erase()  # all or none: a kernel of flat and nested loops has no row schedule
        return None
    walks = [_contiguous(levels) if len(levels) > 1 else [] for levels in nests]
    contiguous = None not in walks
    flat = [[lvl["extent"] for lvl in levels] for levels in nests if len(levels) > 1]
    for levels, walked in zip(nests, walks):
        if len(levels) > 1:
            _flatten_nest(levels, walked or [])
    copy.attributes["flat_nests"] = list({repr(e): e for e in flat}.values())
    # what fusion's builder marks a kernel reducing along one trailing axis: a row kernel
    copy.attributes["schedule"] = "row"
    copy.attributes.pop("strip", None)
    choice = apply_schedule(copy, dims, target)
    if contiguous and (choice.schedule == "warp-rows" or copy.attributes.get("warp_rows")):
        return copy
    # a row kernel: for nests of segments, and for reads through a reshape, which the
    # flat loop addresses at row_base + r where the nest computed a divmod chain a value
    # (a split reduction's too: its first stage reads at row_base + kf)
    if choice.schedule == "row" and (not contiguous or any(walks)):
        return copy
    # a kernel over []: its strips kernel is one block for the whole tensor, the row
    # kernel's split plan spreads it over the GPU (and stores as it reduces: split_stages)
    if choice.schedule == "row" and not kernel.extent_list:
        return copy
    if choice.schedule == "split-rows" and kernel["schedule"] == "split-rows" and any(walks):
        return copy
    copy.erase()
    return None


class FlattenRowNests(KernelPass):
    name = "flatten-row-nests"
    doc = ("Walk a rows kernel's nests over several axes as one loop each, where that gives "
           "it several short rows a warp, or a row kernel for nests of segments or reads "
           "through a reshape's view (a split reduction's too).")

    def rewrite(self, kernel: KernelOp) -> tuple[KernelOp, list[str]]:
        rows = kernel["schedule"] == "strips" and kernel.attributes.get("strip") == "rows"
        if not rows and kernel["schedule"] != "split-rows" or "split_tiles" in kernel.attributes:
            return kernel, []  # (a split through tiles walks its squares, not a flat loop)
        copy = flattened(kernel, self.dims, self.target)
        if copy is None:
            return kernel, []
        return copy, [f"its nests walked as one loop each ({copy['schedule']})"]


__all__ = ["FlattenRowNests", "flattened"]
