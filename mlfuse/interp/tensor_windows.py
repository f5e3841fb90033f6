"""The NumPy semantics of the windowed tensor ops (dialects/tensor_windows.py): the
oracle's rules, which ``tensor_interp`` adds to its table.

Pooling takes every (strided, dilated) window of the padded input with NumPy's
sliding_window_view, the way ``tensor_interp``'s conv2d does; ceil_mode's last window
may reach past the right padding, so the input is padded far enough on the right for
it (those taps never count: -inf for max, and outside the avg divisor).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from mlfuse.interp.common import resolve_shape, scalar


def pool_windows(op, x: np.ndarray, fill) -> np.ndarray:
    """x's windows as [N, C, OH, OW, KH, KW], padding (and ceil_mode's overhang) ``fill``."""
    kernel, stride, pads = op["kernel"], op["stride"], op["padding"]
    dilation = op.attributes.get("dilation", [1, 1])
    out = op.result.type.shape[2:]  # concrete, or a symbolic size kept by a 'same' window
    out = [x.shape[2 + a] if isinstance(out[a], str) else out[a] for a in range(2)]
    spans = [dilation[a] * (kernel[a] - 1) + 1 for a in range(2)]
    widths = [(0, 0), (0, 0)]
    for a in range(2):
        reach = (out[a] - 1) * stride[a] + spans[a]  # padded positions the windows cover
        widths.append((pads[a], max(pads[a], reach - x.shape[2 + a] - pads[a])))
    padded = np.pad(x, widths, constant_values=fill)
    windows = np.lib.stride_tricks.sliding_window_view(padded, spans, axis=(2, 3))
    windows = windows[:, :, ::stride[0], ::stride[1], ::dilation[0], ::dilation[1]]
    return windows[:, :, :out[0], :out[1]]


def avg_divisor(op, height: int, width: int, dtype) -> np.ndarray:
    """torch's avg_pool2d divisor per output position, [OH, OW]: the window clipped to
    the padded input (count_include_pad) or to the input."""
    counts = []
    for a, size in enumerate((height, width)):
        k, s, p = op["kernel"][a], op["stride"][a], op["padding"][a]
        n_out = op.result.type.shape[2 + a]
        n_out = size if isinstance(n_out, str) else n_out
        start = np.arange(n_out) * s - p
        end = np.minimum(start + k, size + p)
        if not op["count_include_pad"]:
            start, end = np.maximum(start, 0), np.minimum(end, size)
        counts.append(end - start)
    return (counts[0][:, None] * counts[1][None, :]).astype(dtype)


def _max_pool2d(op, x, *, dims):
    return pool_windows(op, x, -np.inf).max(axis=(-2, -1))


def _avg_pool2d(op, x, *, dims):
    # a sum starts from +0, as the kernels' accumulators do (bf16's sum keeps the -0 of a
    # window of one -0, whose sign 2 / x would show); adding +0 changes nothing else
    total = pool_windows(op, x, 0).sum(axis=(-2, -1), dtype=x.dtype) + x.dtype.type(0)
    return total / avg_divisor(op, x.shape[2], x.shape[3], x.dtype)


def _arg_reduction(np_arg: Callable) -> Callable:
    def rule(op, x, *, dims):
        # NumPy: the first extreme, or the first nan
        return np_arg(x, axis=op["axis"], keepdims=op["keepdims"]).astype(np.int32)
    return rule


def cumsum(op, x, *, dims):
    axis = op["axis"]
    y = np.flip(x, axis) if op["reverse"] else x
    total = np.cumsum(y, axis=axis, dtype=x.dtype)
    if op["exclusive"]:  # shift by one along axis, a zero first
        total = np.concatenate([np.zeros_like(np.take(total, [0], axis)),
                                np.take(total, np.arange(x.shape[axis] - 1), axis)], axis)
    # every sum starts from +0, as the kernels' accumulators do (np.cumsum keeps the -0
    # of a first element -0, whose sign 1/x would show); adding +0 changes nothing else
    total = total + x.dtype.type(0)
    return np.flip(total, axis) if op["reverse"] else total


def _dim_size(op, *, dims):
    (size,) = resolve_shape((op["sym"],), dims, op)
    return scalar(size, op.result.type.dtype)


WINDOW_RULES: dict[str, Callable] = {
    "tensor.max_pool2d": _max_pool2d,
    "tensor.avg_pool2d": _avg_pool2d,
    "tensor.argmax": _arg_reduction(np.argmax),
    "tensor.argmin": _arg_reduction(np.argmin),
    "tensor.cumsum": cumsum,
    "tensor.dim_size": _dim_size,
}
