"""A vector of a held row read back from shared memory (codegen/shared_rows.py).

``_load_held(array, (index,), values, slot)``: values[slot + lane] = array[index + lane]
for the VECTOR_WIDTH lanes, ``array`` a shared array of f32, i32 or f16 (widened to f32
as ``_load_vector`` widens), ``index`` a multiple of VECTOR_WIDTH; ``_load_held_halves``
the same for 2 * VECTOR_WIDTH 16-bit lanes. On the "cuda" target one LLVM vector load,
which the compiler makes one 16-byte ``ld.shared.v4`` (f16 with VECTOR_WIDTH lanes: 8
bytes): a warp's 32 threads read 512 contiguous bytes in 4 wavefronts, where 4 scalar
loads a vector (each thread's values 16 bytes apart) take 4 wavefronts each. On the
"simulator" target a plain copy that raises where the GPU would fault.
Its CUDA form is built on the vector helpers (``_vector_intrinsic``, ``_widen``).
"""
from __future__ import annotations

_CUDA = '''\
def _held_load(builder, element, ptx, register, first, lanes, conversion, value):
    """values[slot + lane] = the lane-th value of an aligned vector in shared memory, in
    one LLVM vector load (the compiler's ld.shared.v4 or .v2), widened."""
    vector_type = ir.VectorType(element, len(lanes))
    align = len(lanes) * (2 if ptx == "b16" else 4)  # bytes of the vector
    vector = builder.load(builder.bitcast(first, vector_type.as_pointer()), align=align)
    for lane, pointer in enumerate(lanes):
        word = builder.extract_element(vector, ir.Constant(ir.IntType(32), lane))
        builder.store(_widen(builder, word, conversion, value), pointer)


_load_held = _vector_intrinsic(_held_load)
# 16-bit values, 2 * VECTOR_WIDTH a vector: 16 bytes, as VECTOR_WIDTH floats
_load_held_halves = _vector_intrinsic(_held_load, 2 * VECTOR_WIDTH, (types.float16, types.uint16))
'''

_SIMULATOR = '''\
@cuda.jit(device=True)
def _load_held(array, index, values, slot):
    """values[slot + lane] = array[index + lane] (one shared vector load on the GPU)."""
    if index[0] % VECTOR_WIDTH:
        raise RuntimeError("misaligned shared vector load")
    for lane in range(VECTOR_WIDTH):
        values[slot + lane] = array[index[0] + lane]


@cuda.jit(device=True)
def _load_held_halves(array, index, values, slot):
    """_load_held of 2 * VECTOR_WIDTH 16-bit values (16 bytes on the GPU)."""
    if index[0] % (2 * VECTOR_WIDTH):
        raise RuntimeError("misaligned shared vector load")
    for lane in range(2 * VECTOR_WIDTH):
        values[slot + lane] = array[index[0] + lane]
'''

HELD_NAMES = ("_held_load", "_load_held", "_load_held_halves")


def held_helper_source(target: str) -> str:
    """The source of ``_load_held`` on ``target``."""
    return _CUDA if target == "cuda" else _SIMULATOR
