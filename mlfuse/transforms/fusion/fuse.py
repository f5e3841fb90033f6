"""The ``fuse`` pass: group loop nests into kernels, then rewrite each group into
one ``fused.kernel``; and ``no-fuse``, one kernel per nest (the baseline).

Grouping is greedy over producers, last first (so a producer's consumers are
already placed). For a producer P read by groups G1..Gn it tries, best first:
  1. merge P and all of G1..Gn into one kernel (vertical, diamond, multi-output),
  2. rematerialize P (pointwise) inside each reader group that can take it,
  3. merge P into one reader group (multi-output: P stored there, read by the rest),
and keeps P apart otherwise. A move must be legal (the kernel graph stays acyclic,
the group builds into one kernel, it fits the register budget and --fuse-limit)
and profitable by the cost model. Then independent groups over the same
iteration space merge horizontally. Every decision is recorded for ``explain``.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import AllocOp
from mlfuse.ir.builtin import FuncOp
from mlfuse.ir.pass_manager import Pass
from mlfuse.hardware import Target, get_target

from mlfuse.transforms.fusion.cost import ZERO, kernel_cost, resolve
from mlfuse.transforms.fusion.graph import Nest, NestGraph
from mlfuse.transforms.fusion.kernel_builder import CannotFuse, build_kernel, discard
from mlfuse.transforms.fusion.schedules import apply_schedule


@dataclass(eq=False)
class Group:
    members: list[Nest]           # nests computed in this kernel (inlined or stored)
    owned: list[Nest]             # nests whose buffers this kernel writes, when needed

    def __post_init__(self):
        self.member_set = frozenset(self.members)

    def __repr__(self):
        return f"<Group {[n.name for n in self.members]}>"


@dataclass(eq=False)
class Move:
    """A grouping told by its change to the planner's current one: ``removed`` leave,
    ``added`` join at the end. Facts about it are the current ones corrected for the
    groups it touches, so trying a move costs what it touches, not the whole graph."""
    removed: list[Group]
    added: list[Group]

    def __post_init__(self):
        self.removed_ids = {id(g) for g in self.removed}


@dataclass
class Decision:
    producer: str
    consumers: list[str]
    action: str                   # fused | rematerialized | multi-output | horizontal | kept
    reason: str
    cost_before_us: float | None = None
    cost_after_us: float | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def __str__(self) -> str:
        return f"{self.action} {self.producer} -> {', '.join(self.consumers)}: {self.reason}"


@dataclass
class FusionPlan:
    func: str
    groups: list[Group]
    kernels: list[KernelOp]
    decisions: list[Decision] = field(default_factory=list)


class Planner:
    def __init__(self, graph: NestGraph, target: Target, dims: dict, limit: int | None):
        self.graph, self.target, self.dims, self.limit = graph, target, dims, limit
        self.groups = [Group([n], [n]) for n in graph.nests]
        self.decisions: list[Decision] = []
        self._cache: dict = {}
        # Facts about the current grouping, kept up to date by _accept, so that a move
        # costs what it touches rather than a pass over every group:
        self._owner: dict[Nest, Group] = {}          # nest -> the group writing its buffer
        self._computed_by: dict[Nest, list[Group]] = {n: [] for n in graph.nests}
        self._memory_readers: dict[Nest, int] = {n: 0 for n in graph.nests}  # groups loading it
        self._position: dict[int, int] = {}          # id(group) -> index in self.groups
        self._sources: dict[Nest, list[Nest]] = {n: [] for n in graph.nests}  # consumers, inverted
        for n in graph.nests:
            for c in graph.consumers(n):
                self._sources[c].append(n)
        self._enter(self.groups)
        self._renumber()

    # -- bookkeeping of the current grouping -------------------------------------
    def _memory_reads(self, group: Group) -> list[Nest]:
        """The nests whose buffers ``group`` loads (producers it does not compute)."""
        reads = getattr(group, "_memory_reads", None)
        if reads is None:
            reads = list(dict.fromkeys(p for m in group.members for p in self.graph.producers(m)
                                       if p not in group.member_set))
            group._memory_reads = reads
        return reads

    def _enter(self, groups: list[Group], sign: int = 1) -> None:
        for g in groups:
            for n in g.owned:
                if sign > 0:
                    self._owner[n] = g
                elif self._owner.get(n) is g:
                    del self._owner[n]
            for n in g.members:
                if sign > 0:
                    self._computed_by[n].append(g)
                else:
                    self._computed_by[n].remove(g)
            for p in self._loaded(g):
                self._memory_readers[p] += sign

    def _loaded(self, group: Group) -> list[Nest]:
        """The nests ``group`` reads from memory in the sense of ``needed``: a member
        consumes their buffer and ``group`` does not compute them."""
        loaded = getattr(group, "_loaded", None)
        if loaded is None:
            loaded = list(dict.fromkeys(n for m in group.members for n in self._sources[m]
                                        if n not in group.member_set))
            group._loaded = loaded
        return loaded

    def _renumber(self) -> None:
        self._position = {id(g): i for i, g in enumerate(self.groups)}

    def _reads_from_memory(self, group: Group, nest: Nest) -> bool:
        return nest not in group.member_set and \
            not group.member_set.isdisjoint(self.graph.consumer_set(nest))

    # -- facts about a grouping ----------------------------------------------
    # ``groups`` is None (the current grouping), a Move from it, or any list of groups.
    def needed(self, nest: Nest, groups=None) -> bool:
        """Whether ``nest``'s buffer must be in memory: returned, or read by a group
        that does not compute it."""
        if self.graph.is_returned(nest):
            return True
        if isinstance(groups, list):
            return any(self._reads_from_memory(g, nest) for g in groups)
        count = self._memory_readers[nest]
        if groups is not None:
            count += sum(self._reads_from_memory(g, nest) for g in groups.added)
            count -= sum(self._reads_from_memory(g, nest) for g in groups.removed)
        return count > 0

    def outputs(self, group: Group, groups=None) -> list[Nest]:
        return [n for n in group.owned if self.needed(n, groups)]

    def schedule_for(self, space) -> str:
        """The builder's first guess for a kernel over a reduced space (apply_schedule
        then chooses by extents and accesses): "row" for long reductions."""
        c = 1
        for e in space.reduced_extents:
            c *= resolve(e, self.dims, self.target)
        return "row" if c >= self.target.row_min_extent else "pointwise"

    def build(self, group: Group, groups=None, name="kernel"):
        outs = self.outputs(group, groups)
        key = (tuple(n.index for n in group.members), tuple(n.index for n in outs))
        if key not in self._cache:
            try:
                if self.limit is not None and len(group.members) > self.limit:
                    raise CannotFuse(f"--fuse-limit {self.limit} caps a kernel at {self.limit} ops")
                kernel = build_kernel(self.graph, group.members, outs, name, self.schedule_for)
                apply_schedule(kernel, self.dims, self.target)  # by extents and accesses
                cost = kernel_cost(kernel, self.dims, self.target)
                if len(group.members) > 1 and cost.registers > self.target.register_budget:
                    raise CannotFuse(f"register estimate {cost.registers} passes the budget "
                                     f"{self.target.register_budget}")
                self._cache[key] = (kernel, cost)
            except CannotFuse as e:
                self._cache[key] = e
        result = self._cache[key]
        if isinstance(result, CannotFuse):
            raise result
        return result

    def acyclic(self, groups) -> bool:
        """The kernel graph (edge: a group reads from memory a buffer another writes)
        has no cycle, and every buffer read from memory has a writer. ``groups``: a
        Move from the current grouping (checked where it changes) or any list."""
        if isinstance(groups, Move):
            return self._move_acyclic(groups)
        owner = {n: g for g in groups for n in g.owned}
        computed_by: dict[Nest, list[Group]] = {}
        for g in groups:
            for m in g.members:
                computed_by.setdefault(m, []).append(g)
            if any(p not in owner for p in self._memory_reads(g)):
                return False
        return not _has_cycle(groups, lambda g: self._successors(g, owner.get, computed_by.get))

    def _successors(self, group: Group, owner_of, computed_by):
        """Groups that load a buffer ``group`` writes (``owner_of``/``computed_by`` tell
        the grouping)."""
        for n in group.owned:
            if owner_of(n) is not group or self.graph.writer.get(id(n.out)) is not n:
                continue
            for c in self.graph.consumers(n):
                for h in computed_by(c) or ():
                    if h is not group and n not in h.member_set:
                        yield h

    def _move_acyclic(self, move: Move) -> bool:
        removed = move.removed_ids
        added_owner = {n: g for g in move.added for n in g.owned}

        def owner_of(n):
            g = added_owner.get(n)
            if g is None:
                g = self._owner.get(n)
                if g is not None and id(g) in removed:
                    return None
            return g

        def computed_by(n):
            kept = [g for g in self._computed_by[n] if id(g) not in removed]
            return kept + [g for g in move.added if n in g.member_set]

        # every buffer read from memory keeps a writer: the added groups' reads, and
        # the readers of buffers whose writer left
        for g in move.added:
            if any(owner_of(p) is None for p in self._memory_reads(g)):
                return False
        for g in move.removed:
            for n in g.owned:
                if n not in added_owner and self._owner.get(n) is g and \
                        any(self._reads_from_memory(h, n) for c in self.graph.consumers(n)
                            for h in computed_by(c)):
                    return False
        # the grouping was acyclic, so a new cycle runs through an added group
        return not _has_cycle(move.added, lambda g: self._successors(g, owner_of, computed_by))

    # -- moves -----------------------------------------------------------------
    def try_move(self, move: Move, touched_old: list[Group], touched_new: list[Group]):
        """Return (ok, reason, before_us, after_us) for making ``move``."""
        if not self.acyclic(move):
            return False, "would create a cycle between kernels", None, None
        try:
            after = sum((self.build(g, move)[1] for g in touched_new
                         if self.outputs(g, move)), ZERO)
        except CannotFuse as e:
            return False, str(e), None, None
        before = sum((self.build(g)[1] for g in touched_old
                      if self.outputs(g)), ZERO)
        b, a = before.seconds(self.target) * 1e6, after.seconds(self.target) * 1e6
        if after.bytes > before.bytes:
            # at tiny sizes a saved launch outweighs recomputing from a wider input, but
            # fusion promises never to move more bytes than --no-fuse (found by fuzzing)
            return False, f"moves more bytes ({after.bytes} > {before.bytes})", b, a
        if a >= b:
            return False, f"cost model: fused {a:.2f} us >= separate {b:.2f} us", b, a
        return True, f"cost model: fused {a:.2f} us < separate {b:.2f} us", b, a

    def reader_groups(self, nest: Nest) -> list[Group]:
        """The groups computing a consumer of ``nest``, in the order of self.groups."""
        found = {id(g): g for c in self.graph.consumers(nest) for g in self._computed_by[c]}
        return sorted(found.values(), key=lambda g: self._position[id(g)])

    def own_group(self, nest: Nest) -> Group:
        return self._owner[nest]

    def plan_producer(self, p: Nest) -> None:
        readers = [g for g in self.reader_groups(p) if p not in g.member_set]
        if not readers:
            return
        home = self.own_group(p)
        names = sorted({c.name for c in self.graph.consumers(p)})
        tried = []

        # 1. one kernel for the producer and every reader
        merged = Group(_union(home.members, *[g.members for g in readers]),
                       _union(home.owned, *[g.owned for g in readers]))
        move = Move([home] + readers, [merged])
        ok, why, b, a = self.try_move(move, [home] + readers, [merged])
        if ok:
            action = "multi-output" if self.needed(p, move) else "fused"
            self._accept(move, Decision(p.name, names, action, why, b, a))
            return
        tried.append(why)

        # 2. rematerialize a cheap producer in each reader
        if p.is_pointwise and len(home.members) == 1 and len(readers) > 1:
            new_readers = [Group(_union(g.members, [p]), g.owned) for g in readers]
            move = Move(readers, new_readers)
            touched_new = new_readers + ([home] if self.needed(p, move) else [])
            if not self.needed(p, move):
                move = Move(readers + [home], new_readers)
            ok, why, b, a = self.try_move(move, [home] + readers, touched_new)
            if ok:
                self._accept(move, Decision(p.name, names, "rematerialized", why, b, a))
                return
            tried.append(why)

        # 3. join one reader as an extra output; the others read it from memory
        if len(readers) > 1:
            best = None
            for g in readers:
                joined = Group(_union(home.members, g.members), _union(home.owned, g.owned))
                move = Move([home, g], [joined])
                ok, why, b, a = self.try_move(move, [home, g], [joined])
                if ok and (best is None or a - b < best[3] - best[2]):
                    best = (move, why, b, a)
            if best is not None:
                self._accept(best[0], Decision(p.name, names, "multi-output", *best[1:]))
                return
            tried.append(why)
        self.decisions.append(Decision(p.name, names, "kept", "; ".join(dict.fromkeys(tried))))

    def _accept(self, move: Move, decision: Decision) -> None:
        self._enter(move.removed, -1)
        self.groups = [g for g in self.groups if id(g) not in move.removed_ids] + move.added
        self._enter(move.added)
        self._renumber()
        self.decisions.append(decision)

    def horizontal(self) -> None:
        """Merge independent groups over the same iteration space into one launch."""
        changed = True
        while changed:
            changed = False
            for i, g1 in enumerate(self.groups):
                for g2 in self.groups[i + 1:]:
                    k1, k2 = self.build(g1)[0], self.build(g2)[0]
                    if (k1["extents"] != k2["extents"] or k1["schedule"] != k2["schedule"]):
                        continue
                    merged = Group(_union(g1.members, g2.members), _union(g1.owned, g2.owned))
                    move = Move([g1, g2], [merged])
                    ok, why, b, a = self.try_move(move, [g1, g2], [merged])
                    if ok:
                        self._accept(move, Decision(
                            _label(g1), [_label(g2)], "horizontal", why, b, a))
                        changed = True
                        break
                if changed:
                    break

    def run(self) -> list[Group]:
        for p in reversed(self.graph.nests):
            self.plan_producer(p)
        self.horizontal()
        return self.ordered()

    def ordered(self) -> list[Group]:
        """Groups in an order where every buffer is written before it is read: of the
        groups whose inputs are written, always the one with the first op."""
        live = [g for g in self.groups if self.outputs(g)]
        owner = {n: g for g in live for n in g.owned}
        rank = {id(g): r for r, g in enumerate(sorted(live, key=lambda g: min(n.index for n in g.members)))}
        waiting, readers = {}, {id(g): [] for g in live}
        for g in live:
            deps = {id(owner[p]) for p in self._memory_reads(g) if owner.get(p) is not g}
            waiting[id(g)] = len(deps)
            for d in deps:
                readers[d].append(g)
        ready = [(rank[id(g)], g) for g in live if not waiting[id(g)]]
        heapq.heapify(ready)
        order = []
        while ready:
            _, g = heapq.heappop(ready)
            order.append(g)
            for r in readers[id(g)]:
                waiting[id(r)] -= 1
                if not waiting[id(r)]:
                    heapq.heappush(ready, (rank[id(r)], r))
        if len(order) < len(live):  # pragma: no cover - acyclic() rules this out
            raise AssertionError("fusion produced a cyclic kernel graph")
        return order


def _has_cycle(starts, successors) -> bool:
    """Whether a cycle is reachable from ``starts``; an explicit stack, since a kernel
    graph may be thousands of groups deep."""
    state: dict[int, int] = {}  # id -> 1 while on the path, 2 when done
    for start in starts:
        if id(start) in state:
            continue
        state[id(start)] = 1
        stack = [(start, iter(successors(start)))]
        while stack:
            node, successors_left = stack[-1]
            for nxt in successors_left:
                seen = state.get(id(nxt))
                if seen == 1:
                    return True
                if seen is None:
                    state[id(nxt)] = 1
                    stack.append((nxt, iter(successors(nxt))))
                    break
            else:
                state[id(node)] = 2
                stack.pop()
    return False


def _union(*lists):
    out = []
    for lst in lists:
        for x in lst:
            if x not in out:
                out.append(x)
    return out


def _label(group: Group) -> str:
    return "+".join(n.name for n in group.members)


def rewrite(func: FuncOp, planner: Planner, groups: list[Group]) -> list[KernelOp]:
    """Replace the function's nests by one kernel per group, in order, and drop the
    allocations of buffers that no kernel writes any more."""
    live = {id(g) for g in groups}
    view = Move([g for g in planner.groups if id(g) not in live], [])  # the groups kept
    kernels = [planner.build(g, view)[0] for g in groups]
    for entry in planner._cache.values():
        if not isinstance(entry, CannotFuse) and entry[0] not in kernels:
            discard(entry[0])
    for nest in planner.graph.nests:
        nest.op.erase()
    stored = {id(n.out) for g in groups for n in planner.outputs(g, view)}
    for op in list(func.body.ops):
        if isinstance(op, AllocOp) and id(op.result) not in stored and not op.result.uses:
            op.erase()
    ret = func.return_op
    for i, kernel in enumerate(kernels):
        kernel.attributes["kernel_name"] = f"{func.sym_name}_{i}"
        func.body.insert_before(ret, kernel)
    return kernels


class FusePass(Pass):
    name = "fuse"
    doc = "Group loop nests into fused kernels (legality + cost model)."

    def __init__(self, limit: int | None = None, dims: dict | None = None, target: str | None = None):
        self.limit = limit
        self.dims = dims or {}
        self.target = get_target(target)
        self.plans: list[FusionPlan] = []

    def plan_for(self, func: FuncOp) -> tuple[Planner, list[Group]]:
        planner = Planner(NestGraph(func), self.target, self.dims, self.limit)
        return planner, planner.run()

    def run(self, module):
        for func in module.funcs:
            planner, groups = self.plan_for(func)
            kernels = rewrite(func, planner, groups)
            self.plans.append(FusionPlan(func.sym_name, groups, kernels, planner.decisions))

    def remarks(self) -> list[str]:
        return [f"@{plan.func}: {d}" for plan in self.plans for d in plan.decisions]


class NoFusePass(FusePass):
    name = "no-fuse"
    doc = "One kernel per loop nest: the unfused baseline."

    def plan_for(self, func: FuncOp):
        planner = Planner(NestGraph(func), self.target, self.dims, self.limit)
        return planner, planner.ordered()
