"""The one textual form of the IR, at every level.

    func @name(%x: f32[N], %b: f32[N]) -> (f32[N]) {
      %0 = tensor.mul %x, %c : f32[N]
      loops.parallel %out {extents = [N]} (%i: index) {
        ...
      }
      return %0
    }

An op prints as ``results = name operands {attrs} : result types`` followed by
its regions, each as ``(block args) { ops }``. Attribute dicts are sorted so that
printing is deterministic and ``print(parse(print(ir))) == print(ir)``.
"""
from __future__ import annotations

import json
import math
import re

from mlfuse.ir.builtin import FuncOp, ModuleOp, ReturnOp
from mlfuse.ir.core import Operation, Value

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def format_attr_value(v, top: bool = True) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        # inside lists, strings are symbolic dims and print bare
        return v if (not top and _IDENT.match(v)) else json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr_value(x, top=False) for x in v) + "]"
    return json.dumps(str(v))


class Namer:
    """Gives each value a unique printable name, preferring its name hint."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.counter = 0

    def define(self, v: Value) -> str:
        hint = v.name_hint
        if hint and _IDENT.match(hint):
            name, k = hint, 0
            while name in self.taken:
                k += 1
                name = f"{hint}_{k}"
        else:
            while str(self.counter) in self.taken:
                self.counter += 1
            name = str(self.counter)
            self.counter += 1
        self.taken.add(name)
        self.names[id(v)] = name
        return "%" + name

    def __call__(self, v: Value) -> str:
        try:
            return "%" + self.names[id(v)]
        except KeyError:
            return "%<undefined>"


def _non_default_attributes(op: Operation) -> dict:
    """Attributes worth printing: those that differ from the op's declared default."""
    out = {}
    for key, value in op.attributes.items():
        spec = op.attrs.get(key)
        if spec is not None and spec.default is not spec.REQUIRED and _same(spec.default, value):
            continue
        out[key] = value
    return out


def _format_attr(op: Operation, key: str, value) -> str:
    spec = op.attrs.get(key)
    # a symbolic dim prints bare, like the dims inside a shape
    return format_attr_value(value, top=not (spec is not None and spec.kind == "dim"))


def _same(a, b) -> bool:
    return type(a) is type(b) and format_attr_value(a) == format_attr_value(b)


class Printer:
    def __init__(self, indent: str = "  "):
        self.indent = indent
        self.lines: list[str] = []

    def print_module(self, module: ModuleOp) -> str:
        chunks = [self.print_func(f) for f in module.funcs]
        return "\n\n".join(chunks) + ("\n" if chunks else "")

    def print_func(self, func: FuncOp) -> str:
        self.lines = []
        namer = Namer()
        params = ", ".join(f"{namer.define(a)}: {a.type}" for a in func.args)
        results = ", ".join(str(t) for t in func["result_types"])
        self.lines.append(f"func @{func.sym_name}({params}) -> ({results}) {{")
        for op in func.body.ops:
            self._op(op, namer, 1)
        self.lines.append("}")
        return "\n".join(self.lines)

    def _op(self, op: Operation, namer: Namer, depth: int) -> None:
        pad = self.indent * depth
        if isinstance(op, ReturnOp):
            args = ", ".join(namer(v) for v in op.operands)
            self.lines.append(f"{pad}return {args}".rstrip())
            return
        text = ""
        if op.results:
            text += ", ".join(namer.define(r) for r in op.results) + " = "
        text += op.name
        if op.operands:
            text += " " + ", ".join(namer(v) for v in op.operands)
        shown = _non_default_attributes(op)
        if shown:
            items = ", ".join(f"{k} = {_format_attr(op, k, shown[k])}" for k in sorted(shown))
            text += " {" + items + "}"
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        for region in op.regions:
            block = region.block
            args = ", ".join(f"{namer.define(a)}: {a.type}" for a in block.args)
            text += f" ({args}) {{"
            self.lines.append(pad + text)
            for inner in block.ops:
                self._op(inner, namer, depth + 1)
            text = "}"
            pad = self.indent * depth
        self.lines.append(pad + text)


def print_ir(ir) -> str:
    """Print a module, function or single op as text."""
    if isinstance(ir, ModuleOp):
        return Printer().print_module(ir)
    if isinstance(ir, FuncOp):
        return Printer().print_func(ir) + "\n"
    p = Printer()
    p._op(ir, Namer(), 0)
    return "\n".join(p.lines) + "\n"
