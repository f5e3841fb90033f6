"""Which loads a kernel may issue early or keep in registers, and which values.

Three analyses behind the fast schedules of ``emit_kernel``:

- :func:`prefetchable_loads`: in a loop-free pointwise body, the loads whose indices
  come from the loop indices through arith alone. The kernel issues them for several
  points before it computes or stores anything, so they are in flight together (a
  store in between would keep the GPU from starting the next load: it cannot know
  the two do not alias).
- :func:`row_held_loads`: in a row kernel, the same for each top-level row loop, and
  the loads of the same row element that several row loops repeat: the registers
  variant loads each once into a per-thread local array and later loops read it there.
- :func:`row_reused_values`: the same for costly values several row loops compute
  (softmax's exp(x - max)): the first loop keeps them, later loops read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlfuse.dialects.loops import DimOp, LoadOp, MaskedLoadOp
from mlfuse.dialects.reductions import defined_inside
from mlfuse.ir.core import Block, Operation

from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.ir.traits import COSTLY, SCALAR_COMPUTE

LOADS = (LoadOp, MaskedLoadOp)


def _holdable(load: Operation) -> bool:
    """Whether a local array can hold the load's value (bool has no Numba array type here)."""
    return COMPUTE_TYPE[load.result.type.dtype] in SHARED_TYPE


@dataclass
class Held:
    """Loads of one value kept in a local array: the first fills it, the others read it."""

    loads: list[Operation] = field(default_factory=list)

    @property
    def dtype(self) -> str:
        return COMPUTE_TYPE[self.loads[0].result.type.dtype]


def prefetchable_loads(body: Block) -> tuple[list[Operation], list[Operation]]:
    """The top-level loads of ``body`` whose indices (and mask) are computed from the
    loop indices by arith ops alone, and those arith ops (in body order): what the
    kernel must run to issue the loads early."""
    made_here = {id(r) for o in body.ops for r in o.results}
    early: set[int] = {id(a) for a in body.args}

    def ready(values) -> bool:  # computed early, or taken from outside the body
        return all(id(v) in early or id(v) not in made_here for v in values)

    loads = []
    for o in body.ops:
        if isinstance(o, DimOp) or (o.has_trait(SCALAR_COMPUTE) and ready(o.operands)):
            early.update(id(r) for r in o.results)
        elif isinstance(o, LOADS) and _holdable(o) and ready(o.operands[1:]):
            loads.append(o)
    needed = {id(v) for o in loads for v in o.operands[1:]}
    index_ops = []
    for o in reversed(body.ops):  # the ops the loads' indices depend on, transitively
        if not isinstance(o, LOADS) and any(id(r) in needed for r in o.results):
            index_ops.append(o)
            needed.update(id(v) for v in o.operands)
    return loads, index_ops[::-1]


def row_held_loads(row_loops: list[Operation]) -> tuple[list[Held], dict[int, list]]:
    """The registers variant's plan for a row kernel's top-level reduces and fors:
    every load a row loop can issue early gets a local array, and loads of the same
    row element in several loops (same buffer, same extent, indices that are the
    loop's own index or values from outside the loops, in the same places) share one,
    filled by the first loop. Also each loop's index ops (by id of the loop).
    A load directly in a loop's body runs on every iteration, so it fills every slot."""
    inside = defined_inside(row_loops)
    groups: dict[object, Held] = {}
    index_ops = {}
    for loop in row_loops:
        k = loop.body.args[0]
        loads, index_ops[id(loop)] = prefetchable_loads(loop.body)
        for o in loads:
            key: object = id(o)  # a load of its own
            indices = [_index_key(v, k, inside) for v in o.operands[1:]]
            if isinstance(o, LoadOp) and None not in indices:
                key = (id(o.operands[0]), loop["extent"], tuple(indices))
            groups.setdefault(key, Held()).loads.append(o)
    return list(groups.values()), index_ops


_INDEX_MATH = ("arith.add", "arith.mul", "arith.mod", "arith.floordiv", "loops.dim",
               "arith.constant")


def _index_key(v, k, inside: set[int]):
    """What an index computes, the same in every row loop of one extent: "k" for the
    loop's own index, a value from outside the loops itself, index arithmetic of those
    (a flattened nest's ``k // W``, ``k % W``: flatten-row-nests) by its structure; None
    for anything else (a load's value, another loop's)."""
    if v is k:
        return "k"
    op = getattr(v, "op", None)
    if op is not None and op.name in ("arith.constant", "loops.dim"):
        # the same wherever it stands: a fused body holds a copy per inlined producer
        return (op.name, repr(sorted(op.attributes.items())), str(v.type))
    if id(v) not in inside:
        return id(v)
    if op is None or op.name not in _INDEX_MATH or op.regions:
        return None
    operands = tuple(_index_key(u, k, inside) for u in op.operands)
    if None in operands:
        return None
    return (op.name, repr(sorted(op.attributes.items())), operands)


@dataclass
class Reuse:
    """The registers variant's plan for values that several row loops compute: ``kept``
    (id of the op in the first loop -> its op), ``again`` (id of a later loop's op ->
    the op whose kept value it reads instead of computing), ``dead`` (ids of later ops
    whose only uses were the ops that now read a kept value: not emitted)."""

    kept: dict[int, Operation] = field(default_factory=dict)
    again: dict[int, Operation] = field(default_factory=dict)
    dead: set[int] = field(default_factory=set)


def _value_keys(loop: Operation, keys: dict[int, object], inside: set[int],
                interned: dict[tuple, int]) -> list[Operation]:
    """Key each top-level load and arith result of ``loop`` by what it computes (equal
    keys: equal values in the same slot of loops of one extent); returns those ops.
    A key is a number standing for (op, attributes, operands' keys) in ``interned``:
    a long chain of ops then has flat keys, not tuples nested as deep as the chain."""
    def key(v):
        return keys.get(id(v), ("own", id(v)) if id(v) in inside else ("outside", id(v)))
    keys[id(loop.body.args[0])] = ("index",)
    ops = [o for o in loop.body.ops if o.results and (isinstance(o, LoadOp)
                                                      or o.has_trait(SCALAR_COMPUTE))]
    for o in ops:
        attributes = repr(sorted(o.attributes.items()))
        structure = (o.name, attributes, tuple(key(v) for v in o.operands))
        keys[id(o.result)] = interned.setdefault(structure, len(interned))
    return ops


def _costly(op: Operation, again: dict[int, Operation]) -> bool:
    """Whether computing ``op`` again would run a Costly op (its own or an operand's
    that is computed again too); an explicit stack, as the chain may be long."""
    stack, seen = [op], set()
    while stack:
        o = stack.pop()
        if o.has_trait(COSTLY):
            return True
        for v in o.operands:
            producer = getattr(v, "op", None)
            if id(producer) in again and id(producer) not in seen:
                seen.add(id(producer))
                stack.append(producer)
    return False


def _frees_loads(op: Operation, same: dict[int, Operation], kept: dict[int, Operation],
                 users: list[Operation]) -> bool:
    """Whether reading ``op`` from a kept array leaves more than one of its loop's loads
    unread: loads that only the ops computing ``op`` again read (a residual ``x + r``:
    one kept array instead of x's and r's, half the registers a thread holds them in).
    The chain stops at values already read from a kept array (``kept``)."""
    chain, stack = {id(op)}, [op]
    while stack:
        for v in stack.pop().operands:
            producer = getattr(v, "op", None)
            if id(producer) in same and id(producer) not in kept and id(producer) not in chain:
                chain.add(id(producer))
                stack.append(producer)
    inside = {id(o) for o in users}
    read = {id(v.op): v.op for o in users if id(o) in chain for v in o.operands
            if isinstance(getattr(v, "op", None), LoadOp) and id(v.op) in inside}
    elsewhere = {id(v) for o in users if id(o) not in chain for v in o.operands}
    return sum(id(o.result) not in elsewhere for o in read.values()) > 1


def row_reused_values(row_loops: list[Operation], free_loads: bool = True) -> Reuse:
    """Which arith values a later row loop takes from an earlier one of the same extent
    instead of computing them again: those some op of the later loop still needs,
    where computing them would cost a Costly op (softmax's exp(x - max) in its sum
    and in its output loop) or would read several loads nothing else reads (the
    residual of ``h = x + r; layernorm(h)``: h held, not x and r; where ``free_loads``).
    A later loop's ops that only fed them are dead."""
    inside = defined_inside(row_loops)
    keys: dict[int, object] = {}
    interned: dict[tuple, int] = {}
    computed: dict[object, Operation] = {}  # (extent, key) -> the first op computing it
    plan = Reuse()
    for loop in row_loops:
        ops = _value_keys(loop, keys, inside, interned)
        same = {id(o): computed[(loop["extent"], keys[id(o.result)])] for o in ops
                if (loop["extent"], keys[id(o.result)]) in computed and o.name != "loops.load"}
        users = [o for o in loop.walk() if o is not loop]
        needed = {id(v) for o in users if id(o) not in same for v in o.operands}
        for o in ops:
            if (id(o) in same and id(o.result) in needed
                    and (_costly(o, same) or free_loads and _frees_loads(o, same, plan.again, users))
                    and COMPUTE_TYPE[o.result.type.dtype] in SHARED_TYPE):
                plan.kept[id(same[id(o)])] = same[id(o)]
                plan.again[id(o)] = same[id(o)]
        top = {id(o) for o in ops}
        live = {id(v) for o in users if id(o) not in top for v in o.operands}
        for o in reversed(ops):  # backwards: which of them a live op still needs
            if id(o.result) not in live:
                plan.dead.add(id(o))
            elif id(o) not in plan.again:  # one that reads a kept value needs nothing
                live.update(id(v) for v in o.operands)
        for o in ops:
            if o.has_trait(SCALAR_COMPUTE) and o.operands:  # constants: nothing to save
                computed.setdefault((loop["extent"], keys[id(o.result)]), o)
    return plan
