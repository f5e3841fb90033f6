"""Index-map ops of the tensor dialect: slice, concat, pad, gather, iota.

Each computes an output element from at most one input element per operand at an
index it derives from the output index (data-dependent for gather), so each lowers
to one loop nest of loads and index arithmetic and fuses like reshape and transpose
(INJECTIVE; iota reads nothing and is ELEMENTWISE). Declared on ``tensor.DIALECT``;
``mlfuse.dialects`` imports this module, so the ops are part of every registry.
Attributes hold normalized values (non-negative axes, resolved sizes): the .fuse
builtins and the ONNX converters normalize before they build an op.
"""
from __future__ import annotations

from mlfuse.ir.core import ELEMENTWISE, INJECTIVE, Attr, VerifyError
from mlfuse.ir.types import DTYPES, FLOAT_DTYPES, INT_DTYPES, TensorType, itemsize

from mlfuse.dialects.shapes import dim_sum, fmt_shape
from mlfuse.dialects.tensor import DIALECT, TensorOp, _tensors

INDEX_DTYPES = INT_DTYPES  # what gather's indices may be


def gather_fill(dtype: str) -> float:
    """What gather yields for an index outside [-size, size): as jax.numpy.take's default
    mode="fill", nan for floats, the most negative integer for ints, true for bool. A
    kernel cannot raise, and a clamped index would read a plausible element; these make
    the mistake visible instead."""
    if dtype in FLOAT_DTYPES:
        return float("nan")
    if dtype == "bool":
        return 1.0
    return float(-2 ** (8 * itemsize(dtype) - 1))


def _axis(name: str, axis, rank: int) -> int:
    if not isinstance(axis, int) or not 0 <= axis < max(rank, 1) or rank == 0:
        raise VerifyError(f"{name} axis {axis} must be in [0, {rank}) (normalized)")
    return axis


def _per_axis(name: str, key: str, values, rank: int) -> list:
    values = list(values)
    if len(values) != rank:
        raise VerifyError(f"{name} {key} {values} needs one entry per axis of the rank-{rank} "
                          "operand")
    return values


@DIALECT.op
class SliceOp(TensorOp):
    name = "tensor.slice"
    operand_names = ("x",)
    attrs = {"starts": Attr("ints"), "steps": Attr("ints"), "sizes": Attr("dims")}
    fusion = INJECTIVE
    doc = ("out[o0, o1, ...] = x[starts[0] + o0*steps[0], starts[1] + o1*steps[1], ...]: "
           "a strided window, reversed where a step is negative (NumPy basic slicing); "
           "on a symbolic axis start -1 is its last element.")

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        starts = _per_axis(cls.name, "starts", attributes["starts"], t.rank)
        steps = _per_axis(cls.name, "steps", attributes["steps"], t.rank)
        sizes = _per_axis(cls.name, "sizes", attributes["sizes"], t.rank)
        for axis, (size, start, step, count) in enumerate(zip(t.shape, starts, steps, sizes)):
            if step == 0:
                raise VerifyError(f"slice step on axis {axis} is 0")
            if isinstance(size, str) or isinstance(count, str):
                # a symbolic axis is taken whole (forwards from 0 or backwards from its
                # last element, start -1), or its first or last element alone
                whole = count == size and (start, step) in ((0, 1), (-1, -1))
                if not (whole or count == 1 and start in (0, -1)):
                    raise VerifyError(f"slice of symbolic axis {axis} ({size}) must take it "
                                      f"whole or its first or last element, got start {start}, "
                                      f"step {step}, size {count}")
                continue
            last = start + (count - 1) * step
            if count < 1 or not (0 <= start < size and 0 <= last < size):
                raise VerifyError(f"slice on axis {axis} (size {size}) from {start} by {step} "
                                  f"for {count} elements leaves the axis")
        return [t.with_shape(sizes)]


@DIALECT.op
class ConcatOp(TensorOp):
    name = "tensor.concat"
    operand_names = ("*xs",)
    attrs = {"axis": Attr("int")}
    fusion = INJECTIVE
    doc = ("Join tensors of one dtype along axis; every other dim is equal "
           "(NumPy concatenate).")

    @classmethod
    def infer_types(cls, types, attributes):
        ts = _tensors(cls.name, types)
        if not ts:
            raise VerifyError("concat needs at least one tensor")
        first = ts[0]
        axis = _axis(cls.name, attributes["axis"], first.rank)
        for t in ts[1:]:
            if t.dtype != first.dtype:
                raise VerifyError(f"concat operands have different dtypes ({first.dtype}, "
                                  f"{t.dtype})")
            if t.rank != first.rank or any(a != b for k, (a, b) in
                                           enumerate(zip(t.shape, first.shape)) if k != axis):
                raise VerifyError(f"concat along axis {axis}: shapes {fmt_shape(first.shape)} "
                                  f"and {fmt_shape(t.shape)} differ off that axis")
        parts = [t.shape[axis] for t in ts]
        total = dim_sum(parts)
        if total is None:
            raise VerifyError(f"concat along axis {axis} of sizes {', '.join(map(str, parts))}: "
                              "their sum is no dim (a dim is an int or a product of names: "
                              "only multiples of one symbolic size add up)")
        shape = list(first.shape)
        shape[axis] = total
        return [first.with_shape(shape)]


@DIALECT.op
class PadOp(TensorOp):
    name = "tensor.pad"
    operand_names = ("x",)
    attrs = {"low": Attr("ints"), "high": Attr("ints"), "value": Attr("float", 0.0)}
    fusion = INJECTIVE
    doc = ("Constant padding: low[d] elements of value before axis d and high[d] after "
           "(non-negative; NumPy pad, mode constant).")

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _tensors(cls.name, types)
        low = _per_axis(cls.name, "low", attributes["low"], t.rank)
        high = _per_axis(cls.name, "high", attributes["high"], t.rank)
        value = attributes.get("value", 0.0)
        if any(p < 0 for p in low + high):
            raise VerifyError(f"pad widths must be non-negative, got low {low}, high {high}")
        if t.dtype in ("i32", "bool") and value != int(value) or (
                t.dtype == "bool" and value not in (0, 1)):
            raise VerifyError(f"pad value {value} is not a {t.dtype}")
        shape = []
        for axis, (size, lo, hi) in enumerate(zip(t.shape, low, high)):
            total = dim_sum([size, lo + hi]) if lo + hi else size
            if total is None:
                raise VerifyError(f"cannot pad symbolic axis {axis} ({size}): its padded size "
                                  "is no dim")
            shape.append(total)
        return [t.with_shape(shape)]


@DIALECT.op
class GatherOp(TensorOp):
    name = "tensor.gather"
    operand_names = ("x", "indices")
    attrs = {"axis": Attr("int")}
    fusion = INJECTIVE
    doc = ("x's elements at indices along axis (NumPy take): result shape x.shape[:axis] + "
           "indices.shape + x.shape[axis+1:]; negative indices count from the end; an index "
           "outside [-size, size) yields nan (i32: -2**31, bool: true), as jax.numpy.take.")

    @classmethod
    def infer_types(cls, types, attributes):
        x, indices = _tensors(cls.name, types)
        axis = _axis(cls.name, attributes["axis"], x.rank)
        if indices.dtype not in INDEX_DTYPES:
            raise VerifyError(f"gather indices must be {' or '.join(INDEX_DTYPES)}, got "
                              f"{indices.dtype}")
        return [x.with_shape(x.shape[:axis] + indices.shape + x.shape[axis + 1:])]


@DIALECT.op
class IotaOp(TensorOp):
    name = "tensor.iota"
    attrs = {"shape": Attr("dims"), "axis": Attr("int"), "dtype": Attr("str")}
    fusion = ELEMENTWISE
    doc = "Each element's index along axis, as dtype (the building block of arange)."

    @classmethod
    def infer_types(cls, types, attributes):
        shape = tuple(attributes["shape"])
        _axis(cls.name, attributes["axis"], len(shape))
        dtype = attributes["dtype"]
        if dtype not in DTYPES or dtype == "bool":
            raise VerifyError(f"iota dtype must be a number dtype, got {dtype!r}")
        if any(isinstance(d, int) and d < 1 for d in shape):
            raise VerifyError(f"iota sizes must be positive, got {fmt_shape(shape)}")
        return [TensorType(dtype, shape)]
