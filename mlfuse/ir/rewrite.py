"""One rewrite mechanism for every pass: small patterns applied by a walker.

A :class:`RewritePattern` says which ops it applies to (``op_types``: classes,
``traits``: all of which the op must declare) and rewrites one op through a
:class:`Rewriter` (insert before it, replace it, erase it). A
:class:`PatternRewriteWalker` visits ops (pre-order, nested blocks included,
forwards or backwards), offers each to the patterns in order, and repeats until
nothing changes when asked to. Patterns that need scoped state (CSE's table of
values seen in enclosing blocks) get ``enter_block``/``exit_block`` calls.

This is xDSL's RewritePattern + PatternRewriteWalker, cut to what mlfuse needs.
"""
from __future__ import annotations

from typing import Iterable

from mlfuse.ir.core import Block, Operation, Value
from mlfuse.ir.traits import Trait


class Rewriter:
    """Edits around the op being rewritten; the walker reads ``changed``."""

    def __init__(self):
        self.changed = False
        self.current: Operation | None = None

    def insert(self, op: Operation) -> Operation:
        """Insert ``op`` before the op being rewritten, with its location if it has none."""
        if op.loc is None:
            op.loc = self.current.loc
        self.current.parent.insert_before(self.current, op)
        self.changed = True
        return op

    def replace_op(self, op: Operation, values: list[Value]) -> None:
        """Replace every use of ``op``'s results by ``values`` and erase it."""
        op.replace_with(list(values))
        self.changed = True

    def erase_op(self, op: Operation) -> None:
        op.erase()
        self.changed = True


class RewritePattern:
    """Rewrites one op kind. Subclasses set ``op_types`` and/or ``traits`` and define
    ``rewrite(op, rewriter)``, returning whether it applied (changed the IR, or, for a
    conversion pattern, took the op); no later pattern is offered an op one applied to."""

    op_types: tuple[type[Operation], ...] = ()
    traits: frozenset[Trait] = frozenset()

    def matches(self, op: Operation) -> bool:
        if self.op_types and not isinstance(op, self.op_types):
            return False
        return all(op.has_trait(t) for t in self.traits)

    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        raise NotImplementedError

    def enter_block(self, block: Block) -> None:
        """Called before the walker visits ``block``'s first op."""

    def exit_block(self, block: Block) -> None:
        """Called after the walker visited every op of ``block``."""


class PatternRewriteWalker:
    """Applies ``patterns`` to every op under a block, the first matching pattern
    that changes an op winning; ``reverse`` visits each block's ops last first (so a
    use is seen before its definition: dead-code removal in one sweep);
    ``to_fixpoint`` sweeps again until a sweep changes nothing."""

    def __init__(self, patterns: Iterable[RewritePattern], reverse: bool = False,
                 to_fixpoint: bool = False):
        self.patterns = list(patterns)
        self.reverse = reverse
        self.to_fixpoint = to_fixpoint

    def rewrite_block(self, block: Block) -> int:
        """Rewrite ops under ``block``; returns how many rewrites changed something."""
        total = 0
        while True:
            changes = self._sweep(block)
            total += changes
            if not changes or not self.to_fixpoint:
                return total

    def _sweep(self, root: Block) -> int:
        # An explicit stack, not recursion: nesting depth and program length are unbounded.
        changes = 0
        stack: list[tuple[Block, list[Operation], int]] = [(root, self._ops(root), 0)]
        while stack:
            block, ops, i = stack.pop()
            if i == 0:
                self._enter(block)
            if i == len(ops):
                self._exit(block)
                continue
            stack.append((block, ops, i + 1))
            op = ops[i]
            if op.parent is not block:  # erased or moved by an earlier rewrite
                continue
            inner = [r.block for r in op.regions]
            changed = self._apply(op)
            if not changed and op.parent is block:
                for b in reversed(inner) if not self.reverse else inner:
                    stack.append((b, self._ops(b), 0))
            changes += changed
        return changes

    def _ops(self, block: Block) -> list[Operation]:
        return list(reversed(block.ops)) if self.reverse else list(block.ops)

    def _apply(self, op: Operation) -> bool:
        for pattern in self.patterns:
            if pattern.matches(op):
                rewriter = Rewriter()
                rewriter.current = op
                if pattern.rewrite(op, rewriter) or rewriter.changed:
                    return True
        return False

    def _enter(self, block: Block) -> None:
        for p in self.patterns:
            p.enter_block(block)

    def _exit(self, block: Block) -> None:
        for p in self.patterns:
            p.exit_block(block)
