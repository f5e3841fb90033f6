"""Converters of ONNX's neural-network operators: normalizations (BatchNormalization
in inference mode, InstanceNormalization), global pooling, activations (HardSigmoid,
HardSwish, Clip, PRelu, Elu, Selu, Celu, Softsign, ThresholdedRelu, Mish), variadic
Sum/Mean, and the index results ArgMax/ArgMin and CumSum.

Each follows the formula of the ONNX operator specification with the same attributes
and defaults, spelled out in elementwise ops so that it fuses with its neighbours.
"""
from __future__ import annotations

import numpy as np

from mlfuse.dialects import tensor as T
from mlfuse.dialects.tensor_windows import ArgmaxOp, ArgminOp, CumsumOp
from mlfuse.ir.types import NUMPY_DTYPE

from mlfuse.frontend.onnx_import.builders import const_like, ew, norm_axis, reshape, static_ints
from mlfuse.frontend.onnx_import.ops_shape import slice_value


def _per_channel(g, v, rank: int):
    """A [C] parameter shaped [C, 1, ...] to broadcast over [N, C, D1, ...]."""
    return reshape(g, v, [v.type.shape[0]] + [1] * (rank - 2))


def _float_param(g, node, index, x):
    """Input ``index`` in x's dtype (BatchNormalization allows other float types for
    its parameters since opset 15)."""
    return g.input(node, index, x.type.dtype)


# -- normalizations ------------------------------------------------------------------
def _batch_norm(g, node, attrs):
    """Y = (X - mean) * (scale / sqrt(var + epsilon)) + B, per channel (axis 1).
    When scale and var are known, scale / sqrt(var + epsilon) is computed here in
    float64 and rounded once to X's dtype; otherwise it is computed at run time."""
    if g.opset < 7:
        raise g.error("BatchNormalization before opset 7 (is_test, spatial, "
                      "consumed_inputs) is not supported")
    if attrs.get("training_mode", 0):
        raise g.error("training_mode=1 is not supported (inference only: the running "
                      "mean and variance are used)")
    if not attrs.get("spatial", 1):
        raise g.error("spatial=0 is not supported")
    x = g.input(node, 0)
    if x.type.rank < 2:
        raise g.error(f"the input must have a channel axis (rank >= 2), got rank {x.type.rank}")
    eps = float(attrs.get("epsilon", 1e-5))
    channels = x.type.shape[1]
    for i, what in enumerate(("scale", "B", "input_mean", "input_var"), 1):
        shape = g.input_shape(node, i)
        if list(shape) != [channels]:
            raise g.error(f"{what} has shape {list(shape)}; it must be [{channels}] (one per "
                          "channel)")
    scale_name, var_name = node.input[1], node.input[4]
    if scale_name in g.known and var_name in g.known:
        factor = (g.known[scale_name].astype(np.float64)
                  / np.sqrt(g.known[var_name].astype(np.float64) + eps))
        factor = g.array_value(factor.astype(NUMPY_DTYPE[x.type.dtype]),
                               f"{node.output[0]}_factor")
    else:
        var = _float_param(g, node, 4, x)
        factor = ew(g, "mul", _float_param(g, node, 1, x),
                    ew(g, "rsqrt", ew(g, "add", var, const_like(g, eps, var))))
    rank = x.type.rank
    centered = ew(g, "sub", x, _per_channel(g, _float_param(g, node, 3, x), rank))
    y = ew(g, "mul", centered, _per_channel(g, factor, rank))
    return [ew(g, "add", y, _per_channel(g, _float_param(g, node, 2, x), rank))]


def _instance_norm(g, node, attrs):
    """y = scale * (x - mean) / sqrt(var + epsilon) + B, statistics per (n, c) over the
    spatial axes."""
    x, scale, bias = g.input(node, 0), g.input(node, 1), g.input(node, 2)
    rank = x.type.rank
    if rank < 3:
        raise g.error(f"the input needs spatial axes (rank >= 3), got rank {rank}")
    eps = float(attrs.get("epsilon", 1e-5))
    axes = list(range(2, rank))
    mean = g.emit(T.MeanOp, [x], {"axis": axes, "keepdims": True})
    centered = ew(g, "sub", x, mean)
    var = g.emit(T.MeanOp, [ew(g, "mul", centered, centered)], {"axis": axes, "keepdims": True})
    normalized = ew(g, "mul", centered, ew(g, "rsqrt", ew(g, "add", var, const_like(g, eps, var))))
    y = ew(g, "mul", normalized, _per_channel(g, scale, rank))
    return [ew(g, "add", y, _per_channel(g, bias, rank))]


def _global_pool(reduce_name):
    def convert(g, node, attrs):
        x = g.input(node, 0)
        if x.type.rank < 3:
            raise g.error(f"the input needs spatial axes (rank >= 3), got rank {x.type.rank}")
        return [g.emit(T.REDUCE_OPS[reduce_name], [x],
                       {"axis": list(range(2, x.type.rank)), "keepdims": True})]
    return convert


# -- activations ---------------------------------------------------------------------
def clip(g, x, lo, hi):
    """np.clip: maximum then minimum, each bound optional; nan stays nan; lo > hi
    gives hi everywhere (as ONNX Clip says)."""
    if lo is not None:
        x = ew(g, "maximum", x, lo)
    if hi is not None:
        x = ew(g, "minimum", x, hi)
    return x


def _clip(g, node, attrs):
    x = g.input(node, 0)
    if g.opset < 11:  # bounds were attributes
        lo = const_like(g, attrs["min"], x) if "min" in attrs else None
        hi = const_like(g, attrs["max"], x) if "max" in attrs else None
    else:
        lo, hi = g.input(node, 1, x.type.dtype), g.input(node, 2, x.type.dtype)
    for bound in (lo, hi):
        if bound is not None and bound.type.rank != 0:
            raise g.error(f"min and max must be scalars, got shape {list(bound.type.shape)}")
    return [clip(g, x, lo, hi)]


def hard_sigmoid(g, x, alpha: float, beta: float):
    """max(0, min(1, alpha * x + beta)), as ONNX HardSigmoid."""
    y = ew(g, "add", ew(g, "mul", x, const_like(g, alpha, x)), const_like(g, beta, x))
    return clip(g, y, const_like(g, 0.0, x), const_like(g, 1.0, x))


def _hard_sigmoid(g, node, attrs):
    x = g.input(node, 0)
    return [hard_sigmoid(g, x, attrs.get("alpha", 0.2), attrs.get("beta", 0.5))]


def _hard_swish(g, node, attrs):
    """x * max(0, min(1, x / 6 + 1/2)): ONNX HardSwish is x * HardSigmoid(x) with
    alpha = 1/6 and beta = 0.5."""
    x = g.input(node, 0)
    return [ew(g, "mul", x, hard_sigmoid(g, x, 1 / 6, 0.5))]


def _negative_branch(g, x, negative):
    """where(x < 0, negative, x)."""
    return ew(g, "where", ew(g, "lt", x, const_like(g, 0.0, x)), negative, x)


def _prelu(g, node, attrs):
    x, slope = g.input(node, 0), g.input(node, 1)
    return [_negative_branch(g, x, ew(g, "mul", x, slope))]


def _exp_minus_one(g, x, alpha):
    """alpha * (exp(x) - 1), the negative side of Elu, Selu and Celu (expm1: exact
    near 0, where exp(x) - 1 would cancel)."""
    return ew(g, "mul", const_like(g, alpha, x), ew(g, "expm1", x))


def _elu(g, node, attrs):
    x = g.input(node, 0)
    return [_negative_branch(g, x, _exp_minus_one(g, x, attrs.get("alpha", 1.0)))]


def _selu(g, node, attrs):
    x = g.input(node, 0)
    alpha = attrs.get("alpha", 1.67326319217681884765625)
    gamma = attrs.get("gamma", 1.05070102214813232421875)
    y = ew(g, "where", ew(g, "le", x, const_like(g, 0.0, x)), _exp_minus_one(g, x, alpha), x)
    return [ew(g, "mul", y, const_like(g, gamma, x))]


def _celu(g, node, attrs):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    x = g.input(node, 0)
    alpha = attrs.get("alpha", 1.0)
    scaled = ew(g, "div", x, const_like(g, alpha, x))
    zero = const_like(g, 0.0, x)
    return [ew(g, "add", ew(g, "maximum", x, zero),
               ew(g, "minimum", _exp_minus_one(g, scaled, alpha), zero))]


def _softsign(g, node, attrs):
    x = g.input(node, 0)
    return [ew(g, "div", x, ew(g, "add", ew(g, "abs", x), const_like(g, 1.0, x)))]


def _thresholded_relu(g, node, attrs):
    x = g.input(node, 0)
    above = ew(g, "gt", x, const_like(g, attrs.get("alpha", 1.0), x))
    return [ew(g, "where", above, x, const_like(g, 0.0, x))]


def _mish(g, node, attrs):
    """x * tanh(softplus(x))."""
    x = g.input(node, 0)
    return [ew(g, "mul", x, ew(g, "tanh", ew(g, "softplus", x)))]


# -- index results -------------------------------------------------------------------
def _arg_reduce(op_cls):
    """ArgMax / ArgMin: the dialect's op gives the first extreme's index as i32; ONNX
    wants INT64. select_last_index=1 takes the op on x reversed along the axis (a
    slice with step -1): the last index is size - 1 - the first one found there."""
    def convert(g, node, attrs):
        x = g.input(node, 0)
        axis = norm_axis(g, attrs.get("axis", 0), x.type.rank)
        keepdims = bool(attrs.get("keepdims", 1))
        if not attrs.get("select_last_index", 0):
            index = g.emit(op_cls, [x], {"axis": axis, "keepdims": keepdims})
        else:
            size = x.type.shape[axis]
            if not isinstance(size, int):
                raise g.error(f"select_last_index=1 over symbolic size {size} is not supported")
            reversed_x = slice_value(g, x, axis, size - 1, -1, size) if size > 1 else x
            first = g.emit(op_cls, [reversed_x], {"axis": axis, "keepdims": keepdims})
            index = ew(g, "sub", g.scalar(size - 1, "i32"), first)
        return [g.emit(T.CastOp, [index], {"dtype": "i64"})]
    return convert


def _cumsum(g, node, attrs):
    x = g.input(node, 0)
    axis = static_ints(g, node, 1, "axis")
    if axis is None or len(axis) != 1:
        raise g.error(f"axis must be one integer, got {axis}")
    return [g.emit(CumsumOp, [x], {"axis": norm_axis(g, axis[0], x.type.rank),
                                   "exclusive": bool(attrs.get("exclusive", 0)),
                                   "reverse": bool(attrs.get("reverse", 0))})]


def _sum(g, node, attrs):
    values = [g.input(node, i) for i in range(len(node.input)) if g.has_input(node, i)]
    total = values[0]
    for v in values[1:]:
        total = ew(g, "add", total, v)
    return [total]


def _mean(g, node, attrs):
    (total,) = _sum(g, node, attrs)
    count = sum(1 for i in range(len(node.input)) if g.has_input(node, i))
    if count == 1:
        return [total]
    return [ew(g, "div", total, const_like(g, float(count), total))]


CONVERTERS = {
    "BatchNormalization": _batch_norm, "InstanceNormalization": _instance_norm,
    "GlobalAveragePool": _global_pool("mean"), "GlobalMaxPool": _global_pool("max"),
    "Clip": _clip, "HardSigmoid": _hard_sigmoid, "HardSwish": _hard_swish, "PRelu": _prelu,
    "Elu": _elu, "Selu": _selu, "Celu": _celu, "Softsign": _softsign,
    "ThresholdedRelu": _thresholded_relu, "Mish": _mish, "Sum": _sum, "Mean": _mean,
    "ArgMax": _arg_reduce(ArgmaxOp), "ArgMin": _arg_reduce(ArgminOp), "CumSum": _cumsum,
}
