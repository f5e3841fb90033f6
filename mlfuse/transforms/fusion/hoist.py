"""Loads that do not change inside a fused kernel's loop move out of it.

Inlining a gather into a reduction (an embedding lookup before a layernorm) puts the
load of its index, ``ids[i0, i1]``, inside the reduction's loop, where it runs at
every step; and the table load's index then depends on a value computed in the loop,
so the row schedules can neither issue that load early nor keep it for the next loop
over the row. Here every load whose operands are all defined outside a loop moves to
just before it, with the ops its operands need and the ops computed from it alone
(the cast, wrap and clamp of the index). A loop never runs zero times (mlfuse has no
empty arrays), so nothing is loaded that the loop would not load. Index arithmetic
that involves no such load stays where it is: it is cheap, and the contraction
analysis reads it in place.
"""
from __future__ import annotations

from mlfuse.dialects.loops import ForOp, LoadOp, ReduceOp
from mlfuse.ir.core import Block, Operation
from mlfuse.ir.traits import PURE


def hoist_invariant_loads(block: Block) -> None:
    """Hoist out of every loop in ``block``, inner loops first (so a load invariant in
    both moves out of both)."""
    for op in list(block.ops):
        if isinstance(op, (ReduceOp, ForOp)):
            hoist_invariant_loads(op.body)
            _hoist_out_of(op)


def _hoist_out_of(loop: Operation) -> None:
    made_inside = {id(r) for o in loop.walk() if o is not loop for r in o.results}
    made_inside.update(id(a) for o in loop.walk() for r in o.regions for a in r.block.args)
    invariant: dict[int, Operation] = {}  # result id -> op computable before the loop
    for op in loop.body.ops:
        if not op.regions and op.has_trait(PURE) and all(
                id(v) in invariant or id(v) not in made_inside for v in op.operands):
            invariant.update((id(r), op) for r in op.results)
    hoisted: dict[int, Operation] = {}  # id(op) -> op

    def take(op: Operation) -> None:  # op and the invariant ops it reads
        stack = [op]
        while stack:
            o = stack.pop()
            if id(o) not in hoisted:
                hoisted[id(o)] = o
                stack.extend(invariant[id(v)] for v in o.operands if id(v) in invariant)

    reads_hoisted = set()  # result ids of hoisted loads and of ops computed from them
    for op in loop.body.ops:
        if not op.results or id(op.results[0]) not in invariant:
            continue
        if isinstance(op, LoadOp) or any(id(v) in reads_hoisted for v in op.operands):
            take(op)
            reads_hoisted.update(id(r) for r in op.results)
    parent = loop.parent
    for op in [o for o in loop.body.ops if id(o) in hoisted]:  # in body order
        loop.body.detach(op)
        parent.insert_before(loop, op)
