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
from itertools import chain
from dataclasses import dataclass, field

from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import AllocOp
from mlfuse.ir.builtin import FuncOp
from mlfuse.ir.pass_manager import Pass
from mlfuse.hardware import Target, get_target

from mlfuse.transforms.fusion.cost import ZERO, kernel_cost, resolve, row_streamed
from mlfuse.transforms.fusion.graph import Nest, NestGraph
from mlfuse.transforms.fusion.group_facts import GroupFacts
from mlfuse.transforms.fusion.grouping import Group, Grouping, Move
from mlfuse.transforms.fusion.kernel_builder import CannotFuse, build_kernel, discard
from mlfuse.transforms.fusion.schedules import apply_schedule
from mlfuse.transforms.contraction import sums_of_products


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


# A pointwise op between two contractions runs as the first one's epilogue unless the
# second one's prologue is priced cheaper by more than this factor (_epilogue_instead).
EPILOGUE_MARGIN = 1.05


class Planner(Grouping):
    def __init__(self, graph: NestGraph, target: Target, dims: dict, limit: int | None):
        super().__init__(graph)
        self.target, self.dims, self.limit = target, dims, limit
        self.decisions: list[Decision] = []
        self._cache: dict = {}
        self.facts = GroupFacts(graph, dims, target)
        # a contraction reaching a pointwise op beside another one (a residual add of two
        # convs) -> the one priced the cheaper home of that op's epilogue
        self.not_hosts: dict[Nest, Nest] = {}
        self._chosen_host: dict[Nest, tuple] = {}
        # a producer kept -> (its decision's index, its readers' members then, its own
        # group's members then): a second look once either has grown
        self._kept_readers: dict[Nest, tuple[int, list, frozenset]] = {}

    def schedule_for(self, space) -> str:
        """The builder's first guess for a kernel over a reduced space (apply_schedule
        then chooses by extents and accesses): "row" for long reductions."""
        c = 1
        for e in space.reduced_extents:
            c *= resolve(e, self.dims, self.target)
        return "row" if c >= self.target.row_min_extent else "pointwise"

    # Price by facts kept per group where they describe the kernel (group_facts.py), and
    # by building it otherwise; True: do both and compare (tests).
    check_facts = False

    def _facts(self, group: Group):
        if not hasattr(group, "_facts"):
            parts = [p for p in group.parts if p.member_set <= group.member_set]
            versions = [self._facts(p) for p in parts]
            if any(v is None for v in versions):
                group._facts = None  # a part is not flat, so neither is the whole
            elif versions:  # the largest part's facts, with the other members added
                k = max(range(len(parts)), key=lambda i: versions[i].size)
                group._facts = self.facts.merged(
                    versions[k], group.member_set - parts[k].member_set, group.member_set)
            else:
                group._facts = self.facts.of(group.member_set)
        return group._facts

    def _built(self, group: Group, outs: list[Nest], name="kernel"):
        kernel = build_kernel(self.graph, group.members, outs, name, self.schedule_for,
                              self.dims if self.target.row_staged_stores else None)
        apply_schedule(kernel, self.dims, self.target)  # by extents and accesses
        from mlfuse.transforms.flatten_column_nests import flattened_columns, over_columns
        from mlfuse.transforms.flatten_row_nests import flattened
        flat, either = None, False  # the kernel as the pass after fusion rewrites it
        if kernel["schedule"] == "strips" and kernel.attributes.get("strip") == "rows":
            # nests over several axes (a whole tensor's, instance norm's [H, W]): a block
            # a row as strips over rows; flatten-row-nests may make a row kernel of them,
            # whose split plan spreads few rows over the GPU and whose variance is in the
            # mean's pass. A whole tensor's is priced so (one block otherwise: a loss
            # over [B, D] returning its prologue value); rows at the cheaper of the two
            # (instance norm over 4 rows of 512 x 512: 3 kernels priced as strips, 1 as
            # a row kernel; group norm over 256 rows of [32, 256, 64, 64] the other way,
            # one kernel of 0.150 ms on the H100, the row kernel's streaming price a split)
            flat = flattened(kernel, self.dims, self.target)
            either = bool(kernel.extent_list)
        if flat is None and over_columns(kernel):
            # nests over neighbouring axes (batch norm's [N, H, W] of NHWC) walked as one
            # loop: the column plans of one reduced axis (flatten-column-nests)
            flat = flattened_columns(kernel, self.dims, self.target)
        if flat is None:
            return kernel, kernel_cost(kernel, self.dims, self.target)
        cost = kernel_cost(flat, self.dims, self.target)
        flat.erase()
        if either:
            cost = min(cost, kernel_cost(kernel, self.dims, self.target),
                       key=lambda c: c.seconds(self.target))
        return kernel, cost

    def build(self, group: Group, groups=None, name="kernel"):
        """(kernel, cost) of ``group`` storing its outputs in ``groups``; the kernel is
        None where the cost came from the group's facts (``kernel`` builds it)."""
        outs = self.outputs(group, groups)
        key = (group.member_set, tuple(n.index for n in outs))
        if key not in self._cache:
            try:
                if self.limit is not None and len(group.members) > self.limit:
                    raise CannotFuse(f"--fuse-limit {self.limit} caps a kernel at {self.limit} ops")
                facts = self._facts(group)
                kernel, cost = None, (self.facts.cost(facts, outs)
                                      if facts is not None and outs else None)
                if cost is None or self.check_facts:
                    kernel, built = self._built(group, outs, name)
                    if cost is not None:
                        _same_cost(kernel, cost, built, facts)
                    cost = built
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

    def kernel(self, group: Group, groups=None) -> KernelOp:
        """The kernel of ``group`` (built now if it was priced by its facts)."""
        kernel, cost = self.build(group, groups)
        if kernel is None:
            outs = self.outputs(group, groups)
            kernel = self._built(group, outs)[0]
            key = (group.member_set, tuple(n.index for n in outs))
            self._cache[key] = (kernel, cost)
        return kernel

    def space(self, group: Group) -> tuple:
        """(extents, whether it reduces) of the group's kernel: its points before the
        schedule merged neighbouring axes (``coalesced``), so that a column reduction
        over [N, G, C/G] run as strips and one run as split-columns over [N, C] are
        one space (each schedule is the cost model's pick for the group alone; merged,
        the model picks again)."""
        kernel = self.build(group)[0]
        if kernel is None:
            return list(self._facts(group).extents), False
        merged = kernel.attributes.get("coalesced", [[e] for e in kernel["extents"]])
        extents = [e for axes in merged for e in axes]
        return extents, kernel["schedule"] != "pointwise"

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
        # a near tie (within 2%, well inside the model's error: docs/perf-notes.md, "The
        # cost model against measured times") goes to the kernel that moves fewer bytes
        # (a layernorm of a transposed input at 1024 x 1024: its strips' staged stores
        # priced 0.8% above a transpose kernel and a row kernel moving twice the bytes)
        if a >= b * (1.02 if after.bytes < before.bytes else 1.0):
            return False, (f"cost model: fused {a:.2f} us >= separate {b:.2f} us"
                           + self._walked_sums(touched_new, move)
                           + self._streamed_rows(touched_new, move)), b, a
        if a >= b:
            return True, (f"cost model: fused {a:.2f} us within 2% of separate {b:.2f} us, "
                          f"moving fewer bytes ({after.bytes} < {before.bytes})"), b, a
        return True, f"cost model: fused {a:.2f} us < separate {b:.2f} us", b, a

    def _walked_sums(self, groups: list[Group], move: Move) -> str:
        """Why a refused kernel was dear when it holds several sums of products (matmul,
        conv2d): no contraction kernel takes it, so one thread per point walks them."""
        for g in groups:
            kernel = self.build(g, move)[0] if self.outputs(g, move) else None
            count = len(sums_of_products(kernel)) if kernel is not None else 0
            if count > 1:
                return (f" ({count} sums of products in one kernel: not a contraction, one "
                        "thread per point would walk them)")
        return ""

    def _streamed_rows(self, groups: list[Group], move: Move) -> str:
        """Why a refused row kernel was dear: its rows pass what a block holds in
        registers, so it streams them (1024 threads' worth of blocks per SM, each later
        loop re-reading the row, from DRAM where the rows in flight pass L2), where separate
        kernels split each row across blocks and fill the GPU (few long rows with a
        broadcast-back epilogue: group norm, long-row softmax and layernorm)."""
        for g in groups:
            kernel = self.build(g, move)[0] if self.outputs(g, move) else None
            if kernel is not None and kernel["schedule"] == "row" and \
                    row_streamed(kernel, self.dims, self.target):
                return (" (the fused kernel would stream rows too long for registers, "
                        "1024 threads' worth of blocks per SM, each loop re-reading its row)")
        return ""

    # -- a pointwise op between two contractions -------------------------------------
    def _epilogue_homes(self, p: Nest) -> list[tuple[Nest, list[Nest]]]:
        """[(q, chain)]: the contraction-like nests whose results reach ``p`` through
        ``chain`` (pointwise nests, each its own group and read only inside the chain or
        by ``p``: a bias add, a residual add, an activation, or a pointwise graph such as
        ONNX's erf GELU, where the bias add feeds both the erf and the final product),
        each a place where ``p`` could run as q's epilogue. Where the chain branches (a
        residual add of two convs' results: the first block of a resnet stage), every q
        it reaches is a candidate, its chain all the branches' nests, the other q's
        results read from memory. A pointwise producer read outside the chain is an
        input of it (read from memory). Empty where a contraction on the way is shared,
        returned or no single sum of products, or the chain is more than 8 deep."""
        def own(x: Nest) -> bool:
            group = self.owner(x)  # (none: rematerialized into its readers)
            return group is not None and group.members == [x] and not self.graph.is_returned(x)

        # every pointwise nest within 8 producer steps of p, each its own group
        cone, frontier = set(), [p]
        for _ in range(8):
            following = [x for n in frontier for x in self.graph.producers(n)
                         if x.is_pointwise and own(x) and x not in cone]
            if not following:
                break
            cone.update(following)
            frontier = following
        else:
            return []
        # keep those read only inside the chain (or by p): drop the rest until none left
        while drop := {x for x in cone
                       if any(c is not p and c not in cone for c in self.graph.consumers(x))}:
            cone -= drop
        # reached: p and the chain's nests that p reaches through kept ones
        reached, frontier = set(), [p]
        while frontier:
            n = frontier.pop()
            for x in self.graph.producers(n):
                if x in cone and x not in reached:
                    reached.add(x)
                    frontier.append(x)
        chain = reached | {p}
        heavy = {x for n in chain for x in self.graph.producers(n) if not x.is_pointwise}
        if any(not own(x) or len(sums_of_products(x.op)) != 1
               or any(c not in chain for c in self.graph.consumers(x)) for x in heavy):
            return []
        between = sorted(reached, key=lambda n: n.index)
        return [(q, between) for q in sorted(heavy, key=lambda n: n.index)]

    def _in_prologue(self, p: Nest, groups: list[Group]) -> bool:
        """Whether a group of ``groups`` computes ``p`` inside a sum of products (a
        contraction's prologue: recomputed for each tile of the other operand)."""
        for g in groups:
            for c in self.graph.consumer_set(p) & g.member_set:
                for r in sums_of_products(c.op):
                    if any(o.operands and o.operands[0] is p.out for o in r.walk()):
                        return True
        return False

    def _epilogue_instead(self, p: Nest, move: Move, touched_new: list[Group]) -> str | None:
        """Why ``p`` should wait to join its producer contraction as an epilogue (run once
        per output) rather than take ``move`` into a contraction's prologue (run once per
        operand value and tile); None where the move is as good or the question does not
        arise. Both plans are priced over the same nests: the producer with the pointwise
        chain (and ``p`` in the second), and p's readers. Where the chain reaches several
        contractions (a residual add of two convs), each is priced as the epilogue's
        home, the others' raw results read once by it, and the cheapest is chosen: once
        ``p`` is kept, the others keep storing their raw results (``not_hosts``)."""
        homes = self._epilogue_homes(p)
        if not homes or not self._in_prologue(p, move.added):
            return None
        home = self.own_group(p)
        readers = [g for g in self.reader_groups(p) if p not in g.member_set]
        best, priced = None, {}
        for q, pointwise in homes:
            upstream = sorted([q, *pointwise], key=lambda n: n.index)  # program order
            producer = Group(upstream, upstream)
            joined = Group([*upstream, *home.members], [*upstream, *home.owned])
            if not self.acyclic(Move([self.own_group(n) for n in upstream] + [home], [joined])):
                continue  # a reader also feeds the chain: the epilogue plan is no plan
            plans = {}
            for name, groups in (("prologue", [producer, *touched_new]),
                                 ("epilogue", [joined, *readers])):
                try:
                    plans[name] = sum(self.build(g, groups)[1].seconds(self.target)
                                      for g in groups if self.outputs(g, groups)) * 1e6
                except CannotFuse:
                    break
            if "epilogue" in plans:
                priced[q] = plans["epilogue"]
            # of two homes as cheap, the later one: the greedy order's own choice
            if len(plans) == 2 and (best is None or plans["epilogue"] <= best[1]["epilogue"]):
                best = (q, plans)
        # within 5%: what the model leaves out of a prologue (its operand read without
        # 16-byte loads, its loads repeated for each tile) all favours the epilogue
        if best is None or best[1]["epilogue"] > best[1]["prologue"] * EPILOGUE_MARGIN:
            return None
        q, plans = best
        # where p is kept for q, the other contractions store their raw results
        self._chosen_host[p] = (q, [other for other, _ in homes if other is not q])
        others = "".join(f"; as {o.name}'s: {us:.2f} us" for o, us in priced.items() if o is not q)
        return (f"runs once as {q.name}'s epilogue ({plans['epilogue']:.2f} us{others}) rather "
                f"than in each tile of a contraction reading it ({plans['prologue']:.2f} us)")

    def plan_producer(self, p: Nest) -> None:
        readers = [g for g in self.reader_groups(p) if p not in g.member_set]
        if not readers:
            return
        if p in self.not_hosts:  # another contraction hosts the epilogue it reaches
            names = sorted({c.name for c in self.graph.consumers(p)})
            self.decisions.append(Decision(p.name, names, "kept", (
                f"stores its raw result: the epilogue after it runs in "
                f"{self.not_hosts[p].name}'s kernel, priced the cheaper home")))
            return
        home = self.own_group(p)
        names = sorted({c.name for c in self.graph.consumers(p)})
        tried = []

        # 1. one kernel for the producer and every reader
        merged = Group(_union(home.members, *[g.members for g in readers]),
                       _union(home.owned, *[g.owned for g in readers]), (home, *readers))
        move = Move([home] + readers, [merged])
        ok, why, b, a = self.try_move(move, [home] + readers, [merged])
        if ok and (later := self._epilogue_instead(p, move, [merged])):
            ok, why = False, later
        if ok:
            action = "multi-output" if self.needed(p, move) else "fused"
            self._accept(move, Decision(p.name, names, action, why, b, a))
            return
        tried.append(why)

        # 2. rematerialize a cheap producer in each reader
        if p.is_pointwise and len(home.members) == 1 and len(readers) > 1:
            new_readers = [Group(_union(g.members, [p]), g.owned, (g, home)) for g in readers]
            move = Move(readers, new_readers)
            touched_new = new_readers + ([home] if self.needed(p, move) else [])
            if not self.needed(p, move):
                move = Move(readers + [home], new_readers)
            ok, why, b, a = self.try_move(move, [home] + readers, touched_new)
            if ok and (later := self._epilogue_instead(p, move, touched_new)):
                ok, why = False, later
            if ok:
                self._accept(move, Decision(p.name, names, "rematerialized", why, b, a))
                return
            tried.append(why)

        # 3. join one reader as an extra output; the others read it from memory
        if len(readers) > 1:
            best = None
            for g in readers:
                move, ok, why, b, a = self._try_join(p, home, g)
                if ok and (best is None or a - b < best[3] - best[2]):
                    best = (move, why, b, a)
            if best is not None:
                self._accept(best[0], Decision(p.name, names, "multi-output", *best[1:]))
                self._join_more_readers(p, best[0].added[0])
                return
            tried.append(why)
        if p in self._chosen_host:  # kept for that contraction's epilogue
            q, others = self._chosen_host.pop(p)
            self.not_hosts.update({other: q for other in others})
        else:
            self._kept_readers[p] = (len(self.decisions), [g.member_set for g in readers],
                                     home.member_set)
        self.decisions.append(Decision(p.name, names, "kept", "; ".join(dict.fromkeys(tried))))

    def _join_more_readers(self, p: Nest, home: Group) -> None:
        """After ``p`` joined one reader group (multi-output), the other readers that its
        grown kernel can take too: a batch norm's mean, computed in the kernel of the
        variance's shift, also stored through ``reshape(m, [C])``, a kernel of its own
        otherwise. Each is a move of its own, priced as any other."""
        for g in [g for g in self.reader_groups(p) if p not in g.member_set]:
            move, ok, why, b, a = self._try_join(p, home, g)
            if ok:
                names = sorted({c.name for c in self.graph.consumers(p) if c in g.member_set})
                self._accept(move, Decision(p.name, names, "multi-output", why, b, a))
                home = move.added[0]

    def _try_join(self, p: Nest, home: Group, g: Group):
        """(move, ok, reason, before_us, after_us) of merging reader group ``g`` into
        ``p``'s group ``home`` (``p`` stored there for its other readers): priced, and
        refused where the epilogue it reaches has a cheaper home."""
        joined = Group(_union(home.members, g.members), _union(home.owned, g.owned), (home, g))
        move = Move([home, g], [joined])
        ok, why, b, a = self.try_move(move, [home, g], [joined])
        if ok and (later := self._epilogue_instead(p, move, [joined])):
            ok, why = False, later
        return move, ok, why, b, a

    def second_look(self) -> None:
        """Producers were planned last first, so a producer was priced against its readers
        as they were then: where a reader has grown since (joined by its other producers),
        the producer's moves are tried again against the grown groups. A masked mean pool
        ``sum(x*m, axis=1) / sum(m, axis=1)``: sum(m) was priced against the division
        alone (a kernel of B x D points each walking m: dearer than its own small
        kernel), before the division joined sum(x*m), whose kernel walks m's values as
        well. The same where the producer's own group has grown: a causal mask
        ``iota(..., 0) >= iota(..., 1)`` was priced as a reader of two index buffers, before
        the iotas joined it (then it reads nothing from memory). The new decision replaces
        the kept one."""
        for p, (at, before, home) in list(self._kept_readers.items()):
            readers = [g for g in self.reader_groups(p) if p not in g.member_set]
            grown = [g.member_set for g in readers] != before or \
                self.own_group(p).member_set != home
            if not grown or p in self.not_hosts:
                continue
            del self._kept_readers[p]
            old = self.decisions.pop(at)  # (each decision stays at its index)
            self.plan_producer(p)
            new = self.decisions.pop()
            if new.action == "kept":  # the first reason, which explain showed, stays
                new = old
            self.decisions.insert(at, new)

    def _accept(self, move: Move, decision: Decision) -> None:
        self.accept(move)
        self.decisions.append(decision)

    def horizontal(self) -> None:
        """Merge independent groups over the same iteration space into one launch."""
        changed = True
        while changed:
            changed = False
            groups = self.groups
            spaces = [self.space(g) for g in groups]
            alike: dict[str, list[int]] = {}  # the groups of one space, in order
            for i, space in enumerate(spaces):
                alike.setdefault(repr(space), []).append(i)
            for i, g1 in enumerate(groups):
                for j in alike[repr(spaces[i])]:
                    g2 = groups[j]
                    if j <= i or spaces[i] != spaces[j]:
                        continue
                    merged = Group(_union(g1.members, g2.members), _union(g1.owned, g2.owned),
                                   (g1, g2))
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
        self.second_look()
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
            deps = {id(owner[p]) for p in self.loaded(g) if owner.get(p) is not g}
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


def _union(*lists):
    return list(dict.fromkeys(chain.from_iterable(lists)))


def _same_cost(kernel: KernelOp, facts_cost, built, facts) -> None:
    """Planner.check_facts: the facts' price is the built kernel's."""
    fields = ("bytes_read", "bytes_written", "flops", "registers", "threads")
    got = [getattr(facts_cost, f) for f in fields] + [list(facts.extents), "pointwise"]
    want = [getattr(built, f) for f in fields] + [kernel["extents"], kernel["schedule"]]
    if got != want:
        raise AssertionError(f"group facts {got} differ from the built kernel's {want} "
                             f"({', '.join(kernel['sources'])})")


def _label(group: Group) -> str:
    return "+".join(n.name for n in group.members)


def rewrite(func: FuncOp, planner: Planner, groups: list[Group]) -> list[KernelOp]:
    """Replace the function's nests by one kernel per group, in order, and drop the
    allocations of buffers that no kernel writes any more."""
    live = {id(g) for g in groups}
    view = Move([g for g in planner.groups if id(g) not in live], [])  # the groups kept
    kernels = [planner.kernel(g, view) for g in groups]
    for entry in planner._cache.values():
        if not isinstance(entry, CannotFuse) and entry[0] is not None and entry[0] not in kernels:
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
