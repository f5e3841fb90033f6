"""Helper functions a generated module defines when its code uses them.

Device helpers: NaN-propagating maximum/minimum and block reductions (shared memory
on the simulator, warp shuffles + shared memory on a real GPU). Host helpers: the
launch geometry. Every helper is text with no dependency beyond numpy/numba/math.
"""
from __future__ import annotations

from .emit_scalar import combine

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

_POINTWISE_BLOCKS = '''\
def _pointwise_blocks(points, per_thread):
    """Blocks for a grid-stride loop over ``points``, ``per_thread`` points per thread,
    up to MAX_BLOCKS."""
    per_block = THREADS_PER_BLOCK * per_thread
    return min((points + per_block - 1) // per_block, MAX_BLOCKS)
'''

_ROW_BLOCKS = '''\
def _row_blocks(points):
    """One block per point, up to MAX_BLOCKS (blocks stride over the rest)."""
    return min(points, MAX_BLOCKS)
'''

_ROW_THREADS = '''\
def _row_threads(extent, most=1024):
    """Threads sharing a row: the least power of two >= ``extent`` within [32, most]."""
    threads = 32
    while threads < extent and threads < most:
        threads *= 2
    return threads
'''


# 16-byte loads: Numba has no float4, so an intrinsic emits LLVM's <4 x float> load
# (ld.global.v4.f32 / ld.shared.v4.f32). Only the "cuda" target uses it.
_INTRINSIC_IMPORTS = '''\
from llvmlite import ir as _llvm_ir  # noqa: E402  (numba's own code generator)
from numba.core import cgutils as _cgutils  # noqa: E402
from numba.core import types as _types  # noqa: E402
from numba.core.extending import intrinsic as _intrinsic  # noqa: E402
'''

_LOAD4 = '''\
@_intrinsic
def _load4(typingctx, array, index):
    """array[index] and the 3 float32 after it (along the last axis) as one 16-byte
    load; the caller guarantees the address is a multiple of 16."""
    if not (isinstance(array, _types.Array) and array.dtype == _types.float32
            and isinstance(index, _types.BaseTuple) and len(index) == array.ndim):
        return None
    signature = _types.UniTuple(_types.float32, 4)(array, index)

    def codegen(context, builder, sig, args):
        array_type, index_type = sig.args
        data = context.make_array(array_type)(context, builder, args[0])
        indices = [context.cast(builder, i, t, _types.intp) for i, t in
                   zip(_cgutils.unpack_tuple(builder, args[1], len(index_type)), index_type)]
        pointer = _cgutils.get_item_pointer(context, builder, array_type, data, indices,
                                            wraparound=False)
        vector_type = _llvm_ir.VectorType(_llvm_ir.FloatType(), 4)
        vector = builder.load(builder.bitcast(pointer, vector_type.as_pointer()), align=16)
        items = [builder.extract_element(vector, _llvm_ir.Constant(_llvm_ir.IntType(32), i))
                 for i in range(4)]
        return context.make_tuple(builder, sig.return_type, items)

    return signature, codegen
'''

_STORE4 = '''\
@_intrinsic
def _store4(typingctx, array, index, a, b, c, d):
    """a, b, c, d into array[index] and the 3 elements after it (along the last axis)
    as one 16-byte store; the caller guarantees the address is a multiple of 16."""
    if not (isinstance(array, _types.Array) and array.dtype == _types.float32
            and isinstance(index, _types.BaseTuple) and len(index) == array.ndim):
        return None
    signature = _types.void(array, index, _types.float32, _types.float32, _types.float32,
                            _types.float32)

    def codegen(context, builder, sig, args):
        array_type, index_type = sig.args[:2]
        data = context.make_array(array_type)(context, builder, args[0])
        indices = [context.cast(builder, i, t, _types.intp) for i, t in
                   zip(_cgutils.unpack_tuple(builder, args[1], len(index_type)), index_type)]
        pointer = _cgutils.get_item_pointer(context, builder, array_type, data, indices,
                                            wraparound=False)
        vector_type = _llvm_ir.VectorType(_llvm_ir.FloatType(), 4)
        vector = _llvm_ir.Constant(vector_type, _llvm_ir.Undefined)
        for i, (value, value_type) in enumerate(zip(args[2:], sig.args[2:])):
            value = context.cast(builder, value, value_type, _types.float32)
            vector = builder.insert_element(vector, value, _llvm_ir.Constant(_llvm_ir.IntType(32), i))
        builder.store(vector, builder.bitcast(pointer, vector_type.as_pointer()), align=16)
        return context.get_dummy_value()

    return signature, codegen
'''

_TILED_KERNEL = '''\
class _TiledKernel:
    """A contraction's kernels, one per configuration (BM, BN, VECTOR_A, VECTOR_B) of
    its factory, each made (and compiled by Numba) on first use."""

    def __init__(self, factory):
        self.factory, self.kernels = factory, {}

    def __getitem__(self, config):
        if config not in self.kernels:
            self.kernels[config] = self.factory(*config)
        return self.kernels[config]
'''

# The model behind the choice (docs/perf-notes.md): an SM holds the accumulators of
# about 2 * 128 * 128 outputs (64 registers each of a 64K file), so a BM x BN tile has
# 32768 / (BM * BN) blocks resident; a tile's K loop costs in proportion to the
# shared-memory reads per FMA, (BM + BN) / (BM * BN); time ~ waves of resident blocks
# times that. Ties go to the smaller tile (less work wasted past the edges).
_ALIGNED16 = '''\
def _aligned16(array):
    """Whether a device array's data starts on a 16-byte boundary."""
    return array.__cuda_array_interface__["data"][0] % 16 == 0
'''

_CONTRACTION_GEOMETRY = '''\
def _contraction_geometry(m_size, n_size, batch_size):
    """(BM, BN), grid and threads of a contraction over m_size x n_size outputs per
    batch: the tile of CONTRACTION_TILES with the fewest waves of resident blocks,
    weighted by its shared-memory reads per FMA (ties: the smaller tile)."""
    best = None
    for bm, bn in CONTRACTION_TILES:
        blocks = -(-m_size // bm) * -(-n_size // bn) * batch_size
        resident = SM_COUNT * max(1, 32768 // (bm * bn))
        cost = (-(-blocks // resident)) * (bm + bn) / (bm * bn)
        if best is None or cost <= best[0]:
            best = (cost, bm, bn)
    _, bm, bn = best
    grid = (-(-m_size // bm) * -(-n_size // bn), 1, min(batch_size, 65535))
    return (bm, bn), grid, (bm // 8) * (bn // 8)
'''


def block_reduce_name(combiner: str) -> str:
    return f"_block_reduce_{combiner}"


def _block_reduce(combiner: str, target: str, used: set[str]) -> str:
    name = block_reduce_name(combiner)
    if target == "cuda":
        partner = "cuda.shfl_xor_sync(0xFFFFFFFF, value, offset)"
        shuffled = combine(combiner, "value", partner, used)
        return _BLOCK_REDUCE_SHUFFLE.format(name=name, combiner=combiner, warp=WARP,
                                            half_warp=WARP // 2, combine_shuffle=shuffled)
    tree = combine(combiner, "scratch[tid]", "scratch[tid + width]", used)
    return _BLOCK_REDUCE_TREE.format(name=name, combiner=combiner, combine_tree=tree)


_FIXED = {"_maximum": _MAXIMUM, "_minimum": _MINIMUM, "_pointwise_blocks": _POINTWISE_BLOCKS,
          "_row_blocks": _ROW_BLOCKS, "_row_threads": _ROW_THREADS, "_intrinsic": _INTRINSIC_IMPORTS, "_load4": _LOAD4, "_store4": _STORE4,
          "_TiledKernel": _TILED_KERNEL, "_contraction_geometry": _CONTRACTION_GEOMETRY,
          "_aligned16": _ALIGNED16}
# The order helpers appear in a module: device helpers before those that call them.
_NEEDS = {"_load4": ("_intrinsic",), "_store4": ("_intrinsic",)}  # helpers a helper uses
ORDER = ["_intrinsic", "_load4", "_store4", "_maximum", "_minimum"] + [block_reduce_name(c) for c in ("add", "max", "min")] + [
    "_pointwise_blocks", "_row_blocks", "_row_threads", "_TiledKernel", "_contraction_geometry", "_aligned16"]


def helper_sources(used: set[str], target: str) -> list[str]:
    """Source of each helper in ``used`` (and of the helpers those call), in ORDER."""
    texts = {}
    for name in [n for n in ORDER if n.startswith("_block_reduce_") and n in used]:
        texts[name] = _block_reduce(name.removeprefix("_block_reduce_"), target, used)
    used = used | {dep for name in used for dep in _NEEDS.get(name, ())}
    for name in used:
        if name in _FIXED:
            texts[name] = _FIXED[name]
    unknown = used - set(ORDER)
    assert not unknown, f"undefined helpers {unknown}"
    return [texts[n] for n in ORDER if n in texts]
