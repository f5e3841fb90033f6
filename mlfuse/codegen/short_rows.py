"""A row kernel's short-row plan: rows whose length the host learns only per call.

A "row" kernel runs one block per row. Where the row length is a symbol (``x: f32[R,
C]``), a call with short rows (softmax over 131072 rows of 100) would leave a block of
32 threads a few values each: few bytes in flight per SM, latency-bound (42% of copy
bandwidth measured on the H100). The short-row plan runs such a call as warp-rows
(``schedule_warp_rows.py``): a group of lanes per row, several rows per block, the
group's reductions by xor shuffles (no shared memory, no barrier), each thread holding
its values of the row in registers. Its kernels are that schedule's, with the group's
width a parameter:

- "short-vector": lane l of a group of ``width`` takes 16-byte vectors l, l + width, ...
  of its row (4 f32, or 8 f16 where every vector access moves 16-bit values), at most
  ``Target.short_row_values`` values a thread; the host launches it where the row is
  whole vectors and the buffers' rows are aligned;
- "short": the same with values one at a time (any row length, any alignment), at most
  half as many a thread (rows of up to 256 values where the vector kernel takes 512).

The host picks per call (``short_rows_launch``): rows a warp holds take the plan, with the group that
``mlfuse/row_groups.py``'s ``group_width`` gives (its source is copied into the module
as ``_short_row_width``, so the host, the cost model and explain compute one geometry);
longer rows keep the block-per-row kernels.
"""
from __future__ import annotations

from mlfuse.dialects.loops import ForOp, LoadOp, ReduceOp
from mlfuse.row_groups import WARP, scalar_values, vector_lanes

from mlfuse.codegen.schedule_warp_rows import WarpRowsEmitter
from mlfuse.codegen.flat_rows import aligned_start_tests, row_flat_vectors, split_vector_buffers
from mlfuse.codegen.vector import row_vector_accesses

_DOC = {"short": "Short rows over [{space}] (a row kernel's plan for rows known short at the "
                 "call): a group of `width` threads per point, each holding its values of the "
                 "row; group reductions by shuffles.",
        "short-vector": "Short rows over [{space}] (a row kernel's plan for rows known short at "
                        "the call): a group of `width` threads per point, lane l taking vectors "
                        "l, l + width, ... of its row, each loaded and stored whole."}


def _row_loops(op) -> list:
    return [o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]


def _vector_dtypes(accesses) -> list[str]:
    return [(o.operands[0] if isinstance(o, LoadOp) else o.operands[1]).type.dtype
            for o in accesses]


class ShortRowsEmitter(WarpRowsEmitter):
    """The warp-rows kernel with the group's width a parameter and every row held:
    a thread's slots are ``short_row_values``, of which the host's width leaves the
    ones past the row's end unused."""

    DOC = _DOC
    # the scalar kernel's values at row_base + k: no address per value of a 2-D index
    # (layernorm's 16 held values spilled at the 128 registers 512 threads allow)
    flat_rows = True

    def plan_group(self, op, hw) -> None:
        self.held_rows, self.constant_width = True, None
        # blocks resident per SM: registers capped (2 x 512 threads: 64) so that an SM has
        # rows enough in flight, where a thread's held values of the buffers it loads
        # along the row fit them (ptxas sm_90: softmax's 16 f32 of x, 60 registers;
        # layernorm's 16 of x, gamma and beta spilled 144 B at 64, so it keeps 128; so did
        # two buffers of 16 (bf16 and i64 rows: 288 B) and rows read through a reshape,
        # which have no row vector accesses (group norm: 496 B))
        plain, flat, _ = _short_vector_accesses(op)
        accesses = plain + flat
        loaded = {id(o.operands[0]) for o in accesses if isinstance(o, LoadOp)}
        slots = hw.short_row_values if self.vector else scalar_values(hw.short_row_values)
        if hw.short_row_min_blocks > 1 and accesses and \
                slots * len(loaded) <= hw.short_row_values:
            self.launch_bound = "(THREADS_PER_BLOCK, SHORT_ROW_MIN_BLOCKS)"
        # (module constants: hw.short_row_values, row_groups.scalar_values of it)
        self.row_slots = "SHORT_ROW_VALUES" if self.vector else "SHORT_ROW_SCALARS"
        if self.vector and vector_lanes(_vector_dtypes(accesses),
                                        hw.vector_width) != hw.vector_width:
            self.vector_lanes = "VECTOR_WIDTH_16"  # 16 bytes of 16-bit values a vector
            self.vector_moves = ("_load_halves", "_store_halves")


def emit_short_rows(op, name: str, target: str, helpers: set[str], names, hw) -> tuple[dict, str]:
    """The plan's kernels of row kernel ``op`` (``name``: the row kernel's) and what its
    launch needs: {"short": {variant: kernel name}, "short_lanes": values per vector,
    "short_buffers": the buffers a vector kernel needs aligned}."""
    plain, flat, multiples = _short_vector_accesses(op) if hw.vector_width > 1 else ([], [], [])
    accesses = plain + flat
    plain_buffers, flat_buffers = split_vector_buffers(plain, flat)
    variants = {"short": names.fresh(f"{name}_short")}
    if accesses:
        variants["short-vector"] = names.fresh(f"{name}_short_vector")
    texts = [ShortRowsEmitter(op, kname, kind, target, helpers, hw, names.taken).emit()
             for kind, kname in variants.items()]
    lanes = vector_lanes(_vector_dtypes(accesses), hw.vector_width)
    launch = {"short": variants, "short_min_lanes": hw.short_row_lanes,
              "short_lanes": "VECTOR_WIDTH" if lanes == hw.vector_width else "VECTOR_WIDTH_16",
              "short_buffers": plain_buffers, "short_flat_buffers": flat_buffers,
              "short_multiples": multiples}
    return launch, "\n\n".join(texts)


def _short_vector_accesses(op) -> tuple[list, list, list]:
    """The accesses the vector kernel moves whole: plain ``x[..., k]`` ones, those along
    a flat row (a reshape's read, a flattened nest: flat_rows.row_flat_vectors), and what
    the host must check of the flat rows' bases."""
    loops = _row_loops(op)
    flat, multiples = row_flat_vectors(op, loops)
    return row_vector_accesses(loops), flat, multiples


def short_rows_launch(host, kernel, points: str, row: str, args: list[str],
                      lines: list[str]) -> list[str]:
    """The launch lines of a row kernel with a short-row plan: the vector kernel where
    the call's rows (``row`` values) are whole vectors that a warp holds and the buffers
    are aligned, else the scalar kernel where a warp holds the row at half the values a
    thread, else ``lines`` (the block-per-row launches). The group: ``_short_row_width``
    of the row's vectors (at least ``short_row_lanes`` lanes where the row has that many
    vectors) or of its values (as many lanes where the row has that many: each load of
    a group reads at least a 32-byte sector of its row; a warp of 32 lanes a row held
    2 of 50 values a lane, too few loads in flight)."""
    launch, unit = kernel.launch, host.w.unit
    variants = launch["short"]
    host.helpers.update({"_short_row_width", "_pointwise_blocks"})
    width = host.namer.fresh("width")

    def call(kind: str) -> str:
        return host.call(variants[kind], f"_pointwise_blocks({points} * {width}, 1), "
                         "THREADS_PER_BLOCK", args + [width])
    values, scalar = "SHORT_ROW_VALUES", "SHORT_ROW_SCALARS"
    branches = []
    if "short-vector" in variants:
        host.helpers.add("_vector_ready")
        lanes = launch["short_lanes"]
        buffers = ", ".join(host.namer(b) for b in launch["short_buffers"])
        aligned = " and ".join(
            ([f"_vector_ready({buffers}" + ("" if lanes == "VECTOR_WIDTH" else
                                            f", width={lanes}") + ")"] if buffers else []) +
            aligned_start_tests(host, launch.get("short_flat_buffers", ())))
        group = (f"{width} = _short_row_width({row} // {lanes}, {values} // {lanes}, "
                 f"{launch['short_min_lanes']})")
        bases = "".join(f" and {t}" for t in host.multiple_tests(
            launch.get("short_multiples", ()), kernel.op))  # flat rows' bases: whole vectors
        branches.append((f"{row} <= {WARP} * {values} and {row} % {lanes} == 0{bases} and {aligned}",
                         "short rows of whole vectors, aligned: a group of lanes per row",
                         [group, call("short-vector")]))
    branches.append((f"{row} <= {WARP} * {scalar}", "short rows: a group of lanes per row",
                     [f"{width} = _short_row_width({row}, {scalar}, "
                      f"{launch['short_min_lanes']})", call("short")]))
    out = []
    for n, (test, why, body) in enumerate(branches):
        out.append(f"{'if' if n == 0 else 'elif'} {test}:  # {why} (short_rows.py)")
        out += [unit + line for line in body]
    return out + ["else:"] + [unit + line for line in lines]


__all__ = ["ShortRowsEmitter", "emit_short_rows", "short_rows_launch"]
