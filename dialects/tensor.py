"""The tensor dialect: whole-array values with NumPy semantics, what the frontend builds.

Elementwise ops come from the shared table in ``dialects.elementwise``; the rest are
declared here, each with its attributes, shape inference and fusion kind.
Composite ops (softmax, layernorm, rmsnorm) exist only until the ``decompose`` pass.
"""
from __future__ import annotations

from mlfuse.ir.core import (BROADCAST, ELEMENTWISE, INJECTIVE, OPAQUE, OUT_ELEMENTWISE_FUSABLE,
                            REDUCTION, Attr, Operation, VerifyError)
from mlfuse.ir.registry import Dialect
from mlfuse.ir.traits import COMPOSITE, PURE
from mlfuse.ir.types import DTYPES, FLOAT_DTYPES, INT_DTYPES, TensorType

from mlfuse.dialects.elementwise import ELEMENTWISE as ELEMENTWISE_SPECS
from mlfuse.dialects.elementwise import check_dtypes
from mlfuse.dialects.shapes import (broadcast_shapes, conv_out_dim, fmt_shape, normalize_axes, reduced_shape,
                     same_size)

DIALECT = Dialect("tensor", __doc__)


def _tensors(op_name, types) -> list[TensorType]:
    for t in types:
        if not isinstance(t, TensorType):
            raise VerifyError(f"{op_name} takes tensors, got {t}")
    return types


def _float(op_name, t: TensorType, what="operand"):
    if t.dtype not in FLOAT_DTYPES:
        raise VerifyError(f"{op_name} needs a float {what}, got {t.dtype}")


class TensorOp(Operation):
    """Base of tensor ops: results are inferred from operands and attributes; values,
    never memory, so every tensor op is pure."""

    traits = frozenset({PURE})


class CompositeOp(TensorOp):
    """A tensor op the decompose pass rewrites into primitives before lowering."""

    fusion = OPAQUE
    traits = frozenset({PURE, COMPOSITE})


class ElementwiseOp(TensorOp):
    fusion = ELEMENTWISE
    spec = None  # the ElementwiseSpec, set per generated class

    @classmethod
    def infer_types(cls, types, attributes):
        _tensors(cls.name, types)
        try:
            dtype = check_dtypes(cls.spec, [t.dtype for t in types])
        except ValueError as e:
            raise VerifyError(str(e)) from None
        return [TensorType(dtype, broadcast_shapes(*(t.shape for t in types)))]


def _make_elementwise(spec):
    names = {1: ("x",), 2: ("x", "y"), 3: ("cond", "x", "y")}[spec.arity]
    cls = type(f"{spec.name.capitalize()}Op", (ElementwiseOp,), {
        "name": f"tensor.{spec.name}", "operand_names": names, "spec": spec, "doc": spec.doc})
    return DIALECT.op(cls)


ELEMENTWISE_OPS = {name: _make_elementwise(spec) for name, spec in ELEMENTWISE_SPECS.items()}


@DIALECT.op
class ConstantOp(TensorOp):
    name = "tensor.constant"
    attrs = {"value": Attr("float")}
    fusion = ELEMENTWISE
    doc = "A rank-0 constant; its dtype is the result type's (literals take their partner's dtype)."

    def verify_op(self):
        t = self.result.type
        if not isinstance(t, TensorType) or t.rank != 0:
            raise VerifyError(f"tensor.constant yields a rank-0 tensor, got {t}", self.loc)
        v = self["value"]
        if t.dtype in INT_DTYPES + ("bool",) and float(v) != int(v):
            raise VerifyError(f"constant {v} is not a whole number for {t.dtype}", self.loc)


@DIALECT.op
class CastOp(TensorOp):
    name = "tensor.cast"
    operand_names = ("x",)
    attrs = {"dtype": Attr("str")}
    fusion = ELEMENTWISE
    doc = "Convert to another dtype (NumPy astype)."

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        if attributes.get("dtype") not in DTYPES:
            raise VerifyError(f"cast to unknown dtype {attributes.get('dtype')!r}")
        return [t.with_dtype(attributes["dtype"])]


class ReduceOp(TensorOp):
    operand_names = ("x",)
    attrs = {"axis": Attr("ints", doc="axes reduced (sorted, non-negative)"),
             "keepdims": Attr("bool", False)}
    fusion = REDUCTION
    combiner = "add"  # how partial results combine
    float_only = False  # mean divides by the count

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        if t.dtype == "bool":
            raise VerifyError(f"{cls.name} does not reduce bool tensors")
        if cls.float_only:
            _float(cls.name, t)
        axes = attributes.get("axis", [])
        if axes != normalize_axes(axes, t.rank):
            raise VerifyError(f"{cls.name} axis {axes} must be sorted, unique, non-negative "
                              f"and below rank {t.rank}")
        if not axes:
            raise VerifyError(f"{cls.name} needs at least one axis")
        return [t.with_shape(reduced_shape(t.shape, axes, attributes.get("keepdims", False)))]


def _reduction(op, combiner, doc, float_only=False):
    cls = type(f"{op.capitalize()}Op", (ReduceOp,),
               {"name": f"tensor.{op}", "combiner": combiner, "doc": doc, "float_only": float_only})
    return DIALECT.op(cls)


SumOp = _reduction("sum", "add", "Sum over axes (NumPy sum).")
MaxOp = _reduction("max", "max", "Maximum over axes; nan if any element is nan (NumPy max).")
MinOp = _reduction("min", "min", "Minimum over axes; nan if any element is nan (NumPy min).")
MeanOp = _reduction("mean", "add", "Mean over axes (sum / count).", float_only=True)
REDUCE_OPS = {"sum": SumOp, "max": MaxOp, "min": MinOp, "mean": MeanOp}


@DIALECT.op
class ReshapeOp(TensorOp):
    name = "tensor.reshape"
    operand_names = ("x",)
    attrs = {"shape": Attr("dims")}
    fusion = INJECTIVE
    doc = "Same elements in row-major order, new shape; the element count must match."

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        shape = tuple(attributes["shape"])
        if any(isinstance(d, int) and d < 1 for d in shape):
            raise VerifyError(f"reshape sizes must be positive, got {fmt_shape(shape)}")
        if not same_size(t.shape, shape):
            raise VerifyError(f"cannot reshape {fmt_shape(t.shape)} to {fmt_shape(shape)}: "
                              "element counts differ")
        return [t.with_shape(shape)]


@DIALECT.op
class TransposeOp(TensorOp):
    name = "tensor.transpose"
    operand_names = ("x",)
    attrs = {"perm": Attr("ints")}
    fusion = INJECTIVE
    doc = "Permute axes: result dim i is input dim perm[i] (NumPy transpose)."

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        perm = attributes["perm"]
        if sorted(perm) != list(range(t.rank)):
            raise VerifyError(f"perm {perm} is not a permutation of {t.rank} axes")
        return [t.with_shape(t.shape[p] for p in perm)]


@DIALECT.op
class BroadcastToOp(TensorOp):
    name = "tensor.broadcast_to"
    operand_names = ("x",)
    attrs = {"shape": Attr("dims")}
    fusion = BROADCAST
    doc = "Repeat along size-1 or missing leading dims (NumPy broadcast_to)."

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        shape = tuple(attributes["shape"])
        if len(shape) < t.rank or broadcast_shapes(t.shape, shape) != shape:
            raise VerifyError(f"cannot broadcast {fmt_shape(t.shape)} to {fmt_shape(shape)}")
        return [t.with_shape(shape)]


@DIALECT.op
class MatmulOp(TensorOp):
    name = "tensor.matmul"
    operand_names = ("a", "b")
    fusion = OUT_ELEMENTWISE_FUSABLE
    doc = "[M,K]x[K,N], [B,M,K]x[B,K,N] or [B,M,K]x[K,N] (NumPy matmul)."

    @classmethod
    def infer_types(cls, types, attributes):
        a, b = _tensors(cls.name, types)
        if a.dtype != b.dtype:
            raise VerifyError(f"matmul operands have different dtypes ({a.dtype}, {b.dtype})")
        if a.dtype == "bool":
            raise VerifyError("matmul does not take bool tensors")
        ok = (a.rank, b.rank) in ((2, 2), (3, 3), (3, 2))
        if not ok:
            raise VerifyError(f"matmul takes 2-D or batched 3-D operands, got "
                              f"{fmt_shape(a.shape)} and {fmt_shape(b.shape)}")
        if a.shape[-1] != b.shape[-2]:
            raise VerifyError(f"matmul inner dims differ: {fmt_shape(a.shape)} x {fmt_shape(b.shape)}")
        if a.rank == 3 and b.rank == 3 and a.shape[0] != b.shape[0]:
            raise VerifyError(f"matmul batch dims differ: {a.shape[0]} vs {b.shape[0]}")
        return [TensorType(a.dtype, a.shape[:-1] + (b.shape[-1],))]


@DIALECT.op
class Conv2dOp(TensorOp):
    name = "tensor.conv2d"
    operand_names = ("x", "w")
    attrs = {"stride": Attr("ints", [1, 1]), "padding": Attr("ints", [0, 0]),
             "dilation": Attr("ints", [1, 1]), "groups": Attr("int", 1)}
    fusion = OUT_ELEMENTWISE_FUSABLE
    doc = ("2-D cross-correlation, x NCHW, w OIHW, zero padding (as torch.nn.functional.conv2d); "
           "with groups g, w is [O, C/g, KH, KW] and output channel o reads the input channels "
           "of group o // (O/g) (depthwise: g = C).")

    @classmethod
    def infer_types(cls, types, attributes):
        x, w = _tensors(cls.name, types)
        if x.rank != 4 or w.rank != 4:
            raise VerifyError(f"conv2d takes NCHW input and OIHW weights, got "
                              f"{fmt_shape(x.shape)} and {fmt_shape(w.shape)}")
        if x.dtype != w.dtype or x.dtype not in FLOAT_DTYPES:
            raise VerifyError(f"conv2d needs float operands of one dtype, got {x.dtype}, {w.dtype}")
        _check_groups(x.shape[1], w.shape[0], w.shape[1], attributes.get("groups", 1))
        if isinstance(w.shape[2], str) or isinstance(w.shape[3], str):
            raise VerifyError("conv2d kernel sizes must be concrete")
        for key in ("stride", "padding", "dilation"):
            v = attributes.get(key, cls.attrs[key].default)
            if len(v) != 2 or any(k < (0 if key == "padding" else 1) for k in v):
                raise VerifyError(f"conv2d {key} must be two {'non-negative' if key == 'padding' else 'positive'} ints, got {v}")
        s, p, d = (attributes.get(k, cls.attrs[k].default) for k in ("stride", "padding", "dilation"))
        oh = conv_out_dim(x.shape[2], w.shape[2], s[0], p[0], d[0])
        ow = conv_out_dim(x.shape[3], w.shape[3], s[1], p[1], d[1])
        return [TensorType(x.dtype, (x.shape[0], w.shape[0], oh, ow))]


def _check_groups(channels, out_channels, per_group, groups) -> None:
    """x's C channels split into ``groups`` groups of w's ``per_group``; so do the
    O output channels. Groups need the channel counts concrete."""
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise VerifyError(f"conv2d groups must be a positive int, got {groups!r}")
    if groups == 1:
        if channels != per_group:
            raise VerifyError(f"conv2d channels differ: input {channels}, weights {per_group}")
        return
    if not all(isinstance(d, int) for d in (channels, out_channels, per_group)):
        raise VerifyError(f"conv2d with groups={groups} needs concrete channel counts, got "
                          f"input {channels}, weights [{out_channels}, {per_group}, ...]")
    if channels % groups or out_channels % groups:
        raise VerifyError(f"conv2d groups={groups} must divide the input channels ({channels}) "
                          f"and the output channels ({out_channels})")
    if per_group != channels // groups:
        raise VerifyError(f"conv2d weights must have {channels // groups} input channels per "
                          f"group ({channels} channels / groups={groups}), got {per_group}")


# -- composites: rewritten into the ops above by the decompose pass ---------------
@DIALECT.op
class SoftmaxOp(CompositeOp):
    name = "tensor.softmax"
    operand_names = ("x",)
    attrs = {"axis": Attr("int", -1)}
    doc = "exp(x - max(x)) / sum(exp(x - max(x))) along axis."

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        _float(cls.name, t)
        normalize_axes(attributes.get("axis", -1), t.rank)
        return [t]


@DIALECT.op
class LayernormOp(CompositeOp):
    name = "tensor.layernorm"
    operand_names = ("x", "gamma", "beta")
    attrs = {"axis": Attr("int", -1), "eps": Attr("float", 1e-5)}
    doc = ("(x - mean) / sqrt(var + eps) * gamma + beta, statistics over dims axis..last; "
           "gamma and beta have shape x.shape[axis:].")

    @classmethod
    def infer_types(cls, types, attributes):
        x, g, b = _tensors(cls.name, types)
        _float(cls.name, x)
        (axis,) = normalize_axes(attributes.get("axis", -1), x.rank)
        norm_shape = x.shape[axis:]
        for name, t in (("gamma", g), ("beta", b)):
            if t.shape != norm_shape or t.dtype != x.dtype:
                raise VerifyError(f"layernorm {name} must be {x.dtype}{fmt_shape(norm_shape)}, got {t}")
        return [x]


@DIALECT.op
class RmsnormOp(CompositeOp):
    name = "tensor.rmsnorm"
    operand_names = ("x", "gamma")
    attrs = {"eps": Attr("float", 1e-6)}
    doc = "x / sqrt(mean(x*x over the last dim) + eps) * gamma; gamma has shape [last dim]."

    @classmethod
    def infer_types(cls, types, attributes):
        x, g = _tensors(cls.name, types)
        _float(cls.name, x)
        if x.rank < 1 or g.shape != x.shape[-1:] or g.dtype != x.dtype:
            raise VerifyError(f"rmsnorm gamma must be {x.dtype}{fmt_shape(x.shape[-1:])}, got {g}")
        return [x]
