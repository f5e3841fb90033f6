"""A reduction nest over several axes walks them in its inputs' memory order.

Lowering writes a reduction over axes [0, 1] as the nest ``reduce k0 { reduce k1 {
body } }``, the axes in the order of the value it reduces. Fused with a transpose before
it, that value is ``x[k1, k0]``: the inner level steps x's outer axis, so neighbouring
steps are a row apart (``mean(transpose(x))`` as one kernel was priced 30000x a
transpose kernel and a reduction), and no row or strips schedule reads it coalesced.
A nest of one combiner (add, max or min: associative and commutative, so the order of
the levels changes the result only by the rounding of another grouping, as any
schedule's does) is the same reduction with its levels in any order. Here each such
nest whose levels hold nothing but the next level takes the order in which its loads
index memory: where every load of its body that reads its indices reads each of them
directly, once, and all those loads agree on their axes' order, the level over the
outermost of those axes becomes the outer level, and so on in, where the innermost
axis a load reads is one of the nest's (over columns, x[n, w, h, c] read by threads
along c, the order does not matter to coalescing, and the nest keeps the order its
epilogue's loops walk). Anything else (an index computed from a level's index, loads
that disagree) is left as lowering wrote it.
"""
from __future__ import annotations

from mlfuse.dialects.index_forms import reads_any
from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, ReduceOp, YieldOp
from mlfuse.dialects.reductions import reduce_nest
from mlfuse.ir.core import Block

_ORDERLESS = ("add", "max", "min")


def _perfect(levels: list[ReduceOp]) -> bool:
    """Whether each level but the innermost holds only the next level and its yield."""
    for outer, inner in zip(levels, levels[1:]):
        ops = outer.body.ops
        if len(ops) != 2 or ops[0] is not inner or not isinstance(ops[1], YieldOp):
            return False
    return True


def _memory_order(levels: list[ReduceOp]) -> list[int] | None:
    """The levels (their positions in ``levels``) from the outermost axis the loads read
    to the innermost, where the loads agree; None where they do not or cannot tell."""
    ks = {id(lvl.body.args[0]): n for n, lvl in enumerate(levels)}
    found = None
    for op in (o for top in levels[-1].body.ops for o in top.walk()):
        if not isinstance(op, (LoadOp, MaskedLoadOp)):
            continue
        indices = op.operands[1:]
        direct = [ks[id(v)] for v in indices if id(v) in ks]
        if not direct:
            continue  # a value the whole nest shares
        if sorted(direct) != list(range(len(levels))):
            return None  # not every level's index, or one twice
        if any(id(v) not in ks and reads_any(v, set(ks)) for v in indices):
            return None  # an index computed from a level's
        if id(indices[-1]) not in ks:
            return None  # memory's innermost axis a point's: the points' threads coalesce
        if found is not None and direct != found:
            return None
        found = direct
    return found


def _reorder(levels: list[ReduceOp], order: list[int]) -> None:
    """Level i takes the extent and the index uses of level ``order[i]``."""
    args = [lvl.body.args[0] for lvl in levels]
    extents = [lvl["extent"] for lvl in levels]
    uses = [list(a.uses) for a in args]  # before any is moved
    for i, j in enumerate(order):
        levels[i].attributes["extent"] = extents[j]
        for op, slot in uses[j]:
            op.set_operand(slot, args[i])


def order_nests_by_memory(block: Block) -> int:
    """Reorder the levels of ``block``'s top-level reduce nests to their loads' memory
    order (see the module doc); returns how many nests changed."""
    changed = 0
    for op in block.ops:
        if not isinstance(op, ReduceOp) or op["combiner"] not in _ORDERLESS:
            continue
        levels = reduce_nest(op).levels
        if len(levels) < 2 or not _perfect(levels):
            continue
        order = _memory_order(levels)
        if order is not None and order != sorted(order):
            _reorder(levels, order)
            changed += 1
    return changed


__all__ = ["order_nests_by_memory"]
