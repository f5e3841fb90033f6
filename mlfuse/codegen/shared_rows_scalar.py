"""Rows held in registers and shared memory, a value at a time: the "shared-scalar"
variant of a row kernel.

``shared_rows.py``'s variant moves whole 16-byte vectors, so the host takes it only
where the row length is a multiple of VECTOR_WIDTH and every row starts aligned. Rows
of odd lengths (a vocabulary of 12289 or 50257 values) streamed instead: every row loop
read the row from memory again (softmax 4000 x 12289: 35% of copy bandwidth). This
variant holds them the way the scalar "registers" variant holds short rows: thread t
takes values t, t + nthreads, ... of a row (a warp's loads are still 128 contiguous
bytes), its first ``scalar_held_values`` (half of VALUES_PER_THREAD: a value's 64-bit
address takes registers a vector's one address leaves free) in registers (``row_slots``:
the registers variant's fill and lanes), the rest in dynamic shared memory, an area per
held buffer, the value of slot ``s`` at ``(s - row_slots) * nthreads + tid`` (a warp's
32 threads read 32 neighbouring words: no bank conflicts).

Blocks take up to SHARED_ROW_THREADS threads (``_shared_row_plan`` with vectors of one
value), so rows up to 1024 x row_slots values need no shared memory at all.
The loop that first reads a held buffer copies the thread's values past its registers
with 4-byte ``cp.async`` (in flight together with the register fill), or, for 2-byte
values that cp.async cannot move, with plain loads and stores; each thread reads back
only what it copied, so no barrier guards the areas.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.ir.core import Operation, Value
from mlfuse.ir.types import itemsize

from mlfuse.row_hold import scalar_held_values

from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.reuse import Reuse, row_held_loads
from mlfuse.codegen.shared_rows import SharedRowsEmitter

_DOC = ("Row schedule over [{space}]: one block per point, each thread holds its first "
        "values of a row in registers and the rest in shared memory "
        "(values tid, tid + nthreads, ...: the row is read once, of any length or alignment).")


class ScalarSharedRowsEmitter(SharedRowsEmitter):
    """The "shared-scalar" variant (see the module doc): the scalar registers variant's
    slots, then the slots past them in shared memory."""

    base_variant = "registers"
    doc = _DOC

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken=()):
        super().__init__(op, name, target, helpers, hw, taken)
        self.row_slots = scalar_held_values(hw)
        # its index divisions (group norm's channel of each value) 32-bit only: the host
        # runs it where every index fits 31 bits (held_rows.shared_rows_launch); with
        # _divmod_index's 64-bit fallback it spilled 388 B at 64 registers
        self.narrow_divisions = True

    def plan_held_rows(self, row_loops: list[Operation], reuse: bool = True) -> None:
        """The registers variant's plan, then each held buffer's area (widest values first,
        so every area starts aligned) and the loop that copies it."""
        KernelEmitter.plan_held_rows(self, row_loops, reuse)
        w, loc = self.w, self.local
        held = sorted(self.held_buffers, key=lambda b: -itemsize(b.type.dtype))
        groups, _ = row_held_loads(row_loops)
        extent = self.extent(row_loops[0].extent_list[0])
        w.line(f"# values past a thread's first {self.row_slots} (registers) are held in "
               "shared memory, an area per buffer")
        w.line(f"{loc['n_vectors']} = -(-{extent} // {loc['nthreads']})  # a thread's slots")
        self.hold_areas(row_loops, held, groups, self.row_slots, vectors=False)

    @contextmanager
    def loop(self, op, shared: bool):
        if not shared or self.part == "":
            with KernelEmitter.loop(self, op, shared):
                yield
            return
        if self.part == "registers":
            copies = self.copied.get(id(op), [])
            if copies:
                self.copy_past_registers(op, copies)
            with KernelEmitter.loop(self, op, shared):
                yield
            if copies:
                self.w.line("_cp_async_wait(0)  # this thread's copies into shared memory landed")
            return
        with self.shared_part(op):
            yield

    @contextmanager
    def each_slot_past_registers(self, k: str, extent: str):
        """The thread's slots past its registers that lie in the row: ``k`` (the slot's
        row index) and ``place`` (its offset in each area), both stepped by the block's
        threads. (A ``range`` over slots with an index test and products for k and place
        took 20 of the softmax output loop's 55 instructions a value.)"""
        w, loc = self.w, self.local
        w.line(f"{k} = {loc['tid']} + {self.row_slots} * {loc['nthreads']}")
        w.line(f"{loc['place']} = numba.uint32({loc['tid']})")
        with w.indented(f"while {k} < {extent}:"):
            yield
            w.line(f"{k} += {loc['nthreads']}")
            w.line(f"{loc['place']} += numba.uint32({loc['nthreads']})")

    def copy_past_registers(self, op, loads: list[Operation]) -> None:
        """Each of the thread's values past its registers, of ``loads``' buffers, into its
        place in shared memory: a 4-byte cp.async (zeros past the row's end), or a load
        and a store for 2-byte values."""
        w, loc = self.w, self.local
        k = self.define(op.body.args[0], "k")
        extent = self.extent(op.extent_list[0])
        w.line("# this thread's values past its registers: copied into shared memory, in "
               "flight with the register loads")
        with self.each_slot_past_registers(k, extent):
            for o in loads:
                area = self.areas[id(o)]
                array, _, index = self.subscript(o.operands[0], o.operands[1:]).partition("[")
                size = itemsize(area.buffer.type.dtype)
                if size >= 4:
                    w.line(f"_cp_async({area.array}, {area.at} + {loc['place']}, {array}, "
                           f"({index[:-1]},), True, {size})")
                else:
                    w.line(f"{area.array}[{area.at} + {loc['place']}] = {array}[{index}")
        w.line("_cp_async_commit()")

    @contextmanager
    def shared_part(self, op):
        """The loop over the thread's slots past its registers: held buffers read from
        shared memory, other loads from memory, nothing kept for later."""
        w = self.w
        k = self.define(op.body.args[0], "k")
        extent = self.extent(op.extent_list[0])
        saved = self.held, self.reuse, self.kept
        self.held, self.reuse, self.kept = {}, Reuse(dead=set(self.flat_dead)), {}
        w.line("# this thread's values past its registers, held in shared memory")
        with self.each_slot_past_registers(k, extent):
            yield
        self.held, self.reuse, self.kept = saved

    def subscript(self, buf: Value, indices: list[Value]) -> str:
        area = next((a for a in self.areas.values() if a.buffer is buf), None)
        if self.part == "shared" and area is not None:
            # (unsigned: no test for a negative index)
            return f"{area.array}[numba.uint32({area.at} + {self.local['place']})]"
        return super().subscript(buf, indices)

    def load_statement(self, op: Operation) -> None:
        KernelEmitter.load_statement(self, op)


__all__ = ["ScalarSharedRowsEmitter"]
