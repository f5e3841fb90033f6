"""Converters of ONNX's sliding-window operators: Conv (any ``group``), MaxPool,
AveragePool.

The tensor dialect's window ops are 2-D (NCHW) with the same padding on both sides of
each spatial axis. ONNX's 1-D forms (N, C, L) run as 2-D ones over an axis of size 1;
padding that differs between the two sides of an axis (explicit ``pads`` or
``auto_pad`` SAME with an odd total) becomes an explicit ``tensor.pad`` with a value
that cannot change the result (0 for Conv and for AveragePool with
count_include_pad=1, -inf for MaxPool) and the window op then pads nothing. 3-D
windows are an error.
"""
from __future__ import annotations

import math

from mlfuse.dialects import tensor as T
from mlfuse.dialects.tensor_indexing import PadOp
from mlfuse.dialects.tensor_windows import AvgPool2dOp, MaxPool2dOp
from mlfuse.ir.types import FLOAT_DTYPES

from mlfuse.frontend.onnx_import.builders import broadcast, const_like, ew, reshape, string_attr


def _spatial(g, x, w=None):
    """x (and the weights) as 2-D-window operands: a 1-D input [N, C, L] gains an axis
    of size 1 ([N, C, 1, L]). Returns (x, w, squeeze) with squeeze true when the
    result must lose that axis again."""
    rank = x.type.rank
    if rank == 4:
        return x, w, False
    if rank == 3:
        x = reshape(g, x, [*x.type.shape[:2], 1, x.type.shape[2]])
        if w is not None:
            w = reshape(g, w, [*w.type.shape[:2], 1, w.type.shape[2]])
        return x, w, True
    raise g.error(f"only 1-D and 2-D windows (3-D or 4-D input) are supported, got rank {rank}")


def window_pads(g, attrs, sizes, kernel, strides, dilations) -> tuple[list, list]:
    """(begin, end) padding per spatial axis from ``pads`` or ``auto_pad``."""
    auto_pad = string_attr(attrs, "auto_pad", "NOTSET")
    n = len(kernel)
    if auto_pad == "VALID":
        return [0] * n, [0] * n
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(sizes, kernel, strides, dilations):
            if not isinstance(size, int):
                raise g.error("auto_pad SAME over a symbolic size is not supported")
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        return begin, end
    if auto_pad != "NOTSET":
        raise g.error(f"auto_pad='{auto_pad}' is not an auto_pad mode")
    pads = list(attrs.get("pads", [0] * (2 * n)))
    if len(pads) != 2 * n:
        raise g.error(f"pads {pads} must hold a begin and an end for each of {n} spatial axes")
    return pads[:n], pads[n:]


def _padded(g, x, begin, end, fill: float, kernel=None, dilations=None):
    """(x, padding for the window op, whether x was padded here): the op's own
    symmetric padding where it can take it, else x padded explicitly with ``fill``
    and no padding left for the op.
    Pooling ops (``kernel`` given) also refuse padding over half the window's span
    (a window of padding alone), which ONNX allows."""
    native = begin == end and (kernel is None or all(
        2 * p <= d * (k - 1) + 1 for p, k, d in zip(begin, kernel, dilations)))
    if native:
        return x, list(begin), False
    low = [0, 0] + [int(b) for b in begin]
    high = [0, 0] + [int(e) for e in end]
    return g.emit(PadOp, [x], {"low": low, "high": high, "value": fill}), [0] * len(begin), True


class _Window:
    """A node's window attributes in 2-D form (a 1-D node gains a leading axis)."""

    def __init__(self, g, attrs, x, kernel):
        self.squeeze = x.type.rank == 3
        spatial = len(kernel)
        if spatial != x.type.rank - 2:
            raise g.error(f"kernel_shape {list(kernel)} does not match the rank-{x.type.rank} "
                          "input")
        self.kernel = list(kernel)
        self.strides = list(attrs.get("strides", [1] * spatial))
        self.dilations = list(attrs.get("dilations", [1] * spatial))
        self.begin, self.end = window_pads(g, attrs, x.type.shape[2:], self.kernel,
                                           self.strides, self.dilations)
        if self.squeeze:
            self.kernel, self.strides, self.dilations = ([1] + self.kernel, [1] + self.strides,
                                                         [1] + self.dilations)
            self.begin, self.end = [0] + self.begin, [0] + self.end

    def result(self, g, y):
        if self.squeeze:
            shape = y.type.shape
            return reshape(g, y, [*shape[:2], shape[3]])
        return y


def _conv(g, node, attrs):
    x, w, bias = g.input(node, 0), g.input(node, 1), g.input(node, 2)
    kernel = list(attrs.get("kernel_shape", w.type.shape[2:]))
    if kernel != list(w.type.shape[2:]):
        raise g.error(f"kernel_shape {kernel} differs from the weights' {list(w.type.shape[2:])}")
    window = _Window(g, attrs, x, kernel)
    x, w, _ = _spatial(g, x, w)
    x, padding, _ = _padded(g, x, window.begin, window.end, 0.0)
    options = {"stride": window.strides, "padding": padding, "dilation": window.dilations}
    groups = int(attrs.get("group", 1))
    if groups != 1:
        options["groups"] = groups
    y = g.emit(T.Conv2dOp, [x, w], options)
    if bias is not None:
        y = ew(g, "add", y, reshape(g, bias, [1, bias.type.shape[0], 1, 1]))
    return [window.result(g, y)]


def _max_pool(g, node, attrs):
    x = g.input(node, 0)
    if "kernel_shape" not in attrs:
        raise g.error("attribute 'kernel_shape' is required")
    if attrs.get("storage_order", 0):
        raise g.error("storage_order=1 is not supported (it orders the Indices output, "
                      "which mlfuse does not compute)")
    window = _Window(g, attrs, x, attrs["kernel_shape"])
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if x.type.dtype not in FLOAT_DTYPES:
        raise g.error(f"MaxPool on {x.type.dtype} is not supported (float types only)")
    x, _, _ = _spatial(g, x)
    x, padding, explicit = _padded(g, x, window.begin, window.end, -math.inf, window.kernel,
                                   window.dilations)
    if ceil_mode and explicit:
        raise g.error(f"ceil_mode with pads {window.begin} and {window.end} is not supported "
                      "(only the same padding on both sides, at most half the window)")
    y = g.emit(MaxPool2dOp, [x], {
        "kernel": window.kernel, "stride": window.strides, "padding": padding,
        "dilation": window.dilations, "ceil_mode": ceil_mode})
    return [window.result(g, y)]


def _average_pool(g, node, attrs):
    x = g.input(node, 0)
    if "kernel_shape" not in attrs:
        raise g.error("attribute 'kernel_shape' is required")
    window = _Window(g, attrs, x, attrs["kernel_shape"])
    if any(d != 1 for d in window.dilations):
        raise g.error(f"dilations {list(attrs['dilations'])} are not supported for "
                      "AveragePool (only 1)")
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    include_pad = bool(attrs.get("count_include_pad", 0))
    x, _, _ = _spatial(g, x)
    padded, padding, explicit = _padded(g, x, window.begin, window.end, 0.0, window.kernel,
                                        window.dilations)
    options = {"kernel": window.kernel, "stride": window.strides, "padding": padding,
               "ceil_mode": ceil_mode, "count_include_pad": include_pad}
    if not explicit:
        return [window.result(g, g.emit(AvgPool2dOp, [padded], options))]
    if ceil_mode:
        raise g.error(f"ceil_mode with pads {window.begin} and {window.end} is not supported "
                      "(only the same padding on both sides, at most half the window)")
    total = g.emit(AvgPool2dOp, [padded], {**options, "count_include_pad": True})
    if include_pad:
        return [window.result(g, total)]
    # the mean of the elements that are not padding: the window sums of x and of a
    # padded marker of ones, over the same divisor (the window's size)
    ones = broadcast(g, const_like(g, 1.0, x), x.type.shape)
    marker, _, _ = _padded(g, ones, window.begin, window.end, 0.0, window.kernel,
                           window.dilations)
    count = g.emit(AvgPool2dOp, [marker], {**options, "count_include_pad": True})
    return [window.result(g, ew(g, "div", total, count))]


CONVERTERS = {"Conv": _conv, "MaxPool": _max_pool, "AveragePool": _average_pool}
