"""Common-subexpression elimination and dead-code removal, as two rewrite patterns.

Fusion inlines producers at every use, so a diamond computes its shared producer
twice until CSE merges identical pure ops (same name, operands and attributes),
looking through enclosing blocks so a value computed once per kernel point is
reused inside inner loops. Dead-code removal then erases pure ops nothing uses.
"""
from __future__ import annotations

from mlfuse.ir.core import Block, Operation
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.printer import format_attr_value
from mlfuse.ir.rewrite import PatternRewriteWalker, Rewriter, RewritePattern
from mlfuse.ir.traits import PURE


def _is_pure(op) -> bool:
    """An op CSE may merge and DCE may drop: declared Pure (no side effects, the result
    depends only on operands and attributes), with no region of its own."""
    return not op.regions and op.has_trait(PURE)


def _key(op):
    attrs = tuple(sorted((k, format_attr_value(v)) for k, v in op.attributes.items()))
    return (op.name, tuple(id(v) for v in op.operands), attrs,
            tuple(str(r.type) for r in op.results))


class PureOpPattern(RewritePattern):
    def matches(self, op: Operation) -> bool:
        return _is_pure(op)


class MergeIdenticalOps(PureOpPattern):
    """A pure op identical to one already computed in this block or an enclosing one
    is replaced by it. Keeps one table of seen ops per open block."""

    def __init__(self):
        self.scopes: list[dict] = []
        self.removed = 0

    def enter_block(self, block: Block) -> None:
        self.scopes.append({})

    def exit_block(self, block: Block) -> None:
        self.scopes.pop()

    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        key = _key(op)
        found = next((s[key] for s in reversed(self.scopes) if key in s), None)
        if found is None:
            self.scopes[-1][key] = op
            return False
        rewriter.replace_op(op, found.results)
        self.removed += 1
        return True


class EraseUnusedPureOps(PureOpPattern):
    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if any(r.uses for r in op.results):
            return False
        rewriter.erase_op(op)
        return True


def cse_block(block: Block) -> int:
    """Merge duplicate pure ops in ``block`` and nested blocks; returns how many were removed."""
    pattern = MergeIdenticalOps()
    PatternRewriteWalker([pattern]).rewrite_block(block)
    return pattern.removed


def dead_code(block: Block) -> int:
    """Erase pure ops whose results are unused (after CSE and inlining). Walking each
    block backwards sees a use before its definition; repeated until nothing changes."""
    return PatternRewriteWalker([EraseUnusedPureOps()], reverse=True,
                                to_fixpoint=True).rewrite_block(block)


class CSEPass(Pass):
    name = "cse"
    doc = "Merge identical pure ops and drop unused ones inside every function."

    def run(self, module):
        for func in module.funcs:
            cse_block(func.body)
            dead_code(func.body)
