"""The quotient dims an op uses (``C*H*W/8``): each must divide at call time.

A quotient is exact by definition (mlfuse.ir.types), so the sizes a call binds are
checked before anything runs: by the argument checks (mlfuse.runtime.arguments) and
by the generated host function, which computes each quotient once. Lowering writes
a quotient used in index arithmetic as a ``loops.dim`` of the quotient, so every one
a function computes with is found here: in a type, a dim attribute or a dim op.
"""
from __future__ import annotations

from mlfuse.ir.types import is_dim_text, is_quotient


def _dims_in(value):
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(v, (list, tuple)):
            yield from _dims_in(v)
        elif isinstance(v, str) and is_quotient(v) and is_dim_text(v):
            yield v


def quotient_dims(op) -> list[str]:
    """Each quotient dim in ``op`` and the ops nested in it, once, in first-use order."""
    found: dict[str, None] = {}
    for o in op.walk():
        values = [*o.results, *(a for r in o.regions for b in r.blocks for a in b.args)]
        for v in values:
            found.update(dict.fromkeys(_dims_in(list(getattr(v.type, "shape", ())))))
        for attr in o.attributes.values():
            found.update(dict.fromkeys(_dims_in(attr)))
    return list(found)


__all__ = ["quotient_dims"]
