"""The schedule of a fused kernel with reductions, chosen from its extents and accesses.

A kernel's top-level ``loops.reduce`` ops may run five ways (``fused.kernel``'s
``schedule``; codegen reads only that attribute and the IR):

- "row": one block per point, the block's threads share the reduced extent (long rows,
  enough rows to fill the GPU; softmax 16384 x 4096).
- "split-rows": the reduced extent of each point split across blocks, each block
  reducing a contiguous chunk into a partial; a second kernel combines a point's
  partials in a fixed order (deterministic, no atomics) and runs the epilogue. For few
  points with long reductions: a full reduction to a scalar, a few long rows.
- "split-columns": the reduced axes are not the innermost: consecutive threads own
  consecutive points (coalesced reads) and each walks a chunk of the reduced extent;
  a second kernel combines the chunks (column sums, reductions over axis 0).
- "warp-rows": short rows: a group of 1..32 threads per row, several rows per warp
  (softmax over rows of 16). Rows shorter than ``row_min_extent``, and rows of one
  constant length a warp can hold (at most 32 x ``short_row_values`` values: 512), whose
  vector group (``mlfuse/row_groups.py``: threads per row and 16-byte vectors each,
  chosen from the row length and dtype) reads whole lines of neighbouring rows.
- "strips": a block owns a strip of points and ALL of their reduced values, its
  threads splitting both (combined through shared memory): the reductions' results
  are on chip, so a broadcast-back epilogue over the reduced axes runs in the same
  kernel. "columns": 32 neighbouring points per block (reductions over leading or
  middle axes: column centring, softmax over a middle axis); "rows": one point per
  block whose reduced values are contiguous over several axes (instance norm over
  [H, W]; one axis stays "row"). The cost model picks it against split-columns and
  one thread per point (a tiny kept extent with a huge reduced one stays split).
- "pointwise": one thread per point walks the reduction (short reductions).

A loop-free kernel is "pointwise", or "transpose-tiles" where it reads a transpose
(mlfuse/transforms/fusion/tiles.py).

A reduction over several axes is a nest of reduces (one per axis, the inner ones
starting from the combiner's identity); the split schedules walk such a nest as one
flat loop over the product of its extents (:class:`ReduceNest`).

The host picks the number of chunks (split) or the threads per row (warp-rows) from
the sizes of each call, so a kernel compiled with symbolic dims stays right at any size.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

from mlfuse.dialects.arith import FloorDivOp
from mlfuse.dialects.contraction import arg_deps
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.index_forms import (access_walk, linear_terms, merged_view, multiple_of,
                                         reads_any, reads_value, row_step, row_walk, size_of,
                                         unit_tail_dropped, unraveled)
from mlfuse.dialects.loops import ForOp, LoadOp, MaskedLoadOp, ReduceOp, access_parts
from mlfuse.dialects.permute import stores_along_points, why_not_staged_rows
from mlfuse.dialects.reductions import (ReduceNest, loop_levels, reduce_nest, reduce_nests,
                                        staged_fors, why_not_column_staged, why_not_staged)
from mlfuse.ir.core import Operation
from mlfuse.ir.types import FLOAT_DTYPES, INT_DTYPES, product_dim, symbols_of
from mlfuse.hardware import Target
from mlfuse.row_groups import (WARP, kernel_row_group, kernel_runtime_group, row_access_dtypes,
                               scalar_values, why_no_short_rows)
from mlfuse.row_hold import held_buffers, held_in_vectors, scalar_held_values

from mlfuse.transforms.fusion.cost import (held_whole_vectors, kernel_cost, reduced_extent,
                                           resolve, row_held_shared, shared_geometry,
                                           split_column_chunks, stage_count, strip_held,
                                           strip_shape)
from mlfuse.transforms.fusion.moments import shift_centred_squares
from mlfuse.transforms.fusion.tiles import choose_tiles, through_tiles

SPLIT_SCHEDULES = ("split-rows", "split-columns")


def _uses_reduce_result(kernel: Operation) -> set[int]:
    """Ids of the top-level values computed from a top-level reduce's result."""
    tainted: set[int] = set()
    for op in kernel.body.ops:
        inner_operands = [v for o in op.walk() for v in o.operands]
        if isinstance(op, ReduceOp) or any(id(v) in tainted for v in inner_operands):
            tainted.update(id(r) for r in op.results)
    return tainted


def why_not_split(kernel: Operation, fors: bool = False) -> str | None:
    """Why the kernel's reductions cannot be split into independent chunks (None: they can;
    ``fors``: for nests left to the plan, a split through tiles storing as it walks)."""
    if not fors and any(isinstance(o, ForOp) for o in kernel.body.ops):
        return "it also writes along the reduced axis (needs the whole row's result first)"
    nests = reduce_nests(kernel)
    if not nests:
        return "no reduction"
    if len({repr(n.extents) for n in nests}) > 1:
        return "its reductions run over different extents"
    tainted = _uses_reduce_result(kernel)
    for n in nests:
        if any(id(v) in tainted for o in n.top.walk() for v in o.operands if o is not n.top):
            return "one reduction reads another's result (softmax-like: one pass needs the first)"
        if n.top.result.type.dtype not in FLOAT_DTYPES + INT_DTYPES:
            return f"no partial buffer for {n.top.result.type}"
    return None


def _loads(op: Operation) -> list[Operation]:
    return [o for o in op.walk() if isinstance(o, (LoadOp, MaskedLoadOp))]


def _reshaped_view(load: Operation, levels: list, points: dict) -> list | None:
    """A load's indices with a read through a reshape seen as what it is: where the
    indices that read the nest walk it row-major over the buffer's trailing axes
    (``index_forms.access_walk``: group norm's ``x[n, g * C/G + k0, k1, k2]``, or its
    unravel ``x[n, X // (H*W), X // W % H, X % W]`` of ``X = (g * C/8 + k0) * (H*W) +
    k1``), or unravel ``q * S + k`` (k a loop index of extent S: the rows of a reshaped
    view), the load walks the innermost index along contiguous memory, so the view
    ends in it (the rows' values before it) rather than in index arithmetic that mixes
    a point and a step. None where its one index that reads a step is ``(q * S + k) //
    D`` (a per-channel parameter read along group norm's rows, ``gamma[c]``, or with
    the row's other indices, ``t[n, c]``), or that reads outer levels of a nest only
    (``g[q * C/G + k0]`` over ``k0, k1, k2``): one element for many steps."""
    buf, idx = access_parts(load)
    indices = [lvl.body.args[0] for lvl in levels]
    sizes = [lvl["extent"] for lvl in levels]
    extents = {id(k): size for k, size in zip(indices, sizes)}
    if len(levels) > 1 and not any(reads_value(v, indices[-1]) for v in idx):
        return None
    varying = [v for v in idx if size_of(v) is None and reads_any(v, set(map(id, indices)))]
    if len(varying) == 1 and isinstance(getattr(varying[0], "op", None), FloorDivOp):
        inner = varying[0].op.operands[0]
        while isinstance(getattr(inner, "op", None), FloorDivOp):
            inner = inner.op.operands[0]
        if row_step(inner, extents) is not None or \
                row_walk(inner, indices, sizes) is not None:
            return None
    walk = access_walk(idx, list(buf.type.shape), indices, sizes)
    if walk is not None:
        return idx[:walk.at] + [t for t, _ in walk.terms if t is not None] + [indices[-1]]
    found = unraveled(idx)
    if found is None:  # neighbouring axes walked as one (flatten-column-nests): x[X, c],
        # and an axis split into a point's and a step's (group norm over NHWC:
        # x[n, k0 // W, k0 % W, g * C/G + k1] reads the view [N, H*W, G, C/G])
        return [t for v in merged_view(idx, list(buf.type.shape))[0]
                for t in _mixed_radix(v, extents, points)]
    step = row_step(found[1], extents)
    if step is None:
        return idx
    q = next(v for v in found[1].op.operands if v is not step).op
    rows = [v for v in q.operands if size_of(v) is None]
    return found[0] + (_mixed_radix(rows[0], extents, points) if len(rows) == 1 else rows) + [step]


def _mixed_radix(q, extents: dict, points: dict) -> list:
    """The rows' index ``q`` as the indices of separate axes where it is a mixed-radix
    number of loop and point indices: group norm over NHWC reads ``reshape(x, [N, H*W, G,
    C/G])`` at ``(k0 * G + g) * C/G + k1``, whose ``k0 * G + g`` indexes the view's axes
    [H*W, G] (its step and its point apart, as batch norm's ``x[k0, c, k1, k2]``), not a
    window. Each term's coefficient must be the span of the terms below it (a whole
    multiple for the last); [q] elsewhere (``oh * 2 + kh``, kh up to 2: neighbouring
    points' values overlap)."""
    sizes = {**extents, **points}
    terms = linear_terms(q, set(extents))
    if terms is None or any(t is None or id(t) not in sizes for t, _ in terms):
        return [q]
    order, span = [], product_dim([1])
    while terms:
        exact = [tc for tc in terms if product_dim([tc[1]]) == span]
        if len(exact) == 1 or (len(terms) == 1 and multiple_of(terms[0][1], span)):
            t, c = (exact or terms)[0]
        else:
            return [q]
        terms.remove((t, c))
        order.append(t)
        span = product_dim([c, sizes[id(t)]])
    return order[::-1]


def access_layout(kernel: Operation) -> str | None:
    """How the reduced elements lie in memory relative to the threads' points:
    "rows" when every load that steps with a loop index has the loop nest's innermost
    index as its last index (the reduced values of a point are contiguous), "columns"
    when every such load has the kernel's last point index as its last index, or none
    of the point's indices at all (the same address for neighbouring points: mean
    pooling's mask), and at least one has (neighbouring points are contiguous), None
    otherwise (mixed, e.g. a matmul, or a window: an index computed from a point index
    and a reduced one, whose short reductions one thread per point walks best)."""
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if not loops:
        return None
    rows = columns = True
    contiguous = False
    point_last = kernel.body.args[-1] if kernel.body.args else None
    points = set(kernel.body.args)
    point_extents = {id(a): e for a, e in zip(kernel.body.args, kernel.extent_list)}
    memo: dict = {}
    for loop in loops:
        levels = loop_levels(loop)
        steps = [id(lvl.body.args[0]) for lvl in levels]
        fastest = steps[-1]
        for load in _loads(loop):
            idx = _reshaped_view(load, levels, point_extents)
            if idx is None:
                continue  # the same element for runs of steps: not a stream to coalesce
            idx = unit_tail_dropped(idx, list(load.operands[0].type.shape))
            for v in idx:  # oh*stride + kh: a sliding window (pooling, a grouped conv)
                deps = arg_deps(v, memo)
                if deps & points and any(id(a) in steps for a in deps):
                    return None  # neighbouring points' values overlap: neither layout
            if not any(id(v) in steps for v in idx):
                continue
            rows &= bool(idx) and id(idx[-1]) == fastest
            along = point_last is not None and bool(idx) and idx[-1] is point_last
            contiguous |= along
            columns &= along or (point_last is not None and
                                 not any(point_last in arg_deps(v, memo) for v in idx))
    return "rows" if rows else "columns" if columns and contiguous else None


@dataclass
class ScheduleChoice:
    schedule: str
    reason: str
    tile_axes: list | None = None  # transpose-tiles: the tiled axes
    strip: str = ""   # a strips schedule's "columns" or "rows"
    split_stages: bool = False  # a row kernel's split plan for calls with few long rows
    short_rows: bool = False  # a row kernel's plan for calls with short rows (warp-rows)
    staged_rows: bool = False  # warp-rows storing along its points through a shared tile
    split_tiles: list | None = None  # split-rows reading its nests' squares through tiles
    strip_tiles: list | None = None  # strip-tiles: its point axis and reduced level


def _loop_extents(kernel: Operation) -> list[list]:
    """The extents of each top-level loop nest (reduce nests and for nests)."""
    return [[lvl["extent"] for lvl in loop_levels(o)] for o in kernel.body.ops
            if isinstance(o, (ReduceOp, ForOp))]


@contextmanager
def _scheduled(kernel: KernelOp, **attributes):
    """``kernel`` with these attributes while the block runs (what the cost model reads
    of a schedule), its own afterwards."""
    saved = dict(kernel.attributes)
    kernel.attributes.update(attributes)
    try:
        yield kernel
    finally:
        kernel.attributes.clear()
        kernel.attributes.update(saved)


def _seconds(kernel: KernelOp, schedule: str, strip: str, dims, target) -> float:
    """The cost model's time of ``kernel`` under ``schedule``; a split schedule's second
    launch and partial buffers counted in."""
    staged = schedule == "strips" and strip == "columns" and has_column_stages(kernel, target)
    with _scheduled(kernel, schedule=schedule, strip=strip, split_stages=int(staged)):
        cost = kernel_cost(kernel, dims, target)
    seconds = cost.seconds(target)
    if schedule in SPLIT_SCHEDULES:  # partials written and read back: a value per chunk
        points = math.prod(resolve(e, dims, target) for e in kernel.extent_list)
        chunks = (split_column_chunks(points, reduced_extent(kernel, dims, target), target)
                  if schedule == "split-columns" else 32)
        seconds += target.launch_s + 2 * chunks * points * 4 / target.dram_bytes_per_s
    return seconds


def strip_values(kernel, dims, target, strip: str, has_for: bool, staged: bool = False) -> str:
    """What explain says of a strips kernel's loops after the first: whether its threads
    hold their values in registers or read them again (``staged``: the kernel has column
    stages, which the host runs where its values fit on chip nowhere)."""
    if staged and not strip_held(kernel, dims, target, strip):
        levels = stage_count(kernel) - 1
        each = "" if levels == 1 else f" a level at a time ({levels} levels)"
        times = {1: "twice", 2: "three times"}.get(levels, f"{levels + 1} times")
        return ("; at these sizes its values fit on chip nowhere: in column stages, the "
                f"reductions' partials over the whole GPU{each}, a combine, then the loops "
                f"after them (the inputs read {times})")
    loops = sum(isinstance(o, (ReduceOp, ForOp)) for o in kernel.body.ops)
    tail = "; the epilogue over the reduced axes runs in the same kernel" if has_for else ""
    shared = shared_geometry(kernel, dims, target, strip) if loops > 1 else None
    if strip == "columns":  # the host's pick at these sizes (mlfuse/strip_plan.py)
        width, per = strip_shape(kernel, dims, target, strip)
        points = math.prod(resolve(e, dims, target) for e in kernel.extent_list)
        if shared is not None:  # (width in vectors of `lanes` points)
            width, per, size, lanes = shared
            width *= lanes
            tail = (" in 16-byte vectors" if lanes > 1 else "") + \
                f", {size // 1024} KB of shared memory a block" + tail
        tail = (f"; strips of {width} points x {per} threads each "
                f"({-(-points // width)} blocks)") + tail
    if loops < 2:
        return tail
    if shared is not None:
        return tail + "; its values are held in shared memory (inputs read once)"
    if strip_held(kernel, dims, target, strip):
        return tail + "; each thread holds its values in registers (inputs read once)"
    return tail + "; later loops read the inputs again (from L2 where the strips fit)"


# a plan sized per call is kept over pointwise where the model prices it this close at
# the compile-time sizes (_strips_or_split)
PER_CALL_MARGIN = 1.05


def _strips_or_split(kernel, dims, target, blocker, reduced, extents, has_for,
                     unbound=False) -> ScheduleChoice:
    """Over columns: the strips schedule (one kernel, the loops after the reductions
    in it), split-columns (two kernels, more parallelism where the reduced extent is long
    and the points are few) or one thread per point, whichever the cost model finds
    fastest. A plain reduction (no epilogue) over a reduced extent unknown until run time
    does not take strips: split-columns' host sizes its chunks from each call (one for
    short columns, up to 128 for long ones), so it stays near its best at any size, where
    strips, picked at the default size, may not be (column sums of 16384 x 4096, H100:
    strips 0.137 ms, split-columns 0.104)."""
    options = {}
    split = blocker is None and (reduced >= target.row_min_extent or unbound)
    sized_per_call = split and not has_for and unbound
    if len({repr(e) for e in extents}) == 1 and not sized_per_call:
        options["strips"] = _seconds(kernel, "strips", "columns", dims, target)
        if split and not has_for:  # the two plans of a plain reduction, as measured
            options["strips"] *= target.strips_slowdown
    if split:
        options["split-columns"] = _seconds(kernel, "split-columns", "", dims, target)
    options["pointwise"] = _seconds(kernel, "pointwise", "", dims, target)
    numbers = ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in options.items())
    if sized_per_call:
        numbers += "; not strips: the reduced extent is known only at run time"
    if sized_per_call and options["split-columns"] <= options["pointwise"] * PER_CALL_MARGIN:
        # split-columns' host sizes its chunks per call: one where the points fill the GPU
        # (a thread per point, as pointwise), more where they are few (a masked mean pool
        # compiled at the default sizes then called on [64, 2048, 1024]: pointwise's 65536
        # threads took 1.33 ms, torch.compile 0.24)
        del options["pointwise"]
        numbers += f"; split-columns, sized per call, within {PER_CALL_MARGIN - 1:.0%} of pointwise"
    staged = "strips" in options and has_column_stages(kernel, target)
    # compiled for symbols, one thread per point is priced at the default sizes' points
    # (1024 a symbol: the GPU full), where a call may have few (instance norm over NHWC
    # at [16, 64, 64, 128]: 2048 threads); a strips kernel's host sizes its strips, held
    # or streamed or, with column stages, split across the GPU, per call
    few_points = any(s not in dims for s in symbols_of(kernel.extent_list))
    margin = PER_CALL_MARGIN * (1 if staged else target.strips_stream_slowdown)
    if (staged or few_points) and "strips" in options and "pointwise" in options and \
            options["strips"] <= options["pointwise"] * margin:
        del options["pointwise"]
        numbers += f"; strips, sized per call, within {margin - 1:.0%} of pointwise"
    best = min(options, key=options.get)
    what = {"strips": "a block per strip of neighbouring points (coalesced), its threads "
                      f"also split the {reduced} reduced values" +
                      strip_values(kernel, dims, target, "columns", has_for, staged),
            "split-columns": "threads own neighbouring points (coalesced) and walk chunks of "
                             f"the {reduced} reduced values; a second kernel combines the "
                             "chunks",
            "pointwise": "one thread per point walks its reduction"}[best]
    return ScheduleChoice(best, f"reduced axes not innermost: {what} (cost model: {numbers})",
                          strip="columns" if best == "strips" else "")


def has_column_stages(kernel: Operation, target: Target) -> bool:
    """Whether a strips kernel over columns gets column stages, which its host runs for
    calls whose strips fit on chip nowhere."""
    return target.strip_column_stages and why_not_column_staged(kernel) is None


def _with_split_plan(kernel: KernelOp, choice: ScheduleChoice, target: Target) -> ScheduleChoice:
    """A row kernel's choice with its split plan where it has one: the host runs it for
    calls with fewer than sm_count x split_stage_rows_per_sm rows too long for registers."""
    if choice.schedule != "row" or why_not_staged(kernel) is not None:
        return choice
    rows = target.sm_count * target.split_stage_rows_per_sm
    choice.split_stages = True
    fors = [o for o in kernel.body.ops if isinstance(o, ForOp)]
    staged = staged_fors(kernel)
    after = "the loops after them" if any(id(o) not in staged for o in fors) else \
        "their combine"
    choice.reason += (f"; a call with fewer than {rows} rows longer than a block holds "
                      f"splits each across blocks ({stage_count(kernel)} kernels: the "
                      f"statistics' partials by level{', storing as they go' if staged else ''}, "
                      f"then {after})")
    if held_buffers(kernel) is not None and held_in_vectors(kernel):
        choice.reason += ", unless held rows, a block each, move them faster"
    return choice


def _with_short_plan(kernel: KernelOp, choice: ScheduleChoice, dims: dict,
                     target: Target) -> ScheduleChoice:
    """A row kernel's choice with its short-row plan where it has one (its rows' length
    a symbol: codegen/short_rows.py): the host runs calls whose rows a warp holds as
    warp-rows, with the group row_groups.py picks from the call's row length and dtype."""
    if choice.schedule != "row" or why_no_short_rows(kernel) is not None:
        return choice
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    row = resolve(loops[0]["extent"], dims, target)
    group = kernel_runtime_group(kernel, row, target)
    most = f"{WARP * scalar_values(target.short_row_values)} values"
    if row_access_dtypes(loops) and target.vector_width > 1:
        most = f"{WARP * target.short_row_values} values in whole 16-byte vectors, {most} otherwise"
    choice.short_rows = True
    if group is None:
        choice.reason += (f"; a call with rows of at most {most} runs them as warp-rows (a "
                          "group of lanes per row, picked per call)")
    else:
        choice.reason = (f"{row} values a row at these sizes, a length known per call: "
                         f"warp-rows, {group.describe()} (the host picks the group per call "
                         f"for rows of at most {most}); longer rows: " + choice.reason)
    return choice


def _short_rows(kernel: KernelOp, extents: list[list], target: Target) -> str | None:
    """Why warp-rows runs ``kernel``'s rows (None: it does not take them this way): rows
    of one constant length along one axis that a warp holds (at most 32 threads of
    ``short_row_values`` each), in the vector group row_groups.py picks where whole
    vectors fill them, else one value a thread per step (scalar loads, still coalesced).
    A block per row of 32..512 values would leave its threads few values each and cap an
    SM at 32 blocks; the group packs a block's threads with many rows."""
    if any(len(e) != 1 for e in extents) or len({repr(e) for e in extents}) != 1:
        return None
    row = extents[0][0]
    if not isinstance(row, int) or row > WARP * target.short_row_values:
        return None
    group = kernel_row_group(kernel, target)
    if group is not None:
        return group.describe()
    if row < target.row_min_extent:
        return None  # the plain short-row branch says why
    width = min(WARP, 1 << (row - 1).bit_length())
    return (f"{width} threads per row, each value by itself (no whole 16-byte vectors: "
            f"{row} values of this dtype, or accesses a vector cannot take), a warp's load "
            "reads neighbouring values")


def choose_schedule(kernel: KernelOp, dims: dict, target: Target) -> ScheduleChoice:
    """The schedule of ``kernel`` (see the module doc) and why, from the sizes its
    symbols have in ``dims`` (the target's default size where unbound)."""
    choice = _choose_schedule(kernel, dims, target)
    if choice.schedule == "row":  # streaming and split rows: variance in the mean's pass
        shift_centred_squares(kernel.body, target.row_values_per_thread * target.row_threads,
                              size=lambda extent: resolve(extent, dims, target))
    elif choice.staged_rows:  # a warp streams all rows but constant ones it holds: the same
        shift_centred_squares(kernel.body, target.row_values_per_thread * WARP)
    elif _columns_streamed(kernel, choice, dims, target) and shift_centred_squares(kernel.body):
        # likewise strips over columns that hold their values nowhere on chip, where
        # statistics in one pass make one level of partials: column stages, or a split
        choice = _choose_schedule(kernel, dims, target)
    if access_layout(kernel) == "rows":
        choice = _with_split_plan(kernel, choice, target)
        choice = _with_short_plan(kernel, choice, dims, target)
    if choice.schedule == "strips" and choice.strip == "columns" and \
            has_column_stages(kernel, target):
        # codegen/column_stages.py: for calls whose strips fit on chip nowhere
        choice.split_stages = True
        levels = stage_count(kernel) - 1
        kernels = "two kernels" if levels == 1 else f"{levels + 1} kernels"
        choice.reason += ("; a call whose strips' values fit neither shared memory nor "
                          f"registers splits the columns across threads in {kernels} (the "
                          "reductions' partials" + ("" if levels == 1 else " by level") +
                          ", then the loops after them)")
    if choice.schedule == "row":
        choice.reason += _held_rows(kernel, dims, target, choice.split_stages)
    return choice


def _columns_streamed(kernel: KernelOp, choice: ScheduleChoice, dims: dict,
                      target: Target) -> bool:
    """Whether a strips kernel over columns may hold its values on chip nowhere and
    would have a plan of one level of partials (column stages, a pass fewer than two
    levels take; split-columns where no loop follows) were its reductions at one level:
    compiled for sizes, where it holds nothing at them; for symbols, always (a call's
    columns may be long: column standardisation called at [100352, 64] streamed 8
    strips, 3.8x torch.compile on the H100; held kernels pay the shifted sums instead,
    docs/perf-notes.md "Twenty-fourth session")."""
    if choice.schedule != "strips" or choice.strip != "columns":
        return False
    if any(isinstance(o, ForOp) for o in kernel.body.ops) and \
            why_not_column_staged(kernel) is not None:
        return False  # no plan that one level of partials would give it
    if any(s not in dims for n in reduce_nests(kernel) for s in symbols_of(n.extents)):
        return True
    with _scheduled(kernel, schedule="strips", strip="columns"):
        return not strip_held(kernel, dims, target, "columns")


def _held_rows(kernel: KernelOp, dims: dict, target: Target, split_plan: bool) -> str:
    """What explain says of a row kernel whose rows at these sizes pass what registers
    hold but not what registers and shared memory hold (codegen/held_rows.py)."""
    held = row_held_shared(kernel, dims, target, split_plan)
    if held is None:
        return ""
    threads, nbytes = held
    whole = held_whole_vectors(kernel, reduced_extent(kernel, dims, target), target)
    where = f"and {nbytes / 1024:.0f} KB of shared memory" if nbytes else "(no shared memory)"
    values = target.row_values_per_thread if whole else scalar_held_values(target)
    return (f"; rows past what registers hold ({target.row_values_per_thread * target.row_threads}"
            f" values) are held in registers and shared memory at these sizes: {threads} "
            f"threads x {values} values {where} a block, "
            f"{'in whole vectors' if whole else 'held a value at a time'}, the row read once")


def _choose_schedule(kernel: KernelOp, dims: dict, target: Target) -> ScheduleChoice:
    current = kernel["schedule"]  # the builder's "row" or "pointwise", or an earlier choice
    if current not in ("pointwise", "row", "warp-rows", "transpose-tiles", "strips",
                       "strip-tiles") + SPLIT_SCHEDULES:
        return ScheduleChoice(current, f"{current} (set by an earlier pass)")
    nests = reduce_nests(kernel)
    loops = [o for o in kernel.body.ops if isinstance(o, (ReduceOp, ForOp))]
    if not loops:
        tiles = choose_tiles(kernel, dims, target)
        if tiles is not None:
            return ScheduleChoice("transpose-tiles", tiles[1], tiles[0])
        return ScheduleChoice("pointwise", "no reduction: one thread per point")
    from mlfuse.transforms.contraction import match_contraction
    if current == "pointwise" and match_contraction(kernel) is not None:
        return ScheduleChoice("pointwise", "a sum of products: left to the contraction pass")
    points = math.prod(resolve(e, dims, target) for e in kernel.extent_list)
    reduced = max((math.prod(resolve(e, dims, target) for e in n.extents) for n in nests),
                  default=0)
    row = max((resolve(o["extent"], dims, target) for o in loops), default=0)
    layout = access_layout(kernel)
    blocker = why_not_split(kernel)
    few_points = points < 2 * target.sm_count
    row_space = current in ("row", "strips")  # the builder found a reduced space
    extents = _loop_extents(kernel)
    has_for = any(isinstance(o, ForOp) for o in loops)
    # an unbound reduced extent may be long at run time; the host splits it only if it is
    unbound = any(s not in dims for n in nests for s in symbols_of(n.extents))
    long = reduced >= target.split_min_extent or unbound
    if layout == "rows" and stores_along_points(kernel) and why_not_staged_rows(kernel) is None:
        return _staged_rows(kernel, points, row, target)
    tiled = through_tiles(kernel, dims, target, layout,
                          why_not_split(kernel, fors=True) if has_for else blocker,
                          blocker, few_points or reduced >= target.transpose_tile ** 2 or unbound)
    if tiled is not None:  # (split: a point's values a square or more, or few points)
        return ScheduleChoice(tiled[0], tiled[1], **tiled[2])
    if blocker is None and layout == "rows" and few_points and long:
        return ScheduleChoice("split-rows", f"{points} point(s) cannot fill {target.sm_count} SMs "
                              f"with one block each; each point's {reduced} values are split "
                              "across blocks, then a second kernel combines the partials")
    if layout == "columns" and (has_for or row_space or reduced >= target.row_min_extent):
        return _strips_or_split(kernel, dims, target, blocker, reduced, extents, has_for,
                                unbound)
    flat = max(math.prod(resolve(e, dims, target) for e in ext) for ext in extents)
    if layout == "rows" and any(len(e) > 1 for e in extents):
        row = max(row, flat)  # a nest is walked as one flat loop
        if len({repr(e) for e in extents}) == 1 and row >= target.row_min_extent and \
                (row_space or few_points):
            return ScheduleChoice("strips", f"{points} rows of {row} values over several axes: "
                                  "a block per row walks them as one flat loop" +
                                  strip_values(kernel, dims, target, "rows", has_for),
                                  strip="rows")
    short = _short_rows(kernel, extents, target) if layout == "rows" and points > 1 else None
    if short is not None:
        return ScheduleChoice("warp-rows", f"{points} rows of {row} values: {short}")
    if layout == "rows" and has_for and row >= target.row_min_extent and \
            len({repr(e) for e in extents}) == 1:
        return ScheduleChoice("row", f"{points} rows of {row}: one block per row")
    if layout == "rows" and row < target.row_min_extent and points > 1 and \
            why_no_short_rows(kernel) is None:  # rows whose length is a symbol: a row
        # kernel, whose short-row plan holds them in registers at this length and others
        return ScheduleChoice("row", f"{points} rows of {row}: one block per row")
    if layout == "rows" and row < target.row_min_extent and points > 1:
        return ScheduleChoice("warp-rows", f"rows of {row} values: a group of threads per row, "
                              "several rows per warp (coalesced)")
    if layout == "rows" and (current == "row" or points < 2 * target.sm_count):
        why = f"; not split: {blocker}" if blocker and few_points else ""
        return ScheduleChoice("row", f"{points} rows of {row}: one block per row{why}")
    if current == "row" and not any(len(e) > 1 for e in extents):
        return ScheduleChoice("row", f"{points} rows of {row}: one block per row")
    return ScheduleChoice("pointwise", "one thread per point walks its reduction" + (
        "" if layout else " (its reads are neither along rows nor along columns)"))


def _staged_rows(kernel: KernelOp, points: int, row: int, target: Target) -> ScheduleChoice:
    """A row kernel that stores along its points (kernel_builder kept such a store only
    where codegen/staged_rows.py can write it): warp-rows, a warp a row."""
    names = ", ".join(sorted({o.operands[1].name_hint or "an output"
                              for o in stores_along_points(kernel)}))
    rows = target.threads_per_block // WARP
    return ScheduleChoice("warp-rows", f"{points} rows of {row} values, {names} stored along "
                          f"the rows' points: a warp a row, {rows} neighbouring rows a block, "
                          "the store staged through a shared tile (a column of the block's "
                          "rows written at once)", staged_rows=True)


def apply_schedule(kernel: KernelOp, dims: dict, target: Target) -> ScheduleChoice:
    choice = choose_schedule(kernel, dims, target)
    kernel.attributes["schedule"] = choice.schedule
    for key, value in (("tile_axes", choice.tile_axes), ("strip", choice.strip),
                       ("split_stages", int(choice.split_stages)),
                       ("warp_rows", int(choice.short_rows)),
                       ("staged_rows", int(choice.staged_rows)),
                       ("split_tiles", choice.split_tiles), ("strip_tiles", choice.strip_tiles)):
        if value:  # (an attribute the choice does not set: its default, not printed)
            kernel.attributes[key] = value
        else:
            kernel.attributes.pop(key, None)
    return choice


def is_split(kernel: Operation) -> bool:
    return isinstance(kernel, KernelOp) and kernel["schedule"] in SPLIT_SCHEDULES


__all__ = ["ReduceNest", "reduce_nest", "reduce_nests", "why_not_split", "access_layout",
           "choose_schedule", "apply_schedule", "ScheduleChoice", "SPLIT_SCHEDULES", "is_split"]
