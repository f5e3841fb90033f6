"""Deep-copying ops with operand remapping: the tool behind inlining and fusion."""
from __future__ import annotations

from typing import Callable, Generator

from mlfuse.ir.core import Block, Operation, Region, Value

# A hook may take over cloning of one op: given the op and its already-mapped
# operands, it returns the values that replace the op's results, or None to clone.
# Under clone_op_steps it may also return a Demand: yielded to the caller, whose
# answer (the values) replaces the op's results. Inlining a producer at a use asks
# for the producer's value that way, so a caller with an explicit stack inlines a
# chain of any length without recursing once per producer.
CloneHook = Callable[[Operation, list[Value], Block], "list[Value] | Demand | None"]


class Demand:
    """A hook's request for values that the driver of clone_op_steps computes."""


def clone_op_steps(op: Operation, mapping: dict[int, Value], hook: CloneHook | None = None,
                   into: Block | None = None) -> Generator[Demand, list, list[Value]]:
    """Clone ``op`` (regions included) with operands looked up in ``mapping`` (by id);
    append it to ``into`` and return the values standing for its results. A generator:
    it yields each Demand of the hook and takes the values sent back."""
    operands = [mapping.get(id(v), v) for v in op.operands]
    if hook is not None:
        replaced = hook(op, operands, into)
        if isinstance(replaced, Demand):
            replaced = yield replaced
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
                yield from clone_op_steps(inner, mapping, hook, block)
    except BaseException:
        # a hook gave up half way (or the driver closed us): leave no uses behind
        # from the orphaned copies
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


def clone_op(op: Operation, mapping: dict[int, Value], hook: CloneHook | None = None,
             into: Block | None = None) -> list[Value]:
    """clone_op_steps for hooks that never return a Demand."""
    steps = clone_op_steps(op, mapping, hook, into)
    try:
        demand = next(steps)
    except StopIteration as done:
        return done.value
    steps.close()
    raise TypeError(f"the clone hook returned {demand!r}: drive clone_op_steps instead")


def clone_block_steps(src: Block, args: list[Value], into: Block, hook: CloneHook | None = None):
    """Clone the ops of ``src`` into ``into`` with its arguments bound to ``args``
    (a generator, like clone_op_steps); returns the mapping."""
    mapping = {id(a): v for a, v in zip(src.args, args)}
    for op in src.ops:
        yield from clone_op_steps(op, mapping, hook, into)
    return mapping
