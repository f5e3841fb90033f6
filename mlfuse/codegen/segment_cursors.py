"""A flattened nest's segmented accesses (flat_rows.SegmentedAccess: batch norm's
``x[X // (H*W), c, X // W % H, X % W]``, at ``row_base + q * stride + r`` with (q, r)
X's place in segments of H*W) walked without a division a value.

A row loop's thread takes values ``first``, ``first + apart``, ... of the flat index X.
Per segment size the loop keeps the value's place in its segment (r), and per row base
and stride a place cursor, the value's element offset: from one value to the next, r
and the offset gain a step's rest and a step's offset, and where r passes the segment
its end is carried (``r -= size``, the offset gains ``stride - size``). The steps are
planned once before the rows (``plan_segment_steps``); each loop divides only its first
value (``start_segment_cursors``), a division a streaming tile, shared by the tile's
loops. ptxas (sm_90): the load loop of batch-norm training's streaming kernel went from
~28 SASS instructions a value (a 64-bit product q * stride a value, the step's division
each tile) to ~15; the kernel, instruction-bound there (ncu on the H100: 64% of the
SMs' issue, 19% of DRAM bandwidth), from 0.122 ms to 0.110 at [256, 1024, 7, 7].

In a kernel the host runs only where every index fits 31 bits (``narrow_divisions``:
the streaming kernel's narrow twin, stream_narrow.py) the cursors, steps and carries are
unsigned 32-bit (each sum truncated: exact modulo 2**32, and every true offset is under
2**31). In 64 bits LLVM turned the place cursor back into a segment count times the
stride, a 64-bit product a value again (ptxas, batch norm's streaming kernel: 2562 SASS
lines and 104 B spilled; narrow cursors alone: 2005 lines, no spill).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mlfuse.codegen.addressing import access_parts
from mlfuse.ir.core import Operation, Value

if TYPE_CHECKING:  # (flat_rows imports this module)
    from mlfuse.codegen.flat_rows import SegmentedAccess


def access_key(buf: Value, indices) -> tuple:
    """An access's key among a kernel's planned ones: its buffer and index values."""
    return (id(buf), tuple(id(v) for v in indices))


class SegmentCursors:
    """A mixin of flat_rows.FlatRows: the segmented accesses' offsets and cursors. Needs
    from its host class: w, namer, segments, row_bases, flat_strides, _divide,
    _index_code, _base_code."""

    # the current loop's segment cursors: (step, size, base, stride) -> its place cursor,
    # and how each steps
    cursor_names: dict = {}
    cursor_steps: list = []
    segment_steps: dict = {}  # segment size -> (apart, its steps' names), planned per kernel
    place_steps: dict = {}  # (size, stride) -> (a step's offset, a carry's), planned so
    segment_origins: dict = {}  # (first, size) -> (q, r): a fill's and its loop's start

    def segment_subscript(self, access: SegmentedAccess) -> str:
        """``view[row_base + q * stride + r]`` of a segmented access at its step."""
        offset = self.segment_offset(access, self.namer(access.step))
        return f"{self.flat_views[id(access.buf)]}[numba.uint64({offset})]"

    def segment_offset(self, access: SegmentedAccess, step: str) -> str:
        """A segmented access's element offset at flat index ``step``: the loop's place
        cursor where it keeps one (``start_segment_cursors``), else ``row_base + q *
        stride + r``, (q, r) the step's divmod by the segment, one division of
        ``index_division``'s kind (LLVM computes it once for both)."""
        size, base, stride = self._segment_parts(access)
        cursor = self.cursor_names.get((step, size, base, stride))
        if cursor is not None:
            return cursor
        split = f"{self._divide()}({step}, {size})"
        return f"{base} + {split}[0] * {stride} + {split}[1]"

    def _segment_size(self, access: SegmentedAccess) -> str:
        return " * ".join(self._index_code(d) for d in access.divisors)

    def _segment_parts(self, access: SegmentedAccess) -> tuple[str, str, str]:
        """(segment size, row base, stride between segments) of a segmented access, as
        code: what its offset ``base + q * stride + r`` is made of."""
        return (self._segment_size(access), self.row_bases[self._base_code(access)],
                self.flat_strides[(id(access.buf), access.axis)])

    def _wrap(self, value: str) -> str:
        """``value`` as a cursor holds it: unsigned 32-bit in a narrow kernel."""
        return f"numba.uint32({value})" if self.narrow_divisions else value

    def plan_segment_steps(self, apart: str) -> None:
        """Before the point loop, for loops whose thread's values lie ``apart`` values
        apart: each segment size's step (the segments and the rest such a step
        crosses) and, per stride between segments, the offset a step adds and the one
        a carry adds (``stride - size``), so that a value's offset is two additions
        from the one before (``step_segment_cursors``)."""
        self.segment_steps, self.place_steps = {}, {}
        for access in self.segments.values():
            size = self._segment_size(access)
            if size not in self.segment_steps:
                dq, dr = self.namer.fresh("segment_step"), self.namer.fresh("in_segment_step")
                self.w.line(f"{dq}, {dr} = {self._divide()}({apart}, {size})  # a step of "
                            f"{apart} values: whole segments, and the rest")
                self.segment_steps[size] = (apart, dq, dr)
            stride = self.flat_strides[(id(access.buf), access.axis)]
            if (size, stride) not in self.place_steps:
                jump, carry = self.namer.fresh("place_step"), self.namer.fresh("carry_step")
                dq, dr = self.segment_steps[size][1:]
                self.w.line(f"{jump} = {self._wrap(f'{dq} * {stride} + {dr}')}")
                self.w.line(f"{carry} = {self._wrap(f'{stride} - ({size})')}  # from a segment's "
                            "end to the next one's start")
                self.place_steps[(size, stride)] = (jump, carry)

    def start_segment_cursors(self, accesses: list[Operation], step: str, first: str,
                              apart: str) -> None:
        """Before a loop over a thread's values ``first``, ``first + apart``, ... (named
        ``step`` in the body) that emits ``accesses``: per segment size their segmented
        ones use, ``first``'s place in the segments (one divmod, shared with the loop
        before it from the same ``first``: a fill and its row loop), and per row base
        and stride a place cursor, the value's offset, so that each later value is an
        add and a carry away (``step_segment_cursors``), not a division and a 64-bit
        product (batch norm at 7 x 7 pixels: segments of 49, no whole vectors)."""
        parts = {}
        for o in accesses:
            access = self.segments.get(access_key(*access_parts(o)))
            if access is not None:
                size, base, stride = self._segment_parts(access)
                parts.setdefault(size, {})[(base, stride)] = None
        self.cursor_names, self.cursor_steps = {}, []
        origins = self.segment_origins
        for size, places in sorted(parts.items()):
            if (first, size) not in origins:
                q0, r0 = self.namer.fresh("first_segment"), self.namer.fresh("first_in_segment")
                self.w.line(f"{q0}, {r0} = {self._divide()}({first}, {size})  # this thread's "
                            "first value's place in the segments")
                origins[(first, size)] = (q0, r0)
            q0, r0 = origins[(first, size)]
            planned = self.segment_steps.get(size)
            if planned is not None and planned[0] == apart:
                dq, dr = planned[1:]
            else:  # (no steps planned for ``apart`` before the point loop, as warp-rows'
                planned = None  # loops over a group's lanes: divided here)
                dq, dr = self.namer.fresh("segment_step"), self.namer.fresh("in_segment_step")
                self.w.line(f"{dq}, {dr} = {self._divide()}({apart}, {size})")
            r = self.namer.fresh("in_segment")
            self.w.line(f"{r} = {self._wrap(r0)}")
            moves = []
            for base, stride in places:
                place = self.namer.fresh("place")
                self.w.line(f"{place} = {self._wrap(f'{base} + {q0} * {stride} + {r0}')}")
                jump, carry = self.place_steps[(size, stride)] if planned else \
                    (self._wrap(f"{dq} * {stride} + {dr}"), self._wrap(f"{stride} - ({size})"))
                self.cursor_names[(step, size, base, stride)] = place
                moves.append((place, jump, carry))
            self.cursor_steps.append((r, dr, size, moves))

    def step_segment_cursors(self) -> None:
        """The cursors to the next value: add the step, carry once (the rest < size)."""
        def add(name: str, amount: str, sign: str = "+") -> None:  # (narrow: truncated)
            self.w.line(f"{name} = numba.uint32({name} {sign} {amount})" if self.narrow_divisions
                        else f"{name} {sign}= {amount}")
        for r, dr, size, moves in self.cursor_steps:
            add(r, dr)
            for place, jump, _ in moves:
                add(place, jump)
            with self.w.indented(f"if {r} >= {self._wrap(size)}:  # carry"):
                add(r, self._wrap(size), "-")
                for place, _, carry in moves:
                    add(place, carry)

    def stop_segment_cursors(self) -> None:
        self.cursor_names, self.cursor_steps = {}, []
        self.segment_origins = {}


__all__ = ["SegmentCursors"]
