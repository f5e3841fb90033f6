"""Common-subexpression elimination and dead-code removal, as two rewrite patterns.

Fusion inlines producers at every use, so a diamond computes its shared producer
twice until CSE merges identical pure ops (same name, operands and attributes),
looking through enclosing blocks so a value computed once per kernel point is
reused inside inner loops. Dead-code removal then erases pure ops nothing uses.

An op with regions and results whose nested ops are all pure (a reduction over a
loop) merges the same way, its bodies compared by structure: the row L2 norm written
``sqrt(sum(x * x))`` beside ``x / sqrt(sum(x * x) + eps)`` took two sums, two block
reductions a row, where it needs one.
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


def _pure_region_op(op) -> bool:
    """An op with regions and results that CSE may merge: every op nested in it pure
    or its block's terminator (a loop that only computes the value it yields)."""
    return bool(op.regions and op.results) and all(
        _is_pure(o) or getattr(o, "is_terminator", False) or _pure_region_op(o)
        for o in op.walk() if o is not op)


def _attrs(op) -> tuple:
    return tuple(sorted((k, format_attr_value(v)) for k, v in op.attributes.items()))


def _key(op):
    key = (op.name, tuple(id(v) for v in op.operands), _attrs(op),
           tuple(str(r.type) for r in op.results))
    return key + (_body_key(op),) if op.regions else key


def _body_key(op) -> tuple:
    """The structure of ``op``'s regions: each nested op's name, attributes, types and
    operands, a value defined inside named by its place, one from outside by identity."""
    names: dict[int, tuple] = {}
    parts: list = []

    def ref(v):
        return names.get(id(v), ("outer", id(v)))

    def visit(o):
        for region in o.regions:
            block = region.block
            for a in block.args:
                names[id(a)] = ("inside", len(names))
                parts.append(str(a.type))
            for inner in block.ops:
                parts.append((inner.name, tuple(ref(v) for v in inner.operands), _attrs(inner),
                              tuple(str(r.type) for r in inner.results)))
                visit(inner)
                for r in inner.results:
                    names[id(r)] = ("inside", len(names))
    visit(op)
    return tuple(parts)


class PureOpPattern(RewritePattern):
    def matches(self, op: Operation) -> bool:
        return _is_pure(op)


class MergeIdenticalOps(PureOpPattern):
    """A pure op identical to one already computed in this block or an enclosing one
    is replaced by it (a pure region op too: see the module doc). Keeps one table of
    seen ops per open block."""

    def matches(self, op: Operation) -> bool:
        return _is_pure(op) or _pure_region_op(op)

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
