"""Divisions a vector's lanes share: ``(B + k) // D`` computed once per vector.

A vector kernel's lanes step the loop index k over VECTOR_WIDTH neighbours. An index
value of the form ``(B + k) // d1 // d2 ...`` (B and the divisors the same for every
value of the point: ``flat_rows._invariant``) is the same in every lane wherever the
vector does not cross a multiple of D = d1 * d2 * ... (floor divisions compose:
``X // a // b == X // (a * b)``): group norm's channel index of gamma and beta, ``(B +
k) // W // H``, the same for the 4 lanes unless a channel boundary falls inside the
vector. Per value it costs two run-time divisions (``_divmod_index``, dozens of
instructions each: what the epilogue's SASS is mostly made of).

So the lanes' loop of a vector twin (``split_stages.StageEmitter``) first computes each
such chain at the vector's first lane, with a flag ``lanes_agree``: X - q * D +
VECTOR_WIDTH - 1 < D for each chain's X = B + first and q = X // D (one multiply and a
compare: no division). Where it holds, the lanes take q as it is; where not (a vector
across a boundary, or D < VECTOR_WIDTH), each lane computes the chain itself, as the
scalar kernel does. The flag is the same for a vector's lanes (a uniform branch), so
no lane ever reads a value of another lane's channel. The fill's loads at such a value
(gamma[channel], beta[channel]) are likewise issued once per vector where lanes agree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlfuse.dialects.arith import ConstantOp, FloorDivOp
from mlfuse.dialects.loops import DimOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.traits import SCALAR_COMPUTE
from mlfuse.ir.types import INDEX

from mlfuse.codegen.flat_rows import _invariant, _step_split


@dataclass
class Chain:
    """A chain's last division (its value is what the lanes share), the value it divides
    first (``B + k``) and its divisors in order."""

    end: Value
    start: Value
    divisors: list[Value] = field(default_factory=list)


def lane_chains(loop: Operation, points: set[int], dead: set[int]) -> tuple[list[Chain], list[Operation]]:
    """The chains of ``loop``'s body (its direct ops) whose ends something else uses, and
    the body ops that compute them (in body order): see the module doc. ``dead``: ids of
    ops the kernel does not emit (index ops of flat accesses)."""
    k = loop.body.args[0]
    forms: dict[int, Chain] = {}
    for o in loop.body.ops:
        if id(o) in dead or not (isinstance(o, FloorDivOp) and o.result.type == INDEX and
                _invariant(o.operands[1], points)):
            continue
        x = o.operands[0]
        if id(x) in forms:
            head = forms[id(x)]
            forms[id(o.result)] = Chain(o.result, head.start, head.divisors + [o.operands[1]])
        elif _step_split(x, k, points)[0]:
            forms[id(o.result)] = Chain(o.result, x, [o.operands[1]])
    # (a chain's inner divisions are its own: only what else uses counts)
    used = {id(v) for o in loop.walk() if o is not loop and id(o) not in dead
            for v in o.operands if not (isinstance(o, FloorDivOp) and id(o.result) in forms)}
    chains = [c for key, c in forms.items() if key in used]
    made = {id(r): o for o in loop.body.ops for r in o.results}
    needed: set[int] = set()
    stack = [c.end for c in chains]
    while stack:
        op = made.get(id(stack.pop()))
        if op is None or id(op) in needed:
            continue  # (defined outside the loop, or seen)
        if not (op.has_trait(SCALAR_COMPUTE) or isinstance(op, (ConstantOp, DimOp))):
            return [], []  # (never: the forms are index arithmetic)
        needed.add(id(op))
        stack += list(op.operands)
    return chains, [o for o in loop.body.ops if id(o) in needed]


def agree_test(chain: Chain, name) -> str:
    """Whether a vector's lanes share ``chain``'s value (the names: at its first lane)."""
    divisor = " * ".join(name(d) for d in chain.divisors)
    divisor = divisor if len(chain.divisors) == 1 else f"({divisor})"
    return f"{name(chain.start)} - {name(chain.end)} * {divisor} + VECTOR_WIDTH - 1 < {divisor}"


__all__ = ["Chain", "agree_test", "lane_chains"]
