"""Flat views of C-contiguous buffers: an element is one offset from the base address.

Numba indexes ``x[i0, i1]`` with signed 64-bit indices: a wraparound check per index
(a negative index counts from the end), then a multiply per dimension. Every kernel
buffer is C-contiguous (``runtime.arguments`` refuses others and the host allocates
the rest), so a kernel that knows an access's offset can index the buffer's 1-D view
with it, unsigned (no wraparound check). The transpose tiles (schedule_tiles.py)
compute each access's offset once per tile and step it with adds.
"""
from __future__ import annotations

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


def addressing_helper_sources(target: str) -> dict[str, str]:
    return {"_flat": _FLAT_CUDA if target == "cuda" else _FLAT_SIMULATOR}


ADDRESSING_NAMES = ("_flat",)
