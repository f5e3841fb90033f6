"""Tensor-dialect IR -> .fuse source, so an imported graph can be read and edited.

Each op becomes one statement ``name = expression``; operators are used where the
language has them (``a + b``, ``-a``), built-in calls otherwise. A rank-0
``tensor.constant`` is written inline as a literal where the language gives the
literal the constant's dtype (next to a tensor operand of an elementwise op);
elsewhere it becomes ``name = cast(literal, dtype=...)``. Parsing the printed text
gives back the same ops (tests/test_fuse_printer.py checks the round trip).
"""
from __future__ import annotations

import math

from mlfuse.dialects import tensor as T
from mlfuse.dialects import tensor_indexing as TI
from mlfuse.dialects import tensor_windows as W
from mlfuse.dialects.elementwise import BINARY_OPERATORS
from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import FuncOp, ModuleOp, ReturnOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.types import FLOAT_DTYPES

_OPERATOR = {op: symbol for symbol, op in BINARY_OPERATORS.items()}
_KEYWORDS = {"func", "return", "true", "false"}


def print_fuse(module: ModuleOp, header: str = "") -> str:
    """The .fuse source of a tensor-level module; ``header`` lines become comments."""
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comments + "\n".join(_FunctionPrinter(f).text() for f in module.funcs)


def _literal(value, dtype: str) -> str:
    if dtype not in FLOAT_DTYPES:
        text = str(int(value))
    elif math.isnan(value):
        return "(0.0 / 0.0)"  # folded at compile time: the language has no nan literal
    elif math.isinf(value):
        return "(1.0 / 0.0)" if value > 0 else "(-1.0 / 0.0)"
    else:
        text = repr(float(value))
    return f"({text})" if text.startswith("-") else text


def _list(values) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _window(size, start, step, count) -> str:
    """One axis of a tensor.slice as the Python slice that parses back to it."""
    if (start, step, count) == (0, 1, size):
        return ":"
    if start < 0:  # a symbolic axis' last element: backwards whole, or alone
        return "::-1" if count == size else "-1:"
    stop = start + count * step  # one step past the last element; below 0: to the front
    return (f"{start}:{stop if stop >= 0 else ''}" + (f":{step}" if step != 1 else ""))


def _static(value) -> str:
    """An int, bool or int list attribute as a .fuse constant argument."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _list(value) if isinstance(value, list) else str(value)


class _FunctionPrinter:
    def __init__(self, func: FuncOp):
        self.func = func
        self.names: dict[int, str] = {}
        # a dim used as a value is written as its name: no value may take that name then
        self.taken: set[str] = {op["sym"] for op in func.body.ops if isinstance(op, W.DimSizeOp)}
        self.lines: list[str] = []

    def name(self, v: Value) -> str:
        """A unique identifier: the value's name hint, else t1, t2, ..."""
        if id(v) not in self.names:
            hint = v.name_hint if v.name_hint and v.name_hint.isidentifier() else None
            if hint in _KEYWORDS:
                hint += "_"
            k = 0 if hint else 1
            name = hint or "t1"
            while name in self.taken:
                k += 1
                name = f"{hint}_{k}" if hint else f"t{k}"
            self.taken.add(name)
            self.names[id(v)] = name
        return self.names[id(v)]

    def text(self) -> str:
        f = self.func
        params = ", ".join(f"{self.name(a)}: {a.type}" for a in f.args)
        results = [str(t) for t in f.attributes["result_types"]]
        shown = results[0] if len(results) == 1 else f"({', '.join(results)})"
        lines = [f"func {f.sym_name}({params}) -> {shown} {{"]
        for op in f.body.ops:
            if isinstance(op, ReturnOp):
                values = (self.operand(op, i) for i in range(len(op.operands)))
                lines.append(f"    return {', '.join(values)}")
            elif not (isinstance(op, T.ConstantOp) and self.inlined(op)):
                lines.append(f"    {self.name(op.result)} = {self.expression(op)}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    # -- constants --------------------------------------------------------------------
    @staticmethod
    def _literal_fits(user: Operation, index: int) -> bool:
        """Whether operand ``index`` of ``user`` may be written as a bare literal: the
        language types a literal by a tensor partner among the data operands."""
        if not isinstance(user, T.ElementwiseOp):
            return False
        data = range(1, 3) if user.spec.accepts == "where" else range(len(user.operands))
        return index in data and any(not isinstance(user.operands[j].owner, T.ConstantOp)
                                     for j in data if j != index)

    def inlined(self, op: T.ConstantOp) -> bool:
        return bool(op.result.uses) and all(self._literal_fits(u, i) for u, i in op.result.uses)

    def operand(self, op: Operation, index: int) -> str:
        v = op.operands[index]
        owner = v.owner
        if isinstance(owner, T.ConstantOp) and self.inlined(owner):
            return _literal(owner["value"], v.type.dtype)
        return self.name(v)

    # -- one op -----------------------------------------------------------------------
    def expression(self, op: Operation) -> str:
        args = [self.operand(op, i) for i in range(len(op.operands))]
        attrs = op.attributes
        if isinstance(op, T.ConstantOp):
            return f"cast({_literal(attrs['value'], op.result.type.dtype)}, " \
                   f"dtype={op.result.type.dtype})"
        if isinstance(op, T.ElementwiseOp):
            name = op.spec.name
            if name in _OPERATOR:
                return f"{args[0]} {_OPERATOR[name]} {args[1]}"
            if name == "neg":
                return f"-{args[0]}"
            return f"{name}({', '.join(args)})"
        if isinstance(op, T.CastOp):
            return f"cast({args[0]}, dtype={attrs['dtype']})"
        if isinstance(op, T.ReduceOp):
            return f"{op.name.split('.')[1]}({args[0]}, axis={_list(attrs['axis'])}, " \
                   f"keepdims={'true' if attrs['keepdims'] else 'false'})"
        if isinstance(op, (T.ReshapeOp, T.BroadcastToOp)):
            return f"{op.name.split('.')[1]}({args[0]}, {_list(attrs['shape'])})"
        if isinstance(op, T.TransposeOp):
            return f"transpose({args[0]}, perm={_list(attrs['perm'])})"
        if isinstance(op, T.MatmulOp):
            return f"matmul({args[0]}, {args[1]})"
        if isinstance(op, T.Conv2dOp):
            groups = f", groups={attrs['groups']}" if attrs.get("groups", 1) != 1 else ""
            return (f"conv2d({args[0]}, {args[1]}, stride={_list(attrs['stride'])}, "
                    f"padding={_list(attrs['padding'])}, dilation={_list(attrs['dilation'])}"
                    f"{groups})")
        if isinstance(op, W.DimSizeOp):
            return f"cast({attrs['sym']}, dtype={op.result.type.dtype})"
        if isinstance(op, (W.Pool2dOp, W.ArgReduceOp, W.CumsumOp)):  # every attribute spelled out
            keywords = ", ".join(f"{key}={_static(attrs[key])}" for key in op.attrs)
            return f"{op.name.split('.')[1]}({args[0]}, {keywords})"
        if isinstance(op, T.SoftmaxOp):
            return f"softmax({args[0]}, axis={attrs['axis']})"
        if isinstance(op, T.LayernormOp):
            return f"layernorm({', '.join(args)}, axis={attrs['axis']}, eps={attrs['eps']!r})"
        if isinstance(op, T.RmsnormOp):
            return f"rmsnorm({', '.join(args)}, eps={attrs['eps']!r})"
        if isinstance(op, TI.SliceOp):
            windows = map(_window, op.operands[0].type.shape, attrs["starts"], attrs["steps"],
                          attrs["sizes"])
            return f"{args[0]}[{', '.join(windows)}]"
        if isinstance(op, TI.ConcatOp):
            return f"concat({_list(args)}, axis={attrs['axis']})"
        if isinstance(op, TI.PadOp):
            widths = _list(_list(pair) for pair in zip(attrs["low"], attrs["high"]))
            return f"pad({args[0]}, {widths}, value={attrs['value']!r})"
        if isinstance(op, TI.GatherOp):
            return f"take({args[0]}, {args[1]}, axis={attrs['axis']})"
        if isinstance(op, TI.IotaOp):
            return f"iota({_list(attrs['shape'])}, axis={attrs['axis']}, dtype={attrs['dtype']})"
        raise MlfuseError(f"{op.name} has no .fuse form (print a tensor-level module)", op.loc)
