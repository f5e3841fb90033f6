"""Helper functions a generated module defines when its code uses them.

Device helpers: NaN-propagating maximum/minimum and block reductions (shared memory
on the simulator, warp shuffles + shared memory on a real GPU). Host helpers: the
launch geometry. Every helper is text with no dependency beyond numpy/numba/math.
"""
from __future__ import annotations

from mlfuse.codegen.addressing import addressing_helper_sources
from mlfuse.codegen.bf16 import bf16_helper_source
from mlfuse.codegen.held_access import held_helper_source
from mlfuse.codegen.ptx_mma import mma_helper_source
from mlfuse.codegen.ptx_tf32 import tf32_helper_source
from mlfuse.codegen.ptx_wgmma import wgmma_helper_source
from mlfuse.codegen.scalar import combine
from mlfuse.codegen.tile_model import source as tile_model_source
from mlfuse.codegen.vector import vector_helper_sources
from mlfuse.row_groups import group_width_source
from mlfuse.row_hold import row_hold_source
from mlfuse.row_stream import stream_row_source
from mlfuse.strip_plan import shared_source as strip_shared_source
from mlfuse.strip_plan import source as strip_plan_source
from mlfuse.strip_plan import split_source as split_columns_source

WARP = 32
# Shared-memory slots per block reduction: one per thread (tree) or one per warp (shuffles).
SCRATCH_SLOTS = {"simulator": 1024, "cuda": 1024 // WARP}

_MAXIMUM = '''\
@cuda.jit(device=True)
def _maximum(a, b):
    """NumPy's maximum: nan if either is nan."""
    return a if (a > b or a != a) else b
'''

_MINIMUM = '''\
@cuda.jit(device=True)
def _minimum(a, b):
    """NumPy's minimum: nan if either is nan."""
    return a if (a < b or a != a) else b
'''

# A 64-bit integer division is a long software routine on the GPU (dozens of
# instructions); most index spaces fit 32 bits, where it is one short sequence.
_DIVMOD_INDEX = '''\
@cuda.jit(device=True, inline="always")
def _divmod_index(flat, size):
    """divmod of a non-negative flat index by a positive size: in unsigned 32 bits
    when both fit (a 64-bit division costs several times more), else in 64."""
    if flat <= 0x7FFFFFFF and size <= 0x7FFFFFFF:
        quotient, rest = divmod(numba.uint32(flat), numba.uint32(size))
        return numba.int64(quotient), numba.int64(rest)
    return divmod(numba.int64(flat), numba.int64(size))
'''

# The same where the host has checked that every index of the call fits 31 bits (its
# buffers and spaces have fewer than 2**31 values): no 64-bit path, whose registers
# (the division routine's) cost a split-stage epilogue its second vector in flight.
_DIVMOD_INDEX32 = '''\
@cuda.jit(device=True, inline="always")
def _divmod_index32(flat, size):
    """divmod of a non-negative flat index by a positive size, both under 2**31 (the
    host checked it), in unsigned 32 bits."""
    quotient, rest = divmod(numba.uint32(flat), numba.uint32(size))
    return numba.int64(quotient), numba.int64(rest)
'''

# blockDim.x is a power of two (the host picks it): the tree halves it each step.
_BLOCK_REDUCE_TREE = '''\
@cuda.jit(device=True)
def {name}(value, identity, scratch):
    """{combiner} of ``value`` over the block's threads, returned to every thread
    (a shared-memory tree; blockDim.x is a power of two). ``identity`` is unused:
    every slot holds a thread's value; it keeps the shuffle version's signature."""
    tid = cuda.threadIdx.x
    scratch[tid] = value
    cuda.syncthreads()
    width = cuda.blockDim.x // 2
    while width > 0:
        if tid < width:
            scratch[tid] = {combine_tree}
        cuda.syncthreads()
        width //= 2
    result = scratch[0]
    cuda.syncthreads()  # every thread has read the result before scratch is reused
    return result
'''

# Every warp combines the partials itself (xor shuffles leave the total in every lane,
# the same bits in every warp): two barriers, not three, and no wait on warp 0.
_BLOCK_REDUCE_SHUFFLE = '''\
@cuda.jit(device=True)
def {name}(value, identity, scratch):
    """{combiner} of ``value`` over the block's threads, returned to every thread:
    warp shuffles within each warp, then each warp combines the warps' partials
    (blockDim.x is a power of two, at least 32)."""
    lane = cuda.threadIdx.x % {warp}
    offset = {half_warp}
    while offset > 0:
        value = {combine_shuffle}
        offset //= 2
    if lane == 0:
        scratch[cuda.threadIdx.x // {warp}] = value
    cuda.syncthreads()
    value = scratch[lane] if lane < cuda.blockDim.x // {warp} else identity
    offset = {half_warp}
    while offset > 0:
        value = {combine_shuffle}
        offset //= 2
    cuda.syncthreads()  # every warp has read the partials before scratch is reused
    return value
'''

# Groups of ``width`` lanes (a power of two up to a warp), aligned within their warp: xor
# partners stay inside the group. Every lane of the warp runs it (full mask).
_GROUP_REDUCE_SHUFFLE = '''\
@cuda.jit(device=True)
def {name}(value, width, scratch):
    """{combiner} of ``value`` over each aligned group of ``width`` lanes, returned to
    every lane of the group: xor shuffles (``scratch`` is unused; the simulator's twin
    takes it). Every thread of the block calls it."""
    offset = width >> 1  # (a shift: width is a positive power of two)
    while offset > 0:
        value = {combine_shuffle}
        offset >>= 1
    return value
'''

# The simulator's twin: the same butterfly (same partners, same order of operands, so
# the same bits) through shared memory, one barrier pair per step.
_GROUP_REDUCE_TREE = '''\
@cuda.jit(device=True)
def {name}(value, width, scratch):
    """{combiner} of ``value`` over each aligned group of ``width`` threads, returned to
    every thread of the group: the shuffle version's butterfly through ``scratch`` (a
    slot per thread). Every thread of the block calls it."""
    tid = cuda.threadIdx.x
    offset = width // 2
    while offset > 0:
        scratch[tid] = value
        cuda.syncthreads()
        partner = scratch[tid ^ offset]
        cuda.syncthreads()
        value = {combine_tree}
        offset //= 2
    return value
'''

# A strips block over columns is (strip, threads per point): thread (x, y) works on point
# x of the block's strip. Every thread combines its point's partials itself, in thread
# order (y): the same bits in each, no shuffles (the simulator runs the same code). Its
# loop is a while over an offset: a range stepping by a run-time stride had Numba
# compute its trip count by a 64-bit division (ptxas: channel layernorm's kernel 2376 ->
# 2104 instructions). The offset stays uint32 (``other += strip`` would type it int64,
# and each read would test for wraparound): 1864 -> 1544 instructions.
_STRIP_REDUCE = '''\
@cuda.jit(device=True)
def {name}(value, scratch):
    """{combiner} of ``value`` over the block's threads that share a point (those
    with the same ``cuda.threadIdx.x``), returned to each of them."""
    lane, strip = cuda.threadIdx.x, numba.uint32(cuda.blockDim.x)
    tid = cuda.threadIdx.y * strip + lane
    scratch[tid] = value
    cuda.syncthreads()
    value = scratch[lane]
    other, end = numba.uint32(lane + strip), numba.uint32(strip * cuda.blockDim.y)
    while other < end:
        value = {combine_scratch}
        other = numba.uint32(other + strip)
    cuda.syncthreads()  # every thread has read the partials before scratch is reused
    return value
'''

# The same for a thread's ``count`` lanes at once (a vector strips kernel's points):
# every lane's partials written, one barrier, then thread y of each point combines lane y
# alone (in thread order: the bits of _strip_reduce) and writes it back, one barrier,
# every thread reads its lanes' totals. Two barriers and per + count reads a thread for
# all lanes, where a lane at a time costs 2 * count barriers and count * per reads.
# (Unsigned offsets, no wraparound test a read, and while loops.)
# Lane v's partials are a padded block of (per + 1) rows of the strip's width: thread y
# reading lane y sees banks (y * width + t * width + x) mod 32, distinct in a warp.
_STRIP_LANES_REDUCE = '''\
@cuda.jit(device=True, inline="always")
def {name}(parts, count, scratch):
    """{combiner} of each of ``parts[:count]`` over the block's threads that share a
    point (those with the same ``cuda.threadIdx.x``), returned in ``parts`` to each."""
    lane, width = numba.uint32(cuda.threadIdx.x), numba.uint32(cuda.blockDim.x)
    per, me = numba.uint32(cuda.blockDim.y), numba.uint32(cuda.threadIdx.y)
    block = (per + 1) * width  # a lane's partials, padded by a row
    totals = count * block  # then the lanes' totals
    for v in range(count):
        scratch[v * block + me * width + lane] = parts[v]
    cuda.syncthreads()
    v = me
    while v < count:  # (fewer threads a point than lanes: several each)
        value = scratch[v * block + lane]
        other, end = v * block + width + lane, v * block + per * width
        while other < end:
            value = {combine_scratch}
            other += width
        scratch[totals + v * width + lane] = value
        v += per
    cuda.syncthreads()
    for v in range(count):
        parts[v] = scratch[totals + v * width + lane]
    cuda.syncthreads()  # every thread has read the totals before scratch is reused
'''

_STRIP_THREADS = '''\
def _strip_threads(strip, extent):
    """Threads of a strips block of ``strip`` points, ``extent`` reduced values each: a
    power of two per point, enough that each takes at most VALUES_PER_THREAD values,
    at least STRIP_THREADS and at most 512 in all (more would cap a thread's registers
    at 64: its tile of values would spill)."""
    per = max(1, STRIP_THREADS // strip)
    while per < 512 // strip and per * VALUES_PER_THREAD < extent:
        per *= 2
    return per * strip
'''

_ROW_GROUP = '''\
def _row_group(extent):
    """Threads per row of a warp-rows kernel: the least power of two >= ``extent``, at
    most a warp."""
    threads = 1
    while threads < extent and threads < 32:
        threads *= 2
    return threads
'''

_POINTWISE_BLOCKS = '''\
def _pointwise_blocks(points, per_thread):
    """Blocks for a grid-stride loop over ``points``, ``per_thread`` points per thread,
    up to MAX_BLOCKS."""
    per_block = THREADS_PER_BLOCK * per_thread
    return min((points + per_block - 1) // per_block, MAX_BLOCKS)
'''

_ROW_BLOCKS = '''\
def _row_blocks(points):
    """One block per point, up to MAX_ROW_BLOCKS (blocks stride over the rest)."""
    return min(points, MAX_ROW_BLOCKS)
'''

_STRIP_GRID = '''\
def _strip_grid(strips):
    """A block for each strip (a strips kernel takes strip ``blockIdx.y * gridDim.x +
    blockIdx.x``): (x, y) blocks, x at most a grid's 2**31 - 1."""
    x = max(1, min(strips, 2**31 - 1))
    return x, -(-strips // x)
'''

_ROW_THREADS = '''\
def _row_threads(extent, most=1024):
    """Threads sharing a row: the least power of two >= ``extent`` within [32, most]."""
    threads = 32
    while threads < extent and threads < most:
        threads *= 2
    return threads
'''

_SPLIT_STAGES = '''\
def _split_stages(points, extent, reread_bytes):
    """Whether a row kernel's call runs its split plan (codegen/split_stages.py): rows
    longer than a block holds in registers, and fewer than SPLIT_STAGE_ROWS of them or
    so long that the streaming kernel's rows in flight (one an SM, ``reread_bytes`` a
    value re-read) pass L2."""
    return extent > VALUES_PER_THREAD * REGISTER_ROW_THREADS and (
        points < SPLIT_STAGE_ROWS or SM_COUNT * extent * reread_bytes > L2_BYTES)
'''

_SPLIT_ROWS = '''\
def _split_rows(points, extent):
    """Chunks per point of a split-rows reduction of ``extent`` values per point: about
    SM_COUNT * SPLIT_BLOCKS_PER_SM blocks in all, each chunk at least one pass of a
    block's threads over VALUES_PER_THREAD values each, at most 1024 chunks."""
    want = -(-SM_COUNT * SPLIT_BLOCKS_PER_SM // max(points, 1))
    most = -(-extent // (THREADS_PER_BLOCK * VALUES_PER_THREAD))
    return max(1, min(want, most, 1024))
'''

# The split stages' kernels ask two blocks resident an SM (their launch bounds) where
# the epilogue walks the rows again (split_stages.plan_min_blocks). Each such
# epilogue block first combines its row's partials and computes the statistics, so fewer,
# longer chunks win while they fill the GPU (group norm, H100, ms, all kernels: 64 rows of
# 131072 values in 4 chunks (256 blocks, one wave of 264) 0.049, 8 chunks 0.054, 2 chunks
# (half a wave) 0.053; 128 rows of 65536: 2 chunks 0.048, 4 chunks 0.051).
_SPLIT_STAGE_ROWS = '''\
def _split_stage_rows(points, extent, blocks_per_sm):
    """Chunks per point of the split stages (split_stages.py): as many as one wave of
    SM_COUNT * blocks_per_sm blocks holds (the stages' launch bounds; one a point where
    the points fill it already), each chunk at least a pass of a block's threads over
    VALUES_PER_THREAD values."""
    most = -(-extent // (THREADS_PER_BLOCK * VALUES_PER_THREAD))
    return max(1, min(SM_COUNT * blocks_per_sm // max(points, 1), most, 1024))
'''

_TILED_KERNEL = '''\
class _TiledKernel:
    """A contraction's kernels, one per configuration (BM, BN, VECTOR_A, VECTOR_B, SPLIT)
    of its factory, each made (and compiled by Numba) on first use. ``tuned`` maps sizes
    (m, n, k, batch) to the (BM, BN, splits) a search on the device found best (mlfuse
    fills it from its tuning cache); ``last_shape`` is the latest launch's, for that
    search. ``tiles``: the (BM, BN) the factory takes (CONTRACTION_TILES unless given);
    ``threads(BM, BN)``: a block's threads (unless given: from ``shape``, a SIMT
    kernel's ``_simt_shape``). What the
    tile model reads besides the sizes: ``shape``, ``k_step`` (K values a share of K is
    whole steps of),
    ``max_split`` (the most shares K may be split into), ``fma_per_us`` (FMAs per us per
    SM of a full GPU), ``value_bytes`` (of an operand value), ``step_us`` (a K step's
    exposed latency) and ``gather`` (instructions a gathered value of A, of B costs).
    ``narrow_tiles``: the tiles it may take when an operand's copies are narrower than
    16 bytes (None: the same); ``tile_rates``: (BM, BN) -> FMA rate of the tiles run by
    another kernel (a 16-bit contraction's wgmma tiles)."""

    def __init__(self, factory, tiles=None, threads=None, k_step=8, max_split=1,
                 fma_per_us=1.4e5, value_bytes=4, step_us=0.7, shape=None, narrow_tiles=None,
                 gather=(0, 0), tile_rates=None):
        self.factory, self.kernels = factory, {}
        self.tuned, self.last_shape = {}, None
        self._tiles, self._threads, self.shape = tiles, threads, shape
        self.narrow_tiles = narrow_tiles  # the tiles when an operand is not copied 16 bytes
        # at a time (more copies a thread: registers a larger tile lacks); None: all
        self.k_step, self.max_split = k_step, max_split
        self.fma_per_us, self.value_bytes, self.step_us = fma_per_us, value_bytes, step_us
        self.gather = gather
        self.tile_rates = tile_rates  # (BM, BN) -> the FMA rate of tiles another kernel runs

    def plan(self, tiles, m_size, n_size, k_size, batch_size, sm_count):
        """The tile model's ((BM, BN, splits), us, why) among ``tiles`` for these sizes."""
        return _contraction_plan(tiles, m_size, n_size, k_size, batch_size, sm_count,
                                 self.max_split, self.k_step, self.fma_per_us,
                                 self.value_bytes, self.step_us, shape=self.shape,
                                 gather=self.gather, tile_rates=self.tile_rates)

    @property
    def tiles(self):
        return CONTRACTION_TILES if self._tiles is None else self._tiles

    def threads(self, bm, bn):
        if self._threads is not None:
            return self._threads(bm, bn)
        tm, tn = self.shape(bm, bn)[:2]
        return (bm // tm) * (bn // tn)

    def __getitem__(self, config):
        if config not in self.kernels:
            self.kernels[config] = self.factory(*config)
        return self.kernels[config]

    def shared_bytes(self, config):
        """Bytes of dynamic shared memory the kernel of ``config`` takes at its launch (a
        tensor-core kernel's stages: its factory sets ``dynamic_shared``; 0: none)."""
        return getattr(self[config], "dynamic_shared", 0)
'''

# The model behind the choice: _contraction_plan (mlfuse/codegen/tile_model.py, copied
# into the module), documented there and in docs/perf-notes.md.
_CONTRACTION_GEOMETRY = '''\
def _contraction_geometry(kernel, m_size, n_size, k_size, batch_size, copies=None):
    """(BM, BN, splits), grid and threads of ``kernel`` (a _TiledKernel) over m_size x
    n_size outputs per batch, K = k_size: the tuned choice for these sizes if a search
    found one, else the tile model's (_contraction_plan) among the kernel's tiles (its
    narrow_tiles when ``copies``, the values per copy of A and B, are not both 16
    bytes). The grid's y axis is the shares of a split K (1: no split)."""
    shape = (m_size, n_size, k_size, batch_size)
    kernel.last_shape = shape
    best = kernel.tuned.get(shape)
    tiles = kernel.tiles
    narrow = copies is not None and any(c * kernel.value_bytes != 16 for c in copies)
    if narrow and kernel.narrow_tiles is not None:
        tiles = kernel.narrow_tiles
    if best is None:
        best = kernel.plan(tiles, m_size, n_size, k_size, batch_size, SM_COUNT)[0]
    bm, bn, splits = tuple(best) + (1,) * (3 - len(best))  # a (BM, BN) choice: no split
    # blockIdx.x: the tiles of each batch index in turn (the kernel divides it out)
    grid = (-(-m_size // bm) * -(-n_size // bn) * batch_size, splits, 1)
    if grid[0] >= 2 ** 31:
        raise ValueError(f"a contraction of {grid[0]} tiles: more blocks than a grid holds")
    return (bm, bn, splits), grid, kernel.threads(bm, bn)
'''


# Tensor-core contractions (emit_mma.py), per target: (BM, BN) tiles, warp tiles (largest
# first), K per stage. The simulator runs every thread (and every twin's barrier) in
# Python: one warp. On the GPU a 128 x 128 tile takes 64 x 64 warp tiles (measured on
# the H100: 0.73 ms for f16 4096^3 against 0.89 ms with 64 x 32); smaller tiles take
# smaller warp tiles, which keep 4 warps a block and do not spill. The thin tiles (16
# or 32 rows) are for few rows (decode), with split-K filling the GPU.
#
# Stages live in dynamic shared memory, up to "smem" bytes a block (over the 48 KB a
# static array may take; an H100 block may have 227 KB) and at most "stages" of them:
# the 16-bit tiles take at most 96 KB (4 stages), the TF32 ones their stages and two
# converted areas (128 x 128: 4 stages, 138 KB; at 113 KB they had 2). Every tile that
# takes more than 113 KB holds one block an SM anyway (its registers). The wide tiles (128 x 256, 256 x 128: 8 warps of 64 x 64) are for
# 16-bit operands only ("tf32_tiles": the TF32 kernels hold two fragments a value and
# would need 512 threads of smaller warp tiles, more registers than an SM has).
MMA_GEOMETRY = {
    "cuda": {"tiles": ((128, 256), (256, 128), (128, 128), (128, 64), (64, 128), (64, 64),
                       (32, 128), (16, 128)),
             "tf32_tiles": ((128, 128), (128, 64), (64, 128), (64, 64), (32, 128), (16, 128)),
             # with copies under 16 bytes (up to 4x the copies a thread), 3xTF32's tiles of
             # 64 x 32 warp tiles spill (ptxas: 48-556 B); those of 32 x 32 ones do not
             "tf32_narrow_tiles": ((64, 64), (32, 128), (16, 128)),
             "warps": ((64, 64), (64, 32), (32, 32)), "bk": 32, "stages": 4,
             "smem": 227 * 1024,
             # 16-bit operands on warpgroup MMA (emit_wgmma.py): a warpgroup per 64 rows
             "wgmma_tiles": ((128, 256), (128, 128)), "wgmma_stages": 4, "wgmma_n": 256},
    # (the simulator's wgmma tiles: none by default, its 128 threads a warpgroup are slow
    # in Python; tests/test_wgmma.py sets one)
    "simulator": {"tiles": ((16, 16),), "tf32_tiles": ((16, 16),),
                  "tf32_narrow_tiles": ((16, 16),), "warps": ((16, 16),),
                  "bk": 32, "stages": 4, "smem": 48 * 1024},
}


def mma_geometry(target: str) -> dict:
    """MMA_GEOMETRY[target] with what it leaves out filled in (a probe or a test may give
    only tiles, warps and bk): TF32 tiles the tiles of at most 128 x 128, 4 stages in
    48 KB, no warpgroup MMA tiles."""
    geometry = {"stages": 4, "smem": 48 * 1024, "wgmma_tiles": (), "wgmma_stages": 4,
                "wgmma_n": 256, **MMA_GEOMETRY[target]}
    geometry.setdefault("tf32_tiles", tuple(t for t in geometry["tiles"] if t[0] * t[1] <= 16384))
    geometry.setdefault("tf32_narrow_tiles",
                        tuple(t for t in geometry["tf32_tiles"] if t[0] * t[1] <= 8192))
    return geometry


_MMA_GEOMETRY = '''\
MMA_TILES = {tiles}  # (BM, BN) a tensor-core contraction's block tile may take
MMA_WARPS = {warps}  # (rows, columns) of the block tile one warp computes, largest first
MMA_TF32_TILES = {tf32_tiles}  # those of a TF32 or 3xTF32 contraction
MMA_TF32_NARROW_TILES = {tf32_narrow_tiles}  # ... whose operands are not all 16-byte copies
MMA_BK = {bk}  # K values per shared-memory stage of a tensor-core contraction
MMA_STAGES = {stages}  # shared-memory stages at most
MMA_SHARED = {smem}  # bytes of dynamic shared memory a block may take
# 16-bit contractions on warpgroup MMA (wgmma, Hopper; emit_wgmma.py): their (BM, BN), which
# the other tensor-core kernel then does not take, its stages at most, its widest wgmma N
WGMMA_TILES = {wgmma_tiles}
WGMMA_STAGES = {wgmma_stages}
WGMMA_N = {wgmma_n}
MMA16_TILES = WGMMA_TILES + tuple(t for t in MMA_TILES if t not in WGMMA_TILES)
# ... where an operand is not copied 16 bytes at a time (the wgmma kernel's copy plan
# would hold more registers than its accumulators leave): mma.sync's own tiles
MMA16_NARROW_TILES = tuple(t for t in MMA_TILES if t not in WGMMA_TILES)


def _mma_warp(bm, bn, skip=0):
    """A block tile's warp tile: the largest that leaves the block 4 warps or more.
    ``skip``: how many of the largest a kernel's registers cannot hold (3xTF32's)."""
    warps = MMA_WARPS[min(skip, len(MMA_WARPS) - 1):]
    for wm, wn in warps:
        if bm % wm == 0 and bn % wn == 0 and (bm // wm) * (bn // wn) >= 4:
            return wm, wn
    return min(bm, warps[-1][0]), min(bn, warps[-1][1])


def _mma_threads(bm, bn, skip=0):
    """Threads of a tensor-core contraction's block: one warp per warp tile."""
    wm, wn = _mma_warp(bm, bn, skip)
    return (bm // wm) * (bn // wn) * 32


def _mma16_threads(bm, bn):
    """Threads of a 16-bit contraction's block: a warpgroup (128) per 64 rows of a wgmma
    tile, else one warp per warp tile."""
    return bm // 64 * 128 if (bm, bn) in WGMMA_TILES else _mma_threads(bm, bn)


def _mma_or_wgmma(mma, wgmma):
    """A 16-bit contraction's factory: ``wgmma``'s kernel for the WGMMA_TILES, else
    ``mma``'s (mma.sync)."""
    def factory(BM, BN, VECTOR_A, VECTOR_B, SPLIT):
        chosen = wgmma if (BM, BN) in WGMMA_TILES else mma
        return chosen(BM, BN, VECTOR_A, VECTOR_B, SPLIT)
    return factory
'''
MMA_GEOMETRY_NAMES = ("MMA_TILES", "MMA_TF32_TILES", "MMA_TF32_NARROW_TILES", "MMA_WARPS", "MMA_BK", "MMA_STAGES",
                      "MMA_SHARED", "_mma_warp", "_mma_threads", "WGMMA_TILES", "WGMMA_STAGES",
                      "WGMMA_N", "MMA16_TILES", "MMA16_NARROW_TILES", "_mma16_threads",
                      "_mma_or_wgmma")


def block_reduce_name(combiner: str) -> str:
    return f"_block_reduce_{combiner}"


def group_reduce_name(combiner: str) -> str:
    return f"_group_reduce_{combiner}"


def strip_reduce_name(combiner: str) -> str:
    return f"_strip_reduce_{combiner}"


def strip_lanes_reduce_name(combiner: str) -> str:
    return f"_strip_lanes_reduce_{combiner}"


def _strip_lanes_reduce(combiner: str, target: str, used: set[str]) -> str:
    return _STRIP_LANES_REDUCE.format(name=strip_lanes_reduce_name(combiner), combiner=combiner,
                                      combine_scratch=combine(combiner, "value",
                                                              "scratch[other]", used))


def _strip_reduce(combiner: str, target: str, used: set[str]) -> str:
    return _STRIP_REDUCE.format(name=strip_reduce_name(combiner), combiner=combiner,
                                combine_scratch=combine(combiner, "value", "scratch[other]", used))


def _group_reduce(combiner: str, target: str, used: set[str]) -> str:
    name = group_reduce_name(combiner)
    if target == "cuda":
        partner = "cuda.shfl_xor_sync(0xFFFFFFFF, value, offset)"
        return _GROUP_REDUCE_SHUFFLE.format(name=name, combiner=combiner,
                                            combine_shuffle=combine(combiner, "value", partner, used))
    return _GROUP_REDUCE_TREE.format(name=name, combiner=combiner,
                                     combine_tree=combine(combiner, "value", "partner", used))


def _block_reduce(combiner: str, target: str, used: set[str]) -> str:
    name = block_reduce_name(combiner)
    if target == "cuda":
        partner = "cuda.shfl_xor_sync(0xFFFFFFFF, value, offset)"
        shuffled = combine(combiner, "value", partner, used)
        return _BLOCK_REDUCE_SHUFFLE.format(name=name, combiner=combiner, warp=WARP,
                                            half_warp=WARP // 2, combine_shuffle=shuffled)
    tree = combine(combiner, "scratch[tid]", "scratch[tid + width]", used)
    return _BLOCK_REDUCE_TREE.format(name=name, combiner=combiner, combine_tree=tree)


_FIXED = {"_maximum": _MAXIMUM, "_minimum": _MINIMUM, "_divmod_index": _DIVMOD_INDEX,
          "_divmod_index32": _DIVMOD_INDEX32,
          "_pointwise_blocks": _POINTWISE_BLOCKS,
          "_row_blocks": _ROW_BLOCKS, "_strip_grid": _STRIP_GRID, "_row_threads": _ROW_THREADS,
          "_split_rows": _SPLIT_ROWS, "_split_stage_rows": _SPLIT_STAGE_ROWS,
          "_split_stages": _SPLIT_STAGES, "_row_group": _ROW_GROUP,
          "_short_row_width": group_width_source(), "_split_columns": split_columns_source(),
          "_strip_threads": _STRIP_THREADS, "_strip_columns": strip_plan_source(),
          "_strip_shared": strip_shared_source(),
          "_TiledKernel": _TILED_KERNEL, "_contraction_geometry": _CONTRACTION_GEOMETRY,
          "_contraction_plan": tile_model_source(), "_shared_row_plan": row_hold_source(),
          "_stream_row_threads": stream_row_source()}
# The order helpers appear in a module: device helpers before those that call them.
ORDER = ["_bf16", "_maximum", "_minimum", "_divmod_index", "_divmod_index32", "_divmod_magic",
         "_divmod_wide"] + [
    f(c) for f in (block_reduce_name, group_reduce_name, strip_reduce_name,
                   strip_lanes_reduce_name)
    for c in ("add", "max", "min")] + [
    "_vector_access", "_held_access", "_flat", "_magic", "_mma_intrinsics", "_tf32_intrinsics", "_wgmma_intrinsics",
    "_mma_geometry", "_pointwise_blocks", "_row_blocks", "_strip_grid", "_row_threads", "_split_rows", "_split_stage_rows",
    "_split_stages",
    "_stream_row_threads", "_shared_row_plan", "_split_columns", "_short_row_width", "_row_group", "_strip_threads", "_strip_columns",
    "_strip_shared", "_address", "_vector_ready", "_peel_ready", "_copy_values", "_TiledKernel", "_contraction_plan",
    "_contraction_geometry"]


def helper_sources(used: set[str], target: str) -> list[str]:
    """Source of each helper in ``used`` (and of the helpers those call), in ORDER."""
    if used & {"_vector_ready", "_peel_ready", "_copy_values"}:  # they read _address
        used = used | {"_address"}
    texts = {}
    for name in [n for n in ORDER if n.startswith("_block_reduce_") and n in used]:
        texts[name] = _block_reduce(name.removeprefix("_block_reduce_"), target, used)
    for name in [n for n in ORDER if n.startswith("_strip_reduce_") and n in used]:
        texts[name] = _strip_reduce(name.removeprefix("_strip_reduce_"), target, used)
    for name in [n for n in ORDER if n.startswith("_strip_lanes_reduce_") and n in used]:
        texts[name] = _strip_lanes_reduce(name.removeprefix("_strip_lanes_reduce_"), target, used)
    for name in [n for n in ORDER if n.startswith("_group_reduce_") and n in used]:
        texts[name] = _group_reduce(name.removeprefix("_group_reduce_"), target, used)
    fixed = {**_FIXED, **vector_helper_sources(target), **addressing_helper_sources(target),
             "_mma_intrinsics": mma_helper_source(target), "_held_access": held_helper_source(target), "_bf16": bf16_helper_source(target),
             "_tf32_intrinsics": tf32_helper_source(target),
             "_wgmma_intrinsics": wgmma_helper_source(target),
             "_mma_geometry": _MMA_GEOMETRY.format(**mma_geometry(target))}
    for name in used:
        if name in fixed:
            texts[name] = fixed[name]
    unknown = used - set(ORDER)
    assert not unknown, f"undefined helpers {unknown}"
    return [texts[n] for n in ORDER if n in texts]
