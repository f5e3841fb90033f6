"""Rows held in registers whose length is no multiple of a vector: the "registers-peeled"
variant of a row kernel, its plan, and the host's choice of it.

The registers-vector kernel needs every row to start on a vector boundary, so rows of
odd length (4094 f16 values, 2047 f32) fell to the scalar kernel: a 2- or 4-byte load
a value, an address and a bounds test each (f16 layernorm 16384 x 4094 ran 2.4x
slower than torch.compile). The peeled kernel takes such a row as three parts:

- its *head*: the values before the first vector boundary (``(-row_start) % lanes``
  of them, the row's flat offset ``row_start`` known per row);
- its whole vectors from there on, loaded and stored whole, exactly as the
  registers-vector kernel does (``emit_vector.py``), shifted by the head;
- its *tail*: the values after the last whole vector.

Head and tail are fewer than ``2 * lanes`` values together, so the first threads of
the block take one of them each (``end``), in one more slot of every local array
(PEELED_ROW_SLOTS = VALUES_PER_THREAD + 1). Each row loop runs twice: over the
vectors, then over that value.

Rows past registers take the same peeling in the held-rows kernel
(``PeeledSharedRowsEmitter``, a ``shared_rows.py`` kernel): its vectors in registers
and in shared memory (cp.async of whole vectors only) shifted by the head, the ends in
a third part of each row loop (f16 residual + layernorm 8192 x 8190: 0.547 -> 0.296 ms).

Only accesses whose rows share one phase can move whole vectors together: those at
the same indices into buffers of the same shape (x[i, k] and out[i, k] of [R, C]),
which the host checks are contiguous and start on a vector boundary (``_peel_ready``).
Other accesses of the row are read a value a lane, a parameter's (gamma[k], at phase 0)
where its value is used, not held (``PeeledParts.holds``)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from mlfuse.codegen.emit_kernel import KernelEmitter, _row_loops
from mlfuse.codegen.flat_rows import row_flat_vectors
from mlfuse.codegen.row_plans import PartedRowLoops, whole_vector_slots
from mlfuse.codegen.shared_rows import SharedRowsEmitter
from mlfuse.codegen.vector import (
    _buffer_and_indices,
    half_vectors,
    row_vector_accesses,
    vector_buffers,
)
from mlfuse.ir.core import Operation

PEELED_ROW_SLOTS = "PEELED_ROW_SLOTS"


@dataclass
class PeelPlan:
    """The accesses a peeled kernel moves as whole vectors (one phase: the same indices
    into buffers of one shape), their values a vector, and the row extent."""

    accesses: list[Operation]
    lanes: str
    extent: object


def _phase_key(op: Operation) -> tuple:
    buf, indices = _buffer_and_indices(op)
    return tuple(map(str, buf.type.shape)), tuple(id(v) for v in indices[:-1])


def peel_plan(op, hw) -> PeelPlan | None:
    """The peeled variant's plan for ``op`` (a row kernel with a registers variant), or
    None where it would never run: every row is whole vectors already (a constant
    extent a multiple of VECTOR_WIDTH), the row loops differ in length, rows go through
    a reshape (flat rows), or no access steps along the row with the point's own
    indices."""
    row_loops = _row_loops(op)
    extents = {str(o["extent"]) for o in row_loops}
    if hw.vector_width == 1 or hw.row_values_per_thread % hw.vector_width \
            or len(extents) != 1 or row_flat_vectors(op, row_loops)[0]:
        return None
    extent = row_loops[0]["extent"]
    if isinstance(extent, int) and extent % hw.vector_width == 0:
        return None
    points = {id(a) for a in op.body.args}
    classes: dict[tuple, list[Operation]] = {}
    for o in row_vector_accesses(row_loops):
        # the row start is computed from the point's indices, once a row
        if all(id(v) in points for v in _buffer_and_indices(o)[1][:-1]):
            classes.setdefault(_phase_key(o), []).append(o)
    if not classes:
        return None
    accesses = max(classes.values(), key=len)  # (the first of the largest)
    half = half_vectors(accesses) and hw.row_values_per_thread % (2 * hw.vector_width) == 0
    return PeelPlan(accesses, "VECTOR_WIDTH_16" if half else "VECTOR_WIDTH", extent)


class PeeledParts:
    """A mixin (before the emitter it peels) for the peeled kernels: the plan's vectors
    shifted by each row's head, and each row loop's last part, "ends": the thread's one
    value of the row's head or tail. Needs ``peel_setup`` called from ``__init__``."""

    def peel_setup(self, plan: PeelPlan) -> None:
        self.plan, self.vector = plan, True
        self.row_slots = PEELED_ROW_SLOTS
        if plan.lanes != "VECTOR_WIDTH":
            self.vector_lanes, self.vector_moves = plan.lanes, ("_load_halves", "_store_halves")
        self.peel = {n: self.namer.fresh(n) for n in ("row_start", "head", "vectors_end", "end")}

    def plan_vectors(self, accesses: list[Operation], size: str) -> None:
        """Only the plan's accesses move whole vectors: the others' rows start at
        another phase."""
        chosen = {id(o) for o in self.plan.accesses}
        super().plan_vectors([o for o in accesses if id(o) in chosen], size)

    def row_base_lines(self) -> None:
        """Per row: where its first whole vector starts (``head``), where its last ends
        (``vectors_end``), and the one value of its ends this thread takes (``end``)."""
        super().row_base_lines()
        w, p, loc = self.w, self.peel, self.local
        lanes, extent = self.vector_lanes, self.extent(self.plan.extent)
        buf, indices = _buffer_and_indices(self.plan.accesses[0])
        start = "0"  # the flat offset of the row's value 0: (i0 * dim1 + i1) * dim2 ...
        for d, v in enumerate(indices[:-1]):
            index = self.namer(v) if d else f"numba.int64({self.namer(v)})"
            start = index if d == 0 else f"({start} + {index})"
            start = f"{start} * {self.namer(buf)}.shape[{d + 1}]"
        w.line(f"# the row's values before its first {lanes}-aligned vector (head) and after "
               "its last whole one: a value each for the first threads")
        w.line(f"{p['row_start']} = {start}")
        w.line(f"{p['head']} = min(({lanes} - {p['row_start']} % {lanes}) % {lanes}, {extent})")
        w.line(f"{p['vectors_end']} = {extent} - ({extent} - {p['head']}) % {lanes}")
        w.line(f"{p['end']} = {loc['tid']} if {loc['tid']} < {p['head']} else "
               f"{p['vectors_end']} + {loc['tid']} - {p['head']}")

    # -- each row loop's parts (PartedRowLoops): the emitter's, then the ends --------
    @contextmanager
    def loop(self, op, shared: bool):
        if not shared or self.part != "ends":
            with super().loop(op, shared):
                yield
            return
        w, loc = self.w, self.local
        k = self.define(op.body.args[0], "k")
        w.line(f"{k} = {self.peel['end']}  # this thread's value of the row's ends, if any")
        with w.indented(f"if {k} < {self.extent(self.plan.extent)}:"):
            w.line(f"{loc['slot']} = VALUES_PER_THREAD")
            saved, self.staged = self.staged, {}  # (stored where computed, not a vector)
            self.fill(op)
            yield
            self.staged = saved

    def row_vectors(self) -> tuple[str, str]:
        loc, lanes = self.local, self.vector_lanes
        return (f"VALUES_PER_THREAD // {lanes}",
                f"{self.peel['head']} + ({loc['tid']} + {loc['vec']} * {loc['nthreads']}) * {lanes}")

    def vectors_end(self, extent: str) -> str:
        return self.peel["vectors_end"]  # (the last whole vector's)

    def holds(self, load: Operation) -> bool:
        """As the registers kernels, but a parameter of another phase than the row's
        (gamma[k]) is read where its value is used: held, its values were read a lane
        at a time, all ahead, and took f16 residual + layernorm from 80 registers to 98."""
        row_args = {id(loop.body.args[0]) for loop in _row_loops(self.op)}
        return any(load is o for o in self.plan.accesses) or \
            not all(id(v) in row_args for v in load.operands[1:])


class PeeledRowsEmitter(PeeledParts, PartedRowLoops, KernelEmitter):
    """The registers-vector kernel with each row's head and tail peeled off (module doc)."""

    row_loop_parts = ("vectors", "ends")

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken, plan: PeelPlan):
        super().__init__(op, name, "registers-peeled", target, helpers, hw, taken)
        self.peel_setup(plan)


class PeeledSharedRowsEmitter(PeeledParts, SharedRowsEmitter):
    """The shared-vector kernel (rows past registers) with each row's head and tail
    peeled off: its vectors in registers and in shared memory shifted by the head."""

    row_loop_parts = ("registers", "shared", "ends")
    doc = ("Row schedule over [{space}]: one block per point, each thread holds its first "
           "VALUES_PER_THREAD values of a row in registers and the rest in shared memory, in "
           "vectors of 16 bytes from the row's first aligned one; the first threads a value "
           "each of the row's ends (peeled_rows.py).")

    def __init__(self, op, name: str, target: str, helpers: set[str], hw, taken, plan: PeelPlan):
        super().__init__(op, name, target, helpers, hw, taken)
        self.peel_setup(plan)
        self.lanes_set()


def peeled_rows_code(op, name: str, target: str, helpers: set[str], names, hw,
                     variants: dict) -> tuple[dict, str]:
    """The peeled kernel's launch entry (``peeled``: its name, the buffers the host
    checks and their lanes) and its text; ({}, "") where ``op`` has none."""
    plan = peel_plan(op, hw) if "registers" in variants else None
    if plan is None:
        return {}, ""
    kname = names.fresh(f"{name}_peeled")
    text = PeeledRowsEmitter(op, kname, target, helpers, hw, names.taken, plan).emit()
    return {"peeled": {"kernel": kname, "buffers": vector_buffers(plan.accesses),
                       "lanes": plan.lanes}}, text


def peeled_choice(host, kernel, call: str, lines: list[str]) -> list[str]:
    """The registers kernels' launch ``lines`` (the vector kernel where rows are whole
    aligned vectors, else the scalar one) with the peeled kernel (``call``) before the
    scalar one, where its buffers are contiguous and aligned."""
    entry = kernel.launch["peeled"]
    host.helpers.add("_peel_ready")
    buffers = ", ".join(host.namer(b) for b in entry["buffers"])
    width = "" if entry["lanes"] == "VECTOR_WIDTH" else f", width={entry['lanes']}"
    test = (f"{whole_vector_slots(entry['lanes'])} and _peel_ready({buffers}{width}):"
            "  # rows peeled to whole aligned vectors")
    unit = host.w.unit
    if len(lines) == 1:  # no vector kernel: the scalar one alone
        return [f"if {test}", unit + call, "else:"] + [unit + line for line in lines]
    return lines[:2] + [f"elif {test}", unit + call] + lines[2:]


__all__ = ["PeeledRowsEmitter", "PeeledSharedRowsEmitter", "PeelPlan", "peel_plan", "peeled_rows_code", "peeled_choice"]
