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
from mlfuse.dialects.loops import ForOp, LoadOp, MaskedLoadOp, ReduceOp, StoreOp
from mlfuse.dialects.permute import store_scatters, stores_along_points, why_not_staged_rows
from mlfuse.ir.clone import Demand, clone_block_steps
from mlfuse.ir.core import Block, Region, Value
from mlfuse.ir.types import INDEX, symbols_of

from mlfuse.transforms.cse import cse_block, dead_code
from mlfuse.transforms.fusion.graph import Nest, NestGraph
from mlfuse.transforms.fusion.spaces import Space, level, plain_space
from mlfuse.transforms.fusion.hoist import hoist_invariant_loads
from mlfuse.transforms.fusion.nest_order import order_nests_by_memory
from mlfuse.transforms.fusion.sibling_order import gather_sibling_loops
from mlfuse.transforms.fusion.index_algebra import IndexAlgebra
from mlfuse.transforms.fusion.placement import forward_index, placement_root, placement_source
from mlfuse.transforms.fusion.schedules import access_layout
from mlfuse.transforms.loop_emitter import Emitter


class CannotFuse(Exception):
    """The group cannot be one kernel; the message says why (shown by explain)."""


class _ValueOf(Demand):
    """An inlining asks for a member's value at an index (computed into a block)."""

    def __init__(self, nest: Nest, idx: list[Value], block: Block):
        self.nest, self.idx, self.block = nest, idx, block


def _index_key(v: Value):
    """An index value for memoizing: constants by value (each inlined read clones its own)."""
    op = getattr(v, "op", None)
    return ("constant", op["value"]) if isinstance(op, ArithConstant) else id(v)


def _is_zero_index(v: Value) -> bool:
    op = getattr(v, "op", None)
    return isinstance(op, ArithConstant) and v.type == INDEX and op["value"] == 0


def candidate_spaces(members: list[Nest], outputs: list[Nest]) -> list[Space]:
    """Iteration spaces worth trying for a kernel: each reduction's full space first (so
    its consumers over that space join it: the broadcast-back epilogue), then each
    output's own extents, then spaces two outputs' extents make together."""
    seen = [n.space for n in members if n.space is not None]
    seen += [plain_space(n.extents) for n in list(outputs) + list(members)]
    # an output over a space and one over it with axes of 1 (a row statistic returned
    # beside the rows it scales): the second's axes of 1 are the first's reduced ones
    for a in list(outputs) + list(members):
        for b in outputs:
            ea, eb = a.extents, b.extents
            if len(ea) == len(eb) and ea != eb and all(x == y or x == 1 for x, y in zip(ea, eb)):
                seen.append(Space(tuple(eb), tuple(i for i, (x, y) in enumerate(zip(ea, eb))
                                                   if x != y)))
    return list(dict.fromkeys(seen))


def _broadcast_point(nest: Nest, space: Space) -> bool:
    """Whether a reduction over ``nest``'s extents can be read at a kernel point by
    broadcasting (each extent the kernel's or 1): it is then computed at the index a
    consumer reads it at, once per point (mean pooling's ``sum(mask, axis=1)`` of a
    mask [B, S, 1], read over [B, D]: a reduction per point, as the kernel's own). Not
    where the kernel's points run along an axis the reduction reduces (``x / sum(x)``
    over [N]): that would repeat a whole reduction for every element."""
    ext, kept = nest.extents, space.kept
    if nest.space is None or len(ext) != len(kept) or \
            not all(e in (k, 1) for e, k in zip(ext, kept)):
        return False
    spread = {i for i, (e, k) in enumerate(zip(ext, kept)) if e != k}
    if ext == nest.space.keepdims and spread & set(nest.space.reduced):
        return False
    # a symbol both spread over and reduced: as long as the kernel's points, at any size
    return not set(symbols_of([kept[i] for i in spread])) & \
        set(symbols_of(nest.space.reduced_extents))


def _reading_reductions(members: list[Nest]) -> set[Nest]:
    """The members that read a reduction of the group's, directly or through others."""
    made = {id(n.out): n for n in members if n.out is not None}
    after: set[Nest] = set()
    for n in sorted(members, key=lambda n: n.index):
        producers = [made[id(v)] for v in n.reads if id(v) in made]
        if any(not p.is_pointwise or p in after for p in producers):
            after.add(n)
    return after


def choose_space(members: list[Nest], outputs: list[Nest], reshaped: bool = False,
                 placed: bool = False) -> Space:
    """The first candidate space where every reduction is one value per point and
    every output is stored at a point or along the reduced axes (where ``reshaped``,
    also over a reshape of the full space, stored at the reshaped index; where
    ``placed``, also a permute or reshape of a point value or of a value over the
    full space, stored where that chain puts it: placement.py)."""
    reasons = []
    for space in candidate_spaces(members, outputs):
        bad = [n for n in members if not n.is_pointwise and level(n.extents, space) != "point"
               and not _broadcast_point(n, space)]
        bad += [n for n in outputs if level(n.extents, space, reshaped) is None and
                not (placed and placement_root(n, members, space) is not None)]
        if space.reduced and all(e == 1 for e in space.kept):
            # one point: a whole-tensor reduction; its consumers over every element
            # would all wait on one block (spreading it needs a grid-wide barrier). An
            # output over every element that reads no reduction (a prologue value also
            # returned: ``y = x * 2 + 1; return y, mean(y)``) is stored as the values
            # are reduced (split_stages.py: in the reductions' pass over each chunk)
            after = _reading_reductions(members)
            bad += [n for n in members if not n.is_pointwise and any(
                level(o.extents, space, reshaped) == "row" and o in after for o in outputs)]
        if not bad:
            return space
        reasons.append(bad[0])
    culprit = reasons[0] if reasons else members[0]
    if not culprit.is_pointwise and culprit.space is not None and \
            all(e == 1 for e in culprit.space.kept):
        raise CannotFuse(f"{culprit.name} reduces over all elements and its consumers use "
                         "every element: that needs a grid-wide barrier, so two kernels")
    raise CannotFuse(f"{culprit.name} ({culprit.source}, extents {culprit.extents}) does not fit "
                     "one iteration space with the rest of the group")


class KernelBuilder:
    def __init__(self, graph: NestGraph, members: list[Nest], outputs: list[Nest], name: str,
                 schedule_for=None, space: Space | None = None, reshaped: bool = False,
                 staged_rows: dict | None = None):
        self.graph = graph
        # the sizes planned for, where the target stages stores along a row kernel's
        # points (None: it does not)
        self.staged_rows = staged_rows
        self.members = sorted(members, key=lambda n: n.index)
        self.member_set = set(self.members)
        self.outputs = sorted(outputs, key=lambda n: n.index)
        self.reshaped = reshaped
        self.space = space or choose_space(self.members, self.outputs)
        self.E = self.space.kept
        has_reduction = any(not n.is_pointwise and level(n.extents, self.space) == "point"
                            for n in self.members)
        schedule = "pointwise"
        if self.space.reduced and has_reduction and schedule_for is not None:
            schedule = schedule_for(self.space)
        sources = [f"{n.name} = {n.source}" for n in self.members]
        block = Block([INDEX] * len(self.E), [f"i{k}" for k in range(len(self.E))])
        self.kernel = KernelOp(result_types=[], regions=[Region([block])], attributes={
            "extents": list(self.E), "schedule": schedule, "kernel_name": name,
            "sources": sources}, loc=self.members[-1].op.loc)
        self.point_args = list(block.args)
        self.algebra = IndexAlgebra()
        for arg, extent in zip(self.point_args, self.E):
            self.algebra.bound(arg, extent)
        self.point_values: dict[Nest, Value] = {}
        # reductions read at a broadcast index (extents of 1 where the kernel's are not),
        # computed once per point where first read: (nest, index key) -> value
        self.broadcast_values: dict[tuple, Value] = {}
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
        the point's indices; with 0 at the reduced axes of a keepdims reduction; or with
        0 at the axes of one point where only those differ from the kernel's
        (``spaces.moving``: a transpose of a [R, 1] result)."""
        ext = nest.extents
        if ext == self.E:
            return list(self.point_args)
        if self.space.reduced and ext == self.space.keepdims:
            return self.space.interleave(self.point_args, [self.zero()] * len(self.space.reduced))
        moving = iter(a for a, e in zip(self.point_args, self.E) if e != 1)
        return [self.zero() if e == 1 else next(moving) for e in ext]

    def _is_point_index(self, nest: Nest, idx: list[Value]) -> bool:
        if len(idx) != len(nest.extents):
            return False
        return all(v is p or _is_zero_index(v) and self._is_zero_point(p)
                   for v, p in zip(idx, self.point_index(nest)))

    def _is_zero_point(self, p: Value) -> bool:
        """Whether ``p`` is 0 at every point: the constant, or the index of an axis of
        extent 1 (a row kernel over [1, C] read at [0, c] by a reshape to [C])."""
        return _is_zero_index(p) or any(p is a and e == 1 for a, e in zip(self.point_args, self.E))

    # -- inlining --------------------------------------------------------------
    def value_at(self, nest: Nest, idx: list[Value], block: Block) -> Value:
        """The element of ``nest``'s result at ``idx``, computed into ``block``."""
        known = self._known_value(nest, idx, block)
        return known if known is not None else self._inline(nest, idx, block)

    def _known_value(self, nest: Nest, idx: list[Value], block: Block) -> Value | None:
        """The value already computed for ``nest`` at ``idx``, or None to inline it."""
        if nest in self.point_values and self._is_point_index(nest, idx):
            return self.point_values[nest]
        if nest.is_pointwise:
            return None
        if block is self.kernel.body and _broadcast_point(nest, self.space):
            key = (nest, tuple(_index_key(v) for v in idx))
            if key not in self.broadcast_values:  # once per point, where first read
                self.broadcast_values[key] = self._inline(nest, idx, block)
            return self.broadcast_values[key]
        raise CannotFuse(f"{nest.name} ({nest.source}) is read at another index than "
                         "the kernel's own point, which would recompute its reduction")

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
                known = self._known_value(demand.nest, demand.idx, demand.block)
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
            simpler = self.algebra.simplify(op, operands)
            if simpler is not None:  # index arithmetic that undoes a reshape
                return [simpler]
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

    def placed_index(self, nest: Nest, block: Block, full: list[Value] | None = None
                     ) -> list[Value]:
        """Where ``nest`` holds the kernel point's value (``full`` None) or the epilogue's
        value at the full index ``full`` (in the loop over the reduced axes): that index
        of the member it moves, mapped forward (placement.py; index ops into ``block``)."""
        root = "point" if full is None else "row"
        if level(nest.extents, self.space) == root:
            return self.point_index(nest) if full is None else full
        found = placement_source(nest, self.members, self.space, root=root)
        if found is None:
            raise CannotFuse(f"{nest.name} ({nest.source}) is no permute or reshape of "
                             "a value of the kernel's points")
        q, load = found
        return forward_index(nest, load, self.placed_index(q, block, full), q, block)

    def build(self) -> KernelOp:
        body = self.kernel.body
        for nest in self.members:
            if level(nest.extents, self.space) == "point":
                self.point_values[nest] = self._inline(nest, self.point_index(nest), body)
                if nest in self.outputs:
                    self._store(self.point_values[nest], nest, self.point_index(nest), body)
        # a permute or reshape of a point value or of a value over the full space
        # (placement.py): stored by the points, or in the epilogue's loop
        placed = {n: placement_root(n, self.members, self.space) for n in self.outputs
                  if level(n.extents, self.space, self.reshaped) is None}
        for nest in self.outputs:
            if nest in placed and placed[nest] != "row":
                idx = self.placed_index(nest, body)
                self._store(self.value_at(nest, idx, body), nest, idx, body)
        row_outputs = [n for n in self.outputs if placed.get(n) == "row"
                       or level(n.extents, self.space, self.reshaped) == "row"]
        if row_outputs:
            # the broadcast-back epilogue: a loop nest over the reduced axes, in order
            into, steps = body, []
            for d, extent in enumerate(self.space.reduced_extents):
                loop = ForOp(result_types=[], attributes={"extent": extent},
                             regions=[Region([Block([INDEX], [f"k{d}" if d else "k"])])])
                into.append(loop)
                into = loop.body
                steps.append(loop.body.args[0])
                self.algebra.bound(steps[-1], extent)
            full = self.space.interleave(self.point_args, steps)
            moved = []
            for nest in row_outputs:
                idx = full
                if nest in placed:  # a move of a value over the full space
                    idx = self.placed_index(nest, into, full)
                    moved.append(nest.out)
                elif list(nest.extents) != list(self.space.full):  # a reshape of the row
                    idx = Emitter(into, {}).reshape_index(full, list(self.space.full),
                                                          list(nest.extents))
                self._store(self.value_at(nest, idx, into), nest, idx, into)
            if moved:
                self._check_moved_stores(moved)
        cse_block(body)
        hoist_invariant_loads(body)
        cse_block(body)  # loads hoisted out of several loops over a row are one
        dead_code(body)
        order_nests_by_memory(body)  # (a transposed input's reduction walks x's rows)
        gather_sibling_loops(body)  # (after cse: the sums' shared init is one constant)
        return self.kernel

    def _check_moved_stores(self, moved: list[Value]) -> None:
        """Refuse a group whose moved epilogue output (a transpose of a layernorm's
        result) neighbouring threads would write apart: its separate transpose tiles
        write whole lines, a scattered store a 32-byte sector a value (H100: a layernorm
        over rows of 1024 stored transposed, 0.35 ms against 0.094 in two kernels). A
        row kernel's store that follows its points is kept: the staged-rows schedule
        writes it through a shared tile (codegen/staged_rows.py), where the target stages
        rows and the rows' count and length are known when planning: a warp a row has
        no split plan, and a few long rows known only at run time would leave it
        latency-bound (4 rows of 2**20: 4 warps walking 2**20 values each)."""
        layout = access_layout(self.kernel)
        along = layout == "columns"
        stageable = {id(o) for o in stores_along_points(self.kernel)} \
            if layout == "rows" and why_not_staged_rows(self.kernel) is None else set()
        unstaged = self._why_not_staged() if stageable else None
        for op in self.kernel.walk():
            if isinstance(op, StoreOp) and any(op.operands[1] is b for b in moved) and \
                    not (unstaged is None and id(op) in stageable) and \
                    store_scatters(self.kernel, op, along):
                why = f" (staged rows would write it coalesced: {unstaged})" \
                    if id(op) in stageable else ""
                raise CannotFuse(f"{op.operands[1].name_hint or 'an output'} is a move of the "
                                 f"epilogue's values that its threads would store scattered{why}")

    def _why_not_staged(self) -> str | None:
        """Why the staged-rows schedule may not take this kernel (None: it may)."""
        if self.staged_rows is None:
            return "the target's row_staged_stores is off"
        loops = [o["extent"] for o in self.kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
        unbound = sorted(s for s in symbols_of(list(self.kernel.extent_list) + loops)
                         if s not in self.staged_rows)
        if unbound:
            return f"{', '.join(unbound)} known only at run time"
        return None


def build_kernel(graph: NestGraph, members, outputs, name: str, schedule_for=None,
                 staged_rows: dict | None = None) -> KernelOp:
    """One fused.kernel computing ``members`` and storing ``outputs``; raises CannotFuse.
    ``staged_rows``: the sizes planned for where the target's ``row_staged_stores`` is on
    (a row kernel may store along its points, codegen/staged_rows.py), else None."""
    if not outputs:
        raise CannotFuse("the group stores nothing")
    for n in members:
        if n.out is None:
            raise CannotFuse(f"{n.name} is not a simple loop nest")
    # the plain spaces first; then an output over a reshape of a reduction's rows, stored
    # at the reshaped index (group norm); then one that permutes or reshapes a point
    # value or an epilogue's value, stored where that puts it (placement.py). A mode
    # whose space fits but whose kernel does not build (a transpose of the rows has
    # their size, as a reshape would) gives way to the next; where all fail, the reason
    # to give is that of the last mode whose space fitted (the most specific one tried:
    # a transposed epilogue's scattered store, not the reshaped mode's read of the rows
    # at another point), else the first space's.
    unfit = built = None
    for reshaped, placed in ((False, False), (True, False), (False, True)):
        try:
            space = choose_space(members, outputs, reshaped, placed)
        except CannotFuse as e:
            unfit = unfit or e
            continue
        builder = KernelBuilder(graph, members, outputs, name, schedule_for, space, reshaped,
                                staged_rows)
        try:
            return builder.build()
        except CannotFuse as e:
            discard(builder.kernel)
            built = e
    raise (built or unfit) from None


def discard(kernel: KernelOp) -> None:
    """Drop a kernel's uses of the function's buffers (a candidate not taken)."""
    for op in reversed(list(kernel.walk())):
        op.drop_operands()
