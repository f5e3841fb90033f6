"""Vector accesses: VECTOR_WIDTH neighbouring values in one load or store.

A GPU thread that loads 4 floats with one ``ld.global.v4.f32`` (16 bytes) keeps one
address instead of four and issues a quarter of the instructions. f16 values move
4 at a time too (``ld.global.v4.b16``, 8 bytes), widened to the f32 registers they
are computed in on the way in and rounded back (to nearest even, as a scalar f16
store rounds) on the way out. Numba has no float4,
so on the "cuda" target the generated module defines two small intrinsics that emit
the PTX vector load and store themselves (inline PTX through llvmlite, which Numba
brings); on the "simulator" target the same two names are plain device functions
that move the values one by one and raise where the GPU would fault on a misaligned
address, so CI runs the vector kernels' index math as they are.

Which accesses qualify (:func:`pointwise_vector_accesses`, :func:`row_vector_accesses`):
plain loads and stores of f32, i32 or f16 values whose last index is the innermost loop index
itself and whose other indices stay fixed while it steps. A vector kernel reads and
writes those VECTOR_WIDTH at a time and every other access one by one. The host
launches it only when ``_vector_ready`` finds every such buffer's rows starting on a
vector boundary, and falls back on the scalar kernel otherwise.
"""
from __future__ import annotations

from mlfuse.dialects.loops import LoadOp, StoreOp
from mlfuse.ir.core import Block, Operation, Value
from mlfuse.row_groups import HALF_DTYPES, VECTOR_DTYPES

from mlfuse.codegen.reuse import prefetchable_loads
from mlfuse.dialects.reductions import defined_inside

# VECTOR_DTYPES: VECTOR_WIDTH 4 makes a 16- (8-) byte access; a kernel whose vector
# accesses are all HALF_DTYPES moves 2 * VECTOR_WIDTH values a vector (16 bytes:
# ``_load_halves``), which keeps as many bytes in flight as the f32 kernels. Both lists
# live in mlfuse/row_groups.py, where the schedule choice reads them too.


def half_vectors(accesses: list[Operation]) -> bool:
    """Whether a vector kernel with ``accesses`` takes 2 * VECTOR_WIDTH 16-bit values a
    vector: every one of its vector accesses moves 16-bit values."""
    return bool(accesses) and all(_buffer_and_indices(o)[0].type.dtype in HALF_DTYPES
                                  for o in accesses)


def _buffer_and_indices(op: Operation) -> tuple[Value, list[Value]]:
    if isinstance(op, LoadOp):
        return op.operands[0], list(op.operands[1:])
    return op.operands[1], list(op.operands[2:])


def vectorizable(op: Operation, index: Value, fixed) -> bool:
    """Whether the load or store ``op`` touches neighbouring values of its buffer as
    ``index`` steps: ``index`` is its last index and appears nowhere else, and every
    other index is ``fixed`` (does not change while ``index`` steps)."""
    if not isinstance(op, (LoadOp, StoreOp)):
        return False
    buf, indices = _buffer_and_indices(op)
    return (buf.type.dtype in VECTOR_DTYPES and bool(indices) and indices[-1] is index
            and all(v is not index and fixed(v) for v in indices[:-1]))


def pointwise_vector_accesses(body: Block) -> list[Operation]:
    """The early loads and the stores of a loop-free pointwise body that vectors of
    neighbouring points (along the last loop index) may share."""
    *outer, last = body.args
    made_here = {id(r) for o in body.ops for r in o.results}

    def fixed(v):  # another loop index, or a value from outside the body
        return any(v is a for a in outer) or id(v) not in made_here
    candidates = prefetchable_loads(body)[0] + [o for o in body.ops if isinstance(o, StoreOp)]
    return [o for o in candidates if vectorizable(o, last, fixed)]


def row_vector_accesses(row_loops: list[Operation]) -> list[Operation]:
    """The early loads and the stores of a row kernel's top-level reduces and fors
    that vectors of neighbouring row values may share."""
    inside = defined_inside(row_loops)
    accesses = []
    for loop in row_loops:
        candidates = prefetchable_loads(loop.body)[0] + [
            o for o in loop.body.ops if isinstance(o, StoreOp)]
        accesses += [o for o in candidates
                     if vectorizable(o, loop.body.args[0], lambda v: id(v) not in inside)]
    return accesses


def vector_buffers(accesses: list[Operation]) -> list[Value]:
    """The buffers of ``accesses``, each once: the host checks their alignment."""
    buffers: list[Value] = []
    for o in accesses:
        buf = _buffer_and_indices(o)[0]
        if not any(buf is b for b in buffers):
            buffers.append(buf)
    return buffers


# -- helpers the generated module defines --------------------------------------------

# The "cuda" target's intrinsics: PTX vector loads and stores between a buffer and a
# per-thread local array (whose slots Numba keeps in registers once its loops unroll).
_CUDA_INTRINSICS = '''\
# PTX type and register class of each element type a vector access may move; bf16
# arrays reach kernels as uint16 arrays of their bits (codegen/bf16.py).
_VECTOR_PTX = {types.float32: ("f32", "f"), types.int32: ("s32", "r"),
               types.float16: ("b16", "h"), types.uint16: ("b16", "h")}
# Element types held in registers of a wider type (f16 and bf16 compute in f32), and
# the conversion a move makes between them.
_WIDENED = {types.float16: types.float32, types.uint16: types.float32}
_CONVERSION = {types.float16: "f16", types.uint16: "bf16"}


def _vector_operands(context, builder, sig, args, count=VECTOR_WIDTH):
    """LLVM pointers to array[index] (a vector's first value) and to values[slot + lane]
    for each of ``count`` lanes: what a vector load or store moves between."""
    array_type, index_type, values_type, slot_type = sig.args
    array, index, values, slot = args
    indices = [context.cast(builder, i, t, types.intp)
               for i, t in zip(cgutils.unpack_tuple(builder, index, index_type.count),
                               index_type)]
    first = cgutils.get_item_pointer(
        context, builder, array_type, context.make_array(array_type)(context, builder, array),
        indices)
    local = context.make_array(values_type)(context, builder, values)
    slot = context.cast(builder, slot, slot_type, types.intp)
    lanes = [cgutils.get_item_pointer(context, builder, values_type, local,
                                      [builder.add(slot, ir.Constant(slot.type, lane))])
             for lane in range(count)]
    return first, lanes


def _vector_intrinsic(move, count=VECTOR_WIDTH, dtypes=None):
    """An intrinsic ``(array, index, values, slot)`` moving ``count`` lanes, whose code
    ``move`` emits, given the element type as the PTX moves it (f16 as 16-bit words),
    its PTX type and register class, the operands' pointers, the conversion between the
    two ("f16", "bf16" or None: the same type) and the element type of ``values``;
    ``dtypes``: the element types it takes (default: _VECTOR_PTX's)."""
    @intrinsic
    def access(typingctx, array, index, values, slot):
        if array.dtype not in (dtypes or _VECTOR_PTX) or values.dtype not in (
                array.dtype, _WIDENED.get(array.dtype)):
            return None

        def codegen(context, builder, sig, args):
            element = context.get_value_type(array.dtype)  # a half is an i16 in Numba
            conversion = None if values.dtype == array.dtype else _CONVERSION[array.dtype]
            move(builder, element, *_VECTOR_PTX[array.dtype],
                 *_vector_operands(context, builder, sig, args, count),
                 conversion, context.get_value_type(values.dtype))
        return types.void(array, index, values, slot), codegen
    return access


def _widen(builder, word, conversion, value):
    """A moved element as the registers hold it: f16 bits to f32 (Numba keeps a half as
    a 16-bit integer and converts it with the same ``cvt``); bf16 bits shifted up are
    the f32 bits of the same value."""
    if conversion is None:
        return word
    if conversion == "bf16":
        bits = builder.shl(builder.zext(word, ir.IntType(32)), ir.Constant(ir.IntType(32), 16))
        return builder.bitcast(bits, value)
    cvt = ir.InlineAsm(ir.FunctionType(value, [word.type]), "cvt.f32.f16 $0, $1;", "=f,h")
    return builder.call(cvt, [word])


def _narrow(builder, register, conversion, element):
    """A register value as the PTX moves it: f32 rounded to f16 bits, to nearest even;
    or to bf16 bits as ``_bf16_store`` rounds (codegen/bf16.py: ties to even, NaN kept
    quiet with its sign)."""
    if conversion is None:
        return register
    if conversion == "bf16":
        word = ir.IntType(32)
        bits = builder.bitcast(register, word)
        high = builder.lshr(bits, ir.Constant(word, 16))
        rounded = builder.lshr(builder.add(builder.add(bits, ir.Constant(word, 0x7FFF)),
                                           builder.and_(high, ir.Constant(word, 1))),
                               ir.Constant(word, 16))
        quiet = builder.or_(high, ir.Constant(word, 0x40))
        nan = builder.fcmp_unordered("uno", register, register)
        return builder.trunc(builder.select(nan, quiet, rounded), element)
    cvt = ir.InlineAsm(ir.FunctionType(element, [register.type]), "cvt.rn.f16.f32 $0, $1;",
                       "=h,f")
    return builder.call(cvt, [register])


def _vector_load(builder, element, ptx, register, first, lanes, conversion, value):
    """values[slot + lane] = the lane-th value from array[index] on along the last axis,
    for each of the VECTOR_WIDTH lanes, in one PTX vector load. array[index] must be
    aligned to the vector (the host checks before it launches a vector kernel)."""
    outputs = ", ".join(f"${lane}" for lane in range(VECTOR_WIDTH))
    load = ir.InlineAsm(
        ir.FunctionType(ir.LiteralStructType([element] * VECTOR_WIDTH), [first.type]),
        f"ld.global{LOAD_CACHE}.v{VECTOR_WIDTH}.{ptx} {{{outputs}}}, [${VECTOR_WIDTH}];",
        ",".join([f"={register}"] * VECTOR_WIDTH + ["l"]))
    loaded = builder.call(load, [first])
    for lane, pointer in enumerate(lanes):
        builder.store(_widen(builder, builder.extract_value(loaded, lane), conversion, value),
                      pointer)


def _vector_store(builder, element, ptx, register, first, lanes, conversion, value):
    """The lane-th value from array[index] on along the last axis = values[slot + lane],
    for each of the VECTOR_WIDTH lanes, in one PTX vector store (aligned, as above)."""
    inputs = ", ".join(f"${lane + 1}" for lane in range(VECTOR_WIDTH))
    store = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [first.type] + [element] * VECTOR_WIDTH),
        f"st.global{STORE_CACHE}.v{VECTOR_WIDTH}.{ptx} [$0], {{{inputs}}};",
        ",".join(["l"] + [register] * VECTOR_WIDTH) + ",~{memory}")
    builder.call(store, [first] + [_narrow(builder, builder.load(p), conversion, element)
                                   for p in lanes])


def _shared_load(builder, element, ptx, register, first, lanes, conversion, value):
    """As _vector_load, from shared memory: an LLVM vector load, which the compiler
    turns into ld.shared.v4 (it knows the address is in a shared array). f32 only."""
    assert conversion is None and ptx == "f32", "shared vectors move f32 values"
    vector_type = ir.VectorType(element, VECTOR_WIDTH)
    vector = builder.load(builder.bitcast(first, vector_type.as_pointer()),
                          align=VECTOR_WIDTH * 4)
    for lane, pointer in enumerate(lanes):
        builder.store(builder.extract_element(vector, ir.Constant(ir.IntType(32), lane)),
                      pointer)


def _shared_store(builder, element, ptx, register, first, lanes, conversion, value):
    """As _vector_store, into shared memory (st.shared.v4). f32 only."""
    assert conversion is None and ptx == "f32", "shared vectors move f32 values"
    vector_type = ir.VectorType(element, VECTOR_WIDTH)
    vector = ir.Constant(vector_type, ir.Undefined)
    for lane, pointer in enumerate(lanes):
        vector = builder.insert_element(vector, builder.load(pointer),
                                        ir.Constant(ir.IntType(32), lane))
    builder.store(vector, builder.bitcast(first, vector_type.as_pointer()),
                  align=VECTOR_WIDTH * 4)


def _halves_load(builder, element, ptx, register, first, lanes, conversion, value):
    """As _vector_load for 2 * VECTOR_WIDTH 16-bit values: VECTOR_WIDTH 32-bit words in
    one PTX vector load (16 bytes), each split into its two halves (low half first,
    as little-endian memory holds them) and widened."""
    words = ", ".join(f"${w}" for w in range(VECTOR_WIDTH))
    word = ir.IntType(32)
    load = ir.InlineAsm(
        ir.FunctionType(ir.LiteralStructType([word] * VECTOR_WIDTH), [first.type]),
        f"ld.global{LOAD_CACHE}.v{VECTOR_WIDTH}.b32 {{{words}}}, [${VECTOR_WIDTH}];",
        ",".join(["=r"] * VECTOR_WIDTH + ["l"]))
    loaded = builder.call(load, [first])
    for lane, pointer in enumerate(lanes):
        bits = builder.extract_value(loaded, lane // 2)
        if lane % 2:
            bits = builder.lshr(bits, ir.Constant(word, 16))
        half = builder.trunc(bits, element)
        builder.store(_widen(builder, half, conversion, value), pointer)


def _halves_store(builder, element, ptx, register, first, lanes, conversion, value):
    """As _vector_store for 2 * VECTOR_WIDTH 16-bit values, paired into 32-bit words."""
    word = ir.IntType(32)
    halves = [builder.zext(_narrow(builder, builder.load(p), conversion, element), word)
              for p in lanes]
    words = [builder.or_(halves[2 * w], builder.shl(halves[2 * w + 1], ir.Constant(word, 16)))
             for w in range(VECTOR_WIDTH)]
    inputs = ", ".join(f"${w + 1}" for w in range(VECTOR_WIDTH))
    store = ir.InlineAsm(
        ir.FunctionType(ir.VoidType(), [first.type] + [word] * VECTOR_WIDTH),
        f"st.global{STORE_CACHE}.v{VECTOR_WIDTH}.b32 [$0], {{{inputs}}};",
        ",".join(["l"] + ["r"] * VECTOR_WIDTH) + ",~{memory}")
    builder.call(store, [first] + words)


_load_vector = _vector_intrinsic(_vector_load)
_store_vector = _vector_intrinsic(_vector_store)
# 16-bit values, 2 * VECTOR_WIDTH a vector: the same 16 bytes as VECTOR_WIDTH floats
_load_halves = _vector_intrinsic(_halves_load, 2 * VECTOR_WIDTH, (types.float16, types.uint16))
_store_halves = _vector_intrinsic(_halves_store, 2 * VECTOR_WIDTH, (types.float16, types.uint16))
_load_shared = _vector_intrinsic(_shared_load)  # contraction tiles: see emit_contraction.py
_store_shared = _vector_intrinsic(_shared_store)
'''

# The simulator's stand-ins: the same signatures, one value at a time, and the fault a
# misaligned vector access would raise on the GPU.
_SIMULATOR_ACCESSES = '''\
@cuda.jit(device=True)
def _vector_row(array, index, width=VECTOR_WIDTH):
    """The last-axis view of ``array`` that holds array[index], and the position of
    array[index] in it; raises where a GPU vector access of ``width`` values there
    would fault."""
    row, first = array[index[:-1]], index[-1]
    address = row[first:].__array_interface__["data"][0]
    if address % (width * row.dtype.itemsize):
        raise RuntimeError("misaligned vector access: the host launched a vector kernel "
                           "on a buffer whose rows do not start on a vector boundary")
    return row, first


@cuda.jit(device=True)
def _moved(value, source, target):
    """A value of a ``source`` array as a ``target`` array holds it: bf16 bits (a uint16
    array's words) widened to f32 or f32 rounded to them, as the GPU's moves convert
    (``_bf16_load``, ``_bf16_store``); NumPy's conversion otherwise (f16 and f32)."""
    if source.dtype == np.uint16 and target.dtype == np.float32:
        return _bf16_load(value)
    if source.dtype == np.float32 and target.dtype == np.uint16:
        return _bf16_store(value)
    return value


@cuda.jit(device=True)
def _load_vector(array, index, values, slot, width=VECTOR_WIDTH):
    """values[slot + lane] = the lane-th value from array[index] on along the last axis,
    for each of the VECTOR_WIDTH lanes (one vector load on the GPU)."""
    row, first = _vector_row(array, index, width)
    for lane in range(width):
        values[slot + lane] = _moved(row[first + lane], row, values)


@cuda.jit(device=True)
def _store_vector(array, index, values, slot, width=VECTOR_WIDTH):
    """The lane-th value from array[index] on along the last axis = values[slot + lane],
    for each of the VECTOR_WIDTH lanes (one vector store on the GPU)."""
    row, first = _vector_row(array, index, width)
    for lane in range(width):
        row[first + lane] = _moved(values[slot + lane], values, row)


@cuda.jit(device=True)
def _load_halves(array, index, values, slot):
    """_load_vector of 2 * VECTOR_WIDTH 16-bit values (16 bytes on the GPU)."""
    _load_vector(array, index, values, slot, 2 * VECTOR_WIDTH)


@cuda.jit(device=True)
def _store_halves(array, index, values, slot):
    """_store_vector of 2 * VECTOR_WIDTH 16-bit values (16 bytes on the GPU)."""
    _store_vector(array, index, values, slot, 2 * VECTOR_WIDTH)
'''

_COPY_VALUES = '''\
def _copy_values(array, itemsize, *sizes):
    """Values per cp.async into a tensor-core stage: the widest copy of 16, 8 or 4 bytes
    that every size (values: the tile axis, the array's rows) divides and the array's
    start is aligned to; 0: none (the operand is gathered value by value)."""
    address = _address(array)
    for size in (16, 8, 4):
        values = size // itemsize
        if values and address % size == 0 and all(s % values == 0 for s in sizes):
            return values
    return 0
'''

_VECTOR_READY = '''\
def _vector_ready(*arrays, width=VECTOR_WIDTH):
    """Whether a vector kernel may take ``arrays``: each has contiguous rows that start
    on a vector boundary (``width`` values), so every vector access is aligned."""
    for array in arrays:
        align = width * array.dtype.itemsize
        if (_address(array) % align or array.strides[-1] != array.dtype.itemsize
                or any(stride % align for stride in array.strides[:-1])):
            return False
    return True
'''

_PEEL_READY = '''\
def _peel_ready(*arrays, width=VECTOR_WIDTH):
    """Whether a peeled row kernel may take ``arrays``: each is C-contiguous and starts
    on a vector boundary (``width`` values), so that, their shapes being the same, a
    row's values from its first aligned vector on lie in whole aligned vectors in all
    of them alike (peeled_rows.py)."""
    for array in arrays:
        if _address(array) % (width * array.dtype.itemsize):
            return False
        stride = array.dtype.itemsize
        for extent, step in zip(reversed(array.shape), reversed(array.strides)):
            if extent > 1 and step != stride:
                return False
            stride *= extent
    return True
'''

_ADDRESS = {
    "cuda": '''\
def _address(array):
    """The device address of a Numba device array's first element."""
    return array.device_ctypes_pointer.value or 0
''',
    "simulator": '''\
def _address(array):
    """The address of a simulated device array's first element (host memory)."""
    return array.ctypes.data
'''}

# What the "cuda" target's intrinsics import beyond the module's usual imports.
CUDA_IMPORTS = ("from llvmlite import ir", "from numba import types",
                "from numba.cuda import cgutils", "from numba.cuda.extending import intrinsic")
# Module-level names the vector helpers define or import: generated names avoid them.
VECTOR_NAMES = ("_VECTOR_PTX", "_WIDENED", "_CONVERSION", "_moved", "_widen", "_narrow", "_vector_operands", "_vector_intrinsic", "_vector_load",
                "_vector_store", "_vector_row", "_load_vector", "_store_vector", "_address",
                "_halves_load", "_halves_store", "_load_halves", "_store_halves", "_copy_values",
                "_peel_ready",
                "_shared_load", "_shared_store", "_load_shared", "_store_shared",
                "ir", "types", "cgutils", "intrinsic")


def vector_helper_sources(target: str) -> dict[str, str]:
    """Source of each vector helper on ``target``, by the name a module uses."""
    device = _CUDA_INTRINSICS if target == "cuda" else _SIMULATOR_ACCESSES
    return {"_vector_access": device, "_address": _ADDRESS[target], "_vector_ready": _VECTOR_READY,
            "_peel_ready": _PEEL_READY, "_copy_values": _COPY_VALUES}
