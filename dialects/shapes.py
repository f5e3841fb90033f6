"""Shape rules shared by the tensor dialect and the frontend, symbolic dims included.

A symbolic dim (a name) is a size fixed at call time: it equals itself and 1 is
the only other size that broadcasts against it.
"""
from __future__ import annotations

from collections import Counter

from mlfuse.ir.core import VerifyError


def fmt_shape(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def broadcast_shapes(*shapes):
    """NumPy broadcasting of several shapes; raises VerifyError if they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dim = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if dim == 1 or dim == d:
                dim = d
            else:
                raise VerifyError("shapes " + " and ".join(fmt_shape(s) for s in shapes)
                                  + f" do not broadcast (dim {dim} vs {d})")
        out.append(dim)
    return tuple(out)


def normalize_axes(axis, rank: int) -> list[int]:
    """Turn an int or list of ints (negatives allowed) into sorted unique axes."""
    axes = [axis] if isinstance(axis, int) else list(axis)
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise VerifyError(f"axis {a} is out of range for rank {rank}")
        a = a % rank if rank else 0
        if a in out:
            raise VerifyError(f"axis {a} given twice")
        out.append(a)
    return sorted(out)


def _factor(shape):
    ints, syms = 1, Counter()
    for d in shape:
        if isinstance(d, str):
            syms[d] += 1
        else:
            ints *= d
    return ints, syms


def same_size(a, b) -> bool:
    """Whether two shapes provably hold the same number of elements."""
    return _factor(a) == _factor(b)


def reduced_shape(shape, axes, keepdims: bool):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def conv_out_dim(size, kernel, stride, pad, dilation):
    """Output size of one convolved dim; a symbolic input works only for 'same' shapes."""
    return window_out_dim("conv2d", size, kernel, stride, pad, dilation)


def window_out_dim(op: str, size, kernel: int, stride: int, pad: int, dilation: int,
                   ceil_mode: bool = False):
    """Output size of one convolved or pooled dim (torch's rule; ceil_mode drops a last
    window that would start in the right padding). A symbolic size works only for
    'same' windows (stride 1, padding half the dilated kernel), which keep it."""
    span = dilation * (kernel - 1) + 1
    if isinstance(size, str):
        if stride == 1 and 2 * pad == span - 1:
            return size
        raise VerifyError(f"{op} over symbolic size {size} needs stride 1 and 'same' padding")
    room = size + 2 * pad - span
    if room < 0:
        raise VerifyError(f"{op} window {kernel} (dilation {dilation}) does not fit "
                          f"size {size} with padding {pad}")
    out = room // stride + 1
    if ceil_mode:
        out = (room + stride - 1) // stride + 1
        if (out - 1) * stride >= size + pad:
            out -= 1
    return out
