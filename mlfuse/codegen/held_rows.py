"""A row kernel's variants holding rows past registers (``shared_rows.py``: whole
vectors; ``shared_rows_scalar.py``: a value at a time), and the host's choice of them.

The host computes both plans from the call's row length (``_shared_row_plan``, vectors
of VECTOR_WIDTH values or of one) and runs, in this order: the vector variant where the
row is whole vectors of aligned buffers and its shared memory fits; the scalar variant
where its shared memory fits (odd lengths, misaligned rows); else the registers or
streaming kernels. Where the kernel has a split plan too (few long rows), the host
takes it instead only where ``_held_rows_first`` says it moves the rows faster.
"""
from __future__ import annotations

from mlfuse.row_hold import held_buffers, held_value_bytes, scalar_held_values

from mlfuse.codegen.emit_kernel import _row_loops, half_row_vectors
from mlfuse.codegen.shared_rows import SharedRowsEmitter
from mlfuse.codegen.shared_rows_scalar import ScalarSharedRowsEmitter
from mlfuse.codegen.vector import row_vector_accesses, vector_buffers

_ALLOWED = "  # over 48 KB: allowed first\n"


def shared_rows_code(op, name: str, target: str, helpers: set[str], names, hw) -> tuple[dict, str]:
    """The variants' launch entry (``shared_rows``: the bytes a held row value takes, the
    scalar kernel's name, and the vector kernel's name and the buffers the host checks
    for whole aligned vectors, where it has one) and their text; ({}, "") where the
    kernel has none (rows that registers always hold, no buffer to hold, or a target
    without them)."""
    held = held_buffers(op)
    extents = [o["extent"] for o in _row_loops(op)]
    short = all(isinstance(e, int) and e <= hw.row_values_per_thread * hw.row_threads
                for e in extents)
    if held is None or short or not hw.shared_row_bytes:
        return {}, ""
    entry = {"value_bytes": held_value_bytes(held), "scalar_values": scalar_held_values(hw)}
    texts = []
    whole = hw.vector_width > 1 and not any(isinstance(e, int) and e % hw.vector_width
                                            for e in extents)
    if whole:
        entry["vector"] = names.fresh(f"{name}_shared")
        texts.append(SharedRowsEmitter(op, entry["vector"], target, helpers, hw, names.taken).emit())
        texts.append(f"{entry['vector']} = _DynamicShared({entry['vector']}, SHARED_ROW_BYTES)"
                     + _ALLOWED)
        entry["buffers"] = vector_buffers(row_vector_accesses(_row_loops(op)))
        # the kernel's values a vector (16 bytes of 16-bit values where they all are)
        entry["lanes"] = "VECTOR_WIDTH_16" if half_row_vectors(op, hw) else "VECTOR_WIDTH"
    entry["scalar"] = names.fresh(f"{name}_shared_scalar")
    texts.append(ScalarSharedRowsEmitter(op, entry["scalar"], target, helpers, hw,
                                         names.taken).emit())
    texts.append(f"{entry['scalar']} = _DynamicShared({entry['scalar']}, SHARED_ROW_BYTES)"
                 + _ALLOWED)
    return {"shared_rows": entry}, "\n\n\n".join(texts)


def shared_rows_launch(host, kernel, points: str, row: str, args: list[str],
                       stages: int) -> tuple[list[str], list[str], str]:
    """(the lines before the choice, the choice's branches: ``if``/``elif`` lines each
    followed by its indented launch, and the test that the rows are held at all, for
    the split plan's choice): threads and bytes from the call's row length. ``stages``:
    the split plan's kernels (0: none)."""
    entry = kernel.launch["shared_rows"]
    host.helpers.update({"_shared_row_plan", "_row_blocks"})
    unit, long = host.w.unit, f"{row} > VALUES_PER_THREAD * REGISTER_ROW_THREADS"
    threads, held = host.namer.fresh("threads"), host.namer.fresh("held_bytes")
    pairs = "SHARED_ROW_BYTES * SHARED_ROW_PAIRS"  # two blocks of half the threads, where asked
    lines = [(f"{threads}, {held} = _shared_row_plan({row}, {entry['value_bytes']}, "
              f"{entry['scalar_values']}, SHARED_ROW_THREADS, 1, {pairs})")]
    branches = []
    if "vector" in entry:
        host.helpers.add("_vector_ready")
        v_threads, v_held = host.namer.fresh("vector_threads"), host.namer.fresh("vector_bytes")
        lanes = entry["lanes"]
        lines.append(f"{v_threads}, {v_held} = _shared_row_plan({row}, {entry['value_bytes']}, "
                     f"VALUES_PER_THREAD, SHARED_ROW_THREADS, {lanes}, {pairs})")
        buffers = ", ".join(host.namer(b) for b in entry["buffers"])
        ready = f"_vector_ready({buffers}" + (", width=VECTOR_WIDTH_16)" if lanes != "VECTOR_WIDTH"
                                              else ")")
        test = " and ".join([long, f"{v_held} <= SHARED_ROW_BYTES", f"{row} % {lanes} == 0", ready])
        branches += [f"if {test}:  # rows past registers, whole aligned vectors",
                     unit + host.call(entry["vector"],
                                      f"_row_blocks({points}), {v_threads}, 0, {v_held}", args)]
    held_test = f"{long} and {held} <= SHARED_ROW_BYTES"
    branches += [(f"{'elif' if branches else 'if'} {held_test}:  # rows past registers, "
                  "held a value at a time"),
                 unit + host.call(entry["scalar"], f"_row_blocks({points}), {threads}, 0, {held}",
                                  args)]
    if stages:
        held_test += f" and _held_rows_first({points}, {stages}, SM_COUNT)"
    return lines, branches, held_test


__all__ = ["shared_rows_code", "shared_rows_launch"]
