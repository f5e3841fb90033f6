"""Common-subexpression elimination inside loop and kernel bodies.

Fusion inlines producers at every use, so a diamond computes its shared producer
twice until this pass merges identical pure ops (same name, operands and
attributes), looking through enclosing blocks so a value computed once per
kernel point is reused inside inner loops.
"""
from __future__ import annotations

from mlfuse.ir.core import Block
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.printer import format_attr_value
from mlfuse.ir.traits import PURE

def _is_pure(op) -> bool:
    """An op CSE may merge and DCE may drop: declared Pure (no side effects, the result
    depends only on operands and attributes), with no region of its own."""
    return not op.regions and op.has_trait(PURE)


def _key(op):
    attrs = tuple(sorted((k, format_attr_value(v)) for k, v in op.attributes.items()))
    return (op.name, tuple(id(v) for v in op.operands), attrs,
            tuple(str(r.type) for r in op.results))


def cse_block(block: Block, scopes: list[dict] | None = None) -> int:
    """Merge duplicate pure ops in ``block`` and nested blocks; returns how many were removed."""
    scopes = (scopes or []) + [{}]
    removed = 0
    for op in list(block.ops):
        if _is_pure(op):
            key = _key(op)
            found = next((s[key] for s in reversed(scopes) if key in s), None)
            if found is not None:
                op.replace_with(list(found.results))
                removed += 1
                continue
            scopes[-1][key] = op
        for region in op.regions:
            removed += cse_block(region.block, scopes)
    return removed


def dead_code(block: Block) -> int:
    """Erase pure ops whose results are unused (after CSE and inlining)."""
    removed = 0
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            for region in op.regions:
                removed += dead_code(region.block)
            if _is_pure(op) and all(not r.uses for r in op.results):
                op.erase()
                removed += 1
                changed = True
    return removed


class CSEPass(Pass):
    name = "cse"
    doc = "Merge identical pure ops and drop unused ones inside every function."

    def run(self, module):
        for func in module.funcs:
            cse_block(func.body)
            dead_code(func.body)
