"""Scalar ops, on register values, shared by the loops and fused dialects.

The elementwise ops are generated from the same table as the tensor dialect's
(``dialects.elementwise``), so ``tensor.exp`` lowers to ``arith.exp`` by name.
Loop-index arithmetic uses the same ops on the ``index`` type, plus floordiv/mod.
"""
from __future__ import annotations

from mlfuse.ir.core import ELEMENTWISE, Attr, Operation, VerifyError
from mlfuse.ir.registry import Dialect
from mlfuse.ir.traits import COSTLY, PURE, SCALAR_COMPUTE
from mlfuse.ir.types import DTYPES, INDEX, INT_DTYPES, ScalarType

from mlfuse.dialects.elementwise import ELEMENTWISE as ELEMENTWISE_SPECS
from mlfuse.dialects.elementwise import check_dtypes

DIALECT = Dialect("arith", __doc__)


def _scalars(op_name, types):
    for t in types:
        if not isinstance(t, ScalarType):
            raise VerifyError(f"{op_name} takes scalars, got {t}")
    return types


SCALAR = frozenset({PURE, SCALAR_COMPUTE})  # every arith op


class ScalarOp(Operation):
    fusion = ELEMENTWISE
    traits = SCALAR
    spec = None

    @classmethod
    def infer_types(cls, types, attributes):
        _scalars(cls.name, types)
        try:
            return [ScalarType(check_dtypes(cls.spec, [t.dtype for t in types]))]
        except ValueError as e:
            raise VerifyError(str(e)) from None


def _make(spec):
    names = {1: ("x",), 2: ("x", "y"), 3: ("cond", "x", "y")}[spec.arity]
    cls = type(f"Arith{spec.name.capitalize()}Op", (ScalarOp,), {
        "name": f"arith.{spec.name}", "operand_names": names, "spec": spec, "doc": spec.doc,
        "traits": SCALAR | {COSTLY} if spec.costly else SCALAR})
    return DIALECT.op(cls)


SCALAR_OPS = {name: _make(spec) for name, spec in ELEMENTWISE_SPECS.items()}


@DIALECT.op
class ConstantOp(Operation):
    name = "arith.constant"
    traits = SCALAR
    attrs = {"value": Attr("float")}
    fusion = ELEMENTWISE
    doc = "A scalar constant of the result type (index, a number dtype or bool)."

    def verify_op(self):
        t = self.result.type
        if not isinstance(t, ScalarType):
            raise VerifyError(f"arith.constant yields a scalar, got {t}", self.loc)
        value = self["value"]  # (an int as it is: i64's extremes pass a float's precision)
        if t.dtype in ("index", "bool") + INT_DTYPES and not (
                isinstance(value, int) or float(value).is_integer()):
            raise VerifyError(f"constant {value} is not whole for {t.dtype}", self.loc)


class IndexBinaryOp(Operation):
    operand_names = ("x", "y")
    traits = SCALAR
    fusion = ELEMENTWISE

    @classmethod
    def infer_types(cls, types, attributes):
        if list(types) != [INDEX, INDEX]:
            raise VerifyError(f"{cls.name} takes two index operands")
        return [INDEX]


@DIALECT.op
class FloorDivOp(IndexBinaryOp):
    name = "arith.floordiv"
    doc = "Index floor division (operands are non-negative)."


@DIALECT.op
class ModOp(IndexBinaryOp):
    name = "arith.mod"
    doc = "Index remainder (operands are non-negative)."


class BoolBinaryOp(Operation):
    operand_names = ("x", "y")
    traits = SCALAR
    fusion = ELEMENTWISE

    @classmethod
    def infer_types(cls, types, attributes):
        if [t for t in types] != [ScalarType("bool")] * 2:
            raise VerifyError(f"{cls.name} takes two bool operands")
        return [ScalarType("bool")]


@DIALECT.op
class AndOp(BoolBinaryOp):
    name = "arith.and"


@DIALECT.op
class OrOp(BoolBinaryOp):
    name = "arith.or"


@DIALECT.op
class CastOp(Operation):
    name = "arith.cast"
    traits = SCALAR
    operand_names = ("x",)
    attrs = {"dtype": Attr("str")}
    fusion = ELEMENTWISE

    doc = ("Convert to dtype, as NumPy's astype; also between an integer dtype and index "
           "(a gathered index, a size used as a number).")

    @classmethod
    def infer_types(cls, types, attributes):
        (t,) = _scalars(cls.name, types)
        dtype = attributes.get("dtype")
        if dtype not in DTYPES + ("index",):
            raise VerifyError(f"cast to unknown dtype {dtype!r}")
        if dtype == "index" and t.dtype not in INT_DTYPES + ("index",):
            raise VerifyError(f"cast to index takes an integer, got {t.dtype}")
        return [ScalarType(dtype)]
