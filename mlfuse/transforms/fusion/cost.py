"""The fusion cost model: bytes moved, flops, launches and live registers of a kernel.

time(kernel) = max(bytes / bandwidth, flops / peak, walked bytes / L1 rate) + launch
cost, where a pointwise kernel's permuted reads (dialects/permute.py: a transpose read
along the wrong axis) count ``strided_read_factor`` times their bytes unless a
transpose tile reads them, and a kernel with loops also pays for every load its
threads execute (walked bytes), or, when it is a contraction the tiled codegen takes,
for its multiply-adds at the tiled kernel's rate instead of its flops and loads
(reduction_cost.py). A fusion is taken
when the fused kernels' time is below the separate kernels' time, which counts the
intermediates' round trips through memory and the launches saved:
cost(fused) < sum(cost(ops)) + traffic(intermediates) + launches saved x launch cost.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlfuse.dialects.contraction import arg_deps
from mlfuse.dialects.loops import ForOp, LoadOp, MaskedLoadOp, ReduceOp, StoreOp
from mlfuse.dialects.permute import innermost_axis, permuted_loads, stores_along_points, tiled_loads
from mlfuse.dialects.reductions import (loop_levels, reread_value_bytes, sibling_passes,
                                        stage_count)
from mlfuse.ir.core import Block, Operation
from mlfuse.ir.types import INDEX, IndivisibleDim, dim_value, itemsize
from mlfuse.hardware import Target
from mlfuse.strip_plan import (held_planes, held_rereads, line_points, narrowest_points,
                               split_columns, strip_columns, strip_shared, uniform_loads)
from mlfuse.ir.traits import SCALAR_COMPUTE
from mlfuse.row_groups import WARP, kernel_runtime_group
from mlfuse.row_stream import SM_THREADS, stream_row_threads
from mlfuse.row_hold import (held_buffers, held_in_vectors, held_rows_first, held_value_bytes,
                             scalar_held_values, shared_row_plan)
from mlfuse.transforms.fusion.reduction_cost import has_loops, tiled_contraction, walked_bytes


def resolve(dim, dims: dict, target: Target) -> int:
    """A dim's size, a symbol not in ``dims`` taken at the target's default size (a
    quotient that does not divide at those sizes rounded down: an estimate; a call
    with such sizes is refused by the argument checks)."""
    try:
        return dim_value(dim, dims, target.default_dim)
    except IndivisibleDim:
        return max(1, dim_value(dim, dims, target.default_dim, exact=False))


def buffer_bytes(buf_type, dims: dict, target: Target) -> int:
    n = 1
    for d in buf_type.shape:
        n *= resolve(d, dims, target)
    return n * itemsize(buf_type.dtype)


@dataclass
class KernelCost:
    bytes_read: int
    bytes_written: int
    flops: int
    registers: int
    threads: int = 0            # threads that can run at once (the kernel's parallelism)
    launches: int = 1
    seconds_total: float = 0.0  # filled by with_time: sum over the kernels added up
    strided_bytes: int = 0      # bytes read with a stride, counted again for time only
    walked_bytes: int = 0       # bytes its threads load through L1/L2 (kernels with loops)
    tiled_s: float = 0.0        # a contraction's multiply-adds at the tiled kernel's rate

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def with_time(self, target: Target) -> "KernelCost":
        # a kernel with fewer threads than the device holds gets that share of its throughput
        full = target.sm_count * 2048
        share = min(1.0, max(self.threads, 1) / full)
        moved = self.bytes + self.strided_bytes * (target.strided_read_factor - 1)
        # a tiled contraction's flops are timed in tiled_s, at its own rates
        compute = self.tiled_s or self.flops / target.flops_per_s
        busy = max(moved / target.dram_bytes_per_s, compute,
                   self.walked_bytes / target.walker_bytes_per_s)
        self.seconds_total = busy / share + self.launches * target.launch_s
        return self

    def seconds(self, target: Target) -> float:
        return self.seconds_total

    def __add__(self, other: "KernelCost") -> "KernelCost":
        return KernelCost(self.bytes_read + other.bytes_read, self.bytes_written + other.bytes_written,
                          self.flops + other.flops, max(self.registers, other.registers),
                          self.threads + other.threads, self.launches + other.launches,
                          self.seconds_total + other.seconds_total,
                          self.strided_bytes + other.strided_bytes,
                          self.walked_bytes + other.walked_bytes, self.tiled_s + other.tiled_s)


ZERO = KernelCost(0, 0, 0, 0, 0, 0)


def _flops(block: Block, trips: int, dims, target) -> int:
    total = 0
    for op in block.ops:
        if op.has_trait(SCALAR_COMPUTE) and op.operands and op.results[0].type != INDEX:
            total += trips
        for region in op.regions:
            inner = trips
            if isinstance(op, (ForOp, ReduceOp)):
                inner *= resolve(op["extent"], dims, target)
            total += _flops(region.block, inner, dims, target)
    return total


def live_registers(block: Block) -> int:
    """Most scalar values alive at once in ``block`` (nested blocks included): a
    linear-scan estimate of the registers a thread needs."""
    last_use: dict[int, int] = {}
    position = {id(op): i for i, op in enumerate(block.ops)}

    def top_level(op: Operation) -> Operation:
        while op.parent is not block:
            op = op.parent.parent.parent
        return op

    for i, op in enumerate(block.ops):
        for inner in op.walk():
            for v in inner.operands:
                last_use[id(v)] = max(last_use.get(id(v), -1), position[id(top_level(inner))])
    live, peak = set(), len(block.args)
    for i, op in enumerate(block.ops):
        nested = max((live_registers(r.block) for r in op.regions), default=0)
        peak = max(peak, len(live) + len(block.args) + nested)
        for r in op.results:
            if last_use.get(id(r), -1) > i:
                live.add(id(r))
        live = {v for v in live if last_use.get(v, -1) > i}
    return peak


def strip_shape(kernel: Operation, dims: dict, target: Target, strip: str) -> tuple[int, int]:
    """(points per block, threads per point) of a strips kernel, as its host picks them
    (mlfuse/strip_plan.py): over columns the strip narrows with few points; over rows a
    block per point, a power of two of threads with at most row_values_per_thread values
    each, at least strip_threads and at most 512."""
    reduced = reduced_extent(kernel, dims, target)
    if strip == "columns":
        points = math.prod(resolve(e, dims, target) for e in kernel["extents"])
        sizes = [itemsize(o.operands[0 if isinstance(o, (LoadOp, MaskedLoadOp)) else 1]
                          .type.dtype) for o in kernel.walk()
                 if isinstance(o, (LoadOp, MaskedLoadOp, StoreOp))]
        widest, smallest = target.strip_points, min(sizes, default=4)
        return strip_columns(points, reduced, widest, narrowest_points(smallest, widest),
                             line_points(smallest, widest, target.strip_line_bytes),
                             target.strip_threads,
                             target.strip_block_threads, target.strip_stream_threads,
                             target.row_values_per_thread,
                             target.sm_count, target.strip_blocks_per_sm)
    per = max(1, target.strip_threads)
    while per < 512 and per * target.row_values_per_thread < reduced:
        per *= 2
    return 1, per


def reduced_extent(kernel: Operation, dims: dict, target: Target) -> int:
    """The longest row a row-family kernel's top-level loops walk, at these sizes."""
    tops = [o for o in kernel.body.ops if isinstance(o, (ForOp, ReduceOp))]
    return max((math.prod(resolve(lvl["extent"], dims, target) for lvl in loop_levels(o))
                for o in tops), default=1)


def strip_held(kernel: Operation, dims: dict, target: Target, strip: str) -> bool:
    """Whether a strips kernel's threads hold all their reduced values on chip (one read
    of its inputs), in registers or in shared memory, rather than re-reading them in
    each loop."""
    reduced = reduced_extent(kernel, dims, target)
    width, per = strip_shape(kernel, dims, target, strip)
    return reduced <= per * target.row_values_per_thread and \
        per * width <= target.strip_held_threads or shared_held(kernel, dims, target, strip)


def shared_held(kernel: Operation, dims: dict, target: Target, strip: str) -> bool:
    return shared_geometry(kernel, dims, target, strip) is not None


def shared_geometry(kernel: Operation, dims: dict, target: Target, strip: str):
    """(width in vectors, threads a point, bytes, lanes) of the shared-memory strips
    kernel (codegen/strips_shared.py, lanes 1: its scalar form) where the host would
    launch it
    (codegen/strips_shared.py), as far as the IR tells (the buffers' alignment is the
    call's): over columns, every top-level loop one axis, every access of f32 or f16
    values of one size along the points' last axis (16-byte vectors where they divide its
    extent), values read again by at least strip_shared_min_rereads later loops, and a
    strip's planes within strip_shared_bytes (mlfuse/strip_plan.py). A uniform load (a
    mask m[b, k, 0]: ``strip_plan.uniform_loads``) is one value a vector's lanes share,
    not held."""
    if strip != "columns" or target.strip_shared_bytes <= 0:
        return None
    tops = [o for o in kernel.body.ops if isinstance(o, (ForOp, ReduceOp))]
    if not tops or any(len(loop_levels(o)) != 1 for o in tops):
        return None
    last = kernel.body.args[-1]
    sizes, uniform = set(), {id(o) for o in uniform_loads(tops)}
    for o in (o for top in tops for o in top.walk()):
        if isinstance(o, MaskedLoadOp):
            return None
        if id(o) in uniform:
            continue
        if isinstance(o, (LoadOp, StoreOp)):
            buf = o.operands[0 if isinstance(o, LoadOp) else 1]
            if buf.type.dtype not in ("f32", "f16") or o.operands[-1] is not last:
                return None
            sizes.add(itemsize(buf.type.dtype))
    planes = held_planes(tops)[2]
    if len(sizes) != 1 or not planes or held_rereads(tops) < target.strip_shared_min_rereads:
        return None
    size = sizes.pop()
    lanes, widths = 16 // size, (max(1, target.strip_line_bytes // 16), 2)
    points = math.prod(resolve(e, dims, target) for e in kernel["extents"])
    if resolve(kernel["extents"][-1], dims, target) % lanes or not target.strip_vectors:
        # the scalar shared kernel: a point a thread
        lanes, widths = 1, (target.strip_points, narrowest_points(size, target.strip_points))
    plan = strip_shared(points // lanes, reduced_extent(kernel, dims, target), *widths,
                        target.strip_shared_threads, lanes, planes, size,
                        target.strip_shared_bytes, target.sm_count, target.strip_blocks_per_sm)
    return None if plan is None else (*plan, lanes)


def _strip_blocks(kernel: Operation, dims: dict, target: Target, strip: str) -> tuple[int, int]:
    """(blocks of the grid, blocks resident at once) of a strips kernel: over columns,
    launch_bounds ask strip_min_blocks per SM (its registers allow about that many)."""
    width, per = strip_shape(kernel, dims, target, strip)
    points = math.prod(resolve(e, dims, target) for e in kernel["extents"])
    blocks = -(-points // width)
    per_sm = _strip_asked(width, per, target) if strip == "columns" else \
        max(1, 2048 // (width * per))
    return blocks, min(blocks, target.sm_count * per_sm)


def _strip_asked(width: int, per: int, target: Target) -> int:
    """Blocks an SM a strips kernel over columns asks resident (launch_bounds): a deeper
    streaming block (more than strip_block_threads, as many rows in flight as two) one."""
    return target.strip_min_blocks if width * per <= target.strip_block_threads else 1


def row_streamed(kernel: Operation, dims: dict, target: Target) -> bool:
    """Whether a "row" kernel runs its streaming variant: a row longer than the
    registers variant holds (row_values_per_thread x row_threads values) and more than
    one top-level loop, so that the later loops read the row again. Such a kernel has
    1024 threads' worth of blocks resident per SM (half the threads an SM holds:
    mlfuse/row_stream.py), and its re-reads come from DRAM when the rows in flight pass
    L2 (group norm's 132 rows of 512 KB at [32, 256, 64, 64]: 0.389 ms measured on the
    H100, x read three times at half occupancy; the model says 0.38)."""
    passes = sibling_passes(kernel.body.ops)  # reduces walked together are one pass
    row = reduced_extent(kernel, dims, target)
    return len(passes) > 1 and row > target.row_values_per_thread * target.row_threads and \
        row_held_shared(kernel, dims, target) is None


def held_whole_vectors(kernel: Operation, extent: int, target: Target) -> bool:
    """Whether a row kernel's held rows of ``extent`` values move in whole vectors (the
    "shared-vector" variant), not a value at a time."""
    return extent % target.vector_width == 0 and held_in_vectors(kernel)


def row_held_shared(kernel: Operation, dims: dict, target: Target,
                    split_plan: bool | None = None) -> tuple[int, int] | None:
    """(threads, dynamic shared bytes) of a row kernel's block where the host runs one of
    its held-rows variants at these sizes (codegen/held_rows.py, mlfuse/row_hold.py):
    rows longer than the registers variant holds whose values past a thread's
    VALUES_PER_THREAD fit shared_row_bytes (in whole vectors where VECTOR_WIDTH divides
    the row, else a value at a time), and, where the kernel has a split plan, enough of
    them that they beat it (``held_rows_first``). None otherwise. ``split_plan``: whether
    the kernel has a split plan (None: a "row" kernel's attribute says)."""
    if split_plan is None:
        if kernel.attributes.get("schedule") != "row":
            return None
        split_plan = bool(kernel.attributes.get("split_stages"))
    if not target.shared_row_bytes:
        return None
    held = held_buffers(kernel)
    extent = reduced_extent(kernel, dims, target)
    if held is None or extent <= target.row_values_per_thread * target.row_threads:
        return None
    whole = held_whole_vectors(kernel, extent, target)  # else the scalar variant's plan
    threads, nbytes = shared_row_plan(
        extent, held_value_bytes(held),
        target.row_values_per_thread if whole else scalar_held_values(target),
        target.shared_row_threads, target.vector_width if whole else 1,
        target.shared_row_bytes * target.shared_row_split)
    points = math.prod(resolve(e, dims, target) for e in kernel["extents"])
    if nbytes > target.shared_row_bytes or (
            split_plan and _split_called(kernel, points, extent, target)
            and not (held_in_vectors(kernel)  # (else split: codegen/held_rows.py)
                     and held_rows_first(points, stage_count(kernel), target.sm_count))):
        return None
    return threads, nbytes


def _split_called(kernel: Operation, points: int, extent: int, target: Target) -> bool:
    """Whether the host's ``_split_stages`` takes the split plan at these sizes (before
    the held rows' claim)."""
    in_flight = target.sm_count * extent * reread_value_bytes(kernel)
    return points < target.sm_count * target.split_stage_rows_per_sm or in_flight > target.l2_bytes


def _held_shared_threads(points: int, target: Target) -> int:
    """The threads a held-rows kernel counts for the time model: the whole GPU's, less
    the share its busiest SM's rows leave idle elsewhere (``row_hold._held_rows_first``'s
    rule: ceil(points / sm_count) rows on the busiest SM, where the whole GPU would take
    points / sm_count). Its copies put a whole row's loads in flight, so one block per
    SM streams at that SM's full rate (the registers variant's rule), however many more
    threads and shared memory would let it hold: 128 rows on 132 SMs are 97% busy, not
    the quarter of four blocks an SM."""
    rows = -(-points // target.sm_count)  # on the busiest SM
    return target.sm_count * 2048 * points // (rows * target.sm_count)


def row_split(kernel: Operation, dims: dict, target: Target) -> bool:
    """Whether the host runs a row kernel's split plan at these sizes (the generated
    ``_split_stages``): it has one, its rows are longer than the registers variant
    holds, and either there are fewer than sm_count x split_stage_rows_per_sm of them
    or the rows a streaming kernel has in flight (one per SM) pass L2, so that its
    re-reads would come from DRAM."""
    if not kernel.attributes.get("split_stages"):
        return False
    points = math.prod(resolve(e, dims, target) for e in kernel["extents"])
    extent = reduced_extent(kernel, dims, target)
    return extent > target.row_values_per_thread * target.row_threads and \
        _split_called(kernel, points, extent, target) and row_held_shared(kernel, dims, target) is None


def _strip_rereads(kernel: Operation, read: dict, dims: dict, target: Target) -> int:
    """Bytes a strips kernel reads again from DRAM: its later loops re-read the values
    its first loop read; each pass walks the other way (flat_rows.stream_order), so the
    last L2-full of what the strips resident at once read is still there."""
    strip = kernel.attributes.get("strip", "columns")
    if strip_held(kernel, dims, target, strip):
        return 0
    width, _ = strip_shape(kernel, dims, target, strip)
    _, resident = _strip_blocks(kernel, dims, target, strip)
    return _rereads(kernel, read, dims, target, resident * width, alternating=True)


def column_staged(kernel: Operation, dims: dict, target: Target) -> bool:
    """Whether the host runs a strips kernel's column stages at these sizes (the
    generated launch: strips over columns with the plan, ``split_stages``, whose values
    fit neither registers nor shared memory)."""
    return kernel.attributes.get("strip", "columns") == "columns" and \
        bool(kernel.attributes.get("split_stages")) and target.strip_column_stages and \
        not strip_held(kernel, dims, target, "columns")


def _rereads(kernel: Operation, read: dict, dims: dict, target: Target, resident: int,
             alternating: bool = False, stores: bool = False) -> int:
    """Bytes that a kernel's later top-level loops read again from DRAM: the values its
    earlier loops read, when the values of the ``resident`` points in flight at once pass
    L2 (a strips kernel's strips, or a pointwise kernel's threads each walking its own
    reduction: one thread per point holds nothing between its loops). ``alternating``:
    passes walk the values back and forth, so an L2-full of each re-read hits.
    ``stores``: a for joins the pass of reduces it follows where it may (the split
    plan's stages: ``sibling_passes(stores=True)``)."""
    tops = [group[0] for group in sibling_passes(kernel.body.ops, stores)]  # a walk a pass
    if len(tops) < 2:
        return 0
    reduced = reduced_extent(kernel, dims, target)
    seen, again, own, memo = set(), 0, set(), {}
    points = set(kernel.body.args)
    for top in tops:
        loads = [o for o in top.walk() if isinstance(o, (LoadOp, MaskedLoadOp))]
        loaded = {id(o.operands[0]) for o in loads}
        again += sum(buffer_bytes(read[b], dims, target) for b in loaded & seen)
        seen |= loaded
        # a buffer read at the same indices for every point (layernorm's gamma) is one
        # copy in L2 for all the points in flight, not one per point
        own |= {id(o.operands[0]) for o in loads
                if any(arg_deps(v, memo) & points for v in o.operands[1:])}
    # (a buffer smaller than that holds all of it: a middle softmax's mask m[b, k, 0],
    # one value for all of a b's points)
    in_flight = sum(min(resident * itemsize(read[b].dtype) * reduced,
                        buffer_bytes(read[b], dims, target)) for b in seen & own)
    if in_flight <= target.l2_bytes:
        return 0
    return int(again * (1 - target.l2_bytes / in_flight)) if alternating else again


def split_column_chunks(points: int, reduced: int, target: Target) -> int:
    """Chunks per point a split-columns reduction's host takes (strip_plan.split_columns,
    whose source the host runs)."""
    return split_columns(points, reduced, target.sm_count, target.row_values_per_thread)


def kernel_cost(kernel: Operation, dims: dict, target: Target) -> KernelCost:
    """Cost of one kernel (fused.kernel or loops.parallel): each buffer it reads or
    writes counts once at its full size (re-reads of a row or of a broadcast operand
    are assumed to hit in cache)."""
    read, written = {}, {}
    for op in kernel.walk():
        if isinstance(op, (LoadOp, MaskedLoadOp)):
            read[id(op.operands[0])] = op.operands[0].type
        elif isinstance(op, StoreOp):
            written[id(op.operands[1])] = op.operands[1].type
    points = 1
    for e in kernel["extents"]:
        points *= resolve(e, dims, target)
    threads, rereads, launches, scattered = points, 0, 1, 0
    schedule = kernel.attributes.get("schedule")
    inner = max((resolve(op["extent"], dims, target) for op in kernel.body.ops
                 if isinstance(op, (ForOp, ReduceOp))), default=1)
    if schedule == "row":
        threads = points * min(inner, 1024)
        held = row_held_shared(kernel, dims, target)
        if kernel.attributes.get("warp_rows") and \
                kernel_runtime_group(kernel, inner, target) is not None:
            # the short-row plan (codegen/short_rows.py): warp-rows, as priced below
            threads = points * inner
        elif held is not None:  # the row read once, from registers and shared memory after
            threads = _held_shared_threads(points, target)
        elif row_split(kernel, dims, target):
            # codegen/split_stages.py: every block busy, the input read once per stage
            threads, launches = target.sm_count * 2048, stage_count(kernel)
            rereads = _rereads(kernel, read, dims, target, points, stores=True)
        elif row_streamed(kernel, dims, target):
            # the streaming variant: 1024 threads' worth of blocks resident an SM (64
            # registers a thread), each row loop re-reading its row (see row_streamed)
            block = stream_row_threads(reduced_extent(kernel, dims, target),
                                       reread_value_bytes(kernel), target)
            resident = min(points, target.sm_count * (SM_THREADS // block))
            threads = resident * block
            rereads = _rereads(kernel, read, dims, target, resident)
    elif schedule == "warp-rows":  # a group of threads (up to a warp) per row, holding
        # all of it: every value in flight at once, as "row" counts them (row_groups.py)
        threads = points * min(inner, WARP * target.short_row_values)
        if kernel.attributes.get("staged_rows"):  # codegen/staged_rows.py: a warp a
            # row, a tile of a quarter of a register row's values a lane in flight, each
            # row loop reading the row again (from L2 while the rows in flight fit)
            threads = points * min(inner, WARP * max(1, target.row_values_per_thread // 4))
            resident = min(points, target.sm_count * SM_THREADS // WARP)
            rereads = _rereads(kernel, read, dims, target, resident)
            if not target.row_staged_stores:  # written directly: a sector a value
                scattered = sum(buffer_bytes(o.operands[1].type, dims, target)
                                for o in stores_along_points(kernel))
    elif schedule == "strip-tiles":  # a square's values of each point in flight at once
        threads = points * target.transpose_tile  # (codegen/schedule_strip_tiles.py)
    elif schedule == "split-rows":  # chunks of every point's reduction over the whole GPU
        # (then a second kernel combines the chunks: codegen/split_host.py)
        threads, launches = target.sm_count * 2048, 2
    elif schedule == "split-columns":  # a thread per point and chunk, each with a
        # tile of values in flight, as a strips thread; then the chunks' combine
        chunks = split_column_chunks(points, reduced_extent(kernel, dims, target), target)
        threads, launches = points * chunks * target.row_values_per_thread, 2
    if schedule in (None, "pointwise"):  # a thread per point walks its loops one by one
        rereads = _rereads(kernel, read, dims, target, min(points, target.sm_count * 2048))
    if schedule == "strips" and column_staged(kernel, dims, target):
        # codegen/column_stages.py: the reductions' partials over the whole GPU, then
        # the loops after them, each stage reading its inputs again (its combine, like
        # split-columns' second kernel, is not counted here)
        threads, launches = target.sm_count * 2048, stage_count(kernel)
        rereads = _rereads(kernel, read, dims, target, points)
    elif schedule == "strips":  # a block per strip; the values its threads have in flight
        reduced = reduced_extent(kernel, dims, target)
        strip = kernel.attributes.get("strip", "columns")
        width, per = strip_shape(kernel, dims, target, strip)
        threads = points * min(reduced, per * target.row_values_per_thread)
        # a block's phases (loads, a barrier-bound combine, later loops) overlap only
        # with other blocks': fewer resident than strip_min_blocks an SM leave it idle
        # between them (one loop: one phase, then a short combine)
        blocks, _ = _strip_blocks(kernel, dims, target, strip)
        # (over rows, a block per point of 256-512 threads, as before: not measured yet)
        if strip == "columns" and \
                sum(isinstance(o, (ForOp, ReduceOp)) for o in kernel.body.ops) > 1:
            threads = min(threads, target.sm_count * 2048 * blocks
                          // (target.sm_count * _strip_asked(width, per, target)))
            if not strip_held(kernel, dims, target, strip):  # streamed: as measured
                threads = int(min(threads, target.sm_count * 2048) / target.strips_stream_slowdown)
        rereads = _strip_rereads(kernel, read, dims, target)
    flops, walked, tiled = _flops(kernel.body, points, dims, target), 0, 0.0
    contraction = tiled_contraction(kernel, dims, target)
    if contraction is not None:
        # tiles and split-K fill the GPU (codegen/tile_model.py models the rest)
        tiled, flops, _ = contraction
        threads = target.sm_count * 2048
    elif has_loops(kernel):
        walked = walked_bytes(kernel, points, dims, target)
    return KernelCost(
        bytes_read=sum(buffer_bytes(t, dims, target) for t in read.values()) + rereads,
        strided_bytes=_strided_bytes(kernel, dims, target) + scattered,
        bytes_written=sum(buffer_bytes(t, dims, target) for t in written.values()),
        flops=flops, registers=live_registers(kernel.body), threads=threads,
        walked_bytes=walked, tiled_s=tiled, launches=launches).with_time(target)


def _strided_bytes(kernel: Operation, dims: dict, target: Target) -> int:
    """Bytes of the buffers a pointwise kernel reads permuted (not through a tile), when
    its innermost axis is long enough for the stride to waste sectors."""
    schedule = kernel.attributes.get("schedule", "pointwise")
    inner = innermost_axis(kernel)
    if schedule not in ("pointwise", "transpose-tiles") or inner is None or \
            resolve(kernel.extent_list[inner], dims, target) < 8:
        return 0
    tiled = {id(o) for o in tiled_loads(kernel)} if schedule == "transpose-tiles" else set()
    strided = {id(o.operands[0]): o.operands[0].type for o, _ in permuted_loads(kernel)
               if id(o) not in tiled}
    return sum(buffer_bytes(t, dims, target) for t in strided.values())
