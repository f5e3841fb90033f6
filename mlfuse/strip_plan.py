"""The geometry of a strips kernel over columns (codegen/schedule_strips.py), picked per
call from the sizes of the call: how many neighbouring points a block takes (its strip's
width) and how many threads share each point's reduced values; and the chunks a
split-columns reduction cuts each point's values into (codegen/schedule_split.py).

One function, three readers: the host of a generated module (the function's source is
copied into it, so the module stays standalone), codegen (the registers variant's slots
where the reduced extent is a constant) and the cost model (fusion/cost.py), so the
three agree on the blocks and threads of a call.

Why the width varies: a block's strip of ``width`` points x ``extent`` reduced values
is its work. Wide strips (32 f32 points: a warp reads one 128-byte line per reduced
index) give few blocks where the kept extent is small (column centring over 4096
columns: 128 blocks of 512 threads for 132 SMs, each walking 16384 rows twice, 25%
occupancy), and many values a block where the reduced extent is long (softmax over a
middle axis of 256: 32 x 256 values, 512 threads x 16 held values at 100 registers, one
block per SM, whose load, reduce and store phases then never overlap). Narrower strips
(down to one 32-byte sector a row) give more, smaller blocks, several resident per SM.
"""
from __future__ import annotations

import inspect

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import LoadOp


def _strip_columns(points, extent, widest, narrowest, line, least, most, deepest, values,
                   sms, per_sm):
    """(width, per): the points of a block's strip (a power of two from ``widest`` down to
    ``narrowest``) and the threads per point (a power of two; ``width * per`` threads a
    block, at least ``least`` and at most ``most`` where the extent needs them).

    The widest strip whose threads hold all of their point's ``extent`` reduced values
    in ``values`` slots each (the registers variant: inputs read once), else the widest;
    then narrower while the grid has fewer than ``sms * per_sm`` blocks (a few per SM).
    A strip whose values are not held (the streaming variant, which walks its rows twice)
    stops at ``line`` points (a 128-byte line a row: 32-byte rows cost column centring
    0.406 ms against 0.325 with whole lines, H100) unless fewer than half the ``sms``
    would have a block, and takes more threads a point instead, up to ``deepest`` a
    block, while the grid's threads are fewer than the full grid's of ``most``."""
    def threads_per_point(width):
        per = max(1, least // width)
        while per * width < most and per * values < extent:
            per *= 2
        return per

    width = widest
    while width > narrowest and threads_per_point(width) * values < extent:
        width //= 2
    held = threads_per_point(width) * values >= extent
    if not held:  # held nowhere: no reason to narrow
        width = widest
    fill = sms * per_sm
    line = max(narrowest, min(line, widest))
    floor = narrowest if held or (points + line - 1) // line < sms // 2 else line
    while width > floor and (points + width - 1) // width < fill:
        width //= 2
    per = threads_per_point(width)
    blocks = (points + width - 1) // width
    while not held and width * per * 2 <= deepest and 2 * per * values < extent and \
            blocks * width * per < fill * most:
        per *= 2  # (still streamed: the host launches the registers variant at most threads)
    return width, per


def most_slots(extent: int, widest: int, narrowest: int, least: int, most: int,
               values: int) -> int:
    """The most values a thread of the registers variant holds for a constant reduced
    ``extent``, over every width a call may pick (the points are known only per call)."""
    slots, width = 1, widest
    while True:
        _, per = _strip_columns(1 << 62, extent, width, width, width, least, most, most,
                                values, 0, 0)
        slots = max(slots, -(-extent // per))
        if width <= narrowest:
            return min(slots, values)
        width //= 2


def narrowest_points(itemsize: int, widest: int, sector_bytes: int = 32) -> int:
    """The narrowest strip of a kernel whose smallest value is ``itemsize`` bytes: one
    32-byte sector a row (fewer would fetch sectors the block uses only in part)."""
    return max(1, min(widest, sector_bytes // max(1, itemsize)))


def line_points(itemsize: int, widest: int, line_bytes: int = 128) -> int:
    """The narrowest strip of a streaming kernel whose smallest value is ``itemsize``
    bytes: a 128-byte line a row (capped at ``widest``)."""
    return narrowest_points(itemsize, widest, line_bytes)


def _strip_shared(points, extent, widest, narrowest, threads, lanes, planes, value_bytes,
                  budget, sms, per_sm, held_values=8):
    """(width, per, bytes) of the shared-memory strips kernel (codegen/strips_shared.py),
    or None where even its narrowest strip's values pass ``budget`` bytes.

    ``points`` counts vectors of ``lanes`` values (a thread's points); ``planes`` values
    a point and reduced index are held (one per buffer read again), ``value_bytes`` each. A
    block of at most ``threads`` (a power of two): ``width`` threads across the strip,
    ``per`` down the reduced axis, each holding ceil(extent / per) vectors a plane in
    shared memory, a plane's rows ``threads`` wide. The widest strip (a 128-byte line a row: coalesced reads) whose values fit
    ``budget``, then narrower (down to ``narrowest``) while the grid has fewer than
    ``sms * per_sm`` blocks. Fewer threads a point than ``threads // width`` where the
    extent is shorter (no idle threads). Each thread combines its point's ``per``
    partials itself (codegen's _strip_reduce): a small ``per`` keeps that short, and the
    values a thread holds cost shared memory, not registers."""
    def plan(width):
        per = max(1, threads // width)
        while per > 1 and per // 2 >= extent:
            per //= 2
        return per, -(-extent // per) * threads * lanes * planes * value_bytes

    # at most half the block across the strip: the reductions' scratch (a lane's threads'
    # partials, a row of padding and the totals) then holds 2 x threads values a lane
    widest = min(widest, threads // 2)
    width = widest
    while width > narrowest and plan(width)[1] > budget:
        width //= 2
    if width < narrowest or plan(width)[1] > budget or extent < 1:
        return None
    # a short reduced axis: wider strips and fewer threads down it, until a thread holds
    # ``held_values`` of it (softmax over S = 32 of [512, 32, 1024]: 16 threads of 2
    # values made 32768 blocks of little work each), while the values fit and the grid
    # keeps its blocks an SM
    while width * 2 <= threads // 2 and plan(width)[0] > 1 and \
            -(-extent // plan(width)[0]) < held_values and \
            plan(width * 2)[1] <= budget and -(-points // (width * 2)) >= sms * per_sm:
        width *= 2
    while width > narrowest and -(-points // width) < sms * per_sm:
        width //= 2
    per, size = plan(width)
    return width, per, size


def _hold_key(load, loop_indices) -> tuple:
    """What a load reads, the same in every loop: its buffer and, per index, the point
    axis or the loop's reduced index."""
    return (id(load.operands[0]),
            tuple("k" if id(v) in loop_indices else id(v) for v in load.operands[1:]))


def uniform_loads(tops) -> list:
    """The loads of a strips kernel's top-level loops ``tops`` (each one axis) that read
    one value for every point of a row of its strip: f32 or f16, the loop's index once,
    every other index an outer point index or a constant, none the points' last index (a
    middle softmax's mask ``m[b, k, 0]``, a weight ``w[k]``). The vector kernels load
    such a value once for a vector's lanes (codegen/strips_vector.py), the shared one
    reads it again in each loop rather than hold it in a plane, and the cost model
    prices them so."""
    if not tops or not tops[0].parent.args:
        return []
    points = tops[0].parent.args
    found = []
    for top in tops:
        k = top.body.args[0]
        for o in top.body.ops:
            if not isinstance(o, LoadOp) or o.operands[0].type.dtype not in ("f32", "f16"):
                continue
            indices = o.operands[1:]
            if sum(v is k for v in indices) == 1 and not any(v is points[-1] for v in indices) \
                    and all(v is k or any(v is p for p in points) or
                            isinstance(getattr(v, "op", None), ConstantOp) for v in indices):
                found.append(o)
    return found


def _held_uses(tops) -> list[list]:
    """The loads of a kernel's top-level loops ``tops`` grouped by the value they read,
    each group [(loop number, load), ...] in loop order: only groups read in two loops
    or more (a value read again), uniform loads left out (one value for a strip's row of
    points: read again from L1 or L2, not held)."""
    loop_indices = {id(t.body.args[0]) for t in tops}
    uniform = {id(o) for o in uniform_loads(tops)}
    uses: dict[tuple, list] = {}
    for n, top in enumerate(tops):
        for o in top.body.ops:
            if isinstance(o, LoadOp) and id(o) not in uniform:
                uses.setdefault(_hold_key(o, loop_indices), []).append((n, o))
    return [m for m in uses.values() if len({n for n, _ in m}) >= 2]


def held_planes(tops) -> tuple[dict, dict, int]:
    """The shared strips kernel's planes over a kernel's top-level loops ``tops`` (each
    one axis): ({load id: plane} of the loads that store their value, the same of those
    that read it back, planes). A load is held where a later loop loads the same value;
    one read in one loop only keeps nothing."""
    writes, reads, planes = {}, {}, 0
    for members in _held_uses(tops):
        first = members[0][0]
        for n, o in members:
            (writes if n == first else reads)[id(o)] = planes
        planes += 1
    return writes, reads, planes


def held_rereads(tops) -> int:
    """The later loops that read a held value again: what holding a strip in shared memory
    saves, a pass over its values each (column centring's epilogue: 1; middle softmax's
    sum and epilogue: 2). Hardware's strip_shared_min_rereads reads it."""
    return len({n for members in _held_uses(tops) for n, _ in members
                if n != members[0][0]})


THREAD_COMBINE_CHUNKS = 128  # the most chunks a split-columns thread of the second kernel combines
BLOCK_COMBINE_CHUNKS = 65536  # ... a block of it combines (fewer points than fill a wave)


def _split_columns(points, extent, sms, values, cap=None):
    """Chunks per point of a split-columns reduction of ``extent`` values per point: a
    thread per (point, chunk), each walking at least 4 x ``values`` values, at most
    ``cap`` chunks. By default THREAD_COMBINE_CHUNKS (one thread of the second kernel
    combines them, a tile of ``values`` at a time), or BLOCK_COMBINE_CHUNKS where so few
    points would leave most of a wave idle (a block of the second kernel combines a
    point's chunks: column sums of [4194304, 16] took 128 chunks, 2048 threads, 1.9 ms
    on an H100); column stages' epilogue passes its own cap. Of the counts that fill 1
    to 4 whole waves of ``sms`` x 1024 resident threads (the first stage's blocks are
    capped at 64 registers), the one whose last wave is fullest, the fewest chunks on a
    tie: 65536 points took 3 chunks, 1.45 waves, the second 45% full; they take 2 (0.97
    of one)."""
    if points < 1:  # (no launch: the cost model may still price an empty space)
        return 1
    threads = sms * 1024
    if cap is None:
        cap = THREAD_COMBINE_CHUNKS if points * THREAD_COMBINE_CHUNKS >= threads \
            else BLOCK_COMBINE_CHUNKS
    most = max(1, min(extent // (4 * values), cap))
    best, best_fill = 1, 0.0
    for waves in range(1, 5):
        n = max(1, min(waves * threads // points, most))
        total = points * n
        fill = total / (-(-total // threads) * threads)
        if fill > best_fill or (fill == best_fill and n < best):
            best, best_fill = n, fill
    return best


strip_columns = _strip_columns  # the name the cost model and codegen import
strip_shared = _strip_shared
split_columns = _split_columns


def source() -> str:
    """``_strip_columns``' source, for a generated module."""
    return inspect.getsource(_strip_columns)


def shared_source() -> str:
    """``_strip_shared``'s source, for a generated module."""
    return inspect.getsource(_strip_shared)


def split_source() -> str:
    """``_split_columns``' source and its constants, for a generated module."""
    return (f"THREAD_COMBINE_CHUNKS = {THREAD_COMBINE_CHUNKS}  # most chunks a combining thread "
            f"walks\nBLOCK_COMBINE_CHUNKS = {BLOCK_COMBINE_CHUNKS}  # ... a combining block\n\n\n"
            + inspect.getsource(_split_columns))


__all__ = ["strip_columns", "strip_shared", "split_columns", "THREAD_COMBINE_CHUNKS",
           "BLOCK_COMBINE_CHUNKS", "held_planes", "held_rereads", "uniform_loads", "most_slots",
           "narrowest_points", "line_points", "source", "shared_source", "split_source"]
