"""What the fusion planner assumes of its input, checked before it plans.

Lowering makes one loop nest per tensor op: each stores one buffer, once, at its own
indices, no other nest stores that buffer, and every nest that loads it comes after.
The planner's graph (graph.NestGraph) keys producers by buffer on that
assumption. IR text given to ``mlfuse opt --passes fuse`` (or ``no-fuse``) may break
it, and then planning went wrong without a word: a nest that loads the buffer it
stores inlined itself until RecursionError, a nest with two stores was dropped, and a
load before the store was reordered after it. Each is an error at the nest instead.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, StoreOp
from mlfuse.errors import MlfuseError
from mlfuse.ir.core import Operation, Value

if TYPE_CHECKING:  # NestGraph calls check_nests: no import back at run time
    from mlfuse.transforms.fusion.graph import Nest


def buffers_loaded(op: Operation) -> list[Value]:
    """The buffers ``op`` (a nest) loads, in first-load order."""
    seen = []
    for inner in op.walk():
        if isinstance(inner, (LoadOp, MaskedLoadOp)) and inner.operands[0] not in seen:
            seen.append(inner.operands[0])
    return seen

_RULE = ("fuse takes loop nests as lowering makes them: each stores one buffer, once, at "
         "its own indices, and is the only one storing it, before any nest loads it")


def _name(value) -> str:
    return f"%{value.name_hint}" if value.name_hint else "a buffer"


def _where(nest: Nest) -> str:
    return str(nest.op.loc) if nest.op.loc is not None else f"#{nest.index}"


def _error(nest: Nest, what: str) -> MlfuseError:
    return MlfuseError(f"this loop nest {what}; {_RULE}", nest.op.loc)


def _not_simple(nest: Nest) -> str:
    stores = [op for op in nest.op.walk() if isinstance(op, StoreOp)]
    if len(stores) != 1:
        return f"stores {len(stores)} buffers"
    if stores[0].parent is not nest.op.body:
        return f"stores {_name(stores[0].operands[1])} inside an inner loop"
    return f"stores {_name(stores[0].operands[1])} at other indices than its own"


def check_nests(nests: list[Nest], writer: dict) -> None:
    """An MlfuseError at the first nest the planner cannot take (``writer``: buffer id
    -> the nest storing it, as NestGraph builds it)."""
    first_store: dict[int, Nest] = {}
    for nest in nests:
        if nest.out is None:
            raise _error(nest, _not_simple(nest))
        if any(b is nest.out for b in buffers_loaded(nest.op)):
            raise _error(nest, f"loads {_name(nest.out)}, the buffer it stores")
        first = first_store.setdefault(id(nest.out), nest)
        if first is not nest:
            raise _error(nest, f"stores {_name(nest.out)}, which the loop nest at "
                         f"{_where(first)} stores too")
    for nest in nests:
        for buffer in nest.reads:
            producer = writer.get(id(buffer))
            if producer is not None and producer.index > nest.index:
                raise _error(nest, f"loads {_name(buffer)} before the loop nest at "
                             f"{_where(producer)} stores it")
