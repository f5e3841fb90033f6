"""Warpgroup MMA helpers (Hopper, sm_90a): the few PTX instructions of emit_wgmma.py's
kernel, as ``numba.cuda.extending.intrinsic`` functions on the "cuda" target (inline PTX,
as ptx_mma.py's, whose ``_shared_address`` they use) and Python twins on the simulator.
The set, by name:

- ``_wgmma_desc(tiles, index, lead, stride)``: the 64-bit shared-memory matrix descriptor
  (PTX ISA "Matrix Descriptor Format") of the matrix starting at ``tiles[index]`` (a
  16-bit view of shared memory): bits 0-13 its address, 16-29 the leading dimension byte
  offset ``lead``, 32-45 the stride dimension byte offset ``stride`` (each as
  (x & 0x3FFFF) >> 4), base offset 0 (the 128-byte swizzle's 1024-byte patterns start on
  1024-byte boundaries: the kernel's shared memory is 1024-aligned), bits 62-63 = 1:
  128-byte swizzle. ``lead`` and ``stride`` are literals.
- ``_wgmma_f16(acc, slot, desc_a, desc_b, tiles, n)``:
  ``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16`` with scale-d 1 (D = A B + D in
  place on acc[slot..slot + n/2 - 1]), A K-major (imm-trans-a 0), B N-major (imm-trans-b
  1), both in shared memory through their descriptors, 128-byte swizzle: the canonical
  layouts of the ISA ("Shared Memory Matrix Layout", T = 8 16-bit values a 16-byte
  chunk), in bytes from a descriptor's start, before the swizzle:
    A (m, k), m < 64, k < 16:  (m % 8) * 128 + (m // 8) * SBO + 2 k
    B (k, n), k < 16, n < N:   2 (n % 64) + (n // 64) * LBO + (k % 8) * 128 + (k // 8) * SBO
  and the 128-byte swizzle XORs address bits 4-6 (the 16-byte chunk) with bits 7-9 (the
  128-byte row mod 8). ``n`` a literal. Fragment of D (ISA "wgmma .m64nNk16 register
  fragment D"; warp w of the warpgroup, lane l): value i is row 16 w + l // 4 + 8 ((i // 2)
  % 2), column 8 (i // 4) + 2 (l % 4) + i % 2 -- mma.sync's C layout of one 16 x N warp
  tile. ``_wgmma_bf16`` is the bf16 twin.
- ``_wgmma_fence()``: ``wgmma.fence.sync.aligned`` (before a batch of wgmma: the
  accumulators and shared memory written before it are what they read).
- ``_wgmma_commit()``: ``wgmma.commit_group.sync.aligned``.
- ``_wgmma_wait(acc, size, n)``: ``wgmma.wait_group.sync.aligned n`` (n a literal): at most
  n committed groups still in flight. acc[0..size - 1] (size a literal) pass through it ("+f": an empty
  constraint, no instruction), so the compiler neither reads an accumulator before the
  wait nor moves one across it (CUTLASS's warpgroup_fence_operand).
- ``_fence_proxy_async()``: ``fence.proxy.async.shared::cta``: the shared memory written
  by this thread's copies (the generic proxy) made visible to wgmma (the async proxy),
  before the barrier that hands a stage to the warpgroups.

The twins: ``_wgmma_desc`` encodes the byte offset of ``tiles[index]`` from the array's
start (the GPU's shared memory is 1024-aligned, so the swizzle sees the same address
bits), and ``_wgmma_*`` computes this thread's own accumulator fragment from the shared
tiles through the same descriptor decoding and swizzle (products of 16-bit values exact
in f64, the sum rounded to f32 once), at once; the fences, commit and wait do nothing.
So a wrong descriptor, layout or fragment map fails the simulator's tests.
"""
from __future__ import annotations

WGMMA_PTX_TYPES = {"f16": "f16", "bf16": "bf16"}
WGMMA_HELPER = {dtype: f"_wgmma_{ptx}" for dtype, ptx in WGMMA_PTX_TYPES.items()}
SWIZZLE_128B = 1  # the descriptor's swizzle mode (bits 62-63)

_CUDA = '''\
def _wgmma_desc_fields(lead, stride):
    """The descriptor's bits besides the address: LBO, SBO and the 128-byte swizzle."""
    return (((lead & 0x3FFFF) >> 4) << 16) | (((stride & 0x3FFFF) >> 4) << 32) | (1 << 62)


@intrinsic
def _wgmma_desc(typingctx, tiles, index, lead, stride):
    """The matrix descriptor of tiles[index] on (see ptx_wgmma)."""
    if tiles.dtype.bitwidth != 16 or not isinstance(lead, types.IntegerLiteral) or \\
            not isinstance(stride, types.IntegerLiteral):
        return None
    fields = _wgmma_desc_fields(lead.literal_value, stride.literal_value)

    def codegen(context, builder, sig, args):
        address = _shared_address(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        i64 = ir.IntType(64)
        start = builder.lshr(builder.and_(builder.zext(address, i64), ir.Constant(i64, 0x3FFFF)),
                             ir.Constant(i64, 4))
        return builder.or_(start, ir.Constant(i64, fields))
    return types.uint64(tiles, index, lead, stride), codegen


def _wgmma_intrinsic(ptx_type):
    """wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type}, in place on
    acc[slot..slot + n/2 - 1]: A K-major, B N-major, both by descriptor."""
    @intrinsic
    def wgmma(typingctx, acc, slot, desc_a, desc_b, tiles, n):
        if acc.dtype != types.float32 or not isinstance(n, types.IntegerLiteral) or \\
                desc_a != types.uint64 or desc_b != types.uint64:
            return None
        width = n.literal_value
        count = width // 2

        def codegen(context, builder, sig, args):
            acc_v, slot_v, a_v, b_v = args[:4]
            d = _slots(context, builder, sig.args[0], acc_v, slot_v, sig.args[1], count)
            f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
            registers = ", ".join(f"${q}" for q in range(count))
            text = (f"{{ .reg .pred p; setp.ne.b32 p, ${count + 2}, 0; "
                    f"wgmma.mma_async.sync.aligned.m64n{width}k16.f32.{ptx_type}.{ptx_type} "
                    f"{{{registers}}}, ${count}, ${count + 1}, p, 1, 1, 0, 1; }}")
            constraints = ",".join(["=f"] * count + ["l", "l", "r"]
                                   + [str(q) for q in range(count)] + ["~{memory}"])
            asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([f32] * count),
                                               [i64, i64, i32] + [f32] * count),
                               text, constraints, side_effect=True)
            out = builder.call(asm, [a_v, b_v, ir.Constant(i32, 1)]
                               + [builder.load(p) for p in d])
            for q, pointer in enumerate(d):
                builder.store(builder.extract_value(out, q), pointer)
        return types.void(acc, slot, desc_a, desc_b, tiles, n), codegen
    return wgmma


def _wgmma_plain(text):
    """A PTX instruction with no operands (a fence, a commit)."""
    @intrinsic
    def plain(typingctx):
        def codegen(context, builder, sig, args):
            builder.call(ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}",
                                      side_effect=True), [])
        return types.void(), codegen
    return plain


@intrinsic
def _wgmma_wait(typingctx, acc, size, pending):
    """wgmma.wait_group.sync.aligned ``pending``, acc[0..size - 1] passed through it (both
    literals; see ptx_wgmma)."""
    if acc.dtype != types.float32 or not isinstance(pending, types.IntegerLiteral) or \\
            not isinstance(size, types.IntegerLiteral):
        return None
    count, values = pending.literal_value, size.literal_value

    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        d = _slots(context, builder, sig.args[0], args[0], ir.Constant(ir.IntType(64), 0),
                   types.int64, values)
        asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([f32] * values), [f32] * values),
                           f"wgmma.wait_group.sync.aligned {count};",
                           ",".join(["=f"] * values + [str(q) for q in range(values)]
                                    + ["~{memory}"]), side_effect=True)
        out = builder.call(asm, [builder.load(p) for p in d])
        for q, pointer in enumerate(d):
            builder.store(builder.extract_value(out, q), pointer)
    return types.void(acc, size, pending), codegen


_wgmma_f16 = _wgmma_intrinsic("f16")
_wgmma_bf16 = _wgmma_intrinsic("bf16")
_wgmma_fence = _wgmma_plain("wgmma.fence.sync.aligned;")
_wgmma_commit = _wgmma_plain("wgmma.commit_group.sync.aligned;")
_fence_proxy_async = _wgmma_plain("fence.proxy.async.shared::cta;")
'''

_SIMULATOR = '''\
@cuda.jit(device=True)
def _wgmma_desc(tiles, index, lead, stride):
    """The matrix descriptor of tiles[index] on (see ptx_wgmma): its address is its byte
    offset from the array's start (1024-aligned on the GPU)."""
    address = int(index) * 2
    if address % 16:
        raise RuntimeError("wgmma matrix not 16-byte aligned")
    return np.uint64(((address & 0x3FFFF) >> 4) | (((lead & 0x3FFFF) >> 4) << 16)
                     | (((stride & 0x3FFFF) >> 4) << 32) | (1 << 62))


@cuda.jit(device=True)
def _wgmma_fields(desc):
    """(start, LBO, SBO) in bytes of a 128-byte-swizzle descriptor; raises on another mode
    or a base offset (the twin handles what the kernels make)."""
    desc = int(desc)
    if desc >> 62 != 1 or (desc >> 49) & 7:
        raise RuntimeError("wgmma twin: only 128-byte swizzled descriptors of base offset 0")
    return (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4


@cuda.jit(device=True)
def _wgmma_read(tiles, addresses, ptx_type):
    """The 16-bit values at byte ``addresses`` (before the swizzle) as float64: the
    128-byte swizzle XORs bits 4-6 with bits 7-9."""
    swizzled = addresses ^ (((addresses >> 7) & 7) << 4)
    bits = np.asarray(tiles).view(np.uint16)[swizzled // 2]
    if ptx_type == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.float16).astype(np.float64)


@cuda.jit(device=True)
def _wgmma_twin(acc, slot, desc_a, desc_b, tiles, n, ptx_type):
    """wgmma.mma_async.m64nNk16 (A K-major, B N-major, 128-byte swizzle): this thread's
    own D fragment, from the shared tiles through the descriptors (see ptx_wgmma)."""
    me = cuda.threadIdx.x
    lane, warp = me % 32, (me // 32) % 4
    a_start, _, a_sbo = _wgmma_fields(desc_a)
    b_start, b_lbo, b_sbo = _wgmma_fields(desc_b)
    k = np.arange(16)
    rows = 16 * warp + lane // 4 + 8 * np.arange(2)  # this thread's two rows of D
    # its columns: 8 j + 2 (lane % 4) + c, as column 2 j + c of its n/4
    cols = (8 * np.arange(n // 8)[:, None] + 2 * (lane % 4) + np.arange(2)[None, :]).reshape(-1)
    a = _wgmma_read(tiles, a_start + (rows[:, None] % 8) * 128 + (rows[:, None] // 8) * a_sbo
                    + 2 * k[None, :], ptx_type)  # rows x k
    b = _wgmma_read(tiles, b_start + 2 * (cols[None, :] % 64) + (cols[None, :] // 64) * b_lbo
                    + (k[:, None] % 8) * 128 + (k[:, None] // 8) * b_sbo, ptx_type)  # k x cols
    d = a @ b
    for i in range(n // 2):
        j, q = i // 4, i % 4
        acc[slot + i] = np.float32(float(acc[slot + i]) + d[q // 2, 2 * j + q % 2])


@cuda.jit(device=True)
def _wgmma_f16(acc, slot, desc_a, desc_b, tiles, n):
    """wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16 (see ptx_wgmma)."""
    _wgmma_twin(acc, slot, desc_a, desc_b, tiles, n, "f16")


@cuda.jit(device=True)
def _wgmma_bf16(acc, slot, desc_a, desc_b, tiles, n):
    """wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 (see ptx_wgmma)."""
    _wgmma_twin(acc, slot, desc_a, desc_b, tiles, n, "bf16")


@cuda.jit(device=True)
def _wgmma_fence():
    """wgmma.fence: nothing to order, the twin computes at once."""


@cuda.jit(device=True)
def _wgmma_commit():
    """wgmma.commit_group: nothing to group, the twin computes at once."""


@cuda.jit(device=True)
def _wgmma_wait(acc, size, pending):
    """wgmma.wait_group: nothing to wait for, the twin computed at once."""


@cuda.jit(device=True)
def _fence_proxy_async():
    """fence.proxy.async: the simulator has one proxy."""
'''

# Module-level names the helpers define: generated names avoid them.
WGMMA_NAMES = ("_wgmma_desc_fields", "_wgmma_desc", "_wgmma_intrinsic", "_wgmma_plain",
               "_wgmma_wait", "_wgmma_f16", "_wgmma_bf16", "_wgmma_fence", "_wgmma_commit",
               "_fence_proxy_async", "_wgmma_fields", "_wgmma_read", "_wgmma_twin")


def wgmma_helper_source(target: str) -> str:
    """Source of the warpgroup MMA helpers on ``target`` ("cuda": the intrinsics, after
    ptx_mma's, whose _shared_address and _slots they use; "simulator": the twins)."""
    return _CUDA if target == "cuda" else _SIMULATOR


__all__ = ["SWIZZLE_128B", "WGMMA_HELPER", "WGMMA_NAMES", "wgmma_helper_source"]
