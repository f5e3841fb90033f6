"""The host lines of a split reduction (codegen/schedule_split.py): chunks per point from
the sizes of the call, a partial buffer per reduce, then the first kernel (or its vector
twin, where the call allows) and the combining kernel."""
from __future__ import annotations

from mlfuse.codegen.kernel_code import extent_factors
from mlfuse.codegen.schedule_split import COMBINE, partial_dtypes
from mlfuse.dialects.reductions import reduce_nests


def split_launch(host, kernel, points: str, args: list[str]) -> None:
    """The host lines of a split reduction: chunks per point from the sizes, a partial
    buffer per reduce, then both kernels."""
    op = kernel.op
    rows = op["schedule"] == "split-rows"
    n_k = " * ".join(extent_factors(reduce_nests(op)[0].extents, lambda s: host.dim(s, op)))
    second = kernel.variants[COMBINE[op["schedule"]]]
    if not rows:
        columns = kernel.variants.get("split-columns-vector")
        vector = columns and {"name": columns, "lanes": kernel.vector_lanes,
                              "buffers": kernel.vector_buffers}
        lines, stage_args, n_split = columns_first_stage(host, op, points, n_k, args,
                                                         kernel.variants["split-columns"], vector)
        # a thread combines a point's chunks; a block, where few points took many
        host.helpers.update({"_row_blocks", "_row_threads"})
        blocks = (f"_row_blocks({points}), _row_threads(-(-{n_split} // VALUES_PER_THREAD), "
                  "THREADS_PER_BLOCK)")
        unit = host.w.unit
        lines += [f"if {n_split} <= THREAD_COMBINE_CHUNKS:",
                  unit + host.call(second, f"_pointwise_blocks({points}, 1), THREADS_PER_BLOCK",
                                   stage_args),
                  "else:",
                  unit + host.call(kernel.variants["combine-columns-blocks"], blocks, stage_args)]
        host.guarded(op, points, lines)
        return
    host.helpers.update({"_split_rows", "_row_blocks", "_row_threads"})
    n_split = host.namer.fresh("n_split")
    lines = [f"{n_split} = _split_rows({points}, {n_k})"]
    stage_args = args + _partial_buffers(host, op, points, n_split, lines) + [n_split]
    per_thread = f"-(-({n_k}) // ({n_split} * VALUES_PER_THREAD))"
    grids = (f"_row_blocks({points} * {n_split}), _row_threads({per_thread}, THREADS_PER_BLOCK)",
             f"_row_blocks({points}), _row_threads({n_split}, THREADS_PER_BLOCK)")
    first = kernel.variants["split-rows"]
    if "split_tiles" in op.attributes:  # (split_tiles.py): a block per (point, chunk) of squares
        grids = (f"_row_blocks({points} * {n_split}), {kernel.launch['split-rows'][1]}",
                 grids[1])
    if "split-rows-vector" in kernel.variants:  # whole vectors, aligned, 32-bit offsets
        lanes = kernel.vector_lanes
        width = "" if lanes == "VECTOR_WIDTH" else f", width={lanes}"
        buffers = ", ".join(host.namer(b) for b in kernel.vector_buffers)
        host.helpers.add("_vector_ready")
        unit = host.w.unit
        lines += [f"if {points} * ({n_k}) < 2**31 and ({n_k}) % {lanes} == 0 and "
                  f"_vector_ready({buffers}{width}):",
                  unit + host.call(kernel.variants["split-rows-vector"], grids[0], stage_args),
                  "else:", unit + host.call(first, grids[0], stage_args)]
    else:
        lines.append(host.call(first, grids[0], stage_args))
    lines.append(host.call(kernel.variants["combine-rows"], grids[1], stage_args))
    host.guarded(op, points, lines)


def _partial_buffers(host, op, points: str, n_split: str, lines: list[str]) -> list[str]:
    """A partial buffer per reduce of ``points * n_split`` values (lines appended)."""
    partials = []
    for k, dtype in enumerate(partial_dtypes(op)):
        partials.append(host.namer.fresh(f"partials_{k}"))
        lines.append(f"{partials[-1]} = cuda.device_array({points} * {n_split}, dtype=np.{dtype})")
    return partials


def columns_first_stage(host, op, points: str, n_k: str, args: list[str], first: str,
                        vector: dict | None) -> tuple[list[str], list[str], str]:
    """The host lines of a split-columns first stage: chunks per point from the sizes,
    a partial buffer per reduce, and the first kernel, its vector twin (``vector``: its
    name, lanes and buffers) where the call allows. Returns (lines, the kernels'
    arguments, the chunk count's name)."""
    host.helpers.update({"_split_columns", "_pointwise_blocks"})
    n_split = host.namer.fresh("n_split")
    sizes = f"{n_k}, SM_COUNT, VALUES_PER_THREAD"  # (mlfuse/strip_plan.py's)
    if vector is None:
        lines = [f"{n_split} = _split_columns({points}, {sizes})"]
    else:  # a thread a vector of points: the chunks of its own threads' count ...
        lanes = vector["lanes"]
        vectors = host.namer.fresh("vectors")
        # ... where that count stays within two of the combining thread's tiles: column
        # sums 16384 x 4096 took 128 chunks as vectors, 0.123 ms against 0.098 as points
        # (33 chunks), the combining kernel's 4096 threads each walking 128 partials (H100).
        # 16-bit values always: a scalar load moves 2 bytes (f16 column sums 32768 x 4096
        # as points 0.191 ms, as vectors of 8 0.105; f32 as vectors 0.100 against 0.098)
        few = "" if lanes == "VECTOR_WIDTH_16" else \
            f" and _split_columns({points} // {lanes}, {sizes}) <= 2 * VALUES_PER_THREAD"
        lines = [f"{vectors} = {vector_call_test(host, op, lanes, vector['buffers'])}{few}",
                 f"{n_split} = _split_columns({points} // {lanes} if {vectors} else {points}, "
                 f"{sizes})"]
    stage_args = args + _partial_buffers(host, op, points, n_split, lines) + [n_split]
    grid = f"_pointwise_blocks({points} * {n_split}, 1), THREADS_PER_BLOCK"
    if vector is None:
        return lines + [host.call(first, grid, stage_args)], stage_args, n_split
    unit = host.w.unit
    vector_grid = f"_pointwise_blocks({points} // {lanes} * {n_split}, 1), THREADS_PER_BLOCK"
    return lines + [f"if {vectors}:", unit + host.call(vector["name"], vector_grid, stage_args),
                    "else:", unit + host.call(first, grid, stage_args)], stage_args, n_split


def vector_call_test(host, op, lanes: str, buffers) -> str:
    """The host's test that a call may run a kernel moving vectors of ``lanes`` points
    along the last axis of ``op``'s points: the extent divides, and ``buffers``' rows
    start on a vector (``_vector_ready``)."""
    width = "" if lanes == "VECTOR_WIDTH" else f", width={lanes}"
    last = " * ".join(extent_factors([op.extent_list[-1]], lambda s: host.dim(s, op)))
    host.helpers.add("_vector_ready")
    names = ", ".join(host.namer(b) for b in buffers)
    return f"({last}) % {lanes} == 0 and _vector_ready({names}{width})"


__all__ = ["split_launch", "columns_first_stage", "vector_call_test"]
