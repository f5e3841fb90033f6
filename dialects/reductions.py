"""The structure of nested ``loops.reduce`` ops: a reduction over several axes is a
top-level reduce with reduces perfectly nested in it (:class:`ReduceNest`). Read by
the schedule choice (mlfuse/transforms/fusion/schedules.py) and by the split
schedules' codegen, so it lives with the dialect rather than in either.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import ForOp, LoadOp, MaskedLoadOp, ReduceOp, YieldOp, combiner_identity
from mlfuse.ir.types import itemsize
from mlfuse.ir.core import Operation


@dataclass
class ReduceNest:
    """A top-level reduce and the reduces perfectly nested in it with the same combiner,
    each inner one starting from the identity: one reduction over several axes."""

    levels: list[ReduceOp]

    @property
    def top(self) -> ReduceOp:
        return self.levels[0]

    @property
    def inner(self) -> ReduceOp:
        return self.levels[-1]

    @property
    def extents(self) -> list:
        return [r["extent"] for r in self.levels]

    @property
    def indices(self) -> list:
        return [r.body.args[0] for r in self.levels]

    def outer_ops(self, level: int) -> list[Operation]:
        """The ops of level ``level``'s body that compute before the next level starts."""
        return [o for o in self.levels[level].body.ops
                if o is not self.levels[level + 1] and not isinstance(o, YieldOp)]


def _is_identity(value, combiner: str) -> bool:
    op = getattr(value, "op", None)
    return isinstance(op, ConstantOp) and \
        op["value"] == combiner_identity(combiner, value.type.dtype)


def reduce_nest(top: ReduceOp) -> ReduceNest:
    levels = [top]
    while True:
        ops = levels[-1].body.ops
        inner = ops[-2] if len(ops) >= 2 else None
        if not (isinstance(inner, ReduceOp) and ops[-1].operands[0] is inner.result
                and inner["combiner"] == top["combiner"]
                and _is_identity(inner.operands[0], top["combiner"])
                and sum(isinstance(o, ReduceOp) for o in ops) == 1):
            return ReduceNest(levels)
        levels.append(inner)


def top_reduces(kernel: Operation) -> list[ReduceOp]:
    return [o for o in kernel.body.ops if isinstance(o, ReduceOp)]


def reduce_nests(kernel: Operation) -> list[ReduceNest]:
    return [reduce_nest(r) for r in top_reduces(kernel)]


def for_nest(top: ForOp) -> list[ForOp]:
    """A top-level ``loops.for`` and the fors perfectly nested in it: each level's body
    ends with the next level (the ops before it compute what the next level needs). A
    broadcast-back epilogue over several reduced axes is one such nest."""
    levels = [top]
    while True:
        ops = [o for o in levels[-1].body.ops if not isinstance(o, YieldOp)]
        inner = ops[-1] if ops else None
        if not isinstance(inner, ForOp) or any(isinstance(o, (ForOp, ReduceOp)) for o in ops[:-1]):
            return levels
        levels.append(inner)


def loop_levels(top) -> list:
    """The levels of a top-level reduce nest or for nest (walked as one flat loop)."""
    return reduce_nest(top).levels if isinstance(top, ReduceOp) else for_nest(top)


def level_ops(levels: list, level: int) -> list[Operation]:
    """The ops of ``levels[level]``'s body, less the next level and the yield: for the
    innermost level, its whole body but the yield."""
    nxt = levels[level + 1] if level + 1 < len(levels) else None
    return [o for o in levels[level].body.ops if o is not nxt and not isinstance(o, YieldOp)]


def reread_value_bytes(kernel: Operation) -> int:
    """Bytes per reduced value of the buffers that more than one of a kernel's top-level
    loops read (what a streaming row kernel re-reads): the cost model and codegen's
    ``_split_stages`` weigh the rows in flight by it."""
    seen, again = {}, {}
    for top in (o for o in kernel.body.ops if isinstance(o, (ForOp, ReduceOp))):
        loaded = {id(o.operands[0]): o.operands[0].type.dtype for o in top.walk()
                  if isinstance(o, (LoadOp, MaskedLoadOp))}
        again.update({b: t for b, t in loaded.items() if b in seen})
        seen.update(loaded)
    return sum(itemsize(t) for t in again.values())
