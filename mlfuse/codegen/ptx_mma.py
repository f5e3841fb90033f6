"""Tensor-core helpers: the few PTX instructions a tensor-core contraction needs.

Numba has no MMA API, so on the "cuda" target a generated module defines these as
``numba.cuda.extending.intrinsic`` functions that inline PTX through llvmlite's
``ir.InlineAsm`` (as numba-cuda does for ``activemask``). The set, by name:

- ``_ldmatrix_x4(frag, slot, tiles, index)``: ``ldmatrix.sync.aligned.m8n8.x4.shared.b16``.
  Four 8 x 8 matrices of 16-bit values from shared memory into frag[slot..slot+3]
  (uint32 registers, two values each). Lane l gives the address of row l % 8 of
  matrix l // 8 (``tiles[index]``, 16-byte aligned); register i of lane l then holds
  row l // 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i (the lower column in
  the lower 16 bits).
- ``_ldmatrix_x4_trans``: the same with ``.trans``: register i of lane l holds rows
  2 (l % 4) and 2 (l % 4) + 1 of column l // 4 (matrix i transposed on the way).
- ``_mma_f16(acc, acc_slot, a, a_slot, b, b_slot)``:
  ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``, D = A B + C in place on
  acc[acc_slot..+3] (f32), A 16 x 16 in a[a_slot..+3], B 16 x 8 in b[b_slot..+1]
  (packed f16 pairs). ``_mma_bf16`` is the bf16 twin (same layouts).
  Fragment layouts, PTX ISA "Matrix Fragments for mma.m16n8k16" (g = lane // 4,
  t = lane % 4): A register r holds row g + 8 (r % 2), columns 2t + 8 (r // 2) + {0, 1};
  B register r holds rows 2t + 8r + {0, 1} of column g; C/D value q is row
  g + 8 (q // 2), column 2t + q % 2.
- ``_cp_async_at(tiles, index, array, offset, valid, size)``: ``_cp_async`` (below) from
  ``offset`` values past the start of a C-contiguous ``array`` (its flat index).
- ``_cp_async(tiles, index, array, at, valid, size)``: ``cp.async.cg.shared.global``
  (``size`` 16) or ``cp.async.ca.shared.global`` (8 or 4; ``size`` a literal): ``size``
  bytes from array[at] on (along the last axis) to tiles[index] on, asynchronously;
  zeros instead when ``valid`` is false (src-size 0: nothing is read). Both addresses
  aligned to ``size``. ``_cp_async_commit()`` closes a group of copies
  (``cp.async.commit_group``); ``_cp_async_wait(n)`` waits until at most n groups are
  still in flight (``cp.async.wait_group n``, n a literal).

On the "simulator" target each name is a Python stand-in ("twin") with the same
per-lane semantics: the simulator runs a block's threads as Python threads, and the
warp-collective twins exchange the lanes' operands through a shared array between two
barriers. So every thread of the (one-dimensional) block must call them the same
number of times, as a generated tensor-core kernel does; and the block's threads
must number at most TWIN_LANES. The copy twin copies at once (commit and wait do
nothing), and the twins raise where the GPU would fault on a misaligned address.
"""
from __future__ import annotations

# Operand type of a tensor-core contraction -> the PTX type of its mma. bf16 is one
# more entry here (and its storage type in emit_scalar) once the language has it.
MMA_PTX_TYPES = {"f16": "f16", "bf16": "bf16"}
MMA_HELPER = {dtype: f"_mma_{ptx}" for dtype, ptx in MMA_PTX_TYPES.items()}
TWIN_LANES = 1024  # threads of a block the simulator's twins can exchange values among

_CUDA = '''\
def _item_pointer(context, builder, array_type, array, indices, index_types):
    """The LLVM pointer to array[indices]."""
    indices = [context.cast(builder, i, t, types.intp) for i, t in zip(indices, index_types)]
    return cgutils.get_item_pointer(
        context, builder, array_type, context.make_array(array_type)(context, builder, array),
        indices)


def _shared_address(context, builder, array_type, array, index, index_type):
    """The 32-bit shared-space address of tiles[index], a shared array's element: an
    addrspacecast of its generic pointer, which LLVM folds into the shared array's own
    address (no generic-to-shared conversion left in the machine code)."""
    pointer = _item_pointer(context, builder, array_type, array, [index], [index_type])
    shared = builder.addrspacecast(pointer, ir.PointerType(pointer.type.pointee, 3))
    return builder.ptrtoint(shared, ir.IntType(32))


def _slots(context, builder, array_type, array, slot, slot_type, count):
    """Pointers to array[slot], ..., array[slot + count - 1] (a local array's registers)."""
    return [_item_pointer(context, builder, array_type, array,
                          [builder.add(slot, ir.Constant(slot.type, n))], [slot_type])
            for n in range(count)]


def _ldmatrix_intrinsic(suffix):
    """ldmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 into frag[slot..slot+3]."""
    @intrinsic
    def ldmatrix(typingctx, frag, slot, tiles, index):
        if frag.dtype != types.uint32 or tiles.dtype.bitwidth != 16:
            return None

        def codegen(context, builder, sig, args):
            frag_v, slot_v, tiles_v, index_v = args
            source = _shared_address(context, builder, sig.args[2], tiles_v, index_v,
                                     sig.args[3])
            i32 = ir.IntType(32)
            load = ir.InlineAsm(
                ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32]),
                f"ldmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 {{$0, $1, $2, $3}}, [$4];",
                "=r,=r,=r,=r,r,~{memory}")
            loaded = builder.call(load, [source])
            for n, pointer in enumerate(_slots(context, builder, sig.args[0], frag_v, slot_v,
                                               sig.args[1], 4)):
                builder.store(builder.extract_value(loaded, n), pointer)
        return types.void(frag, slot, tiles, index), codegen
    return ldmatrix


def _mma_intrinsic(ptx_type, shape="m16n8k16"):
    """mma.sync.aligned.{shape}.row.col.f32.{ptx_type}.{ptx_type}.f32, in place on acc: four
    A registers, two B registers (the m16n8k16 16-bit and m16n8k8 tf32 forms alike)."""
    @intrinsic
    def mma(typingctx, acc, acc_slot, a, a_slot, b, b_slot):
        if acc.dtype != types.float32 or a.dtype != types.uint32 or b.dtype != types.uint32:
            return None

        def codegen(context, builder, sig, args):
            acc_v, acc_slot_v, a_v, a_slot_v, b_v, b_slot_v = args
            c = _slots(context, builder, sig.args[0], acc_v, acc_slot_v, sig.args[1], 4)
            a = _slots(context, builder, sig.args[2], a_v, a_slot_v, sig.args[3], 4)
            b = _slots(context, builder, sig.args[4], b_v, b_slot_v, sig.args[5], 2)
            f32, i32 = ir.FloatType(), ir.IntType(32)
            mma = ir.InlineAsm(
                ir.FunctionType(ir.LiteralStructType([f32] * 4), [i32] * 6 + [f32] * 4),
                f"mma.sync.aligned.{shape}.row.col.f32.{ptx_type}.{ptx_type}.f32 "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
                ",".join(["=f"] * 4 + ["r"] * 6 + ["f"] * 4))
            d = builder.call(mma, [builder.load(p) for p in a + b + c])
            for n, pointer in enumerate(c):
                builder.store(builder.extract_value(d, n), pointer)
        return types.void(acc, acc_slot, a, a_slot, b, b_slot), codegen
    return mma


@intrinsic
def _cp_async(typingctx, tiles, index, array, at, valid, size):
    """cp.async of ``size`` bytes (a literal: 16 through L2 only, .cg; 8 or 4, .ca),
    zero-filled (src-size 0) unless ``valid``."""
    if not isinstance(at, types.BaseTuple) or tiles.dtype != array.dtype or \
            not isinstance(size, types.IntegerLiteral) or size.literal_value not in (4, 8, 16):
        return None
    nbytes = size.literal_value

    def codegen(context, builder, sig, args):
        tiles_v, index_v, array_v, at_v, valid_v, _ = args
        target = _shared_address(context, builder, sig.args[0], tiles_v, index_v, sig.args[1])
        source = _item_pointer(context, builder, sig.args[2], array_v,
                               cgutils.unpack_tuple(builder, at_v, sig.args[3].count),
                               list(sig.args[3]))
        # an invalid position may lie outside the buffer: read from its start instead
        # (src-size 0 reads nothing, but the address stays one the buffer owns)
        start = context.make_array(sig.args[2])(context, builder, array_v).data
        valid = context.cast(builder, valid_v, sig.args[4], types.boolean)
        _issue_cp_async(builder, target, builder.select(valid, source, start), valid, nbytes)
    return types.void(tiles, index, array, at, valid, size), codegen


def _issue_cp_async(builder, target, source, valid, nbytes: int) -> None:
    """The cp.async of ``nbytes`` from ``source`` to the shared ``target``, reading
    nothing (src-size 0: the destination zero-filled) unless ``valid``; 16 bytes go
    through L2 only (.cg takes 16 bytes only), 8 and 4 through L1 (.ca)."""
    cache = "cg" if nbytes == 16 else "ca"
    i32 = ir.IntType(32)
    read = builder.select(valid, ir.Constant(i32, nbytes), ir.Constant(i32, 0))
    copy = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [target.type, source.type, read.type]),
        f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;",
        "r,l,r,~{memory}")
    builder.call(copy, [target, source, read])


@intrinsic
def _cp_async_at(typingctx, tiles, index, array, offset, valid, size):
    """_cp_async with its source given as a flat offset (in values) from the start of a
    C-contiguous ``array``: one 64-bit add a copy, where an index tuple costs a
    multiply per dimension."""
    if tiles.dtype != array.dtype or not isinstance(offset, types.Integer) or \
            not isinstance(size, types.IntegerLiteral) or size.literal_value not in (4, 8, 16):
        return None
    nbytes = size.literal_value

    def codegen(context, builder, sig, args):
        tiles_v, index_v, array_v, offset_v, valid_v, _ = args
        target = _shared_address(context, builder, sig.args[0], tiles_v, index_v, sig.args[1])
        start = context.make_array(sig.args[2])(context, builder, array_v).data
        offset = context.cast(builder, offset_v, sig.args[3], types.intp)
        valid = context.cast(builder, valid_v, sig.args[4], types.boolean)
        source = builder.select(valid, builder.gep(start, [offset]), start)
        _issue_cp_async(builder, target, source, valid, nbytes)
    return types.void(tiles, index, array, offset, valid, size), codegen


@intrinsic
def _cp_async_commit(typingctx):
    """cp.async.commit_group: the copies issued since the last commit form a group."""
    def codegen(context, builder, sig, args):
        builder.call(ir.InlineAsm(ir.FunctionType(ir.VoidType(), []),
                                  "cp.async.commit_group;", "~{memory}"), [])
    return types.void(), codegen


@intrinsic
def _cp_async_wait(typingctx, pending):
    """cp.async.wait_group ``pending`` (a literal): all but the newest ``pending``
    groups of this thread's copies have landed."""
    if not isinstance(pending, types.IntegerLiteral):
        return None
    count = pending.literal_value

    def codegen(context, builder, sig, args):
        builder.call(ir.InlineAsm(ir.FunctionType(ir.VoidType(), []),
                                  f"cp.async.wait_group {count};", "~{memory}"), [])
    return types.void(pending), codegen


_ldmatrix_x4 = _ldmatrix_intrinsic("")
_ldmatrix_x4_trans = _ldmatrix_intrinsic(".trans")
_mma_f16 = _mma_intrinsic("f16")
_mma_bf16 = _mma_intrinsic("bf16")
'''

_SIMULATOR = '''\
@cuda.jit(device=True)
def _bits16(value):
    """The 16 bits of one f16 value (or of a uint16 holding a bf16's bits)."""
    return int(np.asarray(value).view(np.uint16))


@cuda.jit(device=True)
def _pack(low, high):
    """Two 16-bit values in one uint32 register, ``low`` in the lower half (as PTX)."""
    return np.uint32(_bits16(low) | (_bits16(high) << 16))


@cuda.jit(device=True)
def _unpack(word, half, ptx_type):
    """Half ``half`` (0: the lower) of a packed register as a float."""
    bits = (int(word) >> (16 * half)) & 0xFFFF
    if ptx_type == "bf16":
        return float(np.uint32(bits << 16).view(np.float32))
    return float(np.uint16(bits).view(np.float16))


@cuda.jit(device=True)
def _ldmatrix_twin(frag, slot, tiles, index, transposed):
    """ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16, lane by lane (see ptx_mma)."""
    if index % 8:
        raise RuntimeError("misaligned ldmatrix row: shared address not 16-byte aligned")
    rows = cuda.shared.array(TWIN_LANES, numba.int64)
    me = cuda.threadIdx.x
    lane = me % 32
    warp = me - lane
    rows[me] = index
    cuda.syncthreads()
    for i in range(4):
        if transposed:
            low = tiles[rows[warp + 8 * i + 2 * (lane % 4)] + lane // 4]
            high = tiles[rows[warp + 8 * i + 2 * (lane % 4) + 1] + lane // 4]
        else:
            row = rows[warp + 8 * i + lane // 4]
            low, high = tiles[row + 2 * (lane % 4)], tiles[row + 2 * (lane % 4) + 1]
        frag[slot + i] = _pack(low, high)
    cuda.syncthreads()  # every lane has read the rows before they are reused


@cuda.jit(device=True)
def _ldmatrix_x4(frag, slot, tiles, index):
    """ldmatrix.sync.aligned.m8n8.x4.shared.b16 (see ptx_mma)."""
    _ldmatrix_twin(frag, slot, tiles, index, False)


@cuda.jit(device=True)
def _ldmatrix_x4_trans(frag, slot, tiles, index):
    """ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (see ptx_mma)."""
    _ldmatrix_twin(frag, slot, tiles, index, True)


@cuda.jit(device=True)
def _warp_registers(a, a_slot, b, b_slot):
    """The A (4) and B (2) fragment registers of every lane of this thread's warp, through
    a shared array: (regs[thread, register], the warp's first thread, this lane). The
    caller reads them, then waits at a barrier before the next exchange reuses regs."""
    regs = cuda.shared.array((TWIN_LANES, 6), numba.uint32)
    me = cuda.threadIdx.x
    lane = me % 32
    for r in range(4):
        regs[me, r] = a[a_slot + r]
    for r in range(2):
        regs[me, 4 + r] = b[b_slot + r]
    cuda.syncthreads()
    return regs, me - lane, lane


@cuda.jit(device=True)
def _mma_twin(acc, acc_slot, a, a_slot, b, b_slot, ptx_type):
    """mma.sync.aligned.m16n8k16.row.col.f32.<ptx_type>.<ptx_type>.f32, lane by lane:
    each lane's D values from the A and B registers every lane of its warp holds.
    Products of 16-bit floats are exact in f64; the sum is rounded to f32 once."""
    regs, warp, lane = _warp_registers(a, a_slot, b, b_slot)
    g, t = lane // 4, lane % 4
    for q in range(4):
        row, col = g + 8 * (q // 2), 2 * t + q % 2
        total = float(acc[acc_slot + q])
        for k in range(16):
            # A (row, k): lane 4 (row % 8) + (k % 8) // 2, register row // 8 + 2 (k // 8)
            a_word = regs[warp + 4 * (row % 8) + (k % 8) // 2, row // 8 + 2 * (k // 8)]
            # B (k, col): lane 4 col + (k % 8) // 2, register k // 8
            b_word = regs[warp + 4 * col + (k % 8) // 2, 4 + k // 8]
            total += _unpack(a_word, k % 2, ptx_type) * _unpack(b_word, k % 2, ptx_type)
        acc[acc_slot + q] = np.float32(total)
    cuda.syncthreads()  # every lane has read the registers before they are reused


@cuda.jit(device=True)
def _mma_f16(acc, acc_slot, a, a_slot, b, b_slot):
    """mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (see ptx_mma)."""
    _mma_twin(acc, acc_slot, a, a_slot, b, b_slot, "f16")


@cuda.jit(device=True)
def _mma_bf16(acc, acc_slot, a, a_slot, b, b_slot):
    """mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (see ptx_mma)."""
    _mma_twin(acc, acc_slot, a, a_slot, b, b_slot, "bf16")


@cuda.jit(device=True)
def _cp_async(tiles, index, array, at, valid, size):
    """cp.async of ``size`` bytes (see ptx_mma), done at once."""
    count = size // tiles.dtype.itemsize
    if index % count:
        raise RuntimeError("misaligned cp.async: shared address not aligned to its size")
    if not valid:
        for q in range(count):
            tiles[index + q] = 0
        return
    row, first = array[at[:-1]], at[-1]
    if row[first:].__array_interface__["data"][0] % size or first + count > row.shape[0]:
        raise RuntimeError("cp.async source not aligned contiguous bytes inside the buffer")
    for q in range(count):
        tiles[index + q] = row[first + q]


@cuda.jit(device=True)
def _cp_async_at(tiles, index, array, offset, valid, size):
    """cp.async of ``size`` bytes from a flat offset of a C-contiguous array (see
    ptx_mma), done at once."""
    count = size // tiles.dtype.itemsize
    if index % count:
        raise RuntimeError("misaligned cp.async: shared address not aligned to its size")
    if not valid:
        for q in range(count):
            tiles[index + q] = 0
        return
    if not array.flags.c_contiguous:
        raise RuntimeError("cp.async from a flat offset of an array that is not C-contiguous")
    flat = array.reshape(array.size)
    if flat[offset:].__array_interface__["data"][0] % size or not 0 <= offset <= flat.size - count:
        raise RuntimeError("cp.async source not aligned contiguous bytes inside the buffer")
    for q in range(count):
        tiles[index + q] = flat[offset + q]


@cuda.jit(device=True)
def _cp_async_commit():
    """cp.async.commit_group: nothing to do, the twin copied at once."""


@cuda.jit(device=True)
def _cp_async_wait(pending):
    """cp.async.wait_group: nothing to wait for, the twin copied at once."""
'''

# Dynamic shared memory (both targets): a tensor-core kernel's factory returns its
# kernel wrapped, so that a launch over 48 KB first allows the kernel that much.
_DYNAMIC_SHARED = '''\
STATIC_SHARED_LIMIT = 48 * 1024  # bytes a kernel may take without asking the driver


class _DynamicShared:
    """A kernel whose stages are dynamic shared memory: ``dynamic_shared`` bytes, which
    each launch gives (``kernel[grid, block, 0, dynamic_shared]``). Over 48 KB the
    driver wants the kernel allowed them first, once per compiled kernel
    (``_allow_shared``). Everything else (overloads, compile, ...) is the kernel's."""

    def __init__(self, kernel, dynamic_shared):
        self.kernel, self.dynamic_shared, self.allowed = kernel, dynamic_shared, set()

    def __getitem__(self, config):
        launch = self.kernel[config]
        if self.dynamic_shared <= STATIC_SHARED_LIMIT or TARGET != "cuda":
            return launch

        def allowed_launch(*args):
            key = tuple(self.kernel.typeof_pyval(a) for a in args)
            if key not in self.allowed:
                _allow_shared(self.kernel.compile(key), self.dynamic_shared)
                self.allowed.add(key)
            return launch(*args)
        return allowed_launch

    def __getattr__(self, name):
        return getattr(self.kernel, name)
'''

_ALLOW_SHARED = {"cuda": '''

def _allow_shared(kernel, size):
    """CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = size for a compiled kernel, as
    Numba sets its own attributes (its shared-memory carveout)."""
    from numba.cuda.cudadrv.driver import binding, driver
    function = kernel._codelibrary.get_cufunc()
    attribute = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attribute, size, function.handle, function.device.id)
''', "simulator": '''

def _allow_shared(kernel, size):
    """Nothing to allow: the simulator's shared memory has no limit."""
'''}

# The twins' module globals. Their shared arrays rely on mlfuse.runtime.simulator's fix
# (the simulator's first cuda.shared.array of a line races between threads), which
# load_source applies before a generated module runs.
_TWIN_GLOBALS = """\
TWIN_LANES = {lanes}  # threads of a block the twins exchange among


"""

# Module-level names the helpers define: generated names avoid them.
MMA_NAMES = ("_item_pointer", "_shared_address", "_slots", "_ldmatrix_intrinsic", "_mma_intrinsic", "_cp_async",
             "_cp_async_at", "_cp_async_commit", "_cp_async_wait", "_ldmatrix_x4", "_ldmatrix_x4_trans",
             "_mma_f16", "_mma_bf16", "_bits16", "_pack", "_unpack", "_ldmatrix_twin",
             "_mma_twin", "_warp_registers", "TWIN_LANES", "STATIC_SHARED_LIMIT", "_DynamicShared",
             "_allow_shared")


def mma_helper_source(target: str) -> str:
    """Source of the tensor-core helpers on ``target`` ("cuda": the intrinsics, which
    need the module's CUDA_IMPORTS; "simulator": the twins)."""
    shared = "\n\n" + _DYNAMIC_SHARED + _ALLOW_SHARED[target]
    if target == "cuda":
        return _CUDA + shared
    return _TWIN_GLOBALS.format(lanes=TWIN_LANES) + _SIMULATOR + shared
