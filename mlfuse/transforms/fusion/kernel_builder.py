"""Build one ``fused.kernel`` from a group of loop nests by inlining.

Every read of a buffer that a group member writes is replaced by that member's
computation at the read's index (its body cloned with its indices bound to the
read's index values), so intermediates never touch memory. Members whose result
is one value per kernel point (reductions, and values over the kernel's own
iteration space) are computed once per point and reused from registers; values
over a row (the kernel's points times an inner extent C) are recomputed where
they are used, inside the reductions and the final loop over the row.
"""
from __future__ import annotations

from mlfuse.dialects.arith import ConstantOp as ArithConstant
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import ForOp, LoadOp, MaskedLoadOp, StoreOp
from mlfuse.ir.clone import Demand, clone_block_steps
from mlfuse.ir.core import Block, Region, Value
from mlfuse.ir.types import INDEX

from mlfuse.transforms.cse import cse_block, dead_code
from mlfuse.transforms.fusion.graph import Nest, NestGraph
from mlfuse.transforms.fusion.hoist import hoist_invariant_loads


class CannotFuse(Exception):
    """The group cannot be one kernel; the message says why (shown by explain)."""


class _ValueOf(Demand):
    """An inlining asks for a member's value at an index (computed into a block)."""

    def __init__(self, nest: Nest, idx: list[Value], block: Block):
        self.nest, self.idx, self.block = nest, idx, block


def _is_zero_index(v: Value) -> bool:
    op = getattr(v, "op", None)
    return isinstance(op, ArithConstant) and v.type == INDEX and op["value"] == 0


def _row_outer(nest: Nest) -> list:
    ext = nest.extents
    return ext[:-1] if ext and ext[-1] == 1 else ext


def candidate_spaces(members: list[Nest], outputs: list[Nest]):
    """Iteration spaces (E, C) worth trying for a kernel: a row reduction's rows and
    row length first (so its consumers over the row join it), then each output's
    own extents."""
    seen = []
    for n in members:
        if n.row_extent is not None:
            seen.append((_row_outer(n), n.row_extent))
    for n in list(outputs) + list(members):
        seen.append((n.extents, None))
    unique = []
    for s in seen:
        if s not in unique:
            unique.append(s)
    return unique


def _moving(extents: list) -> list:
    """The extents other than 1: a permutation that moves only axes of one point (a
    transpose of a [R, 1] result) or a reshape adding or dropping them keeps the
    element order, so over the same moving extents it is the same layout."""
    return [e for e in extents if e != 1]


def level(nest: Nest, E: list, C) -> str | None:
    ext = nest.extents
    if ext == E or ext == E + [1] or _moving(ext) == _moving(E):
        return "point"
    if C is not None and ext == E + [C]:
        return "row"
    return None


def choose_space(members: list[Nest], outputs: list[Nest]):
    """The first candidate space where every reduction is one value per point and
    every output is stored at a point or along its row."""
    reasons = []
    for E, C in candidate_spaces(members, outputs):
        bad = [n for n in members if not n.is_pointwise and level(n, E, C) != "point"]
        bad += [n for n in outputs if level(n, E, C) is None]
        if C is not None and all(e == 1 for e in E):
            # one point: a whole-tensor reduction; its consumers over every element
            # would all wait on one block (spreading it needs a grid-wide barrier)
            bad += [n for n in members if not n.is_pointwise and any(
                level(o, E, C) == "row" for o in outputs)]
        if not bad:
            return E, C
        reasons.append(bad[0])
    culprit = reasons[0] if reasons else members[0]
    if not culprit.is_pointwise and all(e == 1 for e in _row_outer(culprit)):
        raise CannotFuse(f"{culprit.name} reduces over all elements and its consumers use "
                         "every element: that needs a grid-wide barrier, so two kernels")
    raise CannotFuse(f"{culprit.name} ({culprit.source}, extents {culprit.extents}) does not fit "
                     "one iteration space with the rest of the group")


class KernelBuilder:
    def __init__(self, graph: NestGraph, members: list[Nest], outputs: list[Nest], name: str,
                 schedule_for=None):
        self.graph = graph
        self.members = sorted(members, key=lambda n: n.index)
        self.member_set = set(self.members)
        self.outputs = sorted(outputs, key=lambda n: n.index)
        self.E, self.C = choose_space(self.members, self.outputs)
        has_row_reduction = any(n.row_extent is not None and level(n, self.E, self.C) == "point"
                                for n in self.members)
        schedule = "pointwise"
        if self.C is not None and has_row_reduction and schedule_for is not None:
            schedule = schedule_for(self.E, self.C)
        sources = [f"{n.name} = {n.source}" for n in self.members]
        block = Block([INDEX] * len(self.E), [f"i{k}" for k in range(len(self.E))])
        self.kernel = KernelOp(result_types=[], regions=[Region([block])], attributes={
            "extents": list(self.E), "schedule": schedule, "kernel_name": name,
            "sources": sources}, loc=self.members[-1].op.loc)
        self.point_args = list(block.args)
        self.point_values: dict[Nest, Value] = {}
        self._zero: Value | None = None

    # -- index helpers ---------------------------------------------------------
    def zero(self) -> Value:
        if self._zero is None:
            c = ArithConstant([], [INDEX], {"value": 0}, result_names=["c0"])
            self.kernel.body.ops.insert(0, c)
            c.parent = self.kernel.body
            self._zero = c.result
        return self._zero

    def point_index(self, nest: Nest) -> list[Value]:
        """The index of the kernel's point in ``nest``'s result (a "point" level nest):
        the point's indices, with 0 for a keepdims axis, or for the axes of one point
        where only those differ from the kernel's (see ``_moving``)."""
        ext = nest.extents
        if ext[:len(self.E)] == self.E:
            return self.point_args + [self.zero() for _ in ext[len(self.E):]]
        moving = iter(a for a, e in zip(self.point_args, self.E) if e != 1)
        return [self.zero() if e == 1 else next(moving) for e in ext]

    def _is_point_index(self, nest: Nest, idx: list[Value]) -> bool:
        if len(idx) != len(nest.extents):
            return False
        return all(v is p or _is_zero_index(v) and _is_zero_index(p)
                   for v, p in zip(idx, self.point_index(nest)))

    # -- inlining --------------------------------------------------------------
    def value_at(self, nest: Nest, idx: list[Value], block: Block) -> Value:
        """The element of ``nest``'s result at ``idx``, computed into ``block``."""
        known = self._known_value(nest, idx)
        return known if known is not None else self._inline(nest, idx, block)

    def _known_value(self, nest: Nest, idx: list[Value]) -> Value | None:
        """The value already computed for ``nest`` at ``idx``, or None to inline it."""
        if nest in self.point_values and self._is_point_index(nest, idx):
            return self.point_values[nest]
        if not nest.is_pointwise:
            raise CannotFuse(f"{nest.name} ({nest.source}) is read at another index than "
                             "the kernel's own point, which would recompute its reduction")
        return None

    def _inline(self, nest: Nest, idx: list[Value], block: Block) -> Value:
        """``nest``'s body cloned at ``idx``, its reads of members inlined in turn: a
        chain of producers is inlined with an explicit stack of clones in progress,
        each waiting for the value of the producer it reads."""
        stack = [self._inline_steps(nest, idx, block)]
        answer = None
        try:
            while True:
                try:
                    demand = stack[-1].send(answer)
                except StopIteration as done:
                    stack.pop()
                    if not stack:
                        return done.value
                    answer = [done.value]
                    continue
                answer = None
                known = self._known_value(demand.nest, demand.idx)
                if known is not None:
                    answer = [known]
                else:
                    stack.append(self._inline_steps(demand.nest, demand.idx, demand.block))
        except BaseException:
            for steps in reversed(stack):
                steps.close()  # their half-built regions drop their uses
            raise

    def _inline_steps(self, nest: Nest, idx: list[Value], block: Block):
        stored: list[Value] = []

        def hook(op, operands, into):
            if isinstance(op, StoreOp):
                stored.append(operands[0])
                return []
            if isinstance(op, (LoadOp, MaskedLoadOp)):
                producer = self.graph.writer.get(id(operands[0]))
                if producer is not None and producer in self.member_set:
                    if isinstance(op, MaskedLoadOp):
                        raise CannotFuse(f"{nest.name} reads {producer.name} through a padding "
                                         "mask (a convolution input): kept in memory")
                    return _ValueOf(producer, list(operands[1:]), into)
            return None

        yield from clone_block_steps(nest.op.body, idx, block, hook)
        value = stored[0]
        if value.name_hint is None or value.name_hint.isdigit():
            value.name_hint = nest.name  # inlined values read as the tensor they stand for
        return value

    def _store(self, value: Value, nest: Nest, idx: list[Value], block: Block) -> None:
        block.append(StoreOp([value, nest.out, *idx]))

    def build(self) -> KernelOp:
        body = self.kernel.body
        for nest in self.members:
            if level(nest, self.E, self.C) == "point":
                self.point_values[nest] = self._inline(nest, self.point_index(nest), body)
                if nest in self.outputs:
                    self._store(self.point_values[nest], nest, self.point_index(nest), body)
        row_outputs = [n for n in self.outputs if level(n, self.E, self.C) == "row"]
        if row_outputs:
            loop = ForOp(result_types=[], attributes={"extent": self.C},
                         regions=[Region([Block([INDEX], ["k"])])])
            body.append(loop)
            k = loop.body.args[0]
            for nest in row_outputs:
                idx = self.point_args + [k]
                self._store(self.value_at(nest, idx, loop.body), nest, idx, loop.body)
        cse_block(body)
        hoist_invariant_loads(body)
        cse_block(body)  # loads hoisted out of several loops over a row are one
        dead_code(body)
        return self.kernel


def build_kernel(graph: NestGraph, members, outputs, name: str, schedule_for=None) -> KernelOp:
    """One fused.kernel computing ``members`` and storing ``outputs``; raises CannotFuse."""
    if not outputs:
        raise CannotFuse("the group stores nothing")
    for n in members:
        if n.out is None:
            raise CannotFuse(f"{n.name} is not a simple loop nest")
    builder = KernelBuilder(graph, members, outputs, name, schedule_for)
    try:
        return builder.build()
    except CannotFuse:
        discard(builder.kernel)
        raise


def discard(kernel: KernelOp) -> None:
    """Drop a kernel's uses of the function's buffers (a candidate not taken)."""
    for op in reversed(list(kernel.walk())):
        op.drop_operands()
