"""The SIMT contraction tile's operand fetches (a mixin of contraction.py's
``ContractionEmitter``): plain operands read at flat offsets planned once a tile, and
the order of the K steps' fetches.

An operand that is one plain load of the accumulator's dtype, contiguous along K (A, a
K-major B: dialects/contraction.py ``k_major_load``) or along N (``direct_load`` of B)
with its one K dim indexed by the K index itself, sits at a flat offset that moves by a
constant with K (``stepped``). So its groups are planned once a tile:

- ``step_setup``: each of the thread's group slots gets the flat offset of its group at
  the block's first K, its own position (m, n) clamped into the sizes: a group past M
  or N reads row or column 0 (any inside would do), whose products land in outputs
  that are never stored;
- ``step_fetch``: a K step loads each slot at its offset, which then moves on by a
  step's K (``step_advance``): no index arithmetic, no bounds.

The partial K step (K, or a share of it, no multiple of BK) is fetched first
(``first_tile``, at the offsets moved on by ``full`` steps; each group checked against
K, zeros past it), the full steps after it in order (``next_tile``): the K loop then
holds no K checks at all (with them in it, 128 x 128 tiles spilled; and they cost ~30
instructions a step). The sides that are not stepped (a gather, gather.py; an operand
behind a prologue) are fetched as before at the K position of the step.

Offsets are unsigned 32-bit where the buffer has under 2**31 values (known here for a
static shape; else the host's WIDE flag says whether some such buffer reaches 2**31,
and the kernel of WIDE takes 64-bit ones), so a load is one multiply-add from the
buffer's base. Before, each step recomputed each group's position and its
multi-dimensional index in int64 (the strides read from the array struct under a
predicate) and checked both bounds: ~60 SASS instructions a 128 x 64 step, now 6 (3
loads, 3 adds).

On the "cuda" target a group is one 16-byte load under VECTOR_A / VECTOR_B. Otherwise
(that fallback, and the simulator, whose B groups run along K) its 4 values are loaded
one by one at offset + q * (their distance), with the same plan, and checked where a
group may straddle an edge (K, or N for a B along N: sizes no multiple of 4).
"""
from __future__ import annotations

import math
from contextlib import nullcontext

from mlfuse.dialects.contraction import arg_deps
from mlfuse.ir.core import Operation, Value

INT32_MAX = 2 ** 31 - 1
VECTOR = 4  # operand values a thread loads together (one 16-byte load when VECTOR_*)


def k_axis(load: Operation, k_vals: list[Value]) -> int | None:
    """The position of the K index among ``load``'s indices where the contraction has one
    K dim, the load indexes it by the K index itself and no other index depends on it
    (its offset is then linear in K); else None."""
    indices = list(load.operands[1:])
    if len(k_vals) != 1 or sum(v is k_vals[0] for v in indices) != 1 or any(
            k_vals[0] in arg_deps(v) for v in indices if v is not k_vals[0]):
        return None
    return next(d for d, v in enumerate(indices) if v is k_vals[0])


def stride_code(buf: Value, axis: int, name: str) -> str:
    """The distance in values between neighbours along ``axis`` of the C-contiguous
    ``buf`` (its variable ``name``): the product of the dims after it."""
    dims = buf.type.shape[axis + 1:]
    if all(isinstance(d, int) for d in dims):
        return str(math.prod(dims))
    return " * ".join(str(d) if isinstance(d, int) else f"{name}.shape[{j}]"
                      for j, d in enumerate(buf.type.shape) if j > axis)


def narrow_buffer(buf: Value) -> bool | None:
    """Whether every flat offset into ``buf`` fits 31 bits: known for a static shape
    (True or False), None for a symbolic one (the host decides: WIDE)."""
    shape = buf.type.shape
    if not all(isinstance(s, int) for s in shape):
        return None
    return math.prod(shape) <= INT32_MAX


class SteppedOperands:
    """ContractionEmitter's operand fetches (see the module doc): ``step_setup`` before
    the K loop, ``first_tile`` and ``next_tile`` (each step)."""

    def stepped(self, side: str) -> Operation | None:
        """The side's plain load when its offset is linear in K (see the module doc)."""
        c = self.c
        load = c.direct_load(side) or c.k_major_load(side)
        if load is None or load.operands[0].type.dtype != c.acc.type.dtype:
            return None
        if side == "b" and load is c.direct_load("b") and k_axis(load, self.k_vals) is None:
            return None
        return load

    def stepped_sides(self) -> list[str]:
        return [side for side in ("a", "b") if self.stepped(side) is not None]

    def wide_buffers(self) -> list[Value]:
        """The stepped sides' buffers of symbolic shape: the host sets WIDE where one of
        them reaches 2**31 values."""
        found: list[Value] = []
        for side in self.stepped_sides():
            buf = self.stepped(side).operands[0]
            if narrow_buffer(buf) is None and not any(buf is b for b in found):
                found.append(buf)
        return found

    def _along_k_load(self, side: str) -> bool:
        """Whether the side's buffer is contiguous along K (A; a K-major B)."""
        return side == "a" or self.stepped(side) is not self.c.direct_load("b")

    def _offset_type(self, side: str) -> str:
        narrow = narrow_buffer(self.stepped(side).operands[0])
        return "OFFSET" if narrow is None else "numba.uint32" if narrow else "numba.uint64"

    def _k_stride(self, side: str) -> str:
        """How far apart the side's consecutive K positions lie in its buffer."""
        if self._along_k_load(side):
            return "1"
        load = self.stepped(side)
        buf = load.operands[0]
        return stride_code(buf, k_axis(load, self.k_vals), self.namer(buf))

    def step_setup(self) -> None:
        """Per tile: each stepped side's slots' flat offsets at the block's first K (own
        positions clamped into the sizes) and the offsets' move a K step."""
        w, L, c = self.w, self.loc, self.c
        self.steps_of = {}
        for side in self.stepped_sides():
            s, own = side.upper(), "m" if side == "a" else "n"
            load, kind = self.stepped(side), self._offset_type(side)
            buf = load.operands[0]
            off, step = self.namer.fresh(f"{side}_off"), self.namer.fresh(f"{side}_step")
            self.steps_of[side] = (off, step)
            view = self.flat_view(buf)
            w.line(f"# {s}: each group slot's flat offset into {view}, moved on a K step at "
                   "a time (a group past the sizes reads inside them: outputs never stored)")
            w.line(f"{off} = cuda.local.array({s}_GROUPS, {kind})")
            w.line(f"{step} = {kind}(BK * {self._k_stride(side)})")
            with self.each_group(side):
                position, k = self.group_position(side, L["k_lo"])
                w.line(f"{L[own]}, {L['k']} = {position}, {k}")
                w.line(f"{L[own]} = {L[own]} if {L[own]} < {L[own + '_size']} else 0")
                self.unravel_into(L[own], *self.dims(c.m_dims if side == "a" else c.n_dims))
                if self._along_k_load(side):
                    lead = list(load.operands[1:len(load.operands) - len(self.k_vals)])
                    self.slice_of(lead)
                    terms = [f"{self.namer(v)} * {stride_code(buf, d, self.namer(buf))}"
                             for d, v in enumerate(lead)] + [L["k"]]
                else:
                    self.unravel_into(L["k"], self.k_vals, c.k_extents)
                    self.slice_of(list(load.operands[1:]))
                    terms = [f"{self.namer(v)} * {stride_code(buf, d, self.namer(buf))}"
                             for d, v in enumerate(load.operands[1:])]
                w.line(f"{off}[{L['slot']}] = {kind}({' + '.join(terms)})")

    def first_tile(self) -> None:
        """The operands' first tile into registers: the partial step's if there is one
        (the stepped sides' offsets stay at the block's first K), else the first."""
        w, L = self.w, self.loc
        if self.stepped_sides():
            with w.indented(f"if {L['full']} < {L['steps']}:  # the last step, partly past K"):
                w.line(f"{L['left']} = numba.int32({L['span']} - {L['full']} * BK)  # its K "
                       "values inside K")
                self.step_fetch(tail=True)
            with w.indented(f"elif {L['full']} > 0:"):
                self.step_fetch(tail=False)
                self.step_advance(f"1 < {L['steps']}")
        self.other_sides(f"0 < {L['steps']}", f"{L['full']} * ({L['steps']} - {L['full']})")

    def next_tile(self) -> None:
        """The operands' tile of step ``nxt`` (the full steps in order, after the partial
        one if any) into registers, if there is one."""
        w, L = self.w, self.loc
        if self.stepped_sides():
            # Not under ``nxt < steps``: that is the loop's own test, and NVVM then threads
            # the fetch to the loop's latch, after the products, where its latency shows
            # (a 32 x 128 decode tile 0.057 -> 0.068 ms). The offsets stay at the last full
            # step once none is left, so the last trip reloads it (never stored); only a
            # block with no full step (a share of K under BK) fetches none.
            w.line("# the next full step's tile, loading during the products")
            self.step_fetch(tail=False, guard=f"{L['full']} > 0")
            self.step_advance(f"{L['nxt']} + 1 < {L['steps']}")
        self.other_sides(f"{L['nxt']} < {L['steps']}", f"{L['nxt']} - ({L['steps']} - {L['full']})")

    def other_sides(self, condition: str, steps: str) -> None:
        """The sides that are not stepped (simt_fetch.py), fetched at K position
        ``steps`` whole steps from the block's first, under ``condition``."""
        w, L = self.w, self.loc
        others = [side for side in ("a", "b") if side not in self.stepped_sides()]
        if not others:
            return
        with w.indented(f"if {condition}:") if condition else nullcontext():
            w.line(f"{L['k0']} = {L['k_lo']} + numba.int64({steps}) * BK")
            for side in others:
                self.fetch(side, L["k0"])

    def step_fetch(self, tail: bool, guard: str | None = None) -> None:
        """This step's groups of every stepped side at their offsets; ``tail``: the last
        step's, which reaches past K (each group checked against it, ``left`` values
        of the step inside K), fetched first (contraction.py ``first_tile``): at the
        offsets moved on by ``full`` steps. ``guard``: a condition on each load (one
        predicated instruction each, where a branch around them all would split the
        loop's block)."""
        for side in self.stepped_sides():
            s = side.upper()
            if self.vector_side(side) is None:
                self._scalar_step(side, tail, guard)
                continue
            with self.w.indented(f"if VECTOR_{s}:  # a group: 16 contiguous bytes"):
                self._vector_step(side, tail, guard)
            with self.w.indented("else:"):
                self._scalar_step(side, tail, guard)

    def step_advance(self, more: str) -> None:
        """The offsets moved on a K step where ``more`` (another full step is left to
        fetch), else kept: they never point past the block's K."""
        w, L = self.w, self.loc
        for side in self.stepped_sides():
            off, step = self.steps_of[side]
            kind = self._offset_type(side)
            move = self.namer.fresh(f"{side}_move")
            w.line(f"{move} = {step} if {more} else {kind}(0)")
            with w.indented(f"for {L['slot']} in range({side.upper()}_GROUPS):"):
                w.line(f"{off}[{L['slot']}] += {move}")

    def _offset(self, side: str, tail: bool) -> str:
        """The slot's offset this step (``tail``: ``full`` steps on)."""
        off, step = self.steps_of[side]
        at = f"{off}[{self.loc['slot']}]"
        return f"{at} + {self._offset_type(side)}({self.loc['full']}) * {step}" if tail else at

    def _vector_step(self, side: str, tail: bool, guard: str | None) -> None:
        w, L = self.w, self.loc
        regs = L[f"{side}_next"]
        view = self.flat_view(self.stepped(side).operands[0])
        load = f"_load_vector({view}, ({self._offset(side, tail)},), {regs}, {L['slot']} * 4)"
        self.helpers.add("_vector_access")
        with self.each_group(side):
            if not tail:
                with w.indented(f"if {guard}:") if guard else nullcontext():
                    w.line(load)
                return
            w.line(f"{L['k']} = numba.int32({self.group_position(side, None)[1]})  # from the "
                   "step's first")
            with w.indented(f"if {L['k']} < {L['left']}:"):
                w.line(load)
            with w.indented("else:"), w.indented(f"for {L['q']} in range(4):"):
                w.line(f"{regs}[{L['slot']} * 4 + {L['q']}] = {self.zero}")

    def _scalar_step(self, side: str, tail: bool, guard: str | None) -> None:
        """The group's values one by one: consecutive K (a K-major buffer, or B's groups
        along K: its K stride apart) or consecutive N, checked where they may straddle
        an edge: K in the tail step, N for groups along N."""
        w, L = self.w, self.loc
        kind = self._offset_type(side)
        regs = L[f"{side}_next"]
        view = self.flat_view(self.stepped(side).operands[0])
        along_k = self.groups_along_k(side)
        apart = self._k_stride(side) if along_k else "1"
        with self.each_group(side):
            checks = [guard] if guard else []
            if tail:
                w.line(f"{L['k']} = numba.int32({self.group_position(side, None)[1]})  # from "
                       "the step's first")
                checks.append(f"{L['k']} + {L['q']} < {L['left']}" if along_k
                              else f"{L['k']} < {L['left']}")
            if not along_k:  # the group's first N (not clamped: the check zeros past N)
                w.line(f"{L['n']} = {self.group_position(side, '0')[0]}")
                checks.append(f"{L['n']} + {L['q']} < {L['n_size']}")
            with w.indented(f"for {L['q']} in range(4):"):
                value = f"{view}[{self._offset(side, tail)} + {kind}({L['q']} * {apart})]"
                at = f"{regs}[{L['slot']} * 4 + {L['q']}]"
                if checks:
                    w.line(f"{at} = {self.zero}")
                with w.indented(f"if {' and '.join(checks)}:") if checks else nullcontext():
                    w.line(f"{at} = {value}")



class IndexedOperands:
    """The sides that are not stepped: a gather addressed once a tile (gather.py), else
    each group's values through the IR at their (m or n, k) position, checked against
    the sizes (zeros outside), 16 bytes at a time for a B along N under VECTOR_B."""

    def fetch(self, side: str, k_start: str) -> None:
        """This thread's groups of the operand's tile at K offset ``k_start`` into
        registers (zeros outside the sizes)."""
        w, L, c = self.w, self.loc, self.c
        own = "m" if side == "a" else "n"
        guard = self.gathers[side].guard if side in self.gathers else None
        if guard == "":  # addressed once per tile (gather.py)
            self.gather_fetch(side, k_start)
            return
        if guard:
            with w.indented(f"if {guard}:  # addressed once per tile (gather.py)"):
                self.gather_fetch(side, k_start)
        with w.indented("else:") if guard else nullcontext(), self.each_group(side):
            position, k = self.group_position(side, k_start)
            w.line(f"{L[own]} = {position}")
            w.line(f"{L['k']} = {k}")
            if self.groups_along_k(side):  # one own position for the group's 4 values
                self.unravel_into(L[own], *self.dims(c.m_dims if side == "a" else c.n_dims))
            load = self.vector_side(side)
            if load is not None:
                with w.indented(f"if VECTOR_{side.upper()}:  # the group is 16 contiguous bytes"):
                    self.vector_fetch(side, load)
                with w.indented("else:"):
                    self.scalar_fetch(side)
            else:
                self.scalar_fetch(side)

    def vector_fetch(self, side: str, load: Operation) -> None:
        """A B group along N (one whose K is not stepped, simt_fetch.py) as one load."""
        w, L, c = self.w, self.loc, self.c
        regs = L[f"{side}_next"]
        self.unravel_into(L["n"], *self.dims(c.n_dims))  # the group's first N
        self.unravel_into(L["k"], self.k_vals, c.k_extents)
        with w.indented(f"if {L['n']} < {L['n_size']} and {L['k']} < {L['k_size']}:"):
            self.slice_of(list(load.operands[1:]))
            self.helpers.add("_vector_access")
            index = ", ".join(self.namer(v) for v in load.operands[1:])
            w.line(f"_load_vector({self.namer(load.operands[0])}, ({index},), {regs}, "
                   f"{L['slot']} * {VECTOR})")
        with w.indented("else:"):
            with w.indented(f"for {L['q']} in range({VECTOR}):"):
                w.line(f"{regs}[{L['slot']} * {VECTOR} + {L['q']}] = {self.zero}")

    def scalar_fetch(self, side: str) -> None:
        """The group's 4 values one by one: consecutive K (or N) positions. Along K,
        the reduction indices are unravelled once and then counted up (mixed radix),
        not divided out for every value."""
        w, L, c = self.w, self.loc, self.c
        own, regs = ("m", L["a_next"]) if side == "a" else ("n", L["b_next"])
        value = c.a if side == "a" else c.b
        along_k = self.groups_along_k(side)
        if along_k:
            self.unravel_into(L["k"], self.k_vals, c.k_extents)
        with w.indented(f"for {L['q']} in range({VECTOR}):"):
            w.line(f"{L['value']} = {self.zero}")
            if along_k:
                cond = (f"{L[own]} < {L[own + '_size']} and {L['k']} + {L['q']} < "
                        f"{L['k_size']}")
            else:
                w.line(f"{L['j']} = {L['n']} + {L['q']}")
                cond = f"{L['j']} < {L['n_size']} and {L['k']} < {L['k_size']}"
            with w.indented(f"if {cond}:"):
                if not along_k:
                    self.unravel_into(L["j"], *self.dims(c.n_dims))
                    self.unravel_into(L["k"], self.k_vals, c.k_extents)
                self.slice_of([value])
                w.line(f"{L['value']} = {self.namer(value)}")
            w.line(f"{regs}[{L['slot']} * {VECTOR} + {L['q']}] = {L['value']}")
            if along_k:
                self.count_up(self.k_vals, c.k_extents)

    def count_up(self, values: list[Value], extents: list) -> None:
        """The next position of a flat index unravelled into ``values`` (``count_up``)."""
        count_up(self.w, [self.namer(v) for v in values], [self.extent(e) for e in extents])


def count_up(w, names: list[str], extents: list[str], cast: str = "") -> None:
    """The next position of a flat index unravelled into ``names`` (mixed radix over
    ``extents``): the last index steps, and carries into the one before it at its
    extent. ``cast`` wraps each new value (``numba.int32``: gather.py's 32-bit taps)."""
    def step(name: str) -> str:
        return f"{name} = {cast}({name} + 1)" if cast else f"{name} += 1"

    w.line(step(names[-1]))

    def carry(d: int) -> None:
        if d > 0:
            with w.indented(f"if {names[d]} == {extents[d]}:"):
                w.line(f"{names[d]} = {cast}(0)" if cast else f"{names[d]} = 0")
                w.line(step(names[d - 1]))
                carry(d - 1)
    carry(len(names) - 1)


__all__ = ["INT32_MAX", "IndexedOperands", "SteppedOperands", "VECTOR", "count_up", "k_axis",
           "narrow_buffer", "stride_code"]
