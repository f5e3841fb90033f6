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

from mlfuse.row_hold import held_buffers, held_in_vectors, held_value_bytes, scalar_held_values

from mlfuse.codegen.emit_kernel import _row_loops, half_row_vectors
from mlfuse.codegen.flat_rows import aligned_start_tests, row_flat_vectors, split_vector_buffers
from mlfuse.codegen.kernel_code import narrow_index_tests
from mlfuse.codegen.peeled_rows import PeeledSharedRowsEmitter, peel_plan
from mlfuse.codegen.row_plans import whole_vector_slots
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
    entry = {"value_bytes": held_value_bytes(held), "scalar_values": scalar_held_values(hw),
             "in_vectors": held_in_vectors(op)}
    texts = []
    row_loops = _row_loops(op)
    flat, multiples = row_flat_vectors(op, row_loops)  # rows through a reshape or a nest
    plain = row_vector_accesses(row_loops)
    moved = vector_buffers(plain + flat)
    whole = hw.vector_width > 1 and not any(isinstance(e, int) and e % hw.vector_width
                                            for e in extents) \
        and entry["in_vectors"] and all(any(b is m for m in moved) for b in held)
    if whole:
        entry["vector"] = names.fresh(f"{name}_shared")
        texts.append(SharedRowsEmitter(op, entry["vector"], target, helpers, hw, names.taken).emit())
        texts.append(f"{entry['vector']} = _DynamicShared({entry['vector']}, SHARED_ROW_BYTES)"
                     + _ALLOWED)
        # the host's tests: rows of the plain accesses' buffers on vectors; flat rows'
        # bases as products of the dims, their buffers' starts (flat_rows.py)
        entry["buffers"], entry["flat_buffers"] = split_vector_buffers(plain, flat)
        entry["multiples"] = multiples
        # the kernel's values a vector (16 bytes of 16-bit values where they all are)
        entry["lanes"] = "VECTOR_WIDTH_16" if half_row_vectors(op, hw) else "VECTOR_WIDTH"
    plan = peel_plan(op, hw)
    peeled = vector_buffers(plan.accesses) if plan is not None else []
    if plan is not None and all(any(b is p for p in peeled) for b in held):
        # rows of no whole vectors, whose held buffers share the row's phase
        entry["peeled"] = names.fresh(f"{name}_shared_peeled")
        texts.append(PeeledSharedRowsEmitter(op, entry["peeled"], target, helpers, hw,
                                             names.taken, plan).emit())
        texts.append(f"{entry['peeled']} = _DynamicShared({entry['peeled']}, SHARED_ROW_BYTES)"
                     + _ALLOWED)
        entry["peeled_buffers"], entry["peeled_lanes"] = peeled, plan.lanes
    entry["scalar"] = names.fresh(f"{name}_shared_scalar")
    texts.append(ScalarSharedRowsEmitter(op, entry["scalar"], target, helpers, hw,
                                         names.taken).emit())
    texts.append(f"{entry['scalar']} = _DynamicShared({entry['scalar']}, SHARED_ROW_BYTES)"
                 + _ALLOWED)
    return {"shared_rows": entry}, "\n\n\n".join(texts)


def shared_rows_launch(host, kernel, points: str, row: str, args: list[str],
                       stages: int) -> tuple[list[str], list[str], str | None]:
    """(the lines before the choice, the choice's branches: ``if``/``elif`` lines each
    followed by its indented launch, and the test that the rows are held at all, for
    the split plan's choice, None where held rows never pre-empt it): threads and bytes
    from the call's row length. ``stages``: the split plan's kernels (0: none)."""
    entry = kernel.launch["shared_rows"]
    host.helpers.update({"_shared_row_plan", "_row_blocks"})
    unit, long = host.w.unit, f"{row} > VALUES_PER_THREAD * REGISTER_ROW_THREADS"
    threads, held = host.namer.fresh("threads"), host.namer.fresh("held_bytes")
    split = "SHARED_ROW_BYTES * SHARED_ROW_SPLIT"  # smaller blocks, more rows an SM, where asked
    lines = [(f"{threads}, {held} = _shared_row_plan({row}, {entry['value_bytes']}, "
              f"{entry['scalar_values']}, SHARED_ROW_THREADS, 1, {split})")]
    branches = []

    def vector_branch(kernel_name, buffers, lanes, ready, extra, comment, base):
        """A held vector kernel's plan line and branch: its own threads and bytes
        (``lanes`` values a vector), launched where ``ready`` takes ``buffers``."""
        host.helpers.add(ready)
        v_threads, v_held = host.namer.fresh(f"{base}_threads"), host.namer.fresh(f"{base}_bytes")
        lines.append(f"{v_threads}, {v_held} = _shared_row_plan({row}, {entry['value_bytes']}, "
                     f"VALUES_PER_THREAD, SHARED_ROW_THREADS, {lanes}, {split})")
        width = ", width=VECTOR_WIDTH_16" if lanes != "VECTOR_WIDTH" else ""
        names = ", ".join(host.namer(b) for b in buffers)
        test = " and ".join([long, f"{v_held} <= SHARED_ROW_BYTES", *extra,
                             whole_vector_slots(lanes)] + ([f"{ready}({names}{width})"]
                                                           if names else []))
        branches.extend([f"{'elif' if branches else 'if'} {test}:  # rows past registers, {comment}",
                         unit + host.call(kernel_name,
                                          f"_row_blocks({points}), {v_threads}, 0, {v_held}", args)])

    if "vector" in entry:
        flat_tests = host.multiple_tests(entry["multiples"], kernel.op) + \
            aligned_start_tests(host, entry["flat_buffers"])
        vector_branch(entry["vector"], entry["buffers"], entry["lanes"], "_vector_ready",
                      [f"{row} % {entry['lanes']} == 0", *flat_tests], "whole aligned vectors",
                      "vector")
    if "peeled" in entry:  # (peeled_rows.py)
        vector_branch(entry["peeled"], entry["peeled_buffers"], entry["peeled_lanes"],
                      "_peel_ready", [], "peeled to whole aligned vectors", "peeled")
    held_test = f"{long} and {held} <= SHARED_ROW_BYTES"
    narrow = " and ".join(narrow_index_tests(host, kernel.op, points, row))  # (its divisions)
    branches += [(f"{'elif' if branches else 'if'} {held_test} and {narrow}:  # rows past "
                  "registers, held a value at a time"),
                 unit + host.call(entry["scalar"], f"_row_blocks({points}), {threads}, 0, {held}",
                                  args)]
    if stages and not entry["in_vectors"]:
        # rows held only a value at a time (an access divides the row index: group
        # norm's gamma[c]) take the split plan where it is called: on the H100, 128 rows
        # of 65536 f32 held 0.058 ms, split 0.047
        return lines, branches, None
    if stages:
        held_test += f" and _held_rows_first({points}, {stages}, SM_COUNT)"
    return lines, branches, held_test


__all__ = ["shared_rows_code", "shared_rows_launch"]
