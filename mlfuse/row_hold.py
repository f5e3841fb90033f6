"""A long row held on chip in registers AND shared memory: a block's threads and the
dynamic shared memory a call takes (codegen/shared_rows.py's "shared-vector" variant).

One function, three readers: the host of a generated module (its source is copied
into it, so the module stays standalone), codegen (the offsets of each held buffer's
area) and the cost model (fusion/cost.py: whether a call takes the variant), so the
three agree on a call's threads and bytes.

A row kernel whose rows pass what its registers variant holds (VALUES_PER_THREAD x
REGISTER_ROW_THREADS values) streams them: each row loop reads the row again (softmax
over rows of 65536 f32: x read three times). Held instead: a block of up to ``most``
threads, thread t taking vectors t, t + threads, ... of a row; its first
``values / vector`` vectors in registers (as the registers variant's), the rest in
shared memory, ``value_bytes`` a row value (the buffers that several row loops read,
one area each). 1024 threads x 16 f32 in registers is 64 KB of a row; 227 KB of shared
memory hold 58112 f32 more, so a row of 65536 f32 (256 KB) is read once.
"""
from __future__ import annotations

import inspect

from mlfuse.dialects.index_forms import ADD, merged_view, op_of, reads_value
from mlfuse.dialects.loops import ForOp, LoadOp, MaskedLoadOp, ReduceOp, StoreOp
from mlfuse.dialects.reductions import defined_inside, loop_levels, sibling_passes
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.types import itemsize
from mlfuse.row_groups import VECTOR_DTYPES


def _shared_row_plan(extent, value_bytes, values, most, vector, sm_bytes=0):
    """(threads, bytes): a block's threads (the least power of two, at least 32, whose
    ``values`` each hold ``extent``, at most ``most``) and the bytes of dynamic shared
    memory holding each thread's vectors (``vector`` values each) past its first
    ``values // vector``, ``value_bytes`` a row value. ``sm_bytes`` (0: never): the
    block is halved, down to ``most // 4`` threads, while ``most`` threads' worth of such
    blocks (an SM's, at the registers the kernel's launch bounds leave) keep their bytes
    and the 1 KB a block the hardware keeps within ``sm_bytes``: more rows an SM at the
    same threads, one's reductions overlapping the others' loads (H100, f32 layernorm
    8192 x 5120: two blocks of 512 0.137 ms, four of 256 0.121, eight of 128 0.124)."""
    def plan(most):
        threads = 32
        while threads * values < extent and threads < most:
            threads *= 2
        past = max(0, -(-extent // (vector * threads)) - values // vector)
        return threads, past * threads * vector * value_bytes
    threads, nbytes = plan(most)
    while sm_bytes and threads > max(32, most // 4):
        half = plan(threads // 2)
        if most // half[0] * (half[1] + 1024) > sm_bytes + 1024:
            break
        threads, nbytes = half
    return threads, nbytes


def _held_rows_first(points, stages, sm_count):
    """Whether ``points`` held rows (a block each) beat the split plan of ``stages``
    kernels (codegen/split_stages.py). Each stage reads the rows again, the held kernel
    once, and either writes the output once: the split plan moves (stages + 1) / 2 times
    the held kernel's bytes, with every SM busy. The held kernel's block puts its whole
    row's loads in flight (an SM's share of the bandwidth, whatever else it holds), so
    it takes as long as its busiest SM's rows: ceil(points / sm_count), where the whole
    GPU would take points / sm_count. 256 rows of 32768 f32 on 132 SMs: 2 rows on the
    busiest, 1.03 of the ideal, against softmax's three stages' 2."""
    return 2 * sm_count * -(-points // sm_count) <= (stages + 1) * points


def shared_row_plan(extent: int, value_bytes: int, values: int, most: int,
                    vector: int, sm_bytes: int = 0) -> tuple[int, int]:
    """The plan of a call (see ``_shared_row_plan``)."""
    return _shared_row_plan(extent, value_bytes, values, most, vector, sm_bytes)


def scalar_held_values(target) -> int:
    """A thread's values in registers in the scalar held variant
    (codegen/shared_rows_scalar.py): half the vector variant's, since each value's 64-bit
    address takes registers that a vector's one address leaves free (softmax with 16
    spilled 168 B at 1024 threads' 64 registers; with 8, none)."""
    return max(1, target.row_values_per_thread // 2)


def held_buffers(kernel: Operation) -> list[Value] | None:
    """The buffers a row kernel's shared-memory variant holds (those that more than one
    pass over the row reads: what its streaming variant reads again), or None where it
    has no such variant: its top-level loops must each walk one axis of one common
    extent, and each held buffer must be read, in every loop that reads it, by plain
    loads at the same place, consecutive elements as the loop's index steps (``_row_place``:
    ``x[..., k]``, a flattened nest's ``x[n, c, k // W, k % W]`` or a reshape's row), the
    rest fixed for the row (so a thread's vectors are neighbouring values: 16-byte
    copies), of a dtype a vector moves."""
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if not loops or any(len(loop_levels(o)) > 1 for o in loops) or \
            len({repr(o["extent"]) for o in loops}) != 1:
        return None
    inside = defined_inside(loops)
    passes: dict[int, set[int]] = {}  # id(buffer) -> the passes reading it
    for n, group in enumerate(sibling_passes(kernel.body.ops)):
        for o in (inner for top in group for inner in top.walk()):
            if isinstance(o, (LoadOp, MaskedLoadOp)):
                passes.setdefault(id(o.operands[0]), set()).add(n)
    held: list[Value] = []
    outer: dict[int, list[int]] = {}  # id(buffer) -> its loads' fixed indices
    for loop in loops:
        k = loop.body.args[0]
        for o in loop.walk():
            if not isinstance(o, (LoadOp, MaskedLoadOp)) or len(passes[id(o.operands[0])]) < 2:
                continue
            buf = o.operands[0]
            fixed = _row_place(buf, o.operands[1:], k, inside) if isinstance(o, LoadOp) else None
            if o.parent is not loop.body or buf.type.dtype not in VECTOR_DTYPES or fixed is None:
                return None
            if outer.setdefault(id(buf), fixed) != fixed:
                return None
            if not any(buf is b for b in held):
                held.append(buf)
    return held or None


def _row_place(buf: Value, indices: list[Value], k: Value, inside: set[int]) -> list[int] | None:
    """The fixed part of a row access's place (ids of the indices besides the step, and
    of the step's offset), where its row values are consecutive elements of ``buf`` as
    ``k`` steps: ``x[..., k]``, or trailing indices that unravel ``k`` (a flattened nest,
    ``x[n, c, k // W, k % W]``) or ``B + k`` (a reshape's row, ``B`` fixed for the row)
    over the buffer's own trailing axes (``index_forms.merged_view``); None otherwise."""
    indices, _ = merged_view(list(indices), list(buf.type.shape))
    if not indices:
        return None
    step, offset = indices[-1], []
    if step is not k:
        add = op_of(step)
        if not isinstance(add, ADD) or not any(v is k for v in add.operands):
            return None
        base = add.operands[1] if add.operands[0] is k else add.operands[0]
        if id(base) in inside:
            return None
        offset = [id(base)]
    if any(id(v) in inside for v in indices[:-1]):
        return None
    return [id(v) for v in indices[:-1]] + offset


def held_in_vectors(kernel: Operation) -> bool:
    """Whether a row kernel's held rows move in 16-byte vectors: every access of its row
    loops that reads the loop index is at a row place (``_row_place``). An access at a
    division of it (group norm's gamma[c], c = (B + k) // (H*W)) would have each lane of
    a vector divide alone (codegen/flat_rows.row_flat_vectors): such rows are held a
    value at a time."""
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    inside = defined_inside(loops)
    for loop in loops:
        k = loop.body.args[0]
        for o in loop.walk():
            if not isinstance(o, (LoadOp, MaskedLoadOp, StoreOp)):
                continue
            buf, indices = (o.operands[1], o.operands[2:]) if isinstance(o, StoreOp) else \
                (o.operands[0], o.operands[2 if isinstance(o, MaskedLoadOp) else 1:])
            if any(reads_value(v, k) for v in indices) and (
                    isinstance(o, MaskedLoadOp) or _row_place(buf, indices, k, inside) is None):
                return False
    return True


def held_value_bytes(buffers: list[Value]) -> int:
    """Bytes of shared memory a held row value takes: one per held buffer."""
    return sum(itemsize(b.type.dtype) for b in buffers)


def held_rows_first(points: int, stages: int, sm_count: int) -> bool:
    """The choice between held rows and the split plan (see ``_held_rows_first``)."""
    return _held_rows_first(points, stages, sm_count)


def row_hold_source() -> str:
    """The plan's and the choice's source, for a generated module's host."""
    return inspect.getsource(_shared_row_plan) + "\n\n" + inspect.getsource(_held_rows_first)


__all__ = ["shared_row_plan", "scalar_held_values", "held_rows_first", "row_hold_source", "held_buffers",
           "held_in_vectors", "held_value_bytes"]
