"""The structure of nested ``loops.reduce`` ops: a reduction over several axes is a
top-level reduce with reduces perfectly nested in it (:class:`ReduceNest`). Read by
the schedule choice (mlfuse/transforms/fusion/schedules.py) and by the split
schedules' codegen, so it lives with the dialect rather than in either.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import (DimOp, ForOp, LoadOp, MaskedLoadOp, ReduceOp, StoreOp, YieldOp,
                                  combiner_identity)
from mlfuse.dialects.permute import (index_deps, innermost_of, load_indices, permuted_in,
                                     store_scatters)
from mlfuse.ir.types import FLOAT_DTYPES, INT_DTYPES, itemsize
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.traits import PURE


@dataclass
class ReduceNest:
    """A top-level reduce and the reduces perfectly nested in it with the same combiner,
    each inner one starting from the identity: one reduction over several axes."""

    levels: list[ReduceOp]

    @property
    def top(self) -> ReduceOp:
        return self.levels[0]

    @property
    def inner(self) -> ReduceOp:
        return self.levels[-1]

    @property
    def extents(self) -> list:
        return [r["extent"] for r in self.levels]

    @property
    def indices(self) -> list:
        return [r.body.args[0] for r in self.levels]

    def outer_ops(self, level: int) -> list[Operation]:
        """The ops of level ``level``'s body that compute before the next level starts."""
        return [o for o in self.levels[level].body.ops
                if o is not self.levels[level + 1] and not isinstance(o, YieldOp)]


def _is_identity(value, combiner: str) -> bool:
    op = getattr(value, "op", None)
    return isinstance(op, ConstantOp) and \
        op["value"] == combiner_identity(combiner, value.type.dtype)


def reduce_nest(top: ReduceOp) -> ReduceNest:
    levels = [top]
    while True:
        ops = levels[-1].body.ops
        inner = ops[-2] if len(ops) >= 2 else None
        if not (isinstance(inner, ReduceOp) and ops[-1].operands[0] is inner.result
                and inner["combiner"] == top["combiner"]
                and _is_identity(inner.operands[0], top["combiner"])
                and sum(isinstance(o, ReduceOp) for o in ops) == 1):
            return ReduceNest(levels)
        levels.append(inner)


def top_reduces(kernel: Operation) -> list[ReduceOp]:
    return [o for o in kernel.body.ops if isinstance(o, ReduceOp)]


def reduce_nests(kernel: Operation) -> list[ReduceNest]:
    return [reduce_nest(r) for r in top_reduces(kernel)]


def nest_tiles(kernel: Operation) -> tuple[int, int, list[Operation]] | None:
    """(A, B, loads) where a kernel's reduce nests read values permuted along nest level A
    (dialects/permute.py's ``permuted_in`` over the nest's indices, the kernel's points
    fixed: ``sum(transpose(a) * b)`` reads a[c, r] in a nest over r, c) and a split
    reduction's first stage can read ``loads`` through shared-memory tiles of levels A
    and B, the innermost level of extent other than the literal 1 (codegen/
    split_tiles.py); None elsewhere. See ``_space_tiles`` for what the loads must be. A
    for nest over the same extents that needs no reduction's result (a prologue value
    also returned: ``d = transpose(a) - b; return d, mean(d * d)``) is walked with them,
    its stores along B; its loads count among the nests'."""
    nests = reduce_nests(kernel)
    fors = [ReduceNest(for_nest(o)) for o in kernel.body.ops if isinstance(o, ForOp)]
    if not nests or len({repr(n.extents) for n in nests + fors}) > 1:
        return None
    need = reduce_levels(kernel)[1] if fors else {}
    if any(need[id(f.top)] >= 0 for f in fors):
        return None
    extents = nests[0].extents
    found = _space_tiles(nests + fors, lambda n: (n.indices, extents), frozenset(kernel.body.args))
    return (found[1], found[0], found[2]) if found else None


def strip_tiles(kernel: Operation) -> tuple[int, int, list[Operation]] | None:
    """(P, K, loads) where a kernel's reduce nests read some values along nest level K
    and the others along its innermost point axis P (``sum(transpose(a) + b, axis=1)``
    reads a[k, r] and b[r, k] for point r): a block of neighbouring points of P can read
    ``loads`` (those along K) through shared-memory tiles of P and K, and the others
    directly, all coalesced (codegen/schedule_strip_tiles.py); None elsewhere. The
    space is the nest's levels, then the points (the innermost of more than one value
    is P), ``permuted_in`` over it; see ``_space_tiles`` for what the loads must be."""
    nests = reduce_nests(kernel)
    points = list(kernel.body.args)
    if not nests or not points or len({repr(n.extents) for n in nests}) > 1:
        return None
    space = lambda n: (n.indices + points, n.extents + list(kernel.extent_list))  # noqa: E731
    found = _space_tiles(nests, space, frozenset())
    levels = len(nests[0].extents)
    if not found or found[0] < levels or found[1] >= levels:
        return None  # P must be a point axis, K a level of the nest
    p = found[0] - levels
    memo: dict = {}
    for load in found[2]:  # the fill computes the tiled loads' indices at its own points:
        # none may come from outside the innermost body and follow P
        body, todo = load.parent, list(load_indices(load))
        while todo:
            v = todo.pop()
            op = getattr(v, "op", None)
            if op is not None and op.parent is body:
                todo.extend(op.operands)
            elif op is not None:
                deps = index_deps(v, memo)
                if deps is None or points[p] in deps:
                    return None
    return p, found[1], found[2]


def _space_tiles(nests, space, fixed: frozenset) -> tuple[int, int, list[Operation]] | None:
    """(inner, axis, loads) of the space ``space(nest)`` gives (its indices and extents):
    the position of its innermost index of more than one value, the one position the
    nests' permuted loads step along (``permuted_in``: ``fixed`` indices and those of one
    value do not move), and those loads; None where there are none, or they step along
    several, or another load reads neither along the innermost index nor without it (a
    gather, a window). Every nest computes nothing but constants at its outer levels;
    the permuted loads are plain loads of the innermost body, of a dtype a shared array
    holds, their indices computed by index arithmetic alone."""
    args, extents = space(nests[0])
    inner = innermost_of(extents)
    if inner is None:
        return None
    memo, axes, tiled = {}, set(), []
    for n in nests:  # indices of one value do not move either
        fixed |= {k for k, e in zip(space(n)[0], extents) if e == 1}
    for n in nests:
        if any(not isinstance(o, (ConstantOp, DimOp)) for level in range(len(n.levels) - 1)
               for o in n.outer_ops(level)):
            return None
        args = space(n)[0]
        for o in n.top.walk():
            if isinstance(o, StoreOp):  # (a for nest's) stores along the innermost index
                moving = [d for d in (index_deps(v, memo) for v in o.operands[2:])
                          if d is None or d - fixed]
                if moving and (moving[-1] is None or args[inner] not in moving[-1]):
                    return None
            if not isinstance(o, (LoadOp, MaskedLoadOp)):
                continue
            deps = [index_deps(v, memo) for v in load_indices(o)]
            axis = permuted_in(args, extents, o, memo, fixed)
            if axis is not None:
                if not isinstance(o, LoadOp) or o.parent is not n.inner.body or \
                        o.result.type.dtype == "bool" or any(d is None for d in deps):
                    return None
                axes.add(axis)
                tiled.append(o)
                continue
            moving = [d for d in deps if d is None or d - fixed]
            if moving and (moving[-1] is None or (args[inner] not in moving[-1] and any(
                    d is None or args[inner] in d for d in deps))):
                return None  # read along another axis, or a gather: no tile makes it a row
    return (inner, axes.pop(), tiled) if len(axes) == 1 else None


def for_nest(top: ForOp) -> list[ForOp]:
    """A top-level ``loops.for`` and the fors perfectly nested in it: each level's body
    ends with the next level (the ops before it compute what the next level needs). A
    broadcast-back epilogue over several reduced axes is one such nest."""
    levels = [top]
    while True:
        ops = [o for o in levels[-1].body.ops if not isinstance(o, YieldOp)]
        inner = ops[-1] if ops else None
        if not isinstance(inner, ForOp) or any(isinstance(o, (ForOp, ReduceOp)) for o in ops[:-1]):
            return levels
        levels.append(inner)


def loop_levels(top) -> list:
    """The levels of a top-level reduce nest or for nest (walked as one flat loop)."""
    return reduce_nest(top).levels if isinstance(top, ReduceOp) else for_nest(top)


def level_ops(levels: list, level: int) -> list[Operation]:
    """The ops of ``levels[level]``'s body, less the next level and the yield: for the
    innermost level, its whole body but the yield."""
    nxt = levels[level + 1] if level + 1 < len(levels) else None
    return [o for o in levels[level].body.ops if o is not nxt and not isinstance(o, YieldOp)]


def reread_value_bytes(kernel: Operation) -> int:
    """Bytes per reduced value of the buffers that more than one of a kernel's top-level
    loops read (what a streaming row kernel re-reads): the cost model and codegen's
    ``_split_stages`` weigh the rows in flight by it."""
    seen, again = {}, {}
    for top in (group[0] for group in sibling_passes(kernel.body.ops)):
        loaded = {id(o.operands[0]): o.operands[0].type.dtype for o in top.walk()
                  if isinstance(o, (LoadOp, MaskedLoadOp))}
        again.update({b: t for b, t in loaded.items() if b in seen})
        seen.update(loaded)
    return sum(itemsize(t) for t in again.values())


def _same_op(a: Operation, b: Operation, same: dict[int, Value]) -> bool:
    """Whether ``b`` computes what ``a`` does: the same op and attributes, no regions,
    operands the same values (through ``same``: b's values known equal to a's). A
    ``loops.dim`` or constant is the same wherever it stands."""
    if type(a) is not type(b) or a.regions or b.regions or not _same_attributes(a, b):
        return False
    if not a.has_trait(PURE) or len(a.operands) != len(b.operands):
        return False
    return all(same.get(id(vb), vb) is va or _same_anywhere(va, vb)
               for va, vb in zip(a.operands, b.operands))


def _same_anywhere(a: Value, b: Value) -> bool:
    """Whether two values are equal wherever they are computed: constants of one value
    and type, or ``loops.dim`` of one symbol (a fused body has a copy of each per
    producer inlined: ``load %m, %i, %k, %c0`` in one loop, ``%c0_1`` in the next)."""
    op_a, op_b = getattr(a, "op", None), getattr(b, "op", None)
    if op_a is None or op_b is None or type(op_a) is not type(op_b):
        return False
    if not isinstance(op_a, (ConstantOp, DimOp)) or op_a.operands or op_b.operands:
        return False
    return _same_attributes(op_a, op_b) and a.type == b.type


def _same_attributes(a: Operation, b: Operation) -> bool:
    """Attributes equal as written (``==`` takes -0.0 for 0.0, and a NaN for no value)."""
    return {k: repr(v) for k, v in a.attributes.items()} == \
        {k: repr(v) for k, v in b.attributes.items()}


def shared_body_ops(first: Operation, other: Operation,
                    outer: dict[int, Value] | None = None) -> dict[int, Operation]:
    """The ops of ``other``'s body that compute what an op of ``first``'s body does
    (by id of other's op -> first's op), the loop indices taken as one (and ``outer``'s:
    the outer levels' indices of two nests walked together, other's id -> first's): when
    both loops are walked together, other's need not run again."""
    same: dict[int, Value] = {id(other.body.args[0]): first.body.args[0], **(outer or {})}
    found: dict[int, Operation] = {}
    candidates = [o for o in first.body.ops if not isinstance(o, YieldOp)]
    for op in other.body.ops:
        match = next((a for a in candidates if _same_op(a, op, same)), None)
        if match is not None:
            found[id(op)] = match
            same.update({id(r): m for r, m in zip(op.results, match.results)})
    return found


def sibling_passes(ops, stores: bool = False) -> list[list[Operation]]:
    """The top-level loops of a row body (``ops``: all of its ops) grouped into passes over the row:
    adjacent single-axis reduces of one extent whose loads are all loads the first
    makes too, none reading another's result (mlfuse/transforms/fusion/moments.py
    makes variance's such a sibling of the mean's), walk one loop; every other loop
    is a pass of its own. Codegen's streaming and split-stage row kernels walk them
    so, and the cost model counts the passes.

    ``stores``: a later for joins a pass of reduces too where it reads nothing computed
    at or after the pass's first loop but its own body, its loads all the first's (a
    value stored as it is reduced: ``y = x * 2 + 1; return y, mean(y)``), with only
    ops that are no loops between: split_stages.py walks it in that pass's stage."""
    groups: list[list[Operation]] = []
    previous = last_loop = None
    for op in ops:
        if isinstance(op, (ReduceOp, ForOp)):
            head = groups[-1][0] if groups and previous is groups[-1][-1] else None
            if head is not None and _joins(head, groups[-1], op):
                groups[-1].append(op)
            elif stores and groups and last_loop is groups[-1][-1] and \
                    _for_joins(ops, groups[-1], op):
                groups[-1].append(op)
            else:
                groups.append([op])
            last_loop = op
        previous = op
    return groups


def _one_walk(head: Operation, op: Operation) -> bool:
    """Whether ``op`` walks what ``head`` does in one loop: each a single axis, of one
    extent, ``op``'s body no nested loops."""
    return len(loop_levels(head)) == 1 and len(loop_levels(op)) == 1 and \
        repr(op["extent"]) == repr(head["extent"]) and not any(o.regions for o in op.body.ops)


def _joins(head: Operation, group: list[Operation], op: Operation) -> bool:
    if not (isinstance(head, ReduceOp) and isinstance(op, ReduceOp) and _one_walk(head, op)):
        return False
    results = {id(g.result) for g in group}
    if any(id(v) in results for inner in op.walk() for v in inner.operands):
        return False
    return _loads_shared(head, op)


def _loads_shared(head: Operation, op: Operation) -> bool:
    shared = shared_body_ops(head, op)
    return all(id(o) in shared for o in op.body.ops if isinstance(o, (LoadOp, MaskedLoadOp)))


def _for_joins(ops, group: list[Operation], op: Operation) -> bool:
    head = group[0]
    if not (isinstance(op, ForOp) and isinstance(head, ReduceOp) and _one_walk(head, op)):
        return False
    ops = list(ops)
    later = {id(r) for o in ops[ops.index(head):] if o is not op
             for inner in o.walk() for r in inner.results}
    if any(id(v) in later for inner in op.walk() for v in inner.operands):
        return False
    return _loads_shared(head, op)


def defined_inside(loops: list[Operation]) -> set[int]:
    """Ids of the values ``loops`` define (results and loop indices, nested ones too):
    what changes from one iteration to the next."""
    return {id(v) for loop in loops for o in loop.walk()
            for v in list(o.results) + [a for r in o.regions for a in r.block.args]}


def defined_before(block, op: Operation) -> set[int]:
    """Ids of the values defined before ``op`` in ``block``: its arguments and the
    results of the ops ahead of it (a combine may read those inits where it starts)."""
    at = block.ops.index(op)
    return {id(r) for o in block.ops[:at] for r in o.results} | {id(a) for a in block.args}


def reduce_levels(op) -> tuple[dict[int, int], dict[int, int]]:
    """(level of each top-level reduce, by id; the highest reduce level each top-level
    op needs, -1 for none, by id): 0 for a reduce that reads no other reduce's result,
    else one more than the highest level it reads (the split plan's stage that walks
    it: codegen/split_stages.py)."""
    levels, need, of_value = {}, {}, {}
    for o in op.body.ops:
        used = [v for inner in o.walk() for v in inner.operands]
        needed = max((of_value.get(id(v), -1) for v in used), default=-1)
        if isinstance(o, ReduceOp):
            levels[id(o)] = needed + 1
            needed += 1
        need[id(o)] = needed
        for r in o.results:
            of_value[id(r)] = needed
    return levels, need


def staged_fors(op) -> set[int]:
    """Ids of the top-level fors walked in a stage's pass rather than the epilogue: a
    for in a pass of reduces (``sibling_passes(stores=True)``) that needs only lower
    levels than theirs (a prologue value also returned: its values stored as the chunk
    is reduced, x read once)."""
    levels, need = reduce_levels(op)
    return {id(o) for group in sibling_passes(op.body.ops, stores=True) for o in group
            if isinstance(o, ForOp) and isinstance(group[0], ReduceOp) and
            need[id(o)] < levels[id(group[0])]}


def stage_count(op) -> int:
    """Kernels of a row kernel's split plan (codegen/split_stages.py): one per level of
    reductions (a reduction reading another's result is a level above it), then the
    epilogue (the loops after them; the partials' combine)."""
    levels, _ = reduce_levels(op)
    return max(levels.values(), default=-1) + 2


def why_not_staged(kernel: Operation) -> str | None:
    """Why a row kernel gets no split plan (codegen/split_stages.py: its rows split
    across blocks, a kernel per level of dependent reductions, then the loops after
    them), None where it does: every top-level loop one axis of the same extent, every
    reduction's result of a type partial buffers hold."""
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if any(len(loop_levels(o)) > 1 for o in loops):
        return "a loop over several axes"
    if len({repr(o["extent"]) for o in loops}) != 1:
        return "loops of different extents"
    for o in loops:
        if isinstance(o, ReduceOp) and o.result.type.dtype not in FLOAT_DTYPES + INT_DTYPES:
            return f"no partial buffer for {o.result.type}"
    return None


def why_not_column_staged(kernel: Operation) -> str | None:
    """Why a strips kernel over columns gets no column stages (codegen/column_stages.py:
    a split-columns stage per level of reductions, a reduction reading another's result
    a level above it, then the loops after the reductions), None where it does: a row
    kernel's conditions (``why_not_staged``), loops after the reductions that read a
    result, and no store along the reduced axis."""
    why = why_not_staged(kernel)
    if why is not None:
        return why
    reduces = {id(o.result) for o in kernel.body.ops if isinstance(o, ReduceOp)}
    fors = [o for o in kernel.body.ops if isinstance(o, ForOp)]
    if not fors:
        return "no loop after the reductions"
    made = {id(r): o for o in kernel.body.ops for r in o.results}

    def reads_result(op) -> bool:
        todo, seen = [v for inner in op.walk() for v in inner.operands], set()
        while todo:
            v = todo.pop()
            if id(v) in reduces:
                return True
            if id(v) not in seen and id(v) in made:
                seen.add(id(v))
                todo += list(made[id(v)].operands)
        return False
    if not all(reads_result(o) for o in fors):
        return "a loop that reads no reduction's result"
    if any(store_scatters(kernel, o, along_points=True) for loop in fors for o in loop.walk()
           if isinstance(o, StoreOp)):
        # its epilogue, a thread per (chunk, point), would write such a store a row a
        # lane apart; the strips kernels stage it through shared memory (strips_staged)
        return "a store along the reduced axis"
    return None
