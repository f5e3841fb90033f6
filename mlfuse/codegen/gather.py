"""A SIMT contraction tile's gathered operand, addressed once per tile instead of per K step.

A gathered operand (conv's im2col side, an operand behind a prologue: any operand that
is not one plain load) is computed value by value from the IR. A thread's groups keep
their own-axis position (a conv's output pixel) for the whole K loop: group ``e`` of a
step sits at ``m0 + e // (BK / 4)`` (A) or ``n0 + e % BN`` (B) whatever the step. So the
gather's ops split in two (``plan_gather``):

- **per position** (``hoisted``): the ops that do not read a reduction index: the
  unravel of the pixel (two 64-bit divmods for a conv), ``i2 * stride - pad``, and each
  load's part of its offset from the indices that do not move with K (``base``: the
  batch image's start). Computed once per tile for each of the thread's group slots and
  kept in registers (``cuda.local.array(GROUPS)`` indexed by the unrolled slot);
- **per value** (``per_value``): the rest, with the reduction indices unravelled once
  a group (unsigned 32-bit divmods by constants where K fits) and counted up per value.
  Each load reads its buffer's flat view (``_flat``, every kernel buffer is
  C-contiguous) at ``base + sum(index * stride)`` over the indices that move with K:
  unsigned, so Numba emits no wraparound code.

Index ops whose range (from the static extents: ``index_range``) fits 32 bits are
computed in int32, so the tap's row and column, their bounds checks and the offset are
32-bit instructions where Numba would type every index int64; the whole offset is
32-bit where the buffer has fewer than 2**31 elements, else a 64-bit base plus a 32-bit
step where the moving indices' part fits. SASS of resnet18's 64 -> 64 3x3 conv at 64 x
128: see docs/perf-notes.md.

Codegen's, not an IR pass's: which op runs where is a property of the tile's loop
structure, which the IR does not model (as flat_rows.py and addressing.py).
"""
from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from mlfuse.dialects.arith import SCALAR_OPS, ConstantOp, FloorDivOp, ModOp
from mlfuse.dialects.contraction import arg_deps
from mlfuse.dialects.loops import DimOp, LoadOp, MaskedLoadOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.traits import SCALAR_COMPUTE
from mlfuse.ir.types import INDEX

from mlfuse.codegen.scalar import SHARED_TYPE
from mlfuse.codegen.simt_fetch import INT32_MAX, count_up, narrow_buffer, stride_code

_FREE = (ConstantOp, DimOp)  # named wherever used: no register kept for them
_LOADS = (LoadOp, MaskedLoadOp)


@dataclass
class FlatLoad:
    """A load of the gather at ``base + step``: ``base`` from the indices (axis, value)
    that do not move with K, once per tile; ``steps`` the rest, per value."""

    buf: Value
    base: list[tuple[int, Value]]
    steps: list[tuple[int, Value]]
    narrow: bool  # the whole offset in 32 bits (a static shape under 2**31 elements)
    narrow_step: bool  # the moving indices' part in 32 bits


@dataclass
class GatherPlan:
    side: str
    value: Value
    hoisted: list[Operation]
    frontier: list[Value]  # hoisted values the per-value ops read (registers per slot)
    per_value: list[Operation]
    loads: dict[tuple, FlatLoad]
    narrow: set[int]  # ids of per-value index ops computed in int32
    narrow_k: bool  # K fits 32 bits: the reduction indices unsigned-divided, counted in int32
    # a factory condition under which the tile gathers this way ("" always): a 64-bit
    # base per slot is two more registers, which 128 x 128 (64 accumulators) spills
    guard: str = ""
    # emission's names: value id -> its per-slot array; the flat views, each load's base
    # array, the K each slot gathers to, the group's count of values inside K, the
    # reduction indices' own names and the divmod's remainder
    names: dict = field(default_factory=dict)
    views: dict = field(default_factory=dict)
    bases: dict = field(default_factory=dict)
    k_end: str = ""
    left: str = ""
    taps: list = field(default_factory=list)
    rest: str = ""


def access_key(buf: Value, indices) -> tuple:
    return (id(buf), tuple(id(v) for v in indices))


def _load_parts(op: Operation) -> tuple[Value, list[Value]]:
    return op.operands[0], list(op.operands[2:] if isinstance(op, MaskedLoadOp) else op.operands[1:])


def index_range(v: Value, known: dict[int, tuple[int, int]], memo: dict) -> tuple | None:
    """(lo, hi) bounds of index value ``v`` from the bounds ``known`` of block arguments;
    None where unknown (a symbolic extent, an op not modelled)."""
    if id(v) in memo:
        return memo[id(v)]
    memo[id(v)] = None
    op = getattr(v, "op", None)
    r = known.get(id(v))
    if r is None and op is not None and v.type == INDEX:
        if isinstance(op, ConstantOp):
            r = (int(op["value"]), int(op["value"]))
        elif isinstance(op, (FloorDivOp, ModOp)):
            a, d = (index_range(x, known, memo) for x in op.operands)
            if a is not None and d is not None and d[0] == d[1] and d[0] > 0:
                r = ((a[0] // d[0], a[1] // d[0]) if isinstance(op, FloorDivOp)
                     else (0, d[0] - 1))
        elif type(op) in _BINARY and len(op.operands) == 2:
            a, b = (index_range(x, known, memo) for x in op.operands)
            if a is not None and b is not None:
                r = _BINARY[type(op)](a, b)
    memo[id(v)] = r
    return r


def _corners(f):
    return lambda a, b: (min(f(x, y) for x in a for y in b), max(f(x, y) for x in a for y in b))


_BINARY = {SCALAR_OPS["add"]: _corners(lambda x, y: x + y),
           SCALAR_OPS["sub"]: _corners(lambda x, y: x - y),
           SCALAR_OPS["mul"]: _corners(lambda x, y: x * y),
           SCALAR_OPS["minimum"]: _corners(min), SCALAR_OPS["maximum"]: _corners(max)}


def _fits(r) -> bool:
    return r is not None and -INT32_MAX <= r[0] and r[1] <= INT32_MAX


def plan_gather(kernel: Operation, side: str, value: Value, own: list[Value],
                bounds: dict[int, tuple[int, int]], k_vals: list[Value], k_extents: list,
                named: set[int]) -> GatherPlan | None:
    """How to gather ``value`` (a side's operand) per tile and per value; None where the
    slice has ops this does not handle (the caller then gathers as before). ``own``: the
    side's own-axis indices; ``bounds``: static (lo, hi) of the kernel's and the
    reduction's indices; ``named``: ids of ops already named (per batch index)."""
    seen: set[int] = set()

    def need(v: Value) -> bool:
        op = getattr(v, "op", None)
        if op is None or id(op) in seen or id(op) in named or \
                not any(a is kernel for a in op.ancestors()):
            return True
        seen.add(id(op))
        if not (op.has_trait(SCALAR_COMPUTE) or isinstance(op, _LOADS + (DimOp,))) or op.regions:
            return False
        return all(need(x) for x in op.operands[1:] if isinstance(op, _LOADS)) if \
            isinstance(op, _LOADS) else all(need(x) for x in op.operands)

    if not need(value):
        return None
    ops = [op for op in kernel.walk() if id(op) in seen]
    memo: dict = {}
    k_ids, allowed = {id(k) for k in k_vals}, {id(a) for a in own + k_vals}
    moving = {id(op) for op in ops for r in op.results
              if {id(a) for a in arg_deps(r, memo)} & k_ids}
    if any(not {id(a) for a in arg_deps(r, memo)} <= allowed for op in ops for r in op.results
           if not isinstance(op, _FREE)) or id(value.op) not in moving:
        return None  # reads the other side's or a batch index: not this side's operand
    loads, ranges = {}, {}

    def moves(v: Value) -> bool:
        return id(v) in k_ids or id(getattr(v, "op", None)) in moving
    for op in ops:
        if id(op) in moving and isinstance(op, _LOADS):
            buf, indices = _load_parts(op)
            loads[access_key(buf, indices)] = _flat_load(buf, indices, moves)
    base_only = {id(v) for f in loads.values() for _, v in f.base}
    per_value = [op for op in ops if id(op) in moving]
    users = {id(x) for op in per_value for i, x in enumerate(op.operands)
             if not (isinstance(op, _LOADS) and id(x) in base_only and
                     i >= (2 if isinstance(op, MaskedLoadOp) else 1))}
    free_used = [op for op in ops if isinstance(op, _FREE) and id(op.result) in users]
    hoisted = [op for op in ops if id(op) not in moving]
    hoist_users = {id(x) for op in hoisted for x in op.operands} | base_only
    hoisted = [op for op in hoisted if not isinstance(op, _FREE) or id(op.result) in hoist_users]
    frontier = [a for a in own if id(a) in users] + \
        [op.result for op in hoisted if not isinstance(op, _FREE) and id(op.result) in users]
    if any(v.type != INDEX and v.type.dtype not in SHARED_TYPE for v in frontier) or \
            any(v.type.dtype == "bool" for v in frontier):
        return None
    narrow = {id(op) for op in per_value if op.has_trait(SCALAR_COMPUTE) and
              not isinstance(op, _FREE) and op.result.type == INDEX and
              _fits(index_range(op.result, bounds, ranges))}
    k_static = all(isinstance(e, int) for e in k_extents)
    return GatherPlan(side, value, hoisted, frontier,
                      [op for op in ops if op in free_used or id(op) in moving], loads, narrow,
                      k_static and math.prod(k_extents) < INT32_MAX // 2,
                      "" if all(f.narrow for f in loads.values()) else "BM * BN < 128 * 128")


def _flat_load(buf: Value, indices: list[Value], moves) -> FlatLoad:
    base = [(d, v) for d, v in enumerate(indices) if not moves(v)]
    steps = [(d, v) for d, v in enumerate(indices) if moves(v)]
    shape = buf.type.shape
    narrow = bool(narrow_buffer(buf))  # (None, a symbolic shape: not known narrow)
    tail_static = all(isinstance(s, int) for s in shape[min((d for d, _ in steps), default=0):])
    # a valid access's indices lie in [0, shape): the moving part is under this bound
    step_bound = sum((shape[d] - 1) * math.prod(shape[d + 1:]) for d, _ in steps) \
        if tail_static else None
    return FlatLoad(buf, base, steps, narrow,
                    narrow or (step_bound is not None and step_bound <= INT32_MAX))


class GatheredOperands:
    """ContractionEmitter's gathered sides (see the module doc): ``gather_setup`` before
    the K loop, ``gather_fetch`` per step, ``subscript`` for the flat loads."""

    gathers: dict[str, GatherPlan]
    gathering: GatherPlan | None = None

    def plan_gathers(self) -> None:
        c, ext = self.c, self.op.extent_list
        bounds = {id(a): (0, e - 1) for a, e in zip(self.args, ext) if isinstance(e, int)}
        bounds.update({id(k): (0, e - 1) for k, e in zip(self.k_vals, c.k_extents)
                       if isinstance(e, int)})
        self.gathers = {}
        for side, value, dims in (("a", c.a, c.m_dims), ("b", c.b, c.n_dims)):
            if self.groups_along_k(side) and self.vector_side(side) is None and \
                    (c.direct_load(side) or c.k_major_load(side)) is None:
                plan = plan_gather(self.op, side, value, self.dims(dims)[0], bounds,
                                   self.k_vals, c.k_extents, self.per_batch)
                if plan is not None:
                    self.gathers[side] = plan

    def gather_setup(self) -> None:
        """Per tile: each group slot's position, its hoisted values into per-slot
        registers, each flat load's base and the K the slot gathers up to."""
        self.plan_gathers()
        w = self.w
        for side, plan in self.gathers.items():
            s = side.upper()
            w.line(f"# {side.upper()} is gathered: each group slot's position-only values, "
                   "once per tile (the K steps read them from registers)")
            plan.names = {}
            for v in plan.frontier:
                dtype = (("numba.int32" if _fits(index_range(v, self._bounds(), {}))
                          else "numba.int64") if v.type == INDEX else SHARED_TYPE[v.type.dtype])
                kind = v.op.name.split(".", 1)[1] if getattr(v, "op", None) else "i"
                plan.names[id(v)] = self._slot_array(f"{self.namer.define(v, kind)}_at", s, dtype)
            for key, load in plan.loads.items():
                plan.views[id(load.buf)] = self.flat_view(load.buf)
                plan.bases[key] = self._slot_array(
                    f"{self.namer(load.buf)}_base", s, "numba.int32" if load.narrow else "numba.int64")
            # the factory's constant picks one fetch for the tile (else as before)
            with w.indented(f"if {plan.guard}:") if plan.guard else nullcontext():
                self._setup_side(plan, side)

    def _setup_side(self, plan: GatherPlan, side: str) -> None:
        """The per-tile part: each slot's position, hoisted values and bases."""
        w, L = self.w, self.loc
        s, own, slot = side.upper(), ("m" if side == "a" else "n"), L["slot"]
        plan.k_end = self._slot_array("k_end", s, "numba.int32" if plan.narrow_k else "numba.int64")
        with w.indented(f"for {slot} in range({s}_GROUPS):"):
            w.line(f"{L['e']} = {L['tid']} + {slot} * THREADS")
            w.line(f"{L[own]} = {self.group_position(side, '0')[0]}")
            cast = "numba.int32" if plan.narrow_k else ""
            w.line(f"{plan.k_end}[{slot}] = {cast}({L['k_size']} if {L[own]} < "
                   f"{L[own + '_size']} else {L['k_lo']})  # zeros past the edge")
            with w.indented(f"if {L[own]} < {L[own + '_size']}:"):
                self.unravel_into(L[own], *self.dims(self.c.m_dims if side == "a"
                                                     else self.c.n_dims))
                for op in plan.hoisted:
                    self.statement(op, shared=False)
                for v in plan.frontier:
                    w.line(f"{plan.names[id(v)]}[{slot}] = {self.namer(v)}")
                for key, load in plan.loads.items():
                    w.line(f"{plan.bases[key]}[{slot}] = {self._base_code(load)}")

    def gather_fetch(self, side: str, k_start: str) -> None:
        """This step's groups of a gathered side: the reduction indices unravelled once a
        group and counted up, the per-value ops, flat loads."""
        w, L, plan = self.w, self.loc, self.gathers[side]
        regs = L[f"{side}_next"]
        with self.each_group(side), self._gathering(plan):
            w.line(f"{L['k']} = {self.group_position(side, k_start)[1]}")
            self._unravel_k(plan)
            left = plan.left = plan.left or self.namer.fresh("left")
            w.line(f"{left} = {'numba.int32' if plan.narrow_k else ''}"
                   f"({plan.k_end}[{L['slot']}] - {L['k']})  # the group's values inside K")
            with w.indented(f"for {L['q']} in range(4):"):
                w.line(f"{L['value']} = {self.zero}")
                with w.indented(f"if {L['q']} < {left}:"):
                    for op in plan.per_value:
                        self._gather_statement(op, plan)
                    w.line(f"{L['value']} = {self.namer(plan.value)}")
                w.line(f"{regs}[{L['slot']} * 4 + {L['q']}] = {L['value']}")
                if plan.narrow_k:
                    self._count_up32()
                else:
                    self.count_up(self.k_vals, self.c.k_extents)

    def flat_view(self, buf: Value) -> str:
        """The name of ``buf``'s flat view, defined at its first use (the tile's top)."""
        views = self.__dict__.setdefault("gather_views", {})
        if id(buf) not in views:
            self.helpers.add("_flat")
            views[id(buf)] = self.namer.fresh(f"{self.namer(buf)}_flat")
            self.w.line(f"{views[id(buf)]} = _flat({self.namer(buf)})")
        return views[id(buf)]

    # -- pieces ----------------------------------------------------------------------
    def _bounds(self) -> dict:
        ext = self.op.extent_list
        return {id(a): (0, e - 1) for a, e in zip(self.args, ext) if isinstance(e, int)}

    def _slot_array(self, base: str, side: str, dtype: str) -> str:
        name = self.namer.fresh(base)
        self.w.line(f"{name} = cuda.local.array({side}_GROUPS, {dtype})")
        return name

    @contextmanager
    def _gathering(self, plan: GatherPlan):
        """Name the frontier values by their slot's register and the reduction indices
        by names of their own (32-bit ones must not share a variable with int64 ones)."""
        saved = dict(self.namer.names)
        slot = self.loc["slot"]
        for v in plan.frontier:
            self.namer.bind(v, f"{plan.names[id(v)]}[{slot}]")
        if not plan.taps:
            plan.taps = [self.namer.fresh(f"{k.name_hint or 'k'}_tap") for k in self.k_vals]
        for k, name in zip(self.k_vals, plan.taps):
            self.namer.bind(k, name)
        self.gathering = plan
        try:
            yield
        finally:
            self.gathering = None
            self.namer.names.clear()
            self.namer.names.update(saved)

    def _unravel_k(self, plan: GatherPlan) -> None:
        if not plan.narrow_k:
            self.unravel_into(self.loc["k"], self.k_vals, self.c.k_extents)
            return
        w, names, ext = self.w, plan.taps, self.c.k_extents
        plan.rest = plan.rest or self.namer.fresh("tap_rest")
        rest = f"numba.uint32({self.loc['k']})"
        for d in range(len(names) - 1, 0, -1):
            w.line(f"{plan.rest if d > 1 else names[0]}, {names[d]} = "
                   f"divmod({rest}, numba.uint32({ext[d]}))  # unsigned 32-bit: a multiply-high")
            rest = plan.rest
        if len(names) == 1:
            w.line(f"{names[0]} = {rest}")
        w.line(f"{', '.join(names)} = {', '.join(f'numba.int32({n})' for n in names)}")

    def _count_up32(self) -> None:
        count_up(self.w, self.gathering.taps, [str(e) for e in self.c.k_extents], "numba.int32")

    def _gather_statement(self, op: Operation, plan: GatherPlan) -> None:
        if id(op) in plan.narrow:  # its range fits: 32-bit instructions
            from mlfuse.codegen.scalar import scalar_expression
            operands = [self.namer(v) for v in op.operands]
            text = scalar_expression(op, operands, self.target, self.helpers)
            self.w.line(f"{self.define(op.result, op.name.split('.', 1)[1])} = numba.int32({text})")
        else:
            self.statement(op, shared=False)

    def _stride(self, buf: Value, axis: int) -> str:
        return stride_code(buf, axis, self.namer(buf))

    def _terms(self, load: FlatLoad, parts) -> str:
        terms = []
        for d, v in parts:
            stride = self._stride(load.buf, d)
            terms.append(self.namer(v) if stride == "1" else f"{self.namer(v)} * {stride}")
        return " + ".join(terms) or "0"

    def _base_code(self, load: FlatLoad) -> str:
        terms = [f"numba.int64({self.namer(v)}) * {self._stride(load.buf, d)}"
                 for d, v in load.base]
        text = " + ".join(terms) or "0"
        return f"numba.int32({text})" if load.narrow else f"numba.int64({text})"

    def subscript(self, buf: Value, indices: list[Value]) -> str:
        plan = self.gathering
        load = plan.loads.get(access_key(buf, indices)) if plan is not None else None
        if load is None:
            return super().subscript(buf, indices)
        key = access_key(buf, indices)
        base = f"{plan.bases[key]}[{self.loc['slot']}]"
        step = self._terms(load, load.steps)
        if load.narrow:
            offset = f"numba.uint32({base} + {step})"
        elif load.narrow_step:
            offset = f"numba.uint64({base} + numba.int32({step}))"
        else:
            offset = f"numba.uint64({base} + {step})"
        return f"{plan.views[id(buf)]}[{offset}]"
