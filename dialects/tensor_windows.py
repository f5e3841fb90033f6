"""Windowed ops of the tensor dialect: 2-D pooling, arg-reductions, cumulative sums, and
the runtime size of a dim as a value.

They are declared on the tensor dialect (``tensor.DIALECT``) from this module, which
``dialects/__init__.py`` imports. Their NumPy semantics are in
``mlfuse/interp/tensor_windows.py``, their lowering in
``mlfuse/transforms/lower_windows.py``, and ``conv2d``'s ``groups`` (declared with
conv2d) shares the pooling window's shape rule here.

Pooling follows torch.nn.functional (NCHW; padding symmetric per spatial dim):

- output size ``(H + 2p - d*(k-1) - 1 + (s-1 if ceil_mode)) // s + 1``; with ceil_mode a
  last window that would start past the input and its left padding is dropped;
- padding at most half the (dilated) kernel, so every window holds an input element;
- max: padded taps never win; avg: the sum divided by the window's taps inside the
  input (count_include_pad false) or inside the padded input (true; taps past the
  right padding, which only ceil_mode makes, never count).
"""
from __future__ import annotations

from mlfuse.ir.builtin import FuncOp
from mlfuse.ir.core import ELEMENTWISE, OUT_ELEMENTWISE_FUSABLE, REDUCTION, Attr, VerifyError
from mlfuse.ir.types import TensorType

from mlfuse.dialects.shapes import fmt_shape, reduced_shape, window_out_dim
from mlfuse.dialects.tensor import DIALECT, TensorOp, _float, _tensors


def pair_attr(name: str, attributes: dict, key: str, default, low: int) -> list[int]:
    """Attribute ``key`` as two ints of at least ``low`` (one per spatial dim)."""
    v = attributes.get(key, default)
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(k, int) for k in v)
            and min(v) >= low):
        kind = "positive" if low else "non-negative"
        raise VerifyError(f"{name} {key} must be two {kind} ints, got {v}")
    return v


class Pool2dOp(TensorOp):
    """Max or average over each (strided, padded) window of the last two dims of NCHW x."""

    operand_names = ("x",)
    fusion = OUT_ELEMENTWISE_FUSABLE
    has_dilation = True

    @classmethod
    def infer_types(cls, types, attributes):
        (x,) = _tensors(cls.name, types)
        if x.rank != 4:
            raise VerifyError(f"{cls.name} takes an NCHW input, got {fmt_shape(x.shape)}")
        _float(cls.name, x)
        kernel = pair_attr(cls.name, attributes, "kernel", None, 1)
        stride = pair_attr(cls.name, attributes, "stride", None, 1)
        pads = pair_attr(cls.name, attributes, "padding", [0, 0], 0)
        dilation = pair_attr(cls.name, attributes, "dilation", [1, 1], 1) \
            if cls.has_dilation else [1, 1]
        ceil_mode = attributes.get("ceil_mode", False)
        out = []
        for axis in range(2):
            span = dilation[axis] * (kernel[axis] - 1) + 1
            if 2 * pads[axis] > span:
                raise VerifyError(f"{cls.name} padding {pads[axis]} is more than half the "
                                  f"window {span}: a window could hold only padding")
            out.append(window_out_dim(cls.name, x.shape[2 + axis], kernel[axis], stride[axis],
                                      pads[axis], dilation[axis], ceil_mode))
        return [x.with_shape(x.shape[:2] + tuple(out))]


@DIALECT.op
class MaxPool2dOp(Pool2dOp):
    name = "tensor.max_pool2d"
    attrs = {"kernel": Attr("ints"), "stride": Attr("ints"), "padding": Attr("ints", [0, 0]),
             "dilation": Attr("ints", [1, 1]), "ceil_mode": Attr("bool", False)}
    doc = ("Maximum over each window of the last two dims (NCHW, torch's max_pool2d): "
           "padded taps never win; nan if the window holds one.")


@DIALECT.op
class AvgPool2dOp(Pool2dOp):
    name = "tensor.avg_pool2d"
    attrs = {"kernel": Attr("ints"), "stride": Attr("ints"), "padding": Attr("ints", [0, 0]),
             "ceil_mode": Attr("bool", False), "count_include_pad": Attr("bool", True)}
    has_dilation = False
    doc = ("Mean over each window of the last two dims (NCHW, torch's avg_pool2d): padding "
           "counts as zeros in the divisor with count_include_pad, else only input taps do.")


def _one_axis(op_name: str, x: TensorType, attributes: dict) -> int:
    axis = attributes.get("axis")
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < x.rank:
        raise VerifyError(f"{op_name} axis must be one non-negative axis below rank {x.rank}, "
                          f"got {axis}")
    return axis


class ArgReduceOp(TensorOp):
    """The index of the first extreme along one axis, as i32."""

    operand_names = ("x",)
    attrs = {"axis": Attr("int"), "keepdims": Attr("bool", False)}
    fusion = REDUCTION
    combiner = "max"

    @classmethod
    def infer_types(cls, types, attributes):
        (x,) = _tensors(cls.name, types)
        if x.dtype == "bool":
            raise VerifyError(f"{cls.name} does not take bool tensors (cast to i32 first)")
        axis = _one_axis(cls.name, x, attributes)
        return [TensorType("i32", reduced_shape(x.shape, [axis], attributes.get("keepdims", False)))]


@DIALECT.op
class ArgmaxOp(ArgReduceOp):
    name = "tensor.argmax"
    doc = "Index (i32) of the first maximum along axis; of the first nan if any (NumPy argmax)."


@DIALECT.op
class ArgminOp(ArgReduceOp):
    name = "tensor.argmin"
    combiner = "min"
    doc = "Index (i32) of the first minimum along axis; of the first nan if any (NumPy argmin)."


@DIALECT.op
class CumsumOp(TensorOp):
    name = "tensor.cumsum"
    operand_names = ("x",)
    attrs = {"axis": Attr("int"), "exclusive": Attr("bool", False), "reverse": Attr("bool", False)}
    fusion = OUT_ELEMENTWISE_FUSABLE
    doc = ("Running sum along axis (ONNX CumSum): exclusive leaves the element itself out, "
           "reverse sums from the end.")

    @classmethod
    def infer_types(cls, types, attributes):
        (x,) = _tensors(cls.name, types)
        if x.dtype == "bool":
            raise VerifyError("tensor.cumsum does not sum bool tensors")
        _one_axis(cls.name, x, attributes)
        return [x]


@DIALECT.op
class DimSizeOp(TensorOp):
    name = "tensor.dim_size"
    attrs = {"sym": Attr("dim", doc="a symbolic dim of the function's parameters")}
    fusion = ELEMENTWISE
    doc = "The size bound to a symbolic dim at call time, as a rank-0 number of the result dtype."

    def verify_op(self):
        t = self.result.type
        if not isinstance(t, TensorType) or t.rank != 0 or t.dtype == "bool":
            raise VerifyError(f"tensor.dim_size yields a rank-0 number, got {t}", self.loc)
        if not isinstance(self["sym"], str):
            raise VerifyError(f"tensor.dim_size needs a symbolic dim, got {self['sym']}", self.loc)
        func = self._function()
        if func is not None and self["sym"] not in {d for a in func.args for d in a.type.shape}:
            raise VerifyError(f"tensor.dim_size: {self['sym']} is not a dim of the function's "
                              "parameters", self.loc)

    def _function(self):
        """The enclosing function (None while the op is not in one yet)."""
        for op in self.ancestors():
            if isinstance(op, FuncOp):
                return op
        return None

