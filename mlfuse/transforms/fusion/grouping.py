"""The fusion planner's current grouping of nests into kernels, and what it knows of it.

The planner (fuse.py) tries thousands of moves on a program of thousands of ops, each
a change to the grouping (:class:`Move`: some groups leave, merged ones join). Every
fact it asks of a move (which buffers stay in memory, which group writes a buffer,
whether the kernel graph stays acyclic) is the current one corrected where the move
changes it, so trying a move costs what it touches, not the whole graph or the whole
group:

- each group knows the nests it reads from memory (``loaded``), made from its parts'
  when it merges them (a chain's growing group reads two buffers, whatever its length);
- a nest's writer and its computing groups are kept through *slots*: a merged group
  takes over the slot of its largest part and only the smaller parts' nests are
  re-pointed, so a merge costs the smaller side (union by size);
- a buffer is *needed* (stored) when returned or loaded by a group that does not
  compute it; the set of needed nests is kept, and a group's outputs are its owned
  nests in it or in the loads the move changes (set intersections, not a walk).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from itertools import chain

from mlfuse.transforms.fusion.graph import Nest, NestGraph


@dataclass(eq=False)
class Group:
    members: list[Nest]           # nests computed in this kernel (inlined or stored)
    owned: list[Nest]             # nests whose buffers this kernel writes, when needed
    parts: tuple = ()             # the groups it merges (its facts start from theirs)

    def __post_init__(self):
        self.member_set = frozenset(self.members)
        self.owned_set = frozenset(self.owned)

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


class Grouping:
    """The current grouping (``groups``, in order: kept groups, then those moves added)
    and its facts, kept up to date by ``accept``."""

    def __init__(self, graph: NestGraph):
        self.graph = graph
        self._live: dict[int, Group] = {}            # id -> group, in order
        self._stamps = 0                             # a group's place in that order
        self._owner: dict[Nest, list] = {}           # nest -> slot of the group writing it
        self._computed_by: dict[Nest, list] = {n: [] for n in graph.nests}  # slots
        self._memory_readers: dict[Nest, int] = {n: 0 for n in graph.nests}  # groups loading it
        self._needed: set[Nest] = {n for n in graph.nests if graph.is_returned(n)}
        self.reranks = 0                             # times the order was made afresh
        singletons = [Group([n], [n]) for n in graph.nests]
        for g in singletons:
            g._rank = g.members[0].index  # program order is a topological order
        self.accept(Move([], singletons))

    @property
    def groups(self) -> list[Group]:
        return list(self._live.values())

    def loaded(self, group: Group) -> list[Nest]:
        """The nests whose buffers ``group`` loads: a member reads them and ``group``
        does not compute them."""
        loaded = getattr(group, "_loaded", None)
        if loaded is None:
            parts = [p for p in group.parts if p.member_set <= group.member_set]
            if parts:  # what a part loads, unless another part computes it
                rest = sorted(group.member_set.difference(*(p.member_set for p in parts)),
                              key=lambda n: n.index)
                found = chain((n for p in parts for n in self.loaded(p)),
                              (p for m in rest for p in self.graph.producers(m)))
            else:
                found = (p for m in group.members for p in self.graph.producers(m))
            loaded = group._loaded = list(dict.fromkeys(
                n for n in found if n not in group.member_set))
            group._loaded_set = frozenset(loaded)
        return loaded

    def _loaded_set(self, group: Group) -> frozenset:
        self.loaded(group)
        return group._loaded_set

    def _reads_from_memory(self, group: Group, nest: Nest) -> bool:
        return nest not in group.member_set and \
            not group.member_set.isdisjoint(self.graph.consumer_set(nest))

    # -- changing the grouping -----------------------------------------------------
    def accept(self, move: Move) -> None:
        for sign, groups in ((-1, move.removed), (1, move.added)):
            for g in groups:
                for p in self.loaded(g):
                    count = self._memory_readers[p] = self._memory_readers[p] + sign
                    if count:
                        self._needed.add(p)
                    elif not self.graph.is_returned(p):
                        self._needed.discard(p)
        taken = set()
        for g in move.added:
            parts = [p for p in g.parts if id(p) in move.removed_ids and id(p) not in taken]
            base = max(parts, key=lambda p: len(p.members), default=None)
            if base is None:
                slot, members, owned = [g], g.member_set, g.owned_set
            else:  # g takes over its largest part's slot: only the others' nests move
                taken.add(id(base))
                slot = base._slot
                slot[0] = g
                members, owned = g.member_set - base.member_set, g.owned_set - base.owned_set
                self._leave(slot, base.member_set - g.member_set, base.owned_set - g.owned_set)
            g._slot = slot
            for n in members:
                self._computed_by[n].append(slot)
            for n in owned:
                self._owner[n] = slot
        for g in move.removed:
            if id(g) not in taken:
                self._leave(g._slot, g.members, g.owned)
            del self._live[id(g)]
        for g in move.added:
            self._live[id(g)] = g
            g._stamp = self._stamps
            self._stamps += 1
        self._place(move)

    # -- a topological order of the kernel graph -------------------------------------
    # Each group has a rank, lower than the ranks of the groups that read what it
    # stores. A cycle through a merged group must come back to one of its predecessors,
    # so the search for one never passes a group ranked above them all (acyclic).
    def _bounds(self, g: Group) -> tuple:
        """(highest rank of a group ``g`` reads from, lowest of a group reading ``g``)."""
        lo = max((o._rank for o in (self._owner[n][0] for n in self.loaded(g) if n in self._owner)
                  if o is not g and hasattr(o, "_rank")), default=-1)
        hi = min((h._rank for h in self._successors(
            g, g.owned_set & self._needed, lambda n: self._owner[n][0] if n in self._owner
            else None, lambda n: [s[0] for s in self._computed_by[n]]) if hasattr(h, "_rank")),
            default=float("inf"))
        return lo, hi

    def _place(self, move: Move) -> None:
        """Rank the added groups: each takes the rank of a part it replaces that lies
        between its neighbours' (always so for a chain), else all are ranked afresh."""
        for g in move.added:
            if not hasattr(g, "_rank"):
                lo, hi = self._bounds(g)
                fits = [p._rank for p in g.parts if id(p) in move.removed_ids and lo < p._rank < hi]
                if not fits:
                    return self._rerank()
                g._rank = fits[0]
        for g in move.added:  # placed one at a time: check them against each other
            lo, hi = self._bounds(g)
            if not lo < g._rank < hi:
                return self._rerank()

    def _rerank(self) -> None:
        """Rank every group afresh in a topological order (Kahn's), ties by old rank."""
        self.reranks += 1
        groups = self.groups
        readers: dict[int, list[Group]] = {id(g): [] for g in groups}
        waiting = {}
        for g in groups:
            writers = {id(self._owner[n][0]) for n in self.loaded(g) if n in self._owner} - {id(g)}
            waiting[id(g)] = len(writers)
            for w in writers:
                readers[w].append(g)
        ready = [(getattr(g, "_rank", float("inf")), g._stamp, g) for g in groups
                 if not waiting[id(g)]]
        heapq.heapify(ready)
        rank = 0
        while ready:
            g = heapq.heappop(ready)[2]
            g._rank, rank = rank, rank + 1
            for r in readers[id(g)]:
                waiting[id(r)] -= 1
                if not waiting[id(r)]:
                    heapq.heappush(ready, (getattr(r, "_rank", float("inf")), r._stamp, r))

    def _leave(self, slot: list, members, owned) -> None:
        for n in members:
            self._computed_by[n].remove(slot)
        for n in owned:
            if self._owner.get(n) is slot:
                del self._owner[n]

    # -- facts about a grouping ----------------------------------------------------
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
            count += sum(nest in self._loaded_set(g) for g in groups.added)
            count -= sum(nest in self._loaded_set(g) for g in groups.removed)
        return count > 0

    def outputs(self, group: Group, groups=None) -> list[Nest]:
        """The owned nests ``group`` stores (needed), in program order."""
        if isinstance(groups, list):
            return [n for n in group.owned if self.needed(n, groups)]
        found = group.owned_set & self._needed
        if groups is not None:  # a move changes only what its groups load
            for g in groups.added + groups.removed:
                found |= group.owned_set & self._loaded_set(g)
        return sorted((n for n in found if self.needed(n, groups)), key=lambda n: n.index)

    def own_group(self, nest: Nest) -> Group:
        return self._owner[nest][0]

    def owner(self, nest: Nest) -> Group | None:
        """The group that owns ``nest``; None where none does (a producer computed
        inside each of its readers' groups, whose buffer no kernel writes)."""
        slot = self._owner.get(nest)
        return None if slot is None else slot[0]

    def reader_groups(self, nest: Nest) -> list[Group]:
        """The groups computing a consumer of ``nest``, in the order of self.groups."""
        found = {id(s[0]): s[0] for c in self.graph.consumers(nest) for s in self._computed_by[c]}
        return sorted(found.values(), key=lambda g: g._stamp)

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
            if any(p not in owner for p in self.loaded(g)):
                return False
        return not has_cycle(groups, lambda g: self._successors(
            g, g.owned, owner.get, computed_by.get))

    def _successors(self, group: Group, stored, owner_of, computed_by):
        """Groups that load a buffer of ``stored`` that ``group`` writes
        (``owner_of``/``computed_by`` tell the grouping)."""
        for n in stored:
            if owner_of(n) is not group or self.graph.writer.get(id(n.out)) is not n:
                continue
            for c in self.graph.consumers(n):
                for h in computed_by(c) or ():
                    if h is not group and n not in h.member_set:
                        yield h

    def _move_acyclic(self, move: Move) -> bool:
        removed = move.removed_ids

        def owner_of(n):
            for g in move.added:
                if n in g.owned_set:
                    return g
            slot = self._owner.get(n)
            return None if slot is None or id(slot[0]) in removed else slot[0]

        def computed_by(n):
            kept = [s[0] for s in self._computed_by[n] if id(s[0]) not in removed]
            return kept + [g for g in move.added if n in g.member_set]

        # every buffer read from memory keeps a writer: the added groups' reads, and
        # the readers of buffers whose writer left
        for g in move.added:
            if any(owner_of(p) is None for p in self.loaded(g)):
                return False
        for g in move.removed:
            for n in g.owned_set.difference(*(a.owned_set for a in move.added)):
                slot = self._owner.get(n)
                if slot is not None and slot[0] is g and \
                        any(self._reads_from_memory(h, n) for c in self.graph.consumers(n)
                            for h in computed_by(c)):
                    return False
        # the grouping was acyclic, so a new cycle runs through an added group; only
        # buffers read from memory lead to another group: those needed now, or loaded
        # by a group of the move
        changed = [self._loaded_set(g) for g in move.added + move.removed]
        added = {id(g) for g in move.added}
        bound = max((o._rank for g in move.added for o in map(owner_of, self.loaded(g))
                     if id(o) not in added), default=-1)

        def successors(g):
            stored = g.owned_set & self._needed
            stored = stored.union(*(g.owned_set & c for c in changed)) if changed else stored
            return (h for h in self._successors(g, stored, owner_of, computed_by)
                    if id(h) in added or h._rank <= bound)
        return not has_cycle(move.added, successors)


def has_cycle(starts, successors) -> bool:
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
