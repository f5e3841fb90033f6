"""Lean addressing for loop-free pointwise kernels: flat offsets, unsigned indices.

Numba indexes ``x[i0, i1]`` with signed 64-bit indices: a wraparound check per index
(a negative index counts from the end), then a 64-bit multiply per dimension. A
pointwise kernel that walks a flat index and unravels it with a divmod per axis pays
that for every access: measured on bias_gelu_f16 (H100), index arithmetic outweighed
the erf. Every kernel buffer is C-contiguous (``runtime.arguments`` refuses others and
the host allocates the rest), so an access is an offset into the buffer's flat view:

- **collapsed**: an access whose indices are the space's trailing loop indices
  ``i_j .. i_{n-1}`` in order, into a buffer whose shape is exactly those extents,
  walks its buffer as the kernel walks its points: its offset is ``flat`` (j = 0, a
  same-shape operand) or ``flat mod (e_j * ... * e_{n-1})`` (a broadcast of trailing
  axes, such as a bias [C] over [R, C]): one division at most, none for j = 0.
- otherwise the loop indices are unravelled (a divmod per axis) and the access
  indexes its buffer with them, unsigned (no wraparound check).

Indices are unsigned, so Numba skips wraparound: ``numba.uint32`` in a kernel the
host launches only for spaces under 2**31 points (the vector variant), ``numba.uint64``
elsewhere. A division by an extent known only at run time multiplies instead:
``_magic`` on the host finds (m, s) with ``n // d == (mulhi(n, m) + n) >> s`` for every
n < 2**31 (Granlund and Montgomery's round-up method; m < 2**32 for every d); the
kernel takes them as parameters (``lean_divisors`` lists them) and ``_divmod_magic``
needs four instructions where a 32-bit division takes about twenty. A space of 2**31
points or more gets m = 0, and the uint64 kernel divides.

A loop index divided by an extent known at run time in the body (group norm's channel
group ``c // (C/G)`` to read its statistics) divides by the same multiply-high: Numba's
int64 ``//`` calls a 64-bit division routine, which on group norm over channels-last
took its normalising kernel to 0.089 ms where torch.compile's took 0.048 (H100).

Loop indices that the body computes with (iota, index arithmetic) are also defined as
int64, as before: unsigned values must not meet signed ones in Numba (the mix types as
float64).

This is a codegen-level simplification, not an IR pass: which access collapses
depends only on the access's indices and its buffer's shape, both in the loops IR
already, and the rewrite is of how the generated code names an element, which the IR
does not model (docs/perf-notes.md).
"""
from __future__ import annotations

from mlfuse.dialects.arith import FloorDivOp, ModOp
from mlfuse.dialects.loops import ACCESSES, DimOp, LoadOp, MaskedLoadOp, StoreOp, access_parts  # noqa: F401 (importers take them from here too)
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.traits import SCALAR_COMPUTE



def collapsed_suffix(op: Operation, args, extents) -> int | None:
    """j where ``op`` indexes its buffer by loop indices args[j:] in order and the
    buffer's shape is extents[j:] (its offset is then the flat index mod the product
    of extents[j:]); None otherwise (rank-0 buffers too)."""
    return suffix_of(*access_parts(op), args, extents)


def suffix_of(buf: Value, indices: list[Value], args, extents) -> int | None:
    """collapsed_suffix of an access of ``buf`` at ``indices``."""
    shape = list(buf.type.shape)
    j = len(args) - len(indices)
    if not indices or j < 0 or shape != list(extents[j:]):
        return None
    return j if all(v is a for v, a in zip(indices, args[j:])) else None


def uses_loop_indices(op: Operation, args) -> bool:
    """Whether ``op`` computes with a loop index (not only addresses with it)."""
    arg_ids = {id(a) for a in args}
    if isinstance(op, ACCESSES):
        _, indices = access_parts(op)
        rest = [v for v in op.operands if not any(v is i for i in indices)]
        return any(id(v) in arg_ids for v in rest)
    return op.has_trait(SCALAR_COMPUTE) and any(id(v) in arg_ids for v in op.operands)


def needs_unravel(ops, args, extents) -> bool:
    """Whether ``ops`` need the loop indices themselves: an access that does not
    collapse but indexes by a loop index, or a computation with one."""
    arg_ids = {id(a) for a in args}
    for o in ops:
        if uses_loop_indices(o, args):
            return True
        if isinstance(o, ACCESSES) and collapsed_suffix(o, args, extents) is None and any(
                id(v) in arg_ids for v in access_parts(o)[1]):
            return True
    return False


def index_divisor(o: Operation, args) -> str | None:
    """The extent (a dim's text) by which ``o`` divides or takes the remainder of a loop
    index of the space ``args`` at run time, else None. (Its dividend is below the
    space's size, so the multiply-high divides it exactly.)"""
    if not isinstance(o, (FloorDivOp, ModOp)) or not any(o.operands[0] is a for a in args):
        return None
    divisor = getattr(o.operands[1], "op", None)
    return divisor["sym"] if isinstance(divisor, DimOp) else None


def lean_divisors(op) -> list[tuple]:
    """The divisors (tuples of extents, each with a symbol) a lean pointwise kernel of
    ``op`` divides by at run time, in parameter order: each collapsed suffix's product,
    then each unravelled axis's extent (where any access or op needs the unravel), then
    each extent the body divides a loop index by (``index_divisor``)."""
    args, extents = list(op.body.args), list(op.extent_list)
    ops = [o for o in op.body.ops]
    found: list[tuple] = []

    def add(dims):
        if any(isinstance(d, str) for d in dims) and dims not in found:
            found.append(dims)
    for o in ops:
        if isinstance(o, ACCESSES):
            j = collapsed_suffix(o, args, extents)
            if j:
                add(tuple(extents[j:]))
    if needs_unravel(ops, args, extents):
        for d in range(1, len(extents)):
            add((extents[d],))
        for o in ops:  # (a body that divides a loop index computes with it: unravelled)
            if (sym := index_divisor(o, args)) is not None:
                add((sym,))
    return found


# -- helpers the generated module defines ------------------------------------------------

_FLAT_CUDA = '''\
@intrinsic
def _flat(typingctx, array):
    """The 1-D view of a C-contiguous array (same data, no copy, no checks): an
    element is then one offset, one multiply-add from the base address."""
    if not isinstance(array, types.Array) or array.layout != "C":
        return None

    def codegen(context, builder, sig, args):
        source = context.make_array(sig.args[0])(context, builder, args[0])
        view = context.make_array(sig.return_type)(context, builder)
        size = context.get_constant(types.intp, 1)
        for extent in cgutils.unpack_tuple(builder, source.shape, array.ndim):
            size = builder.mul(size, extent)
        context.populate_array(view, data=source.data, shape=[size],
                               strides=[source.itemsize], itemsize=source.itemsize,
                               meminfo=source.meminfo, parent=source.parent)
        return view._getvalue()
    return array.copy(ndim=1)(array), codegen
'''

_FLAT_SIMULATOR = '''\
@cuda.jit(device=True)
def _flat(array):
    """The 1-D view of a C-contiguous array (the GPU's intrinsic makes the same view)."""
    return array.reshape(array.size)
'''

_DIVMOD_MAGIC = '''\
@cuda.jit(device=True, inline="always")
def _divmod_magic(n, d, m, s):
    """divmod(n, d) of uint32 n < 2**31 by multiply-high and shift: (m, s) from _magic."""
    high = numba.uint32((numba.uint64(n) * numba.uint64(m)) >> numba.uint64(32))
    q = numba.uint32(numba.uint32(high + n) >> numba.uint32(s))
    return q, numba.uint32(n - q * d)
'''

_DIVMOD_WIDE = '''\
@cuda.jit(device=True, inline="always")
def _divmod_wide(n, d, m, s):
    """divmod(n, d) of uint64 n: by _divmod_magic's multiply when the host found the
    space under 2**31 points (m > 0; the branch is the same in every thread), else a
    64-bit division."""
    if m != numba.uint64(0):
        q = numba.uint64((((n * m) >> numba.uint64(32)) + n) >> s)
        return q, numba.uint64(n - q * d)
    q = numba.uint64(n // d)
    return q, numba.uint64(n - q * d)
'''

_MAGIC = '''\
def _magic(d, points):
    """(m, s) for dividing every n < 2**31 by d >= 1 with a multiply-high, an add and a
    shift: q = (mulhi32(n, m) + n) >> s (Granlund and Montgomery, the round-up method
    with a 33-bit multiplier 2**32 + m); (0, 0) when ``points`` (the space) reaches
    2**31, where the kernel divides."""
    if points >= 2**31 or d < 1:
        return 0, 0
    s = (d - 1).bit_length()  # ceil(log2(d))
    return (2**32 * (2**s - d)) // d + 1, s
'''


def magic_numbers(d: int) -> tuple[int, int]:
    """The host's (m, s) for divisor ``d`` (the same formula as _MAGIC; for tests)."""
    namespace: dict = {}
    exec(_MAGIC, namespace)  # noqa: S102 - our own constant source
    return namespace["_magic"](d, 0)


def addressing_helper_sources(target: str) -> dict[str, str]:
    return {"_flat": _FLAT_CUDA if target == "cuda" else _FLAT_SIMULATOR,
            "_divmod_magic": _DIVMOD_MAGIC, "_divmod_wide": _DIVMOD_WIDE, "_magic": _MAGIC}


ADDRESSING_NAMES = ("_flat", "_divmod_magic", "_divmod_wide", "_magic")


# -- split reductions ---------------------------------------------------------------------

def split_offsets(op) -> dict[int, int] | None:
    """Where each load of a split reduction's nests (their innermost bodies) reads, as
    the flat index over the point's axes then the reduced ones: 0 (its buffer has both,
    offset ``point * n_k + kf``) or the number of point axes (its buffer has the reduced
    axes alone, offset ``kf``), by id; None if a load reads elsewhere or with a mask, or
    an inner body computes with an index (then the indices are unravelled as before)."""
    from mlfuse.dialects.reductions import reduce_nests
    points, extents = list(op.body.args), list(op.extent_list)
    found: dict[int, int] = {}
    for nest in reduce_nests(op):
        args, dims = points + nest.indices, extents + nest.extents
        for o in nest.inner.body.ops:
            if isinstance(o, MaskedLoadOp) or uses_loop_indices(o, args):
                return None
            if isinstance(o, LoadOp):
                j = suffix_of(*access_parts(o), args, dims)
                if j not in (0, len(points)):
                    return None
                found[id(o)] = j
    return found
