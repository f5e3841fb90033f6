"""bf16 in kernels: stored as 16-bit words, computed in f32.

A bf16 value is the upper half of an f32: the same sign and exponent, 7 of the 23
significand bits. Kernels take bf16 arrays as uint16 arrays of those bits (the
runtime passes an ``ml_dtypes.bfloat16`` array viewed as uint16) and compute in
f32, as f16 computes in f32:

- a load widens: the 16 bits shifted up are the f32 bits of the same value;
- a store (and a cast to bf16) rounds to the nearest bf16, ties to even, as
  ``ml_dtypes`` (the interpreters' NumPy) and PyTorch do: add 0x7FFF plus the
  lowest kept bit, keep the upper 16 bits. Overflow past the largest bf16 carries
  into the exponent and gives inf, as it should; NaN keeps its sign and is made quiet
  (the carry could otherwise turn a NaN with low payload bits into inf).

Why not numba-cuda's ``numba.cuda.bf16`` (0.30): its ``nv_bfloat16`` type and
conversions are bindings of CUDA C++ functions (``cuda_bf16.h``) that each module
would compile with NVRTC and link; the CUDA simulator has none of them
(``numba.cuda.simulator.bf16.bfloat16`` is None); and no NumPy array can hold the
type, so arguments would be 16-bit words anyway. The two functions below are plain
integer code shared by both targets; only the reinterpretation of 32 bits as f32
and back is target-specific: an LLVM bitcast on the GPU, a NumPy ``view`` on the
simulator, so the tests run the same rounding the GPU runs.
"""
from __future__ import annotations

BF16_HELPER = "_bf16"  # the helper name generated code records to get these functions

# Names the helper defines: generated names avoid them.
BF16_NAMES = ("_bf16_load", "_bf16_store", "_bf16_round", "_f32_bits", "_bits_f32")

_BITCASTS = {
    "cuda": '''\
@intrinsic
def _f32_bits(typingctx, x):
    """The 32 bits of f32 ``x`` as a uint32 (an LLVM bitcast: no instruction)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@intrinsic
def _bits_f32(typingctx, bits):
    """The f32 whose bits are the low 32 bits of integer ``bits``."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        word = builder.trunc(args[0], ir.IntType(32)) if bits.bitwidth > 32 else \\
            builder.zext(args[0], ir.IntType(32)) if bits.bitwidth < 32 else args[0]
        return builder.bitcast(word, ir.FloatType())
    return types.float32(bits), codegen
''',
    "simulator": '''\
@cuda.jit(device=True)
def _f32_bits(x):
    """The 32 bits of f32 ``x`` as a uint32 (a bitcast on the GPU)."""
    return np.float32(x).view(np.uint32)


@cuda.jit(device=True)
def _bits_f32(bits):
    """The f32 whose bits are the low 32 bits of integer ``bits``."""
    return np.uint32(int(bits) & 0xFFFFFFFF).view(np.float32)
'''}

_CONVERSIONS = '''\
@cuda.jit(device=True)
def _bf16_load(bits):
    """The f32 value of the bf16 whose 16 bits are ``bits`` (exact)."""
    return _bits_f32(np.uint32(bits) << np.uint32(16))


@cuda.jit(device=True)
def _bf16_store(x):
    """The 16 bits of f32 ``x`` rounded to the nearest bf16, ties to even; NaN stays
    NaN (quiet, same sign)."""
    bits = np.int64(_f32_bits(x))
    if x != x:
        return np.uint16((bits >> 16) | 0x40)
    return np.uint16((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)


@cuda.jit(device=True)
def _bf16_round(x):
    """f32 ``x`` rounded to bf16, as an f32 (a cast to bf16 that keeps computing in f32)."""
    return _bf16_load(_bf16_store(x))
'''


def bf16_helper_source(target: str) -> str:
    """Source of the bf16 conversions on ``target`` (the "cuda" one needs the module's
    CUDA_IMPORTS: llvmlite's ir, numba's types and intrinsic)."""
    return _BITCASTS[target] + "\n\n" + _CONVERSIONS


def bf16_load(text: str) -> str:
    """The f32 value of the bf16 bits ``text`` reads."""
    return f"_bf16_load({text})"


def bf16_store(text: str) -> str:
    """The bf16 bits to store for f32 value ``text``."""
    return f"_bf16_store({text})"


def bf16_round(text: str) -> str:
    """f32 value ``text`` rounded to bf16, staying f32."""
    return f"_bf16_round({text})"
