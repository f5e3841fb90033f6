"""When a kernel reads through shared-memory tiles: a loop-free kernel that reads a
transpose ("transpose-tiles"), and a reduction that reads one (``through_tiles``: a split
through tiles, codegen/split_tiles.py, or strips through tiles, schedule_strip_tiles.py).

A pointwise kernel's threads step along its innermost axis; a load whose last index
follows another axis (dialects/permute.py) then reads with a stride, and the cost model
counts its bytes ``strided_read_factor`` times. Through a shared-memory tile of that axis
and the innermost one (``transpose_tile`` points square) the block loads the tile with its
threads along the load's axis and stores with them along the innermost: both coalesced,
the cost of one extra pass through shared memory. The tile is chosen when some load is
permuted (and neither axis is a single value); of several such axes, the one whose loads
move the most bytes. Where one of the two is short (under half a square's side), a
square would idle: the kernel takes thin rectangles instead, the short side whole
(codegen/schedule_thin_tiles.py; the host decides at run time, as it sees the extents).
After fusion, coalesce-axes merges the axes every access indexes together (H, W of NCHW
-> NHWC: runs of H*W values, not W); this choice, made again on the merged kernel (as
explain does), then tiles the merged axis, and says so.
"""
from __future__ import annotations

import math

from mlfuse.dialects.loops import ForOp, ReduceOp
from mlfuse.dialects.permute import innermost_axis, tileable_loads
from mlfuse.dialects.reductions import nest_tiles, reduce_nests, strip_tiles
from mlfuse.ir.core import Operation
from mlfuse.ir.types import product_dim
from mlfuse.hardware import Target

from mlfuse.transforms.fusion.cost import buffer_bytes, resolve

# a tiled reduction's side of fewer values than this idles most of a square, and a warp's
# flat walk of it reads whole sectors of the permuted buffer already
MIN_TILED_SIDE = 8


def choose_tiles(kernel: Operation, dims: dict, target: Target) -> tuple[list[int], str] | None:
    """(tile_axes, reason) when the kernel should read through transpose tiles, else None."""
    if any(isinstance(o, (ReduceOp, ForOp)) for o in kernel.body.ops):
        return None  # a loop inside: one thread walks it (and no tile holds a row)
    inner = innermost_axis(kernel)
    if inner is None:
        return None
    extents = kernel.extent_list
    best = None
    for axis in range(len(extents)):
        if axis == inner:
            continue
        loads = tileable_loads(kernel, axis)
        if not loads:
            continue
        moved = sum(buffer_bytes(b.type, dims, target)
                    for b in {id(o.operands[0]): o.operands[0] for o in loads}.values())
        if best is None or moved > best[0]:
            best = (moved, axis, loads)
    if best is None:
        return None
    _, axis, loads = best
    sizes = [resolve(extents[d], dims, target) for d in (axis, inner)]
    if min(sizes) < 2:
        return None  # a side of one value: nothing to transpose
    names = ", ".join(dict.fromkeys(f"%{o.operands[0].name_hint or '?'}" for o in loads))
    tile, wide = target.transpose_tile, target.transpose_vector_tile
    if min(sizes) < tile // 2:  # a square would idle: codegen/schedule_thin_tiles.py
        shape = (f"thin {max(sizes)}x{min(sizes)} tiles (the short side whole, the long one "
                 f"up to {tile * tile // min(sizes)} values: {tile * tile} points a block)")
    else:
        shape = (f"{tile}x{tile} shared-memory tiles ({wide}x{wide} moving 16-byte vectors "
                 f"where they divide both; thin ones where a side is under {tile // 2} at "
                 f"run time)")
    merged = merged_text(kernel, lambda d: resolve(d, dims, target))
    return [axis, inner], ((f"{merged} (coalesce-axes); " if merged else "") +
                           f"reads of {names} step along axis {axis} ({extents[axis]}), the "
                           f"stores along axis {inner} ({extents[inner]}): {shape} make both "
                           f"coalesced")


def choose_split_tiles(kernel: Operation, dims: dict, target: Target
                       ) -> tuple[list[int] | None, str] | None:
    """(tiled levels, reason) of a split-rows kernel whose nests read some values permuted
    along nest level A and the others along the innermost B (``dialects.reductions.
    nest_tiles``: the sum of a transpose times its source): its first stage reads each
    chunk's squares of those levels through shared-memory tiles (codegen/split_tiles.py),
    both reads coalesced, no transposed copy written and read back. Where a side is
    shorter than 8 values, a flat walk of the nest reads whole sectors of the permuted
    buffer already (its warp spans 32 / side neighbouring values of A): (None, reason),
    the flat split. None where the nests read no such pair of axes."""
    found = nest_tiles(kernel) if target.split_through_tiles else None
    if found is None:
        return None
    axis, last, loads = found
    extents = reduce_nests(kernel)[0].extents
    names = ", ".join(dict.fromkeys(f"%{o.operands[0].name_hint or '?'}" for o in loads))
    along = (f"the reduced values of {names} step along the reduction's axis {axis} "
             f"({extents[axis]}), the others' along axis {last} ({extents[last]})")
    if min(resolve(extents[d], dims, target) for d in (axis, last)) < MIN_TILED_SIDE:
        if any(isinstance(o, ForOp) for o in kernel.body.ops):
            return None  # (the flat split stores nothing as it walks)
        return None, (f"{along}, a short side: a flat walk of both reads whole sectors, split "
                      "across blocks; a second kernel combines the chunks' partials")
    tile = target.transpose_tile
    return [axis, last], (f"{along}: each chunk's {tile}x{tile} squares of the two go through "
                          "shared-memory tiles, so both read coalesced; a second kernel "
                          "combines the chunks' partials")


def choose_strip_tiles(kernel: Operation, dims: dict, target: Target
                       ) -> tuple[list[int], str] | None:
    """([P, K], reason) when a reduction kernel's nests read some values along nest level
    K and the others along its innermost point axis P (``dialects.reductions.strip_tiles``:
    ``sum(transpose(a) + b, axis=1)``), both sides at least 8 values and strips of
    ``transpose_tile`` points enough to give every SM one: a block per strip walks squares
    of P and K through shared tiles (codegen/schedule_strip_tiles.py), every load
    coalesced, where a block per point reads the former a row apart. None elsewhere."""
    found = strip_tiles(kernel) if target.split_through_tiles else None
    if found is None:
        return None
    p, k, loads = found
    extents, levels = kernel.extent_list, reduce_nests(kernel)[0].extents
    tile = target.transpose_tile
    points = math.prod(resolve(e, dims, target) for e in extents)
    if min(resolve(extents[p], dims, target), resolve(levels[k], dims, target)) < \
            MIN_TILED_SIDE or points < tile * target.sm_count:
        return None
    names = ", ".join(dict.fromkeys(f"%{o.operands[0].name_hint or '?'}" for o in loads))
    return [p, k], (f"the reduced values of {names} step along the reduction's axis {k} "
                    f"({levels[k]}), the others' along the points' axis {p} ({extents[p]}): a "
                    f"block per strip of {tile} points walks {tile}x{tile} squares of the two "
                    "through shared-memory tiles, so every load coalesces")


def through_tiles(kernel: Operation, dims: dict, target: Target, layout: str | None,
                  split_blocker: str | None, blocker: str | None, long_enough: bool):
    """(schedule, reason, attributes) of a reduction kernel that reads through shared tiles:
    split through tiles (its reductions splittable, for nests storing as they go aside:
    ``split_blocker`` None; each point's values ``long_enough``), else strips through
    tiles (``blocker`` None, mixed ``layout``); None elsewhere. Reads along rows are
    asked too: a level of one value last can hide the loads' order (a[k1, k0, 0])."""
    if split_blocker is not None or layout == "columns":
        return None
    tiles = choose_split_tiles(kernel, dims, target) if long_enough else None
    if tiles is not None:
        return "split-rows", tiles[1], {"split_tiles": tiles[0]}
    strips = choose_strip_tiles(kernel, dims, target) if layout is None and blocker is None \
        else None
    return ("strip-tiles", strips[1], {"strip_tiles": strips[0]}) if strips else None


def merged_text(kernel: Operation, size=None) -> str:
    """What explain says of a kernel's axes that coalesce-axes merged ("" where none);
    ``size``: a dim's value, where known."""
    parts = [f"{', '.join(map(str, g))} move together: one axis of "
             f"{size(product_dim(g)) if size else product_dim(g)}"
             for g in kernel.attributes.get("coalesced", []) if len(g) > 1]
    return "; ".join(parts)


__all__ = ["choose_split_tiles", "choose_strip_tiles", "choose_tiles", "merged_text",
           "through_tiles"]
