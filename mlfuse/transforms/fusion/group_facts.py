"""The cost facts of a fused group of elementwise nests, kept without building its kernel.

The planner prices every candidate merge by the kernel it would make. Building that
kernel from the group's nests costs the size of the group, and a chain of elementwise
ops grows one group by one nest per merge, so pricing by building was quadratic in
the length of the chain (1000 statements: 48 s). For a *flat* group the kernel is
known without building it: every member is an elementwise nest (one block, pure ops,
one store) over the same extents, reading the members it reads at its own point. Its
kernel is then the members' bodies in program order, each read of a member replaced
by that member's value, identical pure ops merged (CSE), nothing dead; and what the
cost model reads of it (``cost.kernel_cost``) is:

- which ops remain: classes of identical ops, found by value numbering with
  union-find (congruence closure), so that putting a producer into a group merges its
  ops into the group's classes instead of renumbering the group;
- the buffers the remaining loads read, and how many remaining ops compute;
- where each remaining value is defined and last used, in body order, for
  ``cost.live_registers``' linear scan (counted with sorted arrays).

A group's facts are the largest merged group's plus the ops of the other members, so a
merge costs what it adds. One :class:`Facts` object holds the tables; each group's
:class:`Version` of them is either that object or the changes that lead to it from
another version, and reading a version moves the object there (Baker's rerooting: the
changes on the way are undone or redone, each recording its inverse). So trying many
merges onto one group, or going back to it, copies nothing. A group that is not flat
(reductions, reads at other indices, inner loops, dead members) gets ``None`` and is
priced by building its kernel, as before. ``Planner.check_facts`` prices both ways and
compares them (in the tests).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, StoreOp
from mlfuse.hardware import Target
from mlfuse.ir.core import Value
from mlfuse.ir.printer import format_attr_value
from mlfuse.ir.traits import PURE, SCALAR_COMPUTE
from mlfuse.ir.types import INDEX

from mlfuse.transforms.fusion.cost import KernelCost, buffer_bytes, resolve
from mlfuse.transforms.fusion.graph import Nest, NestGraph


@dataclass(frozen=True)
class TemplateOp:
    """One op of a nest's body: ``refs`` name its operands (>= 0: an earlier op of the
    body; < 0: a leaf, a point index or a value from outside the nest)."""
    static: tuple                 # name, attributes, result types: the CSE key less operands
    refs: tuple
    compute: bool                 # counted as a flop by the cost model
    buffer: Value | None          # the buffer a load reads
    member_load: Nest | None      # a load of this producer's buffer at the nest's own point


@dataclass(frozen=True)
class Template:
    ops: tuple
    root: int                     # the op whose value the nest stores
    extents: tuple
    bad_reads: frozenset          # producers read elsewhere than at the point (broadcast)


_MISSING = object()


class _Dict(dict):
    """A dict whose changes are written to its Facts' log (when one is open)."""
    __slots__ = ("_facts",)

    def __init__(self, facts):
        super().__init__()
        self._facts = facts

    def __setitem__(self, key, value):
        log = self._facts._log
        if log is not None:
            log.append((self, key, dict.get(self, key, _MISSING)))
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        log = self._facts._log
        if log is not None:
            log.append((self, key, dict.__getitem__(self, key)))
        dict.__delitem__(self, key)

    def pop(self, key, *default):
        if key not in self:
            return default[0] if default else dict.pop(self, key)
        value = dict.__getitem__(self, key)
        del self[key]
        return value

    def undo(self, key, old) -> None:
        if old is _MISSING:
            del self[key]
        else:
            self[key] = old


class _Set(set):
    __slots__ = ("_facts",)

    def __init__(self, facts):
        super().__init__()
        self._facts = facts

    def add(self, x):
        if self._facts._log is not None:
            self._facts._log.append((self, x, x in self))
        set.add(self, x)

    def discard(self, x):
        if self._facts._log is not None:
            self._facts._log.append((self, x, x in self))
        set.discard(self, x)

    def undo(self, x, was_in) -> None:
        if was_in:
            self.add(x)
        else:
            self.discard(x)


class Facts:
    """Value numbering of one flat group's kernel body (see the module doc); changes to
    it are logged, so that a :class:`Version` can undo them."""
    _SCALARS = ("members", "extents", "bytes_read", "flops", "bad_targets")

    def __init__(self):
        self._log: list | None = None
        self.members: frozenset = frozenset()
        self.extents: tuple | None = None
        self.table = _Dict(self)         # (static, operand classes) -> class
        self.key_of = _Dict(self)        # class -> its key
        self.parent = _Dict(self)        # class merged away -> the class it joined
        self.first = _Dict(self)         # class -> position of its first op (the one kept)
        self.last = _Dict(self)          # class -> position of its last use (same key order)
        self.users = _Dict(self)         # class -> classes whose ops use it (a tuple)
        self.op_of = _Dict(self)         # class -> its TemplateOp
        self.buffers = _Dict(self)       # id(buffer) -> loads of it
        self.bytes_read = 0
        self.flops = 0                   # ops that compute, per point
        self.roots = _Dict(self)         # member -> the class of its value
        self.member_loads = _Dict(self)  # non-member producer -> classes loading it at the point
        self.unread = _Set(self)         # members no other member reads
        self.bad_targets: frozenset = frozenset()

    def __setattr__(self, name, value):
        if name in Facts._SCALARS and self._log is not None:
            self._log.append((self, name, getattr(self, name)))
        object.__setattr__(self, name, value)

    def undo(self, name, old) -> None:
        setattr(self, name, old)

    def replay(self, log: list) -> list:
        """Undo ``log`` (changes in the order made); returns the log that redoes it."""
        self._log = inverse = []
        for container, key, old in reversed(log):
            container.undo(key, old)
        self._log = None
        return inverse

    def find(self, c: int) -> int:
        parent = self.parent
        while c in parent:
            c = parent[c]
        return c


class Version:
    """One group's facts: ``facts`` when this version holds the tables, else ``log``,
    the changes made going from this version to ``next``."""
    __slots__ = ("facts", "next", "log", "extents", "size")

    def __init__(self, facts: Facts, size: int):
        self.facts, self.next, self.log = facts, None, None
        self.extents, self.size = facts.extents, size

    def tables(self) -> Facts:
        """The tables, moved to this version (Baker's rerooting)."""
        path, v = [], self
        while v.facts is None:
            path.append(v)
            v = v.next
        for w in reversed(path):  # w.next holds the tables: undo w's changes
            holder = w.next
            inverse = holder.facts.replay(w.log)
            w.facts, w.next, w.log = holder.facts, None, None
            holder.facts, holder.next, holder.log = None, w, inverse
        return self.facts


class GroupFacts:
    """Builds and prices :class:`Facts` for the planner: nests' templates, leaves and
    class numbers are shared by every group of one function."""

    def __init__(self, graph: NestGraph, dims: dict, target: Target):
        self.graph, self.dims, self.target = graph, dims, target
        # positions in a kernel body: a member's ops in order, then its store
        self.stride = max((len(n.op.body.ops) for n in graph.nests), default=0) + 2
        self._templates: dict[Nest, Template | None] = {}
        self._leaves: dict = {}
        self._classes = 0
        self._bytes: dict[int, int] = {}

    # -- templates ---------------------------------------------------------------
    def template(self, nest: Nest) -> Template | None:
        if nest not in self._templates:
            self._templates[nest] = self._make_template(nest)
        return self._templates[nest]

    def _leaf(self, key) -> int:
        return self._leaves.setdefault(key, -1 - len(self._leaves))

    def _make_template(self, nest: Nest) -> Template | None:
        """The nest's body as template ops, or None when it is not one flat block of
        pure ops ending in its store, every op feeding the stored value."""
        if nest.out is None or not nest.is_pointwise:
            return None
        body = nest.op.body
        args = list(body.args)
        position = {id(a): self._leaf(("point", k)) for k, a in enumerate(args)}
        local: dict[int, int] = {}
        ops, bad, root = [], set(), None
        for op in body.ops:
            if root is not None:
                return None  # ops after the store
            if isinstance(op, StoreOp):
                if op.operands[1] is not nest.out or id(op.operands[0]) not in local:
                    return None
                root = local[id(op.operands[0])]
                continue
            if op.regions or len(op.results) != 1 or not op.has_trait(PURE):
                return None
            refs = tuple(local[id(v)] if id(v) in local else position[id(v)] if id(v) in position
                         else self._leaf(("value", id(v))) for v in op.operands)
            buffer = member_load = None
            if isinstance(op, MaskedLoadOp):
                return None
            if isinstance(op, LoadOp):
                # indices in the point's order (a broadcast drops some): no index
                # arithmetic and no permuted read, which other schedules price
                axes = [args.index(v) if any(v is a for a in args) else -1
                        for v in op.operands[1:]]
                if -1 in axes or axes != sorted(set(axes)):
                    return None
                buffer = op.operands[0]
                producer = self.graph.writer.get(id(buffer))
                if producer is not None:
                    if len(axes) == len(args) and producer.index < nest.index:
                        member_load = producer
                    else:
                        bad.add(producer)
            attrs = tuple(sorted((k, format_attr_value(v)) for k, v in op.attributes.items()))
            result = op.results[0]
            static = (op.name, attrs, str(result.type))
            compute = op.has_trait(SCALAR_COMPUTE) and bool(op.operands) and result.type != INDEX
            local[id(result)] = len(ops)
            ops.append(TemplateOp(static, refs, compute, buffer, member_load))
        if root is None:
            return None
        reached = {root}
        for j in range(len(ops) - 1, -1, -1):
            if j in reached:
                reached.update(r for r in ops[j].refs if r >= 0)
        if len(reached) != len(ops):
            return None  # a dead op: the kernel's dead-code removal would change the picture
        return Template(tuple(ops), root, tuple(nest.extents), frozenset(bad))

    # -- facts of groups -----------------------------------------------------------
    def of(self, members: frozenset) -> Version | None:
        return self.merged(Version(Facts(), 0), members, members)

    def merged(self, base: Version, added, everyone: frozenset) -> Version | None:
        """The facts of the group ``everyone``: ``base``'s group with the nests of
        ``added`` (those it has already are skipped); None when it is not flat."""
        f = base.tables()
        new = sorted({m for m in added if m not in f.members}, key=lambda n: n.index)
        if not new:
            return base
        templates = []
        extents = f.extents
        for m in new:
            t = self.template(m)
            if t is None or (extents is not None and t.extents != extents) or \
                    not t.bad_reads.isdisjoint(everyone) or m in f.bad_targets:
                return None
            extents = t.extents
            templates.append(t)
        f._log = log = []
        f.members, f.extents = everyone, extents
        f.bad_targets = f.bad_targets.union(*(t.bad_reads for t in templates))
        for m, t in zip(new, templates):
            self._insert(f, m, t)
        for m in new:
            for load in f.member_loads.pop(m, ()):
                self._substitute(f, f.find(load), f.find(f.roots[m]))
            if everyone.isdisjoint(self.graph.consumer_set(m)):
                f.unread.add(m)
        for m in new:
            for p in self.graph.producers(m):
                f.unread.discard(p)
        f._log = None
        version = Version(f, len(everyone))
        base.facts, base.next, base.log = None, version, log
        return version

    def _buffer_bytes(self, buffer: Value) -> int:
        size = self._bytes.get(id(buffer))
        if size is None:
            size = self._bytes[id(buffer)] = buffer_bytes(buffer.type, self.dims, self.target)
        return size

    def _count_op(self, f: Facts, op: TemplateOp, sign: int) -> None:
        f.flops += sign * op.compute
        if op.buffer is not None:
            n = f.buffers.get(id(op.buffer), 0) + sign
            if n:
                f.buffers[id(op.buffer)] = n
            else:
                del f.buffers[id(op.buffer)]
            if n == (1 if sign > 0 else 0):
                f.bytes_read += sign * self._buffer_bytes(op.buffer)

    def _insert(self, f: Facts, m: Nest, t: Template) -> None:
        local: list[int] = []
        at = m.index * self.stride
        for j, op in enumerate(t.ops):
            if op.member_load is not None and op.member_load in f.members:
                local.append(f.find(f.roots[op.member_load]))
                continue
            operands = tuple(f.find(local[r]) if r >= 0 else r for r in op.refs)
            key = (op.static, operands)
            c = f.table.get(key)
            if c is not None:
                c = f.find(c)
                if at + j < f.first[c]:
                    self._move_first(f, c, at + j)
            else:
                self._classes += 1
                c = self._classes
                f.table[key], f.key_of[c], f.op_of[c] = c, key, op
                f.first[c] = f.last[c] = at + j
                f.users[c] = ()
                for o in set(operands):
                    if o > 0:
                        f.users[o] += (c,)
                        f.last[o] = max(f.last[o], at + j)
                self._count_op(f, op, 1)
                if op.member_load is not None:
                    f.member_loads[op.member_load] = f.member_loads.get(op.member_load, ()) + (c,)
            local.append(c)
        f.roots[m] = f.find(local[t.root])

    def _relast(self, f: Facts, c: int) -> None:
        f.last[c] = max((f.first[f.find(u)] for u in f.users[c]), default=f.first[c])

    def _move_first(self, f: Facts, c: int, position: int) -> None:
        """Class ``c``'s op is now kept at an earlier ``position``; its op at the old one
        is gone, and so are its operands' uses there."""
        old = f.first[c]
        f.first[c] = position
        if not f.users[c]:
            f.last[c] = position
        for o in set(f.key_of[c][1]):
            if o > 0 and f.last[f.find(o)] == old:
                self._relast(f, f.find(o))

    def _substitute(self, f: Facts, load: int, value: int) -> None:
        """A member's value replaces the loads of its buffer (the member joined)."""
        f.parent[load] = value
        key = f.key_of.pop(load)
        if f.table.get(key) == load:
            del f.table[key]
        f.first.pop(load)
        last = f.last.pop(load)
        users = f.users.pop(load)
        self._count_op(f, f.op_of.pop(load), -1)
        if users:
            f.last[value] = max(f.last[value] if f.users[value] else -1, last)
            f.users[value] += users
        self._rekey_all(f, users)

    def _rekey_all(self, f: Facts, users) -> None:
        """Renumber the keys of ``users`` (an operand's class went); keys that now
        meet an identical op's merge the two, whose users are renumbered in turn."""
        todo, pending = list(users), []
        while todo or pending:
            if todo:
                self._rekey(f, todo.pop(), pending)
                continue
            a, b = (f.find(x) for x in pending.pop())
            if a != b:
                todo.extend(self._union(f, a, b))

    def _rekey(self, f: Facts, u: int, pending: list) -> None:
        u = f.find(u)
        old = f.key_of[u]
        new = (old[0], tuple(f.find(x) if x > 0 else x for x in old[1]))
        if new == old:
            return
        if f.table.get(old) == u:
            del f.table[old]
        f.key_of[u] = new
        other = f.table.get(new)
        if other is None or f.find(other) == u:
            f.table[new] = u
        else:
            pending.append((u, other))

    def _union(self, f: Facts, a: int, b: int) -> tuple:
        """Merge the identical classes ``a`` and ``b``: one op, at the earlier
        position. Returns the users whose keys named the class that went."""
        if len(f.users[a]) < len(f.users[b]):
            a, b = b, a
        f.parent[b] = a
        key_b = f.key_of.pop(b)
        if f.table.get(key_b) == b:
            del f.table[key_b]
        fa, fb = f.first[a], f.first.pop(b)
        la, lb = f.last[a], f.last.pop(b)
        ua, ub = f.users[a], f.users.pop(b)
        self._count_op(f, f.op_of.pop(b), -1)
        f.first[a] = min(fa, fb)
        f.last[a] = max(f.first[a], la if ua else -1, lb if ub else -1)
        f.users[a] = ua + ub
        gone = max(fa, fb)  # the op at this position is dropped: its operand uses too
        for o in set(f.key_of[a][1]):
            if o > 0 and f.last[f.find(o)] == gone:
                self._relast(f, f.find(o))
        key = (f.key_of[a][0], tuple(f.find(x) if x > 0 else x for x in f.key_of[a][1]))
        f.key_of[a] = key
        f.table[key] = a
        return ub

    # -- the cost model's numbers ---------------------------------------------------
    def cost(self, version: Version, outputs: list[Nest]) -> KernelCost | None:
        """``kernel_cost`` of the kernel storing ``outputs``, or None where the facts
        do not describe it (a member nothing uses would be dead code)."""
        f = version.tables()
        if not f.unread.issubset(outputs):
            return None
        points = math.prod(resolve(e, self.dims, self.target) for e in f.extents)
        written = {id(n.out): self._buffer_bytes(n.out) for n in outputs}
        return KernelCost(bytes_read=f.bytes_read, bytes_written=sum(written.values()),
                          flops=f.flops * points, registers=self._registers(f, outputs),
                          threads=points).with_time(self.target)

    def _registers(self, f: Facts, outputs: list[Nest]) -> int:
        """``cost.live_registers`` of the body: at each op, the values defined before it
        and used at or after it, most at once, plus the point indices."""
        stores: dict[int, int] = {}  # class -> position of its last store
        positions = []
        for n in outputs:
            r = f.find(f.roots[n])
            positions.append(n.index * self.stride + self.stride - 1)
            stores[r] = max(stores.get(r, -1), positions[-1])
        # a store extends its value's life from its last use to the store
        extra = [(f.last[r], s) for r, s in stores.items() if s > f.last[r]]
        first = np.fromiter(f.first.values(), np.int64, len(f.first))
        last = np.fromiter(f.last.values(), np.int64, len(f.last))
        starts = np.sort(np.concatenate([first, [a for a, _ in extra]]).astype(np.int64))
        ends = np.sort(np.concatenate([last, [b for _, b in extra]]).astype(np.int64))
        at = np.concatenate([first, positions]).astype(np.int64)
        if not len(at):
            return len(f.extents)
        live = np.searchsorted(starts, at) - np.searchsorted(ends, at)
        return len(f.extents) + max(0, int(live.max()))
