"""Ops every level shares: the module, functions and return."""
from __future__ import annotations

from mlfuse.ir.core import Attr, Block, Operation, Region, VerifyError
from mlfuse.ir.registry import Dialect

DIALECT = Dialect("builtin", __doc__)


@DIALECT.op
class ModuleOp(Operation):
    name = "builtin.module"
    num_regions = 1
    doc = "The top level: a list of functions."

    @property
    def funcs(self) -> list["FuncOp"]:
        return [op for op in self.body.ops if isinstance(op, FuncOp)]

    def func(self, name: str) -> "FuncOp":
        for f in self.funcs:
            if f["sym_name"] == name:
                return f
        raise KeyError(name)

    def verify_op(self):
        seen = set()
        for op in self.body.ops:
            if not isinstance(op, FuncOp):
                raise VerifyError(f"module may only hold functions, found {op.name}", op.loc)
            if op["sym_name"] in seen:
                raise VerifyError(f"function '{op['sym_name']}' defined twice", op.loc)
            seen.add(op["sym_name"])


@DIALECT.op
class FuncOp(Operation):
    name = "builtin.func"
    num_regions = 1
    attrs = {"sym_name": Attr("str"), "result_types": Attr("any")}
    doc = "A function: parameters are the body's block arguments; the body ends in return."

    @staticmethod
    def build(name, arg_types, arg_names, result_types, loc=None) -> "FuncOp":
        region = Region([Block(arg_types, arg_names)])
        return FuncOp(attributes={"sym_name": name, "result_types": list(result_types)},
                      result_types=[], regions=[region], loc=loc)

    @property
    def sym_name(self) -> str:
        return self.attributes["sym_name"]

    @property
    def args(self):
        return self.body.args

    @property
    def return_op(self) -> "ReturnOp":
        return self.body.ops[-1]

    def verify_op(self):
        ops = self.body.ops
        if not ops or not isinstance(ops[-1], ReturnOp):
            raise VerifyError(f"function '{self.sym_name}' does not end in return", self.loc)
        got = [v.type for v in ops[-1].operands]
        want = list(self.attributes["result_types"])
        if got != want:
            raise VerifyError(
                f"function '{self.sym_name}' returns ({', '.join(map(str, got))}) but declares "
                f"({', '.join(map(str, want))})", ops[-1].loc)


@DIALECT.op
class ReturnOp(Operation):
    name = "builtin.return"
    operand_names = ("*values",)
    is_terminator = True

    @classmethod
    def infer_types(cls, operand_types, attributes):
        return []
