"""Parameters of a compilation target, in one place: the fusion cost model and the
code generator read them from here and nowhere else."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Target:
    name: str
    dram_bytes_per_s: float     # measured device-to-device copy rate (bytes read + written)
    flops_per_s: float          # fp32 FMA-pipe throughput, counting one op as one flop
    launch_s: float             # device-side cost of one kernel launch
    register_budget: int        # live scalars per thread before a fused kernel would spill
    shared_mem_bytes: int       # per block
    sm_count: int
    threads_per_block: int      # for pointwise kernels
    pointwise_per_thread: int   # points per thread of a loop-free pointwise kernel: their
                                # loads are issued together, so more bytes are in flight
    row_values_per_thread: int  # a row of at most this * row_threads values stays in registers
    row_min_extent: int         # a reduction shorter than this runs one thread per output
                                # (or, along rows, a group of threads per row: warp-rows,
                                # which rows of a constant length up to 32 x
                                # short_row_values also take: mlfuse/row_groups.py)
    default_dim: int            # size assumed for a symbolic dim that --dim did not bind
    # Launch and access knobs of the generated kernels (benchmarks/probe_memkern.py sweeps
    # them; docs/perf-notes.md has the measurements behind each default).
    vector_width: int = 4       # values of 4 bytes per vector load/store (4: 16 bytes);
                                # 1: no vector variants. Divides both *_per_thread.
    load_cache: str = ""        # PTX cache operator of vector loads ("" or e.g. ".cs")
    store_cache: str = ""       # and of vector stores
    pointwise_blocks_per_sm: int = 32  # a pointwise kernel's grid: at most sm_count * this
                                       # blocks (a grid-stride loop covers the rest); 0: all
    row_threads: int = 512      # most threads of a block holding a row in registers
    row_blocks_per_sm: int = 32  # a row kernel's grid: at most sm_count * this blocks,
                                 # striding over the rows; 0: one block per row
    row_min_blocks: int = 0     # launch_bounds' minimum resident blocks per SM of a
                                # register-held row kernel (0: none asked)
    split_min_extent: int = 8192  # fewer values per point than this are not split across
                                  # blocks (split-rows): one block reduces them fast enough
    split_blocks_per_sm: int = 4  # split-rows: a split reduction's first kernel aims at
                                  # sm_count * this blocks (the host picks the chunks)
    split_stage_rows_per_sm: int = 2  # a row kernel called with fewer rows than sm_count *
                                  # this, each longer than a block holds in registers, splits
                                  # its rows across blocks (codegen/split_stages.py)
    split_stage_min_blocks: int = 2  # ... its stages' blocks resident per SM (launch
                                  # bounds) and a wave's blocks an SM (its chunks), where
                                  # the epilogue walks the rows again: at 4, group norm's
                                  # epilogue spills (32 registers) and took 0.149 -> 0.535 ms
    split_combine_plan_min_blocks: int = 4  # the same where the epilogue only combines
                                  # (``y = p - t; return y, mean(y * y)``): stage 0 in 32
                                  # registers at 100% occupancy; residual_mse 2**26 0.308
                                  # -> 0.288 ms, 8192^2 0.307 -> 0.288 (H100,
                                  # probe_split_tiles.py)
    stream_row_threads: int = 256  # a streaming row kernel (each row loop re-reads its
                                # row): its block's threads, more only while the rows in
                                # flight would pass L2 (mlfuse/row_stream.py; H100, batch
                                # norm over rows of 12544: 1024 threads 0.110 ms, 512
                                # 0.084, 256 0.080)
    shared_row_threads: int = 1024  # a row held in registers and shared memory
                                # (codegen/shared_rows.py): the most threads of its block
    shared_row_bytes: int = 226 * 1024  # ... and the most dynamic shared memory it holds
                                # (H100: 227 KB a block, less the block reductions' scratch);
                                # 0: no such variant
    shared_row_split: bool = True  # ... in blocks of as few as a quarter of
                                # shared_row_threads, while that many threads' rows fit
                                # shared_row_bytes (more rows an SM: row_hold.py)
    row_reuse: bool = True      # a register-held row keeps costly values (exp, div, ...)
                                # that later row loops would compute again
    short_row_values: int = 16  # warp-rows vector kernels: the most values of a row each
                                # thread holds (rows of up to this many: a thread per row,
                                # its reductions in registers, no shuffles). A multiple of
                                # vector_width.
    short_row_batch: int = 1    # warp-rows vector kernels: rows a group takes a step, the
                                # first row loop's loads of all of them issued first
    short_row_lanes: int = 8    # warp-rows vector kernels: the fewest threads sharing a row
                                # of at least this many vectors, so a warp's vector load
                                # reads whole 128-byte lines (mlfuse/row_groups.py); 1: a
                                # thread per row wherever short_row_values allow
    short_row_min_blocks: int = 2  # short-row plan kernels (codegen/short_rows.py):
                                # launch_bounds' resident blocks per SM (2 x 512 threads:
                                # at most 64 registers; at 72, one block an SM had 8 KB of
                                # loads in flight, 23-57% of copy bandwidth on the H100)
    transpose_tile: int = 32    # transpose-tiles: a block's tile is this square of points
    transpose_tile_rows: int = 8  # rows of the tile its threads take at once (threads: x tile)
    transpose_vector_tile: int = 64  # transpose-tiles' vector kernel (extents that
                                # vector_width divides, aligned buffers): its square's side
    transpose_vector_threads: int = 256  # ... and its threads (64 x 64 / 256: each thread
                                # moves 4 vectors of vector_width values each way)
    split_through_tiles: bool = True  # a reduction reading a transpose of what it reads
                                # otherwise: one split through tiles (codegen/split_tiles.py),
                                # or strips through tiles (schedule_strip_tiles.py); off: a
                                # transpose kernel then the reduction, or a block a point)
    transpose_thin_threads: int = 256  # transpose-tiles' thin kernel (a tiled extent under
    transpose_thin_steps: int = 4      # transpose_tile / 2): its threads, and the points each
                                # takes in a rectangle (each step's state costs ~11 registers)
    strided_read_factor: float = 4.0  # a permuted read's cost over a coalesced one (bytes):
                                # each 4-byte value costs a 32-byte sector, of which L1/L2
                                # serve part to the neighbouring threads (transpose_add, H100:
                                # 0.60 ms strided vs 0.27 ms for torch.compile's tiles)
    strip_points: int = 32      # strips schedule over columns: neighbouring points per block
                                # (32 floats: a warp's read is whole 32-byte sectors)
    strip_threads: int = 256    # strips: the fewest threads of a block; more (up to 1024)
                                # where the reduced extent needs them
    strip_held_threads: int = 512  # strips: the most threads of a block whose threads hold
                                   # their values in registers (more would spill)
    strip_block_threads: int = 256  # strips over columns: the most threads of a block (the
                                    # host narrows its strip before it adds threads: several
                                    # small blocks per SM overlap their load/reduce/store phases)
    strip_blocks_per_sm: int = 4  # strips over columns: narrower strips (down to a 32-byte
                                  # sector a row) while the grid has fewer blocks than
                                  # sm_count * this
    strip_min_blocks: int = 3   # strips over columns: launch_bounds' resident blocks per SM
                                # (caps registers at 65536 / (this * strip_block_threads)):
                                # 2 let the held kernels take 110-120 registers, 2 blocks
                                # (channel layernorm over 96 channels 0.061 -> 0.050 ms at
                                # 3, layernorm stored NHWC 0.080 -> 0.069; H100)
    strip_line_bytes: int = 128  # strips over columns, streaming: the narrowest strip's row
                                # (H100, column centring 16384 x 4096: 32-byte rows 0.406 ms,
                                # 128-byte rows 0.325)
    strip_stream_threads: int = 512  # strips over columns, streaming: the most threads of a
                                # block whose strip is a 128-byte line a row and still short
                                # of blocks (more rows in flight, not narrower rows)
    strip_staged_stores: bool = True  # strips over columns: a store along the reduced axis
                                # through a shared tile (codegen/strips_staged.py)
    row_staged_stores: bool = False  # a row kernel's store along its points (a layernorm
                                # stored transposed) through a shared tile, a warp a row
                                # (codegen/staged_rows.py). Off until it is timed on the
                                # GPU: the transpose then keeps its own kernel (the builder
                                # refuses such a store, the cost model prices it scattered)
    staged_row_min_blocks: int = 2  # resident per SM, asked of a staged-rows kernel (its
                                # blocks of threads_per_block: left alone, ptxas took 66
                                # registers, one block of 512 an SM)
    strip_stage_width: int = 16  # ... in a streaming kernel only where its strip has this many
                                # points or more (a narrower one stores 16 bytes a point and more)
    strip_vectors: bool = True  # strips over columns: a thread's points a 16-byte vector
                                # where the buffers allow (codegen/strips_vector.py)
    strip_vector_values: int = 16  # its values a thread has in flight a tile: 4 f32 / 2 f16
                                # vectors (a multiple of 2 * vector_width; 32 spilled 500 B
                                # in middle softmax at the 128-register cap)
    strip_shared_bytes: int = 40 * 1024  # strips over columns in vectors: the most bytes of
                                # shared memory a block holds its strip's values in (read
                                # from DRAM once, codegen/strips_shared.py); 0: never. Under
                                # 48 KB with the reductions' scratch: no opt-in per kernel
    strip_shared_min_rereads: int = 2  # ... only where its held values save at least this
                                # many passes (later loops reading them again): with one
                                # (column centring) a kernel reading x twice ran 9-12% faster
                                # (H100: [1024, 65536] 0.285 ms against 0.325, [768, 65536]
                                # 0.219 against 0.241, [512, 131072] 0.239 against 0.267: a
                                # narrow strip, 32-64 B a row, at 37% occupancy reads slower)
    strip_shared_reuse: bool = True  # ... a costly value two of its loops compute (middle
                                # softmax's exp(x - max)) kept in the plane of the value it
                                # comes from, where no later loop reads that value itself
    strip_shared_threads: int = 128  # its block's threads (each combines its point's
                                # partials itself: fewer threads a point, a shorter combine)
    strip_shared_min_blocks: int = 6  # its launch_bounds' resident blocks per SM (caps
                                # registers at 65536 / (this * strip_shared_threads)): f32
                                # middle softmax [64, 256, 2048] 0.149 ms at 4 (102
                                # registers), 0.126 at 6 (80, no spills; torch.compile 0.119)
    strip_shared_wide_min_blocks: int = 4  # ... where a thread's vectors have 8 lanes (f16,
                                # bf16): twice the values a thread, 60 B spilled at 6
    strip_column_stages: bool = True  # strips over columns: a split plan in two kernels
                                # for calls whose strips fit on chip nowhere
                                # (codegen/column_stages.py)
    column_lanes_epilogue: bool = True  # its epilogue a vector of points a thread where the
                                # call allows (codegen/column_epilogue_vector.py)
    split_tile_vectors: int = 0  # the split stages' vector walk (split_stages.py): each
                                # streamed buffer's vectors a thread loads before it
                                # computes a tile; 0: as the streaming row kernels
                                # (row_plans.stream_tile: one vector of each of two)
    column_lanes_rows: str = "auto"  # ... a chunk's rows: "bands" (consecutive rows),
                                # "interleaved" (n_chunks apart), "one" (the lean epilogue,
                                # column_epilogue_lean.py: a row a thread, 30-38 registers
                                # against 60-70; 2-5% faster on f32 centring, 3% slower
                                # on two statistics, H100: docs/perf-notes.md), "auto"
                                # (lean where the point's values are its reductions
                                # scaled: column_epilogue_lean.lean_epilogue_pays)
    column_lanes_min_blocks: int = 1  # ... whose blocks resident per SM launch bounds ask:
                                # 88 registers at 1 (centring), 92 B spilled at 2 (64)
    strip_lanes_combine: bool = True  # its reductions combine a thread's lanes at once
                                # (two barriers a reduce) rather than a lane at a time (two a
                                # lane; f16 middle softmax at 64 threads a point: 1024 reads)
    split_reduction_min_ratio: int = 16  # split-reductions: a reduction whose axes a kept
                                # axis separates is split where its outer reduced extent is
                                # at least this many times its inner one (group norm over
                                # NHWC: 51-784, split 3x faster; batch norm over NCHW at 7x7:
                                # 1.2-10, split 1.3-5.7x slower, H100); a huge value: never
    split_reduction_max_segment: int = 64  # ... and where the inner axes' values, one run
                                # of the buffer, take fewer bytes than this (group norm over
                                # NHWC: 16-40 B, split faster; batch norm at 7x7: 98-196 B,
                                # slower): longer runs are whole sectors for one reduction
    l2_bytes: int = 50 * 2**20  # what a kernel may re-read from L2 rather than DRAM
    walker_bytes_per_s: float = 6e12  # values a kernel's threads load inside loops, every
                                # lane's load counted (once a warp where its lanes share the
                                # value), through L1/L2: resnet18's walker kernels holding two
                                # conv2d reductions ran 4.0 GB each in 652-741 us (H100)
    simt_fmas_per_s: float = 1.85e13  # a tiled f32 contraction's multiply-adds, GPU full:
                                # codegen/tile_model.py's SIMT rate (1.4e5 per us per SM)
    mma_fmas_per_s: float = 9.4e13  # f16/bf16 on tensor cores (0.71e6 per us per SM)
    contraction_tile: int = 64  # a tiled contraction's block tile edge, as the cost model
                                # assumes it: an operand's prologue runs once per value and
                                # tile of the other side (codegen/tile_model.py picks it)
    contraction_k_step: int = 8  # K values a SIMT tile takes per step (codegen's BK)
    contraction_step_s: float = 0.7e-6  # a K step's exposed latency (tile_model.STEP_US)
    strips_slowdown: float = 1.38  # strips' measured time over the model's, where a plain
                                # reduction (no epilogue) may take strips or split-columns
                                # (H100: column sums of 16384 x 4096 0.137 ms against 0.0995
                                # modelled; split-columns ran them in 0.104 ms, as modelled)
    strips_stream_slowdown: float = 1.09  # a streaming strips kernel over columns with
                                # later loops (their values not held on chip): measured time
                                # over the model's (H100: column centring 16384 x 4096 0.306
                                # ms against 0.280 modelled, one 512-thread block an SM whose
                                # walk, combine and second walk do not overlap; its unfused
                                # plan, modelled 0.295, measured 0.281)

    def __post_init__(self):
        if self.strip_shared_bytes > 40 * 1024:  # (plus its static scratch, under 48 KB)
            raise ValueError("strip_shared_bytes over 40 KB would need a kernel's opt-in to more "
                             "than 48 KB of shared memory, which strips kernels do not ask")
        if self.column_lanes_rows not in ("auto", "bands", "interleaved", "one"):
            raise ValueError(f"column_lanes_rows must be 'auto', 'bands', 'interleaved' or 'one', "
                             f"not {self.column_lanes_rows!r}")
        for knob in ("pointwise_per_thread", "row_values_per_thread", "short_row_values"):
            if getattr(self, knob) % self.vector_width:
                raise ValueError(f"{knob} must be a multiple of vector_width "
                                 f"({self.vector_width})")


# Measured on one H100 (see ../shared/gpu/NOTES.md): copy 2.81 TB/s, SGEMM 49.7 TFLOP/s.
# Launch shape: the sweeps of benchmarks/probe_memkern.py (docs/perf-notes.md, v3): one
# pass over the points (no grid-stride), and rows held by 256 threads x 16 values with
# one block per row (softmax 0.283 -> 0.183 ms, layernorm 0.278 -> 0.183 ms).
H100 = Target(name="h100", dram_bytes_per_s=2.81e12, flops_per_s=49.7e12, launch_s=4e-6,
              register_budget=96, shared_mem_bytes=48 * 1024, sm_count=132,
              threads_per_block=512, pointwise_per_thread=4,
              row_values_per_thread=16, row_min_extent=32, default_dim=1024,
              pointwise_blocks_per_sm=0, row_threads=256, row_blocks_per_sm=0)

TARGETS = {"h100": H100}
DEFAULT_TARGET = H100


def get_target(name: str | None = None) -> Target:
    return TARGETS[name] if name else DEFAULT_TARGET


@contextmanager
def target_in_effect(hw: Target):
    """``hw`` is the passes' target within (``get_target``, which the fuse pass reads by
    name): a probe's changed knobs reach the schedule choices as well as codegen."""
    global DEFAULT_TARGET
    saved = DEFAULT_TARGET, dict(TARGETS)
    DEFAULT_TARGET = TARGETS[hw.name] = hw
    try:
        yield
    finally:
        DEFAULT_TARGET = saved[0]
        TARGETS.clear()
        TARGETS.update(saved[1])


def hw_setting(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` (a probe's or a report's ``--hw``) as a Target field and its value:
    an int, true/false, or the text; a name that is no field is refused."""
    name, _, value = text.partition("=")
    if name not in {f.name for f in fields(Target)}:
        raise ValueError(f"no hardware field {name!r} (mlfuse/hardware.py)")
    return name, (int(value) if value.lstrip("-").isdigit() else
                  value == "true" if value in ("true", "false") else value)
