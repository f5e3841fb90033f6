"""Deep-copying ops with operand remapping: the tool behind inlining and fusion."""
from __future__ import annotations

from typing import Callable

from mlfuse.ir.core import Block, Operation, Region, Value

# A hook may take over cloning of one op: given the op and its already-mapped
# operands, it returns the values that replace the op's results, or None to clone.
CloneHook = Callable[[Operation, list[Value], Block], "list[Value] | None"]


def clone_op(op: Operation, mapping: dict[int, Value], hook: CloneHook | None = None,
             into: Block | None = None) -> list[Value]:
    """Clone ``op`` (regions included) with operands looked up in ``mapping`` (by id);
    append it to ``into`` and return the values standing for its results."""
    operands = [mapping.get(id(v), v) for v in op.operands]
    if hook is not None:
        replaced = hook(op, operands, into)
        if replaced is not None:
            for old, new in zip(op.results, replaced):
                mapping[id(old)] = new
            return replaced
    regions = []
    try:
        for region in op.regions:
            src = region.block
            block = Block([a.type for a in src.args], [a.name_hint for a in src.args])
            regions.append(Region([block]))
            for old, new in zip(src.args, block.args):
                mapping[id(old)] = new
            for inner in src.ops:
                clone_op(inner, mapping, hook, block)
    except Exception:
        # a hook gave up half way: leave no uses behind from the orphaned copies
        for r in regions:
            for inner in reversed(list(r.block.ops)):
                for nested in reversed(list(inner.walk())):
                    nested.drop_operands()
        raise
    new_op = type(op)(operands, [r.type for r in op.results], dict(op.attributes), regions,
                      loc=op.loc, result_names=[r.name_hint for r in op.results])
    for old, new in zip(op.results, new_op.results):
        mapping[id(old)] = new
    if into is not None:
        into.append(new_op)
    return list(new_op.results)


def clone_block_into(src: Block, args: list[Value], into: Block, hook: CloneHook | None = None,
                     skip: Callable[[Operation], bool] = lambda op: False) -> dict[int, Value]:
    """Clone the ops of ``src`` into ``into`` with its arguments bound to ``args``."""
    mapping = {id(a): v for a, v in zip(src.args, args)}
    for op in src.ops:
        if not skip(op):
            clone_op(op, mapping, hook, into)
    return mapping
