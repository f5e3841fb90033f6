"""One converter per ONNX operator, dispatched from ``CONVERTERS``.

A converter takes the importer, the node and its attributes, and returns one
entry per output it produces: an IR value, or a NumPy array when the result is
known at import time (Constant, Shape). Semantics follow the ONNX operator
specification (https://onnx.ai/onnx/operators/); anything the tensor dialect
cannot express is an error naming the node, never a silent approximation.
"""
from __future__ import annotations

import math

import numpy as np
from onnx import numpy_helper

from mlfuse.dialects import tensor as T
from mlfuse.dialects.shapes import broadcast_shapes
from mlfuse.ir.core import VerifyError
from mlfuse.ir.types import FLOAT_DTYPES, IndivisibleDim, product_dim, quotient_dim

from mlfuse.frontend.onnx_import.builders import (axes_input, broadcast, const_like, ew,
                                                  norm_axes, product, reshape, string_attr)
from mlfuse.frontend.onnx_import.graph import IR_DTYPE, ir_dtype
from mlfuse.frontend.onnx_import.ops_conv import CONVERTERS as CONV_CONVERTERS
from mlfuse.frontend.onnx_import.ops_group_norm import CONVERTERS as GROUP_NORM_CONVERTERS
from mlfuse.frontend.onnx_import.ops_nn import CONVERTERS as NN_CONVERTERS
from mlfuse.frontend.onnx_import.ops_shape import CONVERTERS as SHAPE_CONVERTERS

# -- elementwise ---------------------------------------------------------------------
def _unary(name):
    def convert(g, node, attrs):
        return [ew(g, name, g.input(node, 0))]
    return convert


def _binary(name):
    def convert(g, node, attrs):
        return [ew(g, name, g.input(node, 0), g.input(node, 1))]
    return convert


def _pow(g, node, attrs):
    base = g.input(node, 0)
    return [ew(g, "pow", base, g.input(node, 1, base.type.dtype))]  # ONNX allows mixed types


def _reciprocal(g, node, attrs):
    x = g.input(node, 0)
    return [ew(g, "div", const_like(g, 1.0, x), x)]


def _leaky_relu(g, node, attrs):
    x = g.input(node, 0)
    negative = ew(g, "lt", x, const_like(g, 0.0, x))
    scaled = ew(g, "mul", x, const_like(g, attrs.get("alpha", 0.01), x))
    return [ew(g, "where", negative, scaled, x)]


def _gelu(g, node, attrs):
    x = g.input(node, 0)
    approximate = string_attr(attrs, "approximate", "none")
    if approximate == "none":
        return [ew(g, "gelu", x)]
    if approximate != "tanh":
        raise g.error(f"approximate='{approximate}' is not a Gelu mode")
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    cube = ew(g, "mul", ew(g, "mul", x, x), x)
    inner = ew(g, "add", x, ew(g, "mul", cube, const_like(g, 0.044715, x)))
    t = ew(g, "tanh", ew(g, "mul", inner, const_like(g, math.sqrt(2 / math.pi), x)))
    half_x = ew(g, "mul", x, const_like(g, 0.5, x))
    return [ew(g, "mul", half_x, ew(g, "add", t, const_like(g, 1.0, x)))]


def _variadic(name):
    def convert(g, node, attrs):
        values = [g.input(node, i) for i in range(len(node.input)) if g.has_input(node, i)]
        result = values[0]
        for v in values[1:]:
            result = ew(g, name, result, v)
        return [result]
    return convert


def _where(g, node, attrs):
    return [ew(g, "where", g.input(node, 0), g.input(node, 1), g.input(node, 2))]


def _cast(g, node, attrs):
    to = ir_dtype(attrs["to"], "the target type")
    x = g.input(node, 0)
    return [x if x.type.dtype == to else g.emit(T.CastOp, [x], {"dtype": to})]


# -- reductions and normalizations ---------------------------------------------------
def reduce_axes(g, node, attrs, x):
    """The axes a Reduce* node reduces (normalized), or None when it reduces none:
    empty axes with noop_with_empty_axes, or a rank-0 input."""
    axes = axes_input(g, node, attrs, 1)
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        axes = list(range(x.type.rank))
    return norm_axes(g, axes, x.type.rank) if axes else None


def _reduce(name, before=None, after=None):
    """Reduce* as ``after(reduce(before(x)))``: ReduceL1 = sum of abs, ReduceL2 = sqrt
    of the sum of squares, ... A reduction over no axes (noop_with_empty_axes) still
    applies before and after, as ONNX's reference does (ReduceL2 gives |x|)."""
    def convert(g, node, attrs):
        x = g.input(node, 0)
        axes = reduce_axes(g, node, attrs, x)
        y = before(g, x) if before else x
        if axes is not None:
            y = g.emit(T.REDUCE_OPS[name], [y], {"axis": axes,
                                               "keepdims": bool(attrs.get("keepdims", 1))})
        return [after(g, y) if after else y]
    return convert


def _reduce_log_sum_exp(g, node, attrs):
    """log(sum(exp(x - m))) + m with m the maximum (no overflow); an infinite maximum
    shifts by 0 instead, so all -inf gives -inf and +inf gives +inf, not nan."""
    x = g.input(node, 0)
    axes = reduce_axes(g, node, attrs, x)
    if axes is None:
        return [x]  # log(exp(x)), exactly
    peak = g.emit(T.REDUCE_OPS["max"], [x], {"axis": axes, "keepdims": True})
    infinite = ew(g, "eq", ew(g, "abs", peak), const_like(g, math.inf, peak))
    shift = ew(g, "where", infinite, const_like(g, 0.0, peak), peak)
    total = g.emit(T.REDUCE_OPS["sum"], [ew(g, "exp", ew(g, "sub", x, shift))],
                   {"axis": axes, "keepdims": True})
    y = ew(g, "add", ew(g, "log", total), shift)
    if not attrs.get("keepdims", 1):
        y = reshape(g, y, [d for i, d in enumerate(x.type.shape) if i not in axes])
    return [y]


def _softmax(g, node, attrs):
    x = g.input(node, 0)
    if g.opset >= 13:
        (axis,) = norm_axes(g, [attrs.get("axis", -1)], x.type.rank)
        return [g.emit(T.SoftmaxOp, [x], {"axis": axis})]
    # before opset 13: coerced to 2-D, softmax over everything from axis on
    (axis,) = norm_axes(g, [attrs.get("axis", 1)], x.type.rank)
    shape = x.type.shape
    flat = reshape(g, x, [product(g, shape[:axis]), product(g, shape[axis:])])
    return [reshape(g, g.emit(T.SoftmaxOp, [flat], {"axis": 1}), shape)]


def _layer_norm(g, node, attrs):
    x, scale, bias = g.input(node, 0), g.input(node, 1), g.input(node, 2)
    (axis,) = norm_axes(g, [attrs.get("axis", -1)], x.type.rank)
    eps = float(attrs.get("epsilon", 1e-5))
    stash = IR_DTYPE.get(attrs.get("stash_type", 1))
    if stash is None or stash not in FLOAT_DTYPES:
        raise g.error(f"stash_type {attrs.get('stash_type')} is not a float type")
    norm_shape = x.type.shape[axis:]
    scale = broadcast(g, scale, norm_shape)
    bias = broadcast(g, bias if bias is not None else const_like(g, 0.0, x), norm_shape)
    wants_stats = any(node.output[1:3])
    if not wants_stats and stash == x.type.dtype:
        return [g.emit(T.LayernormOp, [x, scale, bias], {"axis": axis, "eps": eps})]
    # Mean and InvStdDev requested, or statistics in another precision: spelled out
    axes = list(range(axis, x.type.rank))
    xs = x if stash == x.type.dtype else g.emit(T.CastOp, [x], {"dtype": stash})
    mean = g.emit(T.MeanOp, [xs], {"axis": axes, "keepdims": True})
    centered = ew(g, "sub", xs, mean)
    var = g.emit(T.MeanOp, [ew(g, "mul", centered, centered)], {"axis": axes, "keepdims": True})
    inv_std = ew(g, "rsqrt", ew(g, "add", var, const_like(g, eps, var)))
    normalized = ew(g, "mul", centered, inv_std)
    if stash != x.type.dtype:
        normalized = g.emit(T.CastOp, [normalized], {"dtype": x.type.dtype})
    y = ew(g, "add", ew(g, "mul", normalized, scale), bias)
    return [y, mean, inv_std]


# -- contractions --------------------------------------------------------------------
def matmul(g, a, b):
    """NumPy matmul (1-D operands, broadcast batch dims) from the dialect's 2-D,
    3-D x 3-D and 3-D x 2-D forms."""
    squeeze = []
    if a.type.rank == 1:
        a = reshape(g, a, [1, a.type.shape[0]])
        squeeze.append(-2)
    if b.type.rank == 1:
        b = reshape(g, b, [b.type.shape[0], 1])
        squeeze.append(-1)
    (m, k), (n,) = a.type.shape[-2:], b.type.shape[-1:]
    batch_a, batch_b = a.type.shape[:-2], b.type.shape[:-2]
    try:
        batch = broadcast_shapes(batch_a, batch_b)
    except VerifyError as e:
        raise g.error(f"MatMul batch dims: {e.message}") from None
    if all(d == 1 for d in batch_b):  # b is one matrix: fold a's batch into its rows
        b2 = reshape(g, b, [k, n])
        a_full = broadcast(g, a, list(batch) + [m, k])
        if len(batch) <= 1:
            y = g.emit(T.MatmulOp, [a_full, b2])
        else:
            a3 = reshape(g, a_full, [product(g, batch), m, k])
            y = g.emit(T.MatmulOp, [a3, b2])
    else:
        a3 = reshape(g, broadcast(g, a, list(batch) + [m, k]), [product(g, batch), m, k])
        b3 = reshape(g, broadcast(g, b, list(batch) + [k, n]), [product(g, batch), k, n])
        y = g.emit(T.MatmulOp, [a3, b3])
    shape = list(batch) + [m, n]
    if -2 in squeeze:  # drop the dims the 1-D operands gained, m first
        del shape[-2]
    if -1 in squeeze:
        del shape[-1]
    return reshape(g, y, shape)


def _matmul(g, node, attrs):
    return [matmul(g, g.input(node, 0), g.input(node, 1))]


def _gemm(g, node, attrs):
    a, b, c = g.input(node, 0), g.input(node, 1), g.input(node, 2)
    if attrs.get("transA", 0):
        a = g.emit(T.TransposeOp, [a], {"perm": [1, 0]})
    if attrs.get("transB", 0):
        b = g.emit(T.TransposeOp, [b], {"perm": [1, 0]})
    y = g.emit(T.MatmulOp, [a, b])
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = ew(g, "mul", y, const_like(g, alpha, y))
    if c is not None:
        if beta != 1.0:
            c = ew(g, "mul", c, const_like(g, beta, c))
        y = ew(g, "add", y, c)
    return [y]


# -- shapes and layout ---------------------------------------------------------------
def _transpose(g, node, attrs):
    x = g.input(node, 0)
    perm = list(attrs.get("perm", reversed(range(x.type.rank))))
    return [g.emit(T.TransposeOp, [x], {"perm": perm})]


def _infer_minus_one(g, in_shape, out_shape, where: int):
    """The size of the -1 dim at ``where``: whatever makes the element counts equal (a
    quotient of symbolic sizes too, [N, G, -1] of [N, C, H, W]: C*H*W/G, checked when
    the model is called)."""
    others = [d for i, d in enumerate(out_shape) if i != where]
    try:
        return quotient_dim(product_dim(in_shape), product_dim(others))
    except IndivisibleDim:
        raise g.error(f"cannot reshape {list(in_shape)} to {list(out_shape)}") from None


def _reshape_node(g, node, attrs):
    x = g.input(node, 0)
    target = [int(d) for d in g.static(node, 1, "the shape").reshape(-1)]
    shape = []
    for i, d in enumerate(target):
        if d == 0 and not attrs.get("allowzero", 0):
            if i >= x.type.rank:
                raise g.error(f"shape {target}: dim {i} copies a dim the input lacks")
            shape.append(x.type.shape[i])
        elif d == 0 or d < -1:
            raise g.error(f"shape {target} has a dim of size {d}; mlfuse needs positive sizes")
        else:
            shape.append(d)
    if -1 in shape:
        shape[shape.index(-1)] = _infer_minus_one(g, x.type.shape, shape, shape.index(-1))
    return [reshape(g, x, shape)]


def _unsqueeze(g, node, attrs):
    x = g.input(node, 0)
    axes = axes_input(g, node, attrs, 1) or []
    out_rank = x.type.rank + len(axes)
    axes = norm_axes(g, axes, out_rank)
    dims = iter(x.type.shape)
    return [reshape(g, x, [1 if i in axes else next(dims) for i in range(out_rank)])]


def _squeeze(g, node, attrs):
    x = g.input(node, 0)
    shape = x.type.shape
    axes = axes_input(g, node, attrs, 1)
    if axes is None:  # every dim of size 1
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = norm_axes(g, axes, len(shape))
    for a in axes:
        if shape[a] != 1:
            raise g.error(f"cannot squeeze axis {a} of size {shape[a]}")
    return [reshape(g, x, [d for i, d in enumerate(shape) if i not in axes])]


def _flatten(g, node, attrs):
    x = g.input(node, 0)
    rank = x.type.rank
    axis = attrs.get("axis", 1)
    if not -rank <= axis <= rank:
        raise g.error(f"axis {axis} is out of range for rank {rank}")
    if axis < 0:
        axis += rank
    shape = x.type.shape
    return [reshape(g, x, [product(g, shape[:axis]), product(g, shape[axis:])])]


def _identity(g, node, attrs):
    return [g.input(node, 0)]


def _constant(g, node, attrs):
    if "value" in attrs:
        return [numpy_helper.to_array(attrs["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return [np.asarray(attrs[key], dtype=dtype)]
    raise g.error(f"attribute {', '.join(attrs) or '(none)'} is not supported (tensor, "
                  "float(s) and int(s) values are)")


def _shape(g, node, attrs):
    shape = g.input(node, 0).type.shape
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    dims = list(shape)[start:end]
    if any(isinstance(d, str) for d in dims):
        raise g.error(f"the shape {list(shape)} is symbolic; mlfuse folds only concrete shapes")
    return [np.asarray(dims, dtype=np.int64)]


CONVERTERS = {
    **{op: _unary(name) for op, name in [
        ("Neg", "neg"), ("Abs", "abs"), ("Exp", "exp"), ("Log", "log"), ("Sqrt", "sqrt"),
        ("Tanh", "tanh"), ("Sigmoid", "sigmoid"), ("Relu", "relu"), ("Erf", "erf"),
        ("Sin", "sin"), ("Cos", "cos"), ("Floor", "floor"), ("Ceil", "ceil"),
        ("Round", "round"), ("Softplus", "softplus"), ("Not", "logical_not")]},
    **{op: _binary(name) for op, name in [
        ("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div"), ("Equal", "eq"),
        ("Less", "lt"), ("Greater", "gt"), ("LessOrEqual", "le"), ("GreaterOrEqual", "ge"),
        ("And", "logical_and"), ("Or", "logical_or"), ("Xor", "ne")]},
    "Pow": _pow, "Reciprocal": _reciprocal, "LeakyRelu": _leaky_relu, "Gelu": _gelu,
    "Max": _variadic("maximum"), "Min": _variadic("minimum"), "Where": _where, "Cast": _cast,
    "ReduceSum": _reduce("sum"), "ReduceMean": _reduce("mean"), "ReduceMax": _reduce("max"),
    "ReduceMin": _reduce("min"),
    "ReduceL1": _reduce("sum", lambda g, x: ew(g, "abs", x)),
    "ReduceL2": _reduce("sum", lambda g, x: ew(g, "mul", x, x), lambda g, y: ew(g, "sqrt", y)),
    "ReduceSumSquare": _reduce("sum", lambda g, x: ew(g, "mul", x, x)),
    "ReduceLogSum": _reduce("sum", after=lambda g, y: ew(g, "log", y)),
    "ReduceLogSumExp": _reduce_log_sum_exp, "Softmax": _softmax, "LayerNormalization": _layer_norm,
    "MatMul": _matmul, "Gemm": _gemm,
    "Transpose": _transpose, "Reshape": _reshape_node, "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze, "Flatten": _flatten, "Identity": _identity, "Constant": _constant,
    "Shape": _shape,
    **CONV_CONVERTERS, **NN_CONVERTERS, **SHAPE_CONVERTERS, **GROUP_NORM_CONVERTERS,
}
