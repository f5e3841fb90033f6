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

    def __repr__(self):
        return f"<Group {[n.name for n in self.members]}>"


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

    # -- facts about a grouping ----------------------------------------------
    def needed(self, nest: Nest, groups: list[Group]) -> bool:
        """Whether ``nest``'s buffer must be in memory: returned, or read by a group
        that does not compute it."""
        if self.graph.is_returned(nest):
            return True
        return any(nest not in g.members and any(c in g.members for c in self.graph.consumers(nest))
                   for g in groups)

    def outputs(self, group: Group, groups: list[Group]) -> list[Nest]:
        return [n for n in group.owned if self.needed(n, groups)]

    def schedule_for(self, E, C) -> str:
        c = resolve(C, self.dims, self.target)
        return "row" if c >= self.target.row_min_extent else "pointwise"

    def build(self, group: Group, groups: list[Group], name="kernel"):
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

    def acyclic(self, groups: list[Group]) -> bool:
        """The kernel graph (edge: a group reads from memory a buffer another writes)
        has no cycle, and every buffer read from memory has a writer."""
        owner = {n: g for g in groups for n in g.owned}
        edges = {id(g): set() for g in groups}
        for g in groups:
            for m in g.members:
                for p in self.graph.producers(m):
                    if p in g.members:
                        continue
                    if p not in owner:
                        return False
                    if owner[p] is not g:
                        edges[id(owner[p])].add(id(g))
                    elif p not in g.members:
                        return False
        state: dict[int, int] = {}

        def visit(gid) -> bool:
            state[gid] = 1
            for nxt in edges[gid]:
                if state.get(nxt) == 1 or (state.get(nxt) is None and not visit(nxt)):
                    return False
            state[gid] = 2
            return True
        return all(state.get(id(g)) == 2 or visit(id(g)) for g in groups)

    # -- moves -----------------------------------------------------------------
    def try_move(self, new_groups: list[Group], touched_old: list[Group], touched_new: list[Group]):
        """Return (ok, reason, before_us, after_us) for replacing the grouping."""
        if not self.acyclic(new_groups):
            return False, "would create a cycle between kernels", None, None
        try:
            after = sum((self.build(g, new_groups)[1] for g in touched_new
                         if self.outputs(g, new_groups)), ZERO)
        except CannotFuse as e:
            return False, str(e), None, None
        before = sum((self.build(g, self.groups)[1] for g in touched_old
                      if self.outputs(g, self.groups)), ZERO)
        b, a = before.seconds(self.target) * 1e6, after.seconds(self.target) * 1e6
        if after.bytes > before.bytes:
            # at tiny sizes a saved launch outweighs recomputing from a wider input, but
            # fusion promises never to move more bytes than --no-fuse (found by fuzzing)
            return False, f"moves more bytes ({after.bytes} > {before.bytes})", b, a
        if a >= b:
            return False, f"cost model: fused {a:.2f} us >= separate {b:.2f} us", b, a
        return True, f"cost model: fused {a:.2f} us < separate {b:.2f} us", b, a

    def reader_groups(self, nest: Nest) -> list[Group]:
        consumers = self.graph.consumers(nest)
        return [g for g in self.groups if any(c in g.members for c in consumers)]

    def own_group(self, nest: Nest) -> Group:
        return next(g for g in self.groups if nest in g.owned)

    def plan_producer(self, p: Nest) -> None:
        readers = [g for g in self.reader_groups(p) if p not in g.members]
        if not readers:
            return
        home = self.own_group(p)
        names = sorted({c.name for c in self.graph.consumers(p)})
        others = [g for g in self.groups if g is not home and g not in readers]
        tried = []

        # 1. one kernel for the producer and every reader
        merged = Group(_union(home.members, *[g.members for g in readers]),
                       _union(home.owned, *[g.owned for g in readers]))
        ok, why, b, a = self.try_move(others + [merged], [home] + readers, [merged])
        if ok:
            action = "multi-output" if self.needed(p, others + [merged]) else "fused"
            self._accept(others + [merged], Decision(p.name, names, action, why, b, a))
            return
        tried.append(why)

        # 2. rematerialize a cheap producer in each reader
        if p.is_pointwise and len(home.members) == 1 and len(readers) > 1:
            new_readers = [Group(_union(g.members, [p]), g.owned) for g in readers]
            new_groups = [g for g in self.groups if g not in readers] + new_readers
            touched_new = new_readers + ([home] if self.needed(p, new_groups) else [])
            if not self.needed(p, new_groups):
                new_groups = [g for g in new_groups if g is not home]
            ok, why, b, a = self.try_move(new_groups, [home] + readers, touched_new)
            if ok:
                self._accept(new_groups, Decision(p.name, names, "rematerialized", why, b, a))
                return
            tried.append(why)

        # 3. join one reader as an extra output; the others read it from memory
        if len(readers) > 1:
            best = None
            for g in readers:
                joined = Group(_union(home.members, g.members), _union(home.owned, g.owned))
                new_groups = [x for x in self.groups if x is not home and x is not g] + [joined]
                ok, why, b, a = self.try_move(new_groups, [home, g], [joined])
                if ok and (best is None or a - b < best[3] - best[2]):
                    best = (new_groups, why, b, a)
            if best is not None:
                self._accept(best[0], Decision(p.name, names, "multi-output", *best[1:]))
                return
            tried.append(why)
        self.decisions.append(Decision(p.name, names, "kept", "; ".join(dict.fromkeys(tried))))

    def _accept(self, groups: list[Group], decision: Decision) -> None:
        self.groups = groups
        self.decisions.append(decision)

    def horizontal(self) -> None:
        """Merge independent groups over the same iteration space into one launch."""
        changed = True
        while changed:
            changed = False
            for i, g1 in enumerate(self.groups):
                for g2 in self.groups[i + 1:]:
                    k1, k2 = self.build(g1, self.groups)[0], self.build(g2, self.groups)[0]
                    if (k1["extents"] != k2["extents"] or k1["schedule"] != k2["schedule"]):
                        continue
                    merged = Group(_union(g1.members, g2.members), _union(g1.owned, g2.owned))
                    new_groups = [g for g in self.groups if g is not g1 and g is not g2] + [merged]
                    ok, why, b, a = self.try_move(new_groups, [g1, g2], [merged])
                    if ok:
                        self._accept(new_groups, Decision(
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
        """Groups in an order where every buffer is written before it is read."""
        live = [g for g in self.groups if self.outputs(g, self.groups)]
        owner = {n: g for g in live for n in g.owned}
        done, order = set(), []
        while len(order) < len(live):
            for g in sorted(live, key=lambda g: min(n.index for n in g.members)):
                if id(g) in done:
                    continue
                deps = {id(owner[p]) for m in g.members for p in self.graph.producers(m)
                        if p not in g.members and owner.get(p) is not g}
                if deps <= done:
                    done.add(id(g))
                    order.append(g)
                    break
            else:  # pragma: no cover - acyclic() rules this out
                raise AssertionError("fusion produced a cyclic kernel graph")
        return order


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
    kernels = [planner.build(g, groups)[0] for g in groups]
    for entry in planner._cache.values():
        if not isinstance(entry, CannotFuse) and entry[0] not in kernels:
            discard(entry[0])
    for nest in planner.graph.nests:
        nest.op.erase()
    stored = {id(n.out) for g in groups for n in planner.outputs(g, groups)}
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
