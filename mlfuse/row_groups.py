"""Short rows split over a group of lanes: how many lanes share a row, and how many
16-byte vectors each holds (the "warp-rows" schedule's vector variant).

One rule, read by the schedule choice (``transforms/fusion/schedules.py``: explain's
reason and the cost model's threads) and by codegen (``codegen/schedule_warp_rows.py``),
so that what explain says is what runs.

A row of ``n`` vectors goes to a group of ``width`` lanes (a power of two, at most a
warp); lane l takes vectors l, l + width, l + 2 * width, ... of its row, and the
group's neighbouring lanes read neighbouring vectors. Two limits set ``width``:

- registers: a lane holds at most ``Target.short_row_values`` values of a row (16:
  a row of 512 f32 takes a whole warp, 4 vectors a lane);
- coalescing: at least ``Target.short_row_lanes`` lanes (8) where the row has that many
  vectors, so that each vector load of a warp reads whole 128-byte lines of its rows;
  a row of fewer vectors gets a lane per vector, so a warp reads 32 / width whole
  neighbouring rows at once (rows of 16 f32: 4 lanes a row, 8 rows = 512 contiguous
  bytes per load). A thread per row (the rule without this limit) read each row's
  64 bytes as a separate stream, a quarter-sector a lane per load: latency-bound
  (H100 ncu, softmax over 2^22 x 16: 19% SM busy, 37.7 cycles long-scoreboard stall).

Rows whose vectors the width does not divide leave the last lanes' last vectors out (a
masked tail: a lane's vector is taken only where it starts inside the row). The group
reduces by ``log2(width)`` xor-shuffle steps (codegen/helpers.py ``_group_reduce``).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from mlfuse.dialects.loops import ForOp, LoadOp, ReduceOp, StoreOp
from mlfuse.dialects.reductions import loop_levels
from mlfuse.ir.types import HALF_FLOAT_DTYPES

WARP = 32
VECTOR_DTYPES = ("f32", "i32", "f16", "bf16")  # what a vector access may move (codegen/vector.py)
HALF_DTYPES = HALF_FLOAT_DTYPES  # of those, the 16-bit ones: 8 to a 16-byte vector


def group_width(units, per_thread, fewest):
    """Threads sharing a row of ``units`` (vectors, or values) when each thread holds at
    most ``per_thread`` of them and a group has at least ``fewest`` threads where the row
    has that many: the least power of two both allow; 0 where a warp cannot hold the row.
    The generated host calls this very function (its source is copied into the module,
    ``_short_row_width``) to pick a group per call for rows whose length it learns then."""
    width = 1
    while width * per_thread < units or (width < fewest and width < units):
        width *= 2
    return width if width <= 32 else 0


def group_width_source() -> str:
    """``group_width`` as the generated module's ``_short_row_width``."""
    return inspect.getsource(group_width).replace("def group_width(", "def _short_row_width(", 1)


@dataclass(frozen=True)
class RowGroup:
    row: int       # values per row
    lanes: int     # values per vector
    width: int     # threads per row (a power of two, at most a warp)
    vectors: int   # vectors each thread holds (the last lanes' last ones may be empty)

    @property
    def slots(self) -> int:
        """Values a thread holds of its row."""
        return self.vectors * self.lanes

    @property
    def shuffle_steps(self) -> int:
        """Xor-shuffle steps of one group reduction."""
        return self.width.bit_length() - 1

    def describe(self) -> str:
        """What explain says of the group."""
        if self.lanes == 1:  # values one at a time (no whole 16-byte vectors)
            return (f"{self.width} threads per row, each holding up to {self.vectors} of its "
                    f"{self.row} values (no whole 16-byte vectors: loaded one at a time); a "
                    f"reduction takes {self.shuffle_steps} shuffle step(s)")
        n = self.row // self.lanes
        ragged = "" if n % self.width == 0 else f", the last {self.width * self.vectors - n} " \
            "vector slot(s) masked"
        if self.width == 1:
            return f"a thread per row, {n} vector(s) of {self.lanes} values, no shuffles"
        per_load = (f"a warp's vector load reads {WARP // self.width} whole neighbouring rows"
                    if self.vectors == 1 else
                    f"a warp's vector load reads {self.width * self.lanes} neighbouring values "
                    "of each of its rows")
        return (f"{self.width} threads per row, {self.vectors} vector(s) of {self.lanes} values "
                f"each{ragged}; {per_load}; a reduction takes {self.shuffle_steps} shuffle "
                f"step{'s' if self.shuffle_steps > 1 else ''}")


def vector_lanes(dtypes, vector_width: int) -> int:
    """Values per vector of a row kernel whose vector accesses move ``dtypes``: 16 bytes
    of 16-bit values (2 * vector_width) where all are 16-bit, else ``vector_width``."""
    dtypes = list(dtypes)
    if dtypes and all(d in HALF_DTYPES for d in dtypes):
        return 2 * vector_width
    return vector_width


def row_group(row: int, lanes: int, most_values: int, fewest_lanes: int) -> RowGroup | None:
    """The group of a row of ``row`` values in vectors of ``lanes`` values, each thread
    holding at most ``most_values`` values and a group at least ``fewest_lanes`` threads
    where the row has as many vectors (the module doc); None where ``lanes`` does not
    divide the row or a warp cannot hold it."""
    if lanes < 1 or row < 1 or row % lanes:
        return None
    n = row // lanes
    width = group_width(n, max(1, most_values // lanes), fewest_lanes)
    if not width:
        return None
    return RowGroup(row, lanes, width, -(-n // width))


def target_row_group(row, dtypes, hw) -> RowGroup | None:
    """The group of rows of ``row`` values whose vector accesses move ``dtypes``, with the
    limits of target ``hw`` (mlfuse.hardware.Target): 16-byte vectors of 16-bit values
    where all are 16-bit and the row holds whole ones, else vectors of hw.vector_width
    values; None for no vector group (a row of run-time length, or not whole vectors)."""
    if hw.vector_width == 1 or not isinstance(row, int):
        return None
    lanes = vector_lanes(dtypes, hw.vector_width)
    group = row_group(row, lanes, hw.short_row_values, hw.short_row_lanes)
    if group is None and lanes != hw.vector_width:
        group = row_group(row, hw.vector_width, hw.short_row_values, hw.short_row_lanes)
    return group


def row_access_dtypes(row_loops) -> list[str]:
    """The dtypes of the loads and stores directly in ``row_loops`` (a kernel's top-level
    reduces and fors) that step along the row (last index the loop's own) and that a
    vector may move: what decides a row's vector width (codegen/vector.py finds the
    accesses it moves whole the same way, and also asks that their loads may be issued
    early)."""
    dtypes = []
    for loop in row_loops:
        step = loop.body.args[0]
        for o in loop.body.ops:
            buf, indices = ((o.operands[0], o.operands[1:]) if isinstance(o, LoadOp) else
                            (o.operands[1], o.operands[2:]) if isinstance(o, StoreOp) else
                            (None, ()))
            if indices and indices[-1] is step and buf.type.dtype in VECTOR_DTYPES:
                dtypes.append(buf.type.dtype)
    return dtypes


def kernel_row_group(kernel, hw) -> RowGroup | None:
    """The vector group of a kernel whose top-level row loops all run over one constant
    extent and move whole vectors along it (None: no such group)."""
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    extents = {repr(o.extent_list) for o in loops}
    dtypes = row_access_dtypes(loops)
    if len(extents) != 1 or len(loops[0].extent_list) != 1 or not dtypes:
        return None
    return target_row_group(loops[0]["extent"], dtypes, hw)


def scalar_values(values: int) -> int:
    """Values a thread of a short-row plan's scalar kernel holds, of the ``values`` its
    vector kernel does: half (each held value keeps an address besides: at 16, layernorm's
    x, gamma and beta spilled at the 128 registers a block of 512 threads allows)."""
    return max(1, values // 2)


def runtime_row_group(row: int, dtypes, hw) -> RowGroup | None:
    """The group the generated host picks for a call whose rows have ``row`` values (a
    row length known only then; "short rows" of a row kernel, codegen/short_rows.py):
    16-byte vectors where they fill the row (16-bit values 8 a vector where every vector
    access moves them), else a value at a time with at least ``short_row_lanes`` lanes per
    row where the row has that many values (a group's load reads a 32-byte sector of f32
    of its row: fewer lanes holding more values each, more loads in flight a thread),
    each thread holding half as many (``scalar_values``); None
    where a warp cannot hold the row (the block-per-row kernels take it)."""
    lanes = vector_lanes(dtypes, hw.vector_width) if hw.vector_width > 1 and dtypes else 1
    if lanes > 1 and row % lanes == 0:
        return row_group(row, lanes, hw.short_row_values, hw.short_row_lanes)
    return row_group(row, 1, scalar_values(hw.short_row_values), hw.short_row_lanes)


def kernel_runtime_group(kernel, row: int, hw) -> RowGroup | None:
    """The group of a row kernel's short-row plan for a call with rows of ``row`` values
    (None: the call runs the block-per-row kernels)."""
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    return runtime_row_group(row, row_access_dtypes(loops), hw)


def why_no_short_rows(kernel) -> str | None:
    """Why a row kernel gets no short-row plan (a group of lanes per row, picked per call;
    codegen/short_rows.py), None where it does: every top-level loop walks one axis, all
    of the same extent, a symbol (a constant short row takes warp-rows outright)."""
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if not loops:
        return "no row loop"
    if any(len(loop_levels(o)) > 1 for o in loops):
        return "a loop over several axes"
    extents = {repr(o["extent"]) for o in loops}
    if len(extents) != 1:
        return "loops of different extents"
    if isinstance(loops[0]["extent"], int):
        return "its rows have a constant length"
    if any(_item_bytes(o) == 8 for loop in loops for o in loop.body.ops
           if isinstance(o, (LoadOp, StoreOp))):
        # a held slot of 64-bit values takes two registers: ptxas spilled 288 B of a bf16 +
        # i64 row kernel's group at the 128 registers its 512-thread block allows
        return "64-bit values along its rows (held slots would spill)"
    return None


def _item_bytes(access) -> int:
    """Bytes of one value a load or store moves."""
    buffer = access.operands[0] if isinstance(access, LoadOp) else access.operands[1]
    return 8 if buffer.type.dtype in ("f64", "i64") else 4


__all__ = ["group_width", "group_width_source", "kernel_runtime_group", "runtime_row_group",
           "scalar_values", "why_no_short_rows",
           "HALF_DTYPES", "VECTOR_DTYPES", "RowGroup", "kernel_row_group", "row_access_dtypes",
           "row_group", "target_row_group", "vector_lanes"]
