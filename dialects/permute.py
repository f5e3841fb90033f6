"""Permuted reads of a kernel: loads whose fastest-varying index follows another axis
of the iteration space than the innermost one. Shared by the cost model and the
schedule choice (mlfuse/transforms/fusion/) and by codegen (mlfuse/codegen/schedule_tiles.py),
which reads only the IR and the kernel's ``tile_axes``.

Threads of a pointwise kernel take neighbouring points of the innermost axis, so a load
whose last index is that axis's index reads neighbouring elements (coalesced). A load
``x[i1, i0]`` in a kernel over ``[i0, i1]`` (a transpose) instead reads elements a row
apart in neighbouring threads: each 4-byte value costs a 32-byte sector. Such a load is
*permuted along* axis 0 here. The "transpose-tiles" schedule reads it through a
shared-memory tile of the two axes: threads first step along axis 0 to load the tile
(coalesced), then along the innermost axis to compute and store.

The innermost axis is the last one whose extent is not the literal 1 (an axis of one
point does not move between threads).
"""
from __future__ import annotations

from mlfuse.ir.core import BlockArgument, Operation, Value

from mlfuse.dialects.loops import DimOp, ForOp, LoadOp, LoopOp, MaskedLoadOp, ReduceOp, StoreOp


def innermost_axis(kernel: LoopOp) -> int | None:
    """The position of the innermost axis that is not of extent 1 (None: no such axis)."""
    return innermost_of(kernel.extent_list)


def innermost_of(extents: list) -> int | None:
    """The position of the last of ``extents`` that is not the literal 1 (None: none)."""
    return next((d for d in reversed(range(len(extents))) if extents[d] != 1), None)


def index_deps(value: Value, memo: dict) -> frozenset | None:
    """The block arguments an index is computed from through pure index arithmetic
    (None when a load or a loop result feeds it: not a static layout)."""
    key = id(value)
    if key not in memo:
        if isinstance(value, BlockArgument):
            memo[key] = frozenset([value])
        else:
            op = value.op
            if isinstance(op, (LoadOp, MaskedLoadOp)) or op.regions:
                memo[key] = None
            elif isinstance(op, DimOp) or not op.operands:
                memo[key] = frozenset()
            else:
                deps = [index_deps(v, memo) for v in op.operands]
                memo[key] = None if any(d is None for d in deps) else frozenset().union(*deps)
    return memo[key]


def load_indices(load: Operation) -> list[Value]:
    return list(load.operands[2:] if isinstance(load, MaskedLoadOp) else load.operands[1:])


def permuted_axis(kernel: LoopOp, load: Operation, memo: dict | None = None) -> int | None:
    """The kernel axis ``load`` is permuted along (see the module doc), or None."""
    return permuted_in(list(kernel.body.args), kernel.extent_list, load, memo)


def permuted_in(args: list, extents: list, load: Operation, memo: dict | None = None,
                fixed: frozenset = frozenset()) -> int | None:
    """The position in ``args`` (the indices of a space of ``extents``: a kernel's
    points, or a reduce nest's levels) that ``load`` is permuted along, or None. Its
    fastest-varying index (the last one that moves: indices that are constants or follow
    only axes of extent 1 or ``fixed`` indices do not) is computed from exactly one of
    ``args``, not the innermost one, and from no loop index or loaded value; and another
    of its indices follows the innermost axis."""
    inner = innermost_of(extents)
    if inner is None:
        return None
    memo = {} if memo is None else memo
    # axes of one point, and indices fixed for the whole space, do not move
    still = {a for a, e in zip(args, extents) if e == 1} | set(fixed)
    indices = load_indices(load)
    deps = [index_deps(v, memo) for v in indices]
    moving = [n for n, d in enumerate(deps) if d is None or d - still]
    if not moving:
        return None
    last = deps[moving[-1]]
    if last is None or len(last - still) != 1 or any(a not in args for a in last - still):
        return None
    axis = args.index(next(iter(last - still)))
    if axis == inner:
        return None
    # neighbouring threads must read different elements: a load not indexed by the
    # innermost axis (a broadcast, mean[c] over [N, C, H, W]) reads one for all
    return axis if any(d is not None and args[inner] in d for d in deps) else None


def permuted_loads(kernel: LoopOp) -> list[tuple[Operation, int]]:
    """Every load of the kernel (at any depth) that is permuted, with its axis."""
    memo: dict = {}
    found = []
    for op in kernel.walk():
        if isinstance(op, (LoadOp, MaskedLoadOp)):
            axis = permuted_axis(kernel, op, memo)
            if axis is not None:
                found.append((op, axis))
    return found


def tileable_loads(kernel: LoopOp, axis: int) -> list[Operation]:
    """The loads a transpose tile over (``axis``, innermost) reads: plain top-level loads
    permuted along ``axis`` whose every index is computed from kernel indices alone
    (codegen computes them a second time, at the tile-loading threads' points), of a
    dtype a shared array holds (not bool)."""
    memo: dict = {}
    found = []
    for op in kernel.body.ops:
        if isinstance(op, LoadOp) and op.result.type.dtype != "bool" \
                and permuted_axis(kernel, op, memo) == axis \
                and all(index_deps(v, memo) is not None for v in load_indices(op)):
            found.append(op)
    return found


def tiled_loads(kernel) -> list[Operation]:
    """The loads a "transpose-tiles" kernel reads through its tile (from ``tile_axes``)."""
    return tileable_loads(kernel, kernel["tile_axes"][0])


def store_scatters(kernel: LoopOp, store: Operation, along_points: bool) -> bool:
    """Whether ``store``, in a reduction kernel's loop over the reduced axes (its
    broadcast-back epilogue), writes elements apart in neighbouring threads: its last
    index that moves does not follow the index they step along, the kernel's last point
    where they split neighbouring points (``along_points``: a strip over columns) or the
    innermost loop's index otherwise (a block per row). A transpose after a layernorm
    over rows would store each row as a column of the output; after a layernorm over the
    channels of NCHW read as NHWC it stores along the points (fusion/placement.py)."""
    loop = store.parent.parent_op if store.parent is not None else None
    if not isinstance(loop, ForOp):
        return False
    args = list(kernel.body.args)
    fast = args[-1] if along_points and args else loop.body.args[0]
    deps = [index_deps(v, {}) for v in store.operands[2:]]
    moving = [d for d in deps if d is None or d]
    return bool(moving) and moving[-1] is not None and fast not in moving[-1]


def stores_along_points(kernel: LoopOp) -> list[Operation]:
    """The stores of a row kernel's epilogue that a block per row would scatter but that
    follow the kernel's last point (a layernorm over rows stored transposed: out[k, r]).
    A block of neighbouring rows writes them coalesced through a shared tile
    (codegen/staged_rows.py)."""
    return [o for top in kernel.body.ops if isinstance(top, ForOp) for o in top.walk()
            if isinstance(o, StoreOp) and store_scatters(kernel, o, along_points=False)
            and not store_scatters(kernel, o, along_points=True)]


def why_not_staged_rows(kernel: LoopOp) -> str | None:
    """Why a row kernel's stores along its points cannot go through the staged-rows
    tile (None: they can): a warp walks each row loop in steps of 32 values with a
    barrier a step, so the loops must be single loops over one extent (no nest, the
    same trip count in every warp) and the staged stores in their top-level bodies."""
    if not kernel.body.args:
        return "no point axis"
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if any(isinstance(o, (ReduceOp, ForOp)) for top in loops for o in top.walk() if o is not top):
        return "a row loop holds a nested loop"
    if len({repr(o["extent"]) for o in loops}) != 1:
        return "row loops of different extents"
    staged = stores_along_points(kernel)
    if any(o.parent is None or not any(o.parent.parent_op is top for top in loops)
           for o in staged):
        return "a staged store below the row loop"
    return None


__all__ = ["index_deps", "innermost_axis", "innermost_of", "load_indices", "permuted_axis", "permuted_in",
           "permuted_loads", "store_scatters", "stores_along_points", "tileable_loads",
           "tiled_loads", "why_not_staged_rows"]
