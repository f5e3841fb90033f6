"""Independent reductions of a kernel body brought next to each other, so that one pass
over the row walks them.

The builder emits a body's ops in the order their values are needed. In
``max(y) + sum(y * y)`` the sum's init (a constant) stands between the two reduces; in
``sum(x) / n`` beside ``max(x)`` the division does. ``dialects/reductions.sibling_passes``
groups only adjacent reduces into one pass, so such kernels walked each row (or each
chunk of a split row) once per reduce: twice the reads where the row is streamed.

Here, for each two top-level reduces with only non-loop ops between them, where the
second reads nothing the first computes (directly or through the ops between), the ops
between that the second needs move before the first and the others after the second,
each group in its order. Both moves keep every value defined before its uses: what the
second needs does not read the first, and what moves after the second is read by
neither (a later ``for`` joins a pass with ops between already:
``sibling_passes(stores=True)``). A store may move after the second reduce: within a
kernel no buffer is both read and written (dialects/loops.py's LoadOp), so no load sees
the difference.
"""
from __future__ import annotations

from mlfuse.dialects.loops import ForOp, ReduceOp
from mlfuse.ir.core import Block, Operation


def _reads(op: Operation) -> set[int]:
    """Ids of the values ``op`` or any op nested in it reads."""
    return {id(v) for o in op.walk() for v in o.operands}


def gather_sibling_loops(block: Block) -> int:
    """Move the ops between independent neighbouring reduces of ``block`` aside (see
    the module doc). Returns how many pairs it made adjacent."""
    moved = 0
    loops = [o for o in block.ops if isinstance(o, (ReduceOp, ForOp))]
    for first, second in zip(loops, loops[1:]):
        if not (isinstance(first, ReduceOp) and isinstance(second, ReduceOp)):
            continue
        ops = list(block.ops)
        between = ops[ops.index(first) + 1:ops.index(second)]
        if not between or any(o.regions for o in between):
            continue
        needed, reads = [], _reads(second)
        for op in reversed(between):  # what the second reads, through the ops between
            if any(id(r) in reads for r in op.results):
                needed.append(op)
                reads |= _reads(op)
        if any(id(r) in reads for r in first.results):
            continue  # the second depends on the first
        for op in reversed(needed):  # (back in block order)
            block.detach(op)
            block.insert_before(first, op)
        rest = [o for o in between if o not in needed]
        anchor = second
        for op in rest:
            block.detach(op)
            _insert_after(block, anchor, op)
            anchor = op
        moved += 1
    return moved


def _insert_after(block: Block, anchor: Operation, op: Operation) -> None:
    ops = list(block.ops)
    following = ops[ops.index(anchor) + 1:]
    if following:
        block.insert_before(following[0], op)
    else:
        block.append(op)


__all__ = ["gather_sibling_loops"]
