"""Shape rules shared by the tensor dialect and the frontend, symbolic dims included.

A symbolic dim (a name, or a product of names such as ``B*H``) is a size fixed at
call time: it equals itself and 1 is the only other size that broadcasts against it.
"""
from __future__ import annotations

from collections import Counter

from mlfuse.ir.core import VerifyError
from mlfuse.ir.types import MAX_ELEMENTS, dim_monomial, is_quotient, product_dim


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
        coefficient, exponents = dim_monomial(d)
        ints *= coefficient
        syms.update(exponents)
    return ints, +syms, -syms  # a quotient's divisors count negatively


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


def dim_sum(dims) -> object | None:
    """The dim that is the sum of ``dims`` where one exists (ints; multiples of one
    product of names: N + N = 2*N), else None (4 + N has no dim)."""
    total, names = 0, None
    for d in dims:
        if d == 0:
            continue
        if is_quotient(d):
            return None
        coefficient, syms = dim_monomial(d)
        coefficient, syms = int(coefficient), tuple(sorted(syms.elements()))
        if names is None:
            names = syms
        elif syms != names:
            return None
        total += coefficient
    return product_dim([total, *(names or ())])


def slice_params(size, start, stop, step) -> tuple[int, int, int]:
    """(start, step, count) of the Python/NumPy slice ``start:stop:step`` (each may be
    None) over an axis of ``size``: negatives count from the end, out-of-range bounds
    clamp (ONNX Slice has the same rules). ``count`` may be 0. A symbolic ``size``
    takes only slices whose result does not depend on it, and then ``start`` -1 stands
    for its last element: the whole axis forwards (stop left out or at least 2**62) or
    backwards (``::-1``), the first element (0:1) or the last (-1:); anything else is
    a VerifyError."""
    shown = ":".join("" if v is None else str(v) for v in (start, stop, step)[:3 if step else 2])
    step = 1 if step is None else step
    if step == 0:
        raise VerifyError("slice step cannot be 0")
    if isinstance(size, str):
        to_end = stop is None or abs(stop) >= MAX_ELEMENTS
        if step == 1 and start in (None, 0) and to_end:
            return 0, 1, size
        if step == -1 and start in (None, -1) and to_end:
            return -1, -1, size
        if step > 0 and start in (None, 0) and stop == 1:
            return 0, 1, 1
        if step > 0 and start == -1 and to_end:
            return -1, 1, 1
        raise VerifyError(f"slice {shown} of symbolic size {size} has a size that depends on "
                          f"{size}; only the whole axis (: or ::-1), its first element (0:1) "
                          "or its last (-1:) can be taken from it")
    # Python's slice.indices, on an int size
    lo, hi = (0, size) if step > 0 else (-1, size - 1)

    def clamp(v, default):
        if v is None:
            return default
        if v < 0:
            v += size
        return min(max(v, lo), hi)
    first = clamp(start, lo if step > 0 else hi)
    last = clamp(stop, hi if step > 0 else lo)
    count = max(0, (last - first + (step - (1 if step > 0 else -1))) // step)
    return first, step, count

