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

from dataclasses import dataclass

from mlfuse.dialects.loops import ForOp, LoadOp, ReduceOp, StoreOp

WARP = 32
VECTOR_DTYPES = ("f32", "i32", "f16")  # what a vector access may move (codegen/vector.py)
HALF_DTYPES = ("f16",)  # of those, the 16-bit ones: 8 to a 16-byte vector


def _ceil_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


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
    per_thread = max(1, most_values // lanes)
    width = max(_ceil_pow2(-(-n // per_thread)), min(_ceil_pow2(n), _ceil_pow2(fewest_lanes)))
    if width > WARP:
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


__all__ = ["HALF_DTYPES", "VECTOR_DTYPES", "RowGroup", "kernel_row_group", "row_access_dtypes",
           "row_group", "target_row_group", "vector_lanes"]
