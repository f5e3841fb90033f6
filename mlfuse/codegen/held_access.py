"""A vector of a held row read back from shared memory (codegen/shared_rows.py).

``_load_held(array, (index,), values, slot)``: values[slot + lane] = array[index + lane]
for the VECTOR_WIDTH lanes, ``array`` a shared array of f32, i32 or f16 (widened to
f32 as ``_load_vector`` widens), ``index`` a multiple of VECTOR_WIDTH. On the "cuda"
target one LLVM vector load, which the compiler makes one ``ld.shared.v4`` (16 bytes
of f32; f16: 8 bytes): a warp's 32 threads read 512 contiguous bytes in 4 wavefronts,
where 4 scalar loads a vector (each thread's values 16 bytes apart) take 4 wavefronts
each. On the "simulator" target a plain copy that raises where the GPU would fault.
Its CUDA form is built on the vector helpers (``_vector_intrinsic``, ``_widen``).
"""
from __future__ import annotations

_CUDA = '''\
def _held_load(builder, element, ptx, register, first, lanes, conversion, value):
    """values[slot + lane] = the lane-th value of an aligned vector in shared memory, in
    one LLVM vector load (the compiler's ld.shared.v4 or .v2), widened."""
    vector_type = ir.VectorType(element, VECTOR_WIDTH)
    align = VECTOR_WIDTH * (2 if ptx == "b16" else 4)  # bytes of the vector
    vector = builder.load(builder.bitcast(first, vector_type.as_pointer()), align=align)
    for lane, pointer in enumerate(lanes):
        word = builder.extract_element(vector, ir.Constant(ir.IntType(32), lane))
        builder.store(_widen(builder, word, conversion, value), pointer)


_load_held = _vector_intrinsic(_held_load)
'''

_SIMULATOR = '''\
@cuda.jit(device=True)
def _load_held(array, index, values, slot):
    """values[slot + lane] = array[index + lane] (one shared vector load on the GPU)."""
    if index[0] % VECTOR_WIDTH:
        raise RuntimeError("misaligned shared vector load")
    for lane in range(VECTOR_WIDTH):
        values[slot + lane] = array[index[0] + lane]
'''

HELD_NAMES = ("_held_load", "_load_held")


def held_helper_source(target: str) -> str:
    """The source of ``_load_held`` on ``target``."""
    return _CUDA if target == "cuda" else _SIMULATOR
