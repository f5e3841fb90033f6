"""When a loop-free kernel reads through transpose tiles ("transpose-tiles").

A pointwise kernel's threads step along its innermost axis; a load whose last index
follows another axis (dialects/permute.py) then reads with a stride, and the cost model
counts its bytes ``strided_read_factor`` times. Through a shared-memory tile of that axis
and the innermost one (``transpose_tile`` points square) the block loads the tile with its
threads along the load's axis and stores with them along the innermost: both coalesced,
the cost of one extra pass through shared memory. The tile is chosen when some load is
permuted and both axes are long enough to fill a good part of a tile; of several such
axes, the one whose loads move the most bytes.
"""
from __future__ import annotations

from mlfuse.dialects.loops import ForOp, ReduceOp
from mlfuse.dialects.permute import innermost_axis, tileable_loads
from mlfuse.ir.core import Operation
from mlfuse.hardware import Target

from mlfuse.transforms.fusion.cost import buffer_bytes, resolve


def choose_tiles(kernel: Operation, dims: dict, target: Target) -> tuple[list[int], str] | None:
    """(tile_axes, reason) when the kernel should read through transpose tiles, else None."""
    if any(isinstance(o, (ReduceOp, ForOp)) for o in kernel.body.ops):
        return None  # a loop inside: one thread walks it (and no tile holds a row)
    inner = innermost_axis(kernel)
    if inner is None:
        return None
    extents = kernel.extent_list
    least = target.transpose_tile // 2  # shorter axes would leave most of a tile idle
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
    if min(sizes) < least:
        return None
    names = ", ".join(dict.fromkeys(f"%{o.operands[0].name_hint or '?'}" for o in loads))
    tile, wide = target.transpose_tile, target.transpose_vector_tile
    return [axis, inner], (f"reads of {names} step along axis {axis} ({extents[axis]}), the "
                           f"stores along axis {inner} ({extents[inner]}): {tile}x{tile} "
                           f"shared-memory tiles ({wide}x{wide} moving vectors where "
                           f"{target.vector_width} divides both) make both coalesced")


__all__ = ["choose_tiles"]
