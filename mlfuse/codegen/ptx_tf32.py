"""Tensor-core helpers for f32 contractions at a lower matmul precision (emit_tf32.py):
the TF32 conversions and the TF32 mma, added to ptx_mma's set (they use its
``_item_pointer``, ``_shared_address``, ``_slots`` and ``_mma_intrinsic`` on "cuda", ``_warp_registers`` on the
simulator, so a module holding these holds those). By name:

- ``_tf32_round(x) -> uint32``: ``cvt.rna.tf32.f32``: x (f32) rounded to nearest, ties
  away from zero, to 10 mantissa bits; the f32 bit pattern of the result, whose lower
  13 bits are zero. Infinities stay, a NaN stays a NaN, a finite value that rounds
  past the largest float becomes infinite.
- ``_tf32_split(x) -> (hi, lo)``: the 3xTF32 split: hi = ``cvt.rna.tf32.f32`` of x, lo
  = the residual x - hi (exact in f32) rounded as cvt.rna.tf32.f32 rounds (by integer
  arithmetic: the residual is small and finite), or 0 where that residual
  is not finite (x infinite or NaN, or hi overflowed): the product of hi alone then
  carries the inf or NaN, instead of inf - inf making a NaN of an infinite result.
- ``_mma_tf32(acc, acc_slot, a, a_slot, b, b_slot)``:
  ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``, D = A B + C in place on
  acc[acc_slot..+3] (f32), A 16 x 8 in a[a_slot..+3], B 8 x 8 in b[b_slot..+1], one TF32
  value (f32 bits) per register. Fragment layouts, PTX ISA "Matrix Fragments for
  mma.m16n8k8" (.tf32; g = lane // 4, t = lane % 4): A register r holds row g + 8 (r % 2),
  column t + 4 (r // 2); B register r holds row t + 4 r of column g; C/D value q is row
  g + 8 (q // 2), column 2t + q % 2 (as m16n8k16's).

- ``_ld_shared_v4(tiles, index) -> (a, b, c, d)``: ``ld.shared.v4.f32``: tiles[index..
  index + 3] of a float32 shared array (16-byte aligned): a raw stage's 16-byte chunk in
  one load, for the conversion.
- ``_st_shared_v4(tiles, index, a, b, c, d)``: ``st.shared.v4.b32``: four uint32 words
  into tiles[index..index + 3] (a uint32 shared array, 16-byte aligned): a converted
  stage's 16-byte chunk in one store.

On the simulator each is a Python twin with the same per-lane semantics; the mma twin
raises where a finite operand has any of its lower 13 bits set (a value the kernel
forgot to convert: the PTX ISA leaves such an operand's meaning to the hardware).
"""
from __future__ import annotations

TF32_HELPER = {"mma-tf32": "_tf32_round", "mma-tf32x3": "_tf32_split"}

_CUDA = '''\
def _word_address(context, builder, array_type, array, word, word_type):
    """The 32-bit shared address of 4-byte word ``word`` of a shared array, computed in
    32 bits (base + word * 4: ptxas folds a constant part of ``word`` into the access,
    where a 64-bit index truncated to 32 bits kept a register per access)."""
    i32 = ir.IntType(32)
    data = context.make_array(array_type)(context, builder, array).data
    base = builder.ptrtoint(builder.addrspacecast(data, ir.PointerType(data.type.pointee, 3)), i32)
    word = context.cast(builder, word, word_type, types.uint64 if word_type.bitwidth > 32
                        else types.uint32)
    if word_type.bitwidth > 32:
        word = builder.trunc(word, i32)
    return builder.add(base, builder.shl(word, ir.Constant(i32, 2)))


@intrinsic
def _tf32_round(typingctx, value):
    """cvt.rna.tf32.f32: value rounded to TF32, as its f32 bits."""
    if value != types.float32:
        return None

    def codegen(context, builder, sig, args):
        convert = ir.InlineAsm(ir.FunctionType(ir.IntType(32), [ir.FloatType()]),
                               "cvt.rna.tf32.f32 $0, $1;", "=r,f")
        return builder.call(convert, [args[0]])
    return types.uint32(value), codegen


@intrinsic
def _tf32_split(typingctx, value):
    """(hi, lo): cvt.rna.tf32.f32 of value, and the residual value - hi rounded the same
    way by integer arithmetic (0 unless finite)."""
    if value != types.float32:
        return None
    pair = types.UniTuple(types.uint32, 2)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        # the residual is finite and far from the largest float, so adding half a TF32
        # ulp to its bits and cutting the lower 13 is cvt.rna's rounding: 2 integer
        # instructions where cvt.rna takes 4 (its inf/NaN checks), and one finiteness
        # test (|rest| < inf, false for NaN) instead of testp's integer compare
        split = ir.InlineAsm(
            ir.FunctionType(ir.LiteralStructType([i32, i32]), [ir.FloatType()]),
            "{ .reg .b32 hi, lo; .reg .f32 high, rest, size; .reg .pred finite; "
            "cvt.rna.tf32.f32 hi, $2; mov.b32 high, hi; sub.rn.f32 rest, $2, high; "
            "mov.b32 lo, rest; add.u32 lo, lo, 4096; and.b32 lo, lo, -8192; "
            "abs.f32 size, rest; setp.lt.f32 finite, size, 0f7F800000; "
            "selp.b32 $1, lo, 0, finite; mov.b32 $0, hi; }",
            "=r,=r,f")
        both = builder.call(split, [args[0]])
        return context.make_tuple(builder, sig.return_type,
                                  [builder.extract_value(both, 0), builder.extract_value(both, 1)])
    return pair(value), codegen


@intrinsic
def _ld_shared_v4(typingctx, tiles, index):
    """ld.shared.v4.f32: tiles[index..index + 3] (a float32 shared array, 16-byte aligned)."""
    if tiles.dtype != types.float32:
        return None
    quad = types.UniTuple(types.float32, 4)

    def codegen(context, builder, sig, args):
        address = _word_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        f32 = ir.FloatType()
        load = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([f32] * 4), [ir.IntType(32)]),
                            "ld.shared.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,r,~{memory}")
        loaded = builder.call(load, [address])
        return context.make_tuple(builder, sig.return_type,
                                  [builder.extract_value(loaded, n) for n in range(4)])
    return quad(tiles, index), codegen


@intrinsic
def _st_shared_v4(typingctx, tiles, index, a, b, c, d):
    """st.shared.v4.b32: a, b, c, d into tiles[index..index + 3] (16-byte aligned)."""
    if tiles.dtype != types.uint32:
        return None

    def codegen(context, builder, sig, args):
        address = _shared_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        values = [context.cast(builder, v, t, types.uint32) for v, t in zip(args[2:], sig.args[2:])]
        i32 = ir.IntType(32)
        store = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [i32] * 5),
                             "st.shared.v4.b32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r,~{memory}")
        builder.call(store, [address] + values)
    return types.void(tiles, index, a, b, c, d), codegen


@intrinsic
def _ldmatrix_x4_words(typingctx, frag, slot, tiles, word):
    """ldmatrix.sync.aligned.m8n8.x4.shared.b16 from the 4-byte word ``word`` of ``tiles``
    (a uint32 or float32 shared array), its address computed in 32 bits."""
    if frag.dtype != types.uint32 or tiles.dtype.bitwidth != 32:
        return None

    def codegen(context, builder, sig, args):
        frag_v, slot_v, tiles_v, word_v = args
        source = _word_address(context, builder, sig.args[2], tiles_v, word_v, sig.args[3])
        i32 = ir.IntType(32)
        load = ir.InlineAsm(
            ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32]),
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];",
            "=r,=r,=r,=r,r,~{memory}")
        loaded = builder.call(load, [source])
        for n, pointer in enumerate(_slots(context, builder, sig.args[0], frag_v, slot_v,
                                           sig.args[1], 4)):
            builder.store(builder.extract_value(loaded, n), pointer)
    return types.void(frag, slot, tiles, word), codegen


@intrinsic
def _ld_shared_word(typingctx, tiles, word):
    """ld.shared.f32: tiles[word] of a float32 shared array, its address in 32 bits."""
    if tiles.dtype != types.float32:
        return None

    def codegen(context, builder, sig, args):
        source = _word_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        load = ir.InlineAsm(ir.FunctionType(ir.FloatType(), [ir.IntType(32)]),
                            "ld.shared.f32 $0, [$1];", "=f,r,~{memory}")
        return builder.call(load, [source])
    return types.float32(tiles, word), codegen


@intrinsic
def _kept(typingctx, value):
    """value (uint32), through an asm LLVM may not move: a per-lane base computed before
    a loop stays loop-variant, so each use inside it is base + an immediate for ptxas,
    not a register of its own hoisted out of the loop."""
    if value != types.uint32:
        return None

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        keep = ir.InlineAsm(ir.FunctionType(i32, [i32]), "mov.b32 $0, $1;", "=r,r",
                            side_effect=True)
        return builder.call(keep, [args[0]])
    return types.uint32(value), codegen


_mma_tf32 = _mma_intrinsic("tf32", "m16n8k8")
'''

_SIMULATOR = '''\
@cuda.jit(device=True)
def _tf32_round(value):
    """cvt.rna.tf32.f32 (see ptx_tf32): add half a TF32 ulp to the magnitude's bits and
    cut the lower 13: round to nearest, ties away from zero (a carry runs into the
    exponent, past the largest float into infinity)."""
    bits = int(np.float32(value).view(np.uint32))
    if bits & 0x7F800000 == 0x7F800000:  # inf or NaN: as it is
        return np.uint32(bits)
    return np.uint32((bits + 0x1000) & 0xFFFFE000)


@cuda.jit(device=True)
def _tf32_split(value):
    """The 3xTF32 split (see ptx_tf32): hi, and the residual rounded (0 unless finite)."""
    hi = _tf32_round(value)
    high = np.uint32(hi).view(np.float32)
    if not math.isfinite(high):
        return hi, np.uint32(0)
    return hi, _tf32_round(np.float32(value) - high)


@cuda.jit(device=True)
def _st_shared_v4(tiles, index, a, b, c, d):
    """st.shared.v4.b32 (see ptx_tf32): four words, 16-byte aligned."""
    if index % 4:
        raise RuntimeError("misaligned st.shared.v4: shared address not 16-byte aligned")
    tiles[index], tiles[index + 1] = a, b
    tiles[index + 2], tiles[index + 3] = c, d


@cuda.jit(device=True)
def _ld_shared_v4(tiles, index):
    """ld.shared.v4.f32 (see ptx_tf32): four values, 16-byte aligned."""
    if index % 4:
        raise RuntimeError("misaligned ld.shared.v4: shared address not 16-byte aligned")
    return tiles[index], tiles[index + 1], tiles[index + 2], tiles[index + 3]


@cuda.jit(device=True)
def _ldmatrix_x4_words(frag, slot, tiles, word):
    """ldmatrix.sync.aligned.m8n8.x4.shared.b16 from 4-byte word ``word`` (see ptx_tf32)."""
    _ldmatrix_twin(frag, slot, tiles.view(np.uint16), 2 * int(word), False)


@cuda.jit(device=True)
def _ld_shared_word(tiles, word):
    """ld.shared.f32 (see ptx_tf32)."""
    return tiles[word]


@cuda.jit(device=True)
def _kept(value):
    """The value (see ptx_tf32: on the GPU an asm that keeps it loop-variant)."""
    return value


@cuda.jit(device=True)
def _tf32_value(word):
    """The TF32 value an mma operand register holds (f32 bits, lower 13 bits zero)."""
    bits = int(word)
    if bits & 0x1FFF and bits & 0x7F800000 != 0x7F800000:
        raise RuntimeError("mma .tf32 operand not in TF32 format: convert it with "
                           "cvt.rna.tf32.f32 first")
    return float(np.uint32(bits).view(np.float32))


@cuda.jit(device=True)
def _mma_tf32(acc, acc_slot, a, a_slot, b, b_slot):
    """mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, lane by lane: each lane's D
    values from the A and B registers every lane of its warp holds. Products of TF32
    values are exact in f64; the sum is rounded to f32 once."""
    regs, warp, lane = _warp_registers(a, a_slot, b, b_slot)
    g, t = lane // 4, lane % 4
    for q in range(4):
        row, col = g + 8 * (q // 2), 2 * t + q % 2
        total = float(acc[acc_slot + q])
        for k in range(8):
            # A (row, k): lane 4 (row % 8) + k % 4, register row // 8 + 2 (k // 4)
            a_word = regs[warp + 4 * (row % 8) + k % 4, row // 8 + 2 * (k // 4)]
            # B (k, col): lane 4 col + k % 4, register k // 4
            b_word = regs[warp + 4 * col + k % 4, 4 + k // 4]
            total += _tf32_value(a_word) * _tf32_value(b_word)
        acc[acc_slot + q] = np.float32(total)
    cuda.syncthreads()  # every lane has read the registers before they are reused
'''

# Module-level names the helpers define: generated names avoid them.
TF32_NAMES = ("_tf32_round", "_tf32_split", "_tf32_value", "_mma_tf32", "_st_shared_v4",
              "_ld_shared_v4", "_ldmatrix_x4_words", "_kept",
              "_ld_shared_word")


def tf32_helper_source(target: str) -> str:
    """Source of the TF32 helpers on ``target`` (after ptx_mma's, which they use)."""
    return _CUDA if target == "cuda" else _SIMULATOR


__all__ = ["TF32_HELPER", "TF32_NAMES", "tf32_helper_source"]
