"""What a kernel with loops costs beyond its DRAM bytes: the loads its threads execute,
and a contraction's multiply-adds at the rate of the tiled kernel that will run it.

DRAM-once pricing (cost.py: each buffer counted once at its size) is right where every
value a kernel loads is a different one, and it stays right for a row, a column or a
window whose values neighbouring threads share through L1. It is badly wrong for a
reduction that re-reads its inputs many times over: one thread per output point of a
conv2d or a matmul walking its K values reads each operand value once for every
output that uses it, with no sharing through shared memory. Those loads go through
L1/L2, and their count, not the DRAM bytes, sets the time:

    walked bytes = sum over the loads in the kernel that depend on a point index of
                   (points x the extents of the loops around the load) x itemsize

timed at ``Target.walker_bytes_per_s``; a load that reads the same address at every
point is excluded (a broadcast the loop hoists or the cache serves once per warp), and
one that does not depend on the innermost point index counts once for each value the
warp's lanes take of the indices it does depend on: one value broadcast to a run of lanes
(a masked mean pool's mask, read at [b, s] by the threads of neighbouring d, is one load
a warp where d covers the warp's 32 lanes, and two where d is 16 and they span two b).
The rate is measured on the H100 (docs/perf-notes.md): resnet18's three walker kernels,
each holding two conv2d reductions, ran 652, 672 and 741 us for 4.0 GB walked each (the
weights once a warp): 5.4-6.2 TB/s.

A kernel that ``schedule-contractions`` will tile (transforms/contraction.py,
``match_contraction``: one sum of products and nothing else that loops) is priced
instead by its multiply-adds at the tiled kernel's rate when the GPU is full
(``Target.simt_fmas_per_s``, ``mma_fmas_per_s``: codegen/tile_model.py's calibrated
rates times the SMs). So fusion sees what a second contraction costs in a group: the
group is no longer a contraction, and its walker is priced at its loads.
"""
from __future__ import annotations

import math

from mlfuse.dialects.contraction import MAX_SPLIT, MIN_SPLIT_K, arg_deps
from mlfuse.dialects.loops import ForOp, LoadOp, MaskedLoadOp, ReduceOp
from mlfuse.hardware import Target
from mlfuse.ir.core import Block, Operation
from mlfuse.ir.traits import SCALAR_COMPUTE
from mlfuse.ir.types import INDEX, dim_value, itemsize
from mlfuse.transforms.contraction import match_contraction

WARP = 32


def has_loops(kernel: Operation) -> bool:
    return any(isinstance(o, (ForOp, ReduceOp)) for o in kernel.body.ops)


def walked_bytes(kernel: Operation, points: int, dims: dict, target: Target) -> int:
    """Bytes the kernel's threads load, every execution of every load that depends on a
    point index counted (see the module doc)."""
    args, memo = set(kernel.body.args), {}
    lanes = _warp_axes(kernel, dims, target)
    innermost = next(iter(lanes), None)

    def walk(block: Block, trips: int) -> int:
        total = 0
        for op in block.ops:
            deps = set().union(*(arg_deps(v, memo) for v in op.operands[1:])) \
                if isinstance(op, (LoadOp, MaskedLoadOp)) else set()
            if deps & args:
                # a warp's lanes differ in the innermost point indices: a load that does
                # not read the innermost is one address for each run of lanes along it
                distinct = WARP if innermost in deps else \
                    min(WARP, math.prod(n for a, n in lanes.items() if a in deps))
                total += trips * itemsize(op.operands[0].type.dtype) * distinct // WARP
            for region in op.regions:
                inner = trips
                if isinstance(op, (ForOp, ReduceOp)):
                    inner *= dim_value(op["extent"], dims, target.default_dim)
                total += walk(region.block, inner)
        return total

    return walk(kernel.body, points)


def _warp_axes(kernel: Operation, dims: dict, target: Target) -> dict:
    """The point indices a warp's 32 lanes differ in, each with how many values it takes
    among them: the innermost ones, as far as it takes their extents to cover 32 points
    (a warp of 32 lanes over an innermost extent of 20 spans two values of the next)."""
    covered, lanes = 1, {}
    for arg, extent in zip(reversed(kernel.body.args), reversed(kernel.extent_list)):
        if covered >= WARP:
            break
        lanes[arg] = min(dim_value(extent, dims, target.default_dim), -(-WARP // covered))
        covered *= lanes[arg]
    return lanes


def _computes(op: Operation) -> bool:
    """Counted as a flop (as cost._flops counts them): scalar compute, not index math."""
    return op.has_trait(SCALAR_COMPUTE) and bool(op.operands) and op.results[0].type != INDEX


def tiled_contraction(kernel: Operation, dims: dict, target: Target):
    """(seconds, flops, variant) of the kernel as the tiled contraction schedule-contractions
    will make of it (or has made), or None when it is not one: its multiply-adds at the
    variant's rate, plus its other work on the same pipe at ``flops_per_s``. The
    epilogue runs once per output point; a prologue op on one operand (a bias and relu
    fused into the input, an im2col padding mask) runs once per value of that operand
    and tile of the other side: ``contraction_tile`` is the tile edge assumed. A tiny
    contraction is bound by its K loop's latency instead (codegen/tile_model.py's
    latency bound for one wave of blocks)."""
    if kernel.attributes.get("schedule") not in ("pointwise", "contraction") or \
            not has_loops(kernel):
        return None
    c = match_contraction(kernel)
    if c is None:
        return None

    def size(extents) -> int:
        return math.prod(dim_value(e, dims, target.default_dim) for e in extents)
    extents = kernel["extents"]
    m, n = size(extents[d] for d in c.m_dims), size(extents[d] for d in c.n_dims)
    batch, k = size(extents[d] for d in c.batch_dims), size(c.k_extents)
    args = list(kernel.body.args)
    m_args, n_args = {args[d] for d in c.m_dims}, {args[d] for d in c.n_dims}
    tiles_m, tiles_n = -(-m // target.contraction_tile), -(-n // target.contraction_tile)
    product = c.reduces[-1].body.ops[-1].operands[0].op
    other, memo = 0, {}
    for op in kernel.body.ops:  # the ops around the reduction: once per output point
        if _computes(op):
            other += m * n * batch
    for level in c.reduces:
        for op in level.body.ops:
            if op is product or not _computes(op):
                continue
            deps = arg_deps(op.results[0], memo)
            on_m, on_n = bool(deps & m_args), bool(deps & n_args)
            other += k * batch * (m * n if on_m and on_n else m * tiles_n if on_m else
                                  n * tiles_m if on_n else tiles_m * tiles_n)
    variant = kernel.attributes.get("variant", c.variant)
    rate = target.mma_fmas_per_s if variant in ("mma-f16", "mma-bf16") else \
        target.simt_fmas_per_s  # 3xTF32 runs at about the SIMT rate; TF32 above it
    if c.acc.type.dtype == "f64":
        rate /= 2
    fmas = m * n * batch * k
    # and at least one K loop's latency: a block's K loop is a chain of steps, each
    # waiting on its loads; split-K shortens it to a share of MIN_SPLIT_K values
    steps = -(-min(k, max(MIN_SPLIT_K, k // MAX_SPLIT)) // target.contraction_k_step)
    seconds = max(fmas / rate + other / target.flops_per_s, steps * target.contraction_step_s)
    return seconds, 2 * fmas + other, variant


__all__ = ["has_loops", "walked_bytes", "tiled_contraction"]
