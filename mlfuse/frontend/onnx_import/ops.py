"""One converter per ONNX operator, dispatched from ``CONVERTERS``.

A converter takes the importer, the node and its attributes, and returns one
entry per output it produces: an IR value, or a NumPy array when the result is
known at import time (Constant, Shape). Semantics follow the ONNX operator
specification (https://onnx.ai/onnx/operators/); anything the tensor dialect
cannot express is an error naming the node, never a silent approximation.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
from onnx import numpy_helper

from mlfuse.dialects import tensor as T
from mlfuse.dialects.shapes import broadcast_shapes, normalize_axes
from mlfuse.ir.core import VerifyError
from mlfuse.ir.types import FLOAT_DTYPES

from mlfuse.frontend.onnx_import.graph import IR_DTYPE, GraphImporter, ir_dtype

E = T.ELEMENTWISE_OPS


# -- small builders ------------------------------------------------------------------
def _ew(g: GraphImporter, name: str, *operands):
    return g.emit(E[name], list(operands))


def _const_like(g, value, like):
    return g.scalar(value, like.type.dtype)


def _reshape(g, v, shape):
    shape = list(shape)
    if list(v.type.shape) == shape:
        return v
    return g.emit(T.ReshapeOp, [v], {"shape": shape})


def _broadcast(g, v, shape):
    shape = list(shape)
    if list(v.type.shape) == shape:
        return v
    return g.emit(T.BroadcastToOp, [v], {"shape": shape})


def _axes(g, axes, rank: int) -> list[int]:
    try:
        return normalize_axes([int(a) for a in axes], rank)
    except VerifyError as e:
        raise g.error(e.message) from None


def _product(g, dims):
    """The size of ``dims`` as one dim: an int, or a single symbol times ones."""
    ints = math.prod(d for d in dims if isinstance(d, int))
    symbols = [d for d in dims if isinstance(d, str)]
    if not symbols:
        return ints
    if len(symbols) == 1 and ints == 1:
        return symbols[0]
    raise g.error(f"cannot merge dims {list(dims)} into one: symbolic sizes only merge "
                  "with ones")


def _axes_input(g, node, attrs, index: int):
    """Axes from the attribute (older opsets) or from input ``index`` (newer ones)."""
    if "axes" in attrs:
        return list(attrs["axes"])
    axes = g.static(node, index, "axes")
    return None if axes is None else [int(a) for a in axes.reshape(-1)]


# -- elementwise ---------------------------------------------------------------------
def _unary(name):
    def convert(g, node, attrs):
        return [_ew(g, name, g.input(node, 0))]
    return convert


def _binary(name):
    def convert(g, node, attrs):
        return [_ew(g, name, g.input(node, 0), g.input(node, 1))]
    return convert


def _pow(g, node, attrs):
    base = g.input(node, 0)
    return [_ew(g, "pow", base, g.input(node, 1, base.type.dtype))]  # ONNX allows mixed types


def _reciprocal(g, node, attrs):
    x = g.input(node, 0)
    return [_ew(g, "div", _const_like(g, 1.0, x), x)]


def _leaky_relu(g, node, attrs):
    x = g.input(node, 0)
    negative = _ew(g, "lt", x, _const_like(g, 0.0, x))
    scaled = _ew(g, "mul", x, _const_like(g, attrs.get("alpha", 0.01), x))
    return [_ew(g, "where", negative, scaled, x)]


def _gelu(g, node, attrs):
    x = g.input(node, 0)
    approximate = attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate == "none":
        return [_ew(g, "gelu", x)]
    if approximate != "tanh":
        raise g.error(f"approximate='{approximate}' is not a Gelu mode")
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    cube = _ew(g, "mul", _ew(g, "mul", x, x), x)
    inner = _ew(g, "add", x, _ew(g, "mul", cube, _const_like(g, 0.044715, x)))
    t = _ew(g, "tanh", _ew(g, "mul", inner, _const_like(g, math.sqrt(2 / math.pi), x)))
    half_x = _ew(g, "mul", x, _const_like(g, 0.5, x))
    return [_ew(g, "mul", half_x, _ew(g, "add", t, _const_like(g, 1.0, x)))]


def _variadic(name):
    def convert(g, node, attrs):
        values = [g.input(node, i) for i in range(len(node.input)) if g.has_input(node, i)]
        result = values[0]
        for v in values[1:]:
            result = _ew(g, name, result, v)
        return [result]
    return convert


def _where(g, node, attrs):
    return [_ew(g, "where", g.input(node, 0), g.input(node, 1), g.input(node, 2))]


def _cast(g, node, attrs):
    to = ir_dtype(attrs["to"], "the target type")
    x = g.input(node, 0)
    return [x if x.type.dtype == to else g.emit(T.CastOp, [x], {"dtype": to})]


# -- reductions and normalizations ---------------------------------------------------
def _reduce(name):
    def convert(g, node, attrs):
        x = g.input(node, 0)
        axes = _axes_input(g, node, attrs, 1)
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.type.rank))
        if not axes:  # rank 0: reducing nothing
            return [x]
        return [g.emit(T.REDUCE_OPS[name], [x], {"axis": _axes(g, axes, x.type.rank),
                                                 "keepdims": bool(attrs.get("keepdims", 1))})]
    return convert


def _softmax(g, node, attrs):
    x = g.input(node, 0)
    if g.opset >= 13:
        (axis,) = _axes(g, [attrs.get("axis", -1)], x.type.rank)
        return [g.emit(T.SoftmaxOp, [x], {"axis": axis})]
    # before opset 13: coerced to 2-D, softmax over everything from axis on
    (axis,) = _axes(g, [attrs.get("axis", 1)], x.type.rank)
    shape = x.type.shape
    flat = _reshape(g, x, [_product(g, shape[:axis]), _product(g, shape[axis:])])
    return [_reshape(g, g.emit(T.SoftmaxOp, [flat], {"axis": 1}), shape)]


def _layer_norm(g, node, attrs):
    x, scale, bias = g.input(node, 0), g.input(node, 1), g.input(node, 2)
    (axis,) = _axes(g, [attrs.get("axis", -1)], x.type.rank)
    eps = float(attrs.get("epsilon", 1e-5))
    stash = IR_DTYPE.get(attrs.get("stash_type", 1))
    if stash is None or stash not in FLOAT_DTYPES:
        raise g.error(f"stash_type {attrs.get('stash_type')} is not a float type")
    norm_shape = x.type.shape[axis:]
    scale = _broadcast(g, scale, norm_shape)
    bias = _broadcast(g, bias if bias is not None else _const_like(g, 0.0, x), norm_shape)
    wants_stats = any(node.output[1:3])
    if not wants_stats and stash == x.type.dtype:
        return [g.emit(T.LayernormOp, [x, scale, bias], {"axis": axis, "eps": eps})]
    # Mean and InvStdDev requested, or statistics in another precision: spelled out
    axes = list(range(axis, x.type.rank))
    xs = x if stash == x.type.dtype else g.emit(T.CastOp, [x], {"dtype": stash})
    mean = g.emit(T.MeanOp, [xs], {"axis": axes, "keepdims": True})
    centered = _ew(g, "sub", xs, mean)
    var = g.emit(T.MeanOp, [_ew(g, "mul", centered, centered)], {"axis": axes, "keepdims": True})
    inv_std = _ew(g, "rsqrt", _ew(g, "add", var, _const_like(g, eps, var)))
    normalized = _ew(g, "mul", centered, inv_std)
    if stash != x.type.dtype:
        normalized = g.emit(T.CastOp, [normalized], {"dtype": x.type.dtype})
    y = _ew(g, "add", _ew(g, "mul", normalized, scale), bias)
    return [y, mean, inv_std]


# -- contractions --------------------------------------------------------------------
def matmul(g, a, b):
    """NumPy matmul (1-D operands, broadcast batch dims) from the dialect's 2-D,
    3-D x 3-D and 3-D x 2-D forms."""
    squeeze = []
    if a.type.rank == 1:
        a = _reshape(g, a, [1, a.type.shape[0]])
        squeeze.append(-2)
    if b.type.rank == 1:
        b = _reshape(g, b, [b.type.shape[0], 1])
        squeeze.append(-1)
    (m, k), (n,) = a.type.shape[-2:], b.type.shape[-1:]
    batch_a, batch_b = a.type.shape[:-2], b.type.shape[:-2]
    try:
        batch = broadcast_shapes(batch_a, batch_b)
    except VerifyError as e:
        raise g.error(f"MatMul batch dims: {e.message}") from None
    if all(d == 1 for d in batch_b):  # b is one matrix: fold a's batch into its rows
        b2 = _reshape(g, b, [k, n])
        a_full = _broadcast(g, a, list(batch) + [m, k])
        if len(batch) <= 1:
            y = g.emit(T.MatmulOp, [a_full, b2])
        else:
            a3 = _reshape(g, a_full, [_product(g, batch), m, k])
            y = g.emit(T.MatmulOp, [a3, b2])
    else:
        a3 = _reshape(g, _broadcast(g, a, list(batch) + [m, k]), [_product(g, batch), m, k])
        b3 = _reshape(g, _broadcast(g, b, list(batch) + [k, n]), [_product(g, batch), k, n])
        y = g.emit(T.MatmulOp, [a3, b3])
    shape = list(batch) + [m, n]
    if -2 in squeeze:  # drop the dims the 1-D operands gained, m first
        del shape[-2]
    if -1 in squeeze:
        del shape[-1]
    return _reshape(g, y, shape)


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
        y = _ew(g, "mul", y, _const_like(g, alpha, y))
    if c is not None:
        if beta != 1.0:
            c = _ew(g, "mul", c, _const_like(g, beta, c))
        y = _ew(g, "add", y, c)
    return [y]


def _conv_padding(g, attrs, x_hw, kernel, strides, dilations) -> list[int]:
    """Symmetric padding per spatial dim; the dialect has no asymmetric padding."""
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad == "VALID":
        return [0, 0]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in zip(x_hw, kernel, strides, dilations):
            if not isinstance(size, int):
                raise g.error("auto_pad SAME over a symbolic size is not supported")
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            if total % 2:
                raise g.error(f"auto_pad {auto_pad} needs asymmetric padding here "
                              f"(total {total}); mlfuse pads both sides equally")
            pads.append(total // 2)
        return pads
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if pads[:2] != pads[2:]:
        raise g.error(f"asymmetric pads {pads} are not supported (mlfuse pads both sides "
                      "equally)")
    return pads[:2]


def _conv(g, node, attrs):
    x, w, bias = g.input(node, 0), g.input(node, 1), g.input(node, 2)
    if x.type.rank != 4:
        raise g.error(f"only 2-D convolution (4-D input) is supported, got rank {x.type.rank}")
    if attrs.get("group", 1) != 1:
        raise g.error(f"group={attrs['group']} is not supported (only group=1)")
    kernel = list(attrs.get("kernel_shape", w.type.shape[2:]))
    if kernel != list(w.type.shape[2:]):
        raise g.error(f"kernel_shape {kernel} differs from the weights' {list(w.type.shape[2:])}")
    strides = list(attrs.get("strides", [1, 1]))
    dilations = list(attrs.get("dilations", [1, 1]))
    padding = _conv_padding(g, attrs, x.type.shape[2:], kernel, strides, dilations)
    y = g.emit(T.Conv2dOp, [x, w], {"stride": strides, "padding": padding,
                                    "dilation": dilations})
    if bias is not None:
        y = _ew(g, "add", y, _reshape(g, bias, [1, bias.type.shape[0], 1, 1]))
    return [y]


# -- shapes and layout ---------------------------------------------------------------
def _transpose(g, node, attrs):
    x = g.input(node, 0)
    perm = list(attrs.get("perm", reversed(range(x.type.rank))))
    return [g.emit(T.TransposeOp, [x], {"perm": perm})]


def _infer_minus_one(g, in_shape, out_shape, where: int):
    """The size of the -1 dim at ``where``: whatever makes the element counts equal."""
    have = Counter(d for d in in_shape if isinstance(d, str))
    have.subtract(d for i, d in enumerate(out_shape) if isinstance(d, str) and i != where)
    ints_in = math.prod(d for d in in_shape if isinstance(d, int))
    ints_out = math.prod(d for i, d in enumerate(out_shape) if isinstance(d, int) and i != where)
    left = [s for s, n in have.items() for _ in range(n)]
    if any(n < 0 for n in have.values()) or ints_out == 0 or ints_in % ints_out:
        raise g.error(f"cannot reshape {list(in_shape)} to {list(out_shape)}")
    ratio = ints_in // ints_out
    if not left:
        return ratio
    if len(left) == 1 and ratio == 1:
        return left[0]
    raise g.error(f"the -1 in reshape to {list(out_shape)} stands for a product of symbolic dims")


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
    return [_reshape(g, x, shape)]


def _unsqueeze(g, node, attrs):
    x = g.input(node, 0)
    axes = _axes_input(g, node, attrs, 1) or []
    out_rank = x.type.rank + len(axes)
    axes = _axes(g, axes, out_rank)
    dims = iter(x.type.shape)
    return [_reshape(g, x, [1 if i in axes else next(dims) for i in range(out_rank)])]


def _squeeze(g, node, attrs):
    x = g.input(node, 0)
    shape = x.type.shape
    axes = _axes_input(g, node, attrs, 1)
    if axes is None:  # every dim of size 1
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = _axes(g, axes, len(shape))
    for a in axes:
        if shape[a] != 1:
            raise g.error(f"cannot squeeze axis {a} of size {shape[a]}")
    return [_reshape(g, x, [d for i, d in enumerate(shape) if i not in axes])]


def _flatten(g, node, attrs):
    x = g.input(node, 0)
    rank = x.type.rank
    axis = attrs.get("axis", 1)
    if not -rank <= axis <= rank:
        raise g.error(f"axis {axis} is out of range for rank {rank}")
    if axis < 0:
        axis += rank
    shape = x.type.shape
    return [_reshape(g, x, [_product(g, shape[:axis]), _product(g, shape[axis:])])]


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
        ("Sin", "sin"), ("Cos", "cos")]},
    **{op: _binary(name) for op, name in [
        ("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div"), ("Equal", "eq"),
        ("Less", "lt"), ("Greater", "gt"), ("LessOrEqual", "le"), ("GreaterOrEqual", "ge")]},
    "Pow": _pow, "Reciprocal": _reciprocal, "LeakyRelu": _leaky_relu, "Gelu": _gelu,
    "Max": _variadic("maximum"), "Min": _variadic("minimum"), "Where": _where, "Cast": _cast,
    "ReduceSum": _reduce("sum"), "ReduceMean": _reduce("mean"), "ReduceMax": _reduce("max"),
    "ReduceMin": _reduce("min"), "Softmax": _softmax, "LayerNormalization": _layer_norm,
    "MatMul": _matmul, "Gemm": _gemm, "Conv": _conv,
    "Transpose": _transpose, "Reshape": _reshape_node, "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze, "Flatten": _flatten, "Identity": _identity, "Constant": _constant,
    "Shape": _shape,
}
