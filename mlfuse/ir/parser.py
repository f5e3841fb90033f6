"""Parse the textual IR (grammar/ir.lark) back into ops: the inverse of printer.py."""
from __future__ import annotations

import json
from functools import lru_cache

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from mlfuse.errors import Location, MlfuseError, normalize_newlines
from mlfuse.syntax.grammars import grammar_text
from mlfuse.syntax.lark_errors import convert_lark_error, location_of
from mlfuse.ir.builtin import FuncOp, ModuleOp, ReturnOp
from mlfuse.ir.core import Block, Region, VerifyError
from mlfuse.ir.registry import OpRegistry
from mlfuse.ir.types import (BufferType, IndivisibleDim, ScalarType, TensorType, product_dim,
                             quotient_dim, shape_problem)


@lru_cache(maxsize=None)
def _lark() -> Lark:
    return Lark(grammar_text("ir.lark"), parser="lalr", propagate_positions=True,
                maybe_placeholders=True)


class _Scope:
    def __init__(self, parent=None):
        self.values = {}
        self.parent = parent

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.values:
                return s.values[name]
            s = s.parent
        return None


class IRParser:
    def __init__(self, source: str, filename: str, registry: OpRegistry):
        self.registry = registry
        self.source = source
        self.filename = filename

    def loc(self, node) -> Location:
        return location_of(node, self.filename, self.source)

    def error(self, message, node) -> MlfuseError:
        return MlfuseError(message, self.loc(node))

    def parse(self) -> ModuleOp:
        try:
            tree = _lark().parse(self.source)
        except UnexpectedInput as e:
            raise convert_lark_error(e, self.filename, self.source) from None
        module = ModuleOp(result_types=[])
        for f in tree.children:
            module.body.append(self.func(f))
        return module

    # -- pieces -------------------------------------------------------------
    def type(self, t: Tree):
        kind = t.data
        dtype = str(t.children[0])
        if kind == "scalar_type":
            return ScalarType(dtype)
        dims = tuple(self.value(d) for d in t.children[1:] if d is not None)
        if dtype == "index":
            raise self.error("index is not an element type", t)
        problem = shape_problem(dims)  # what the .fuse frontend rejects, rejected here too
        if problem:
            raise self.error(f"{problem} (in {kind.replace('_', ' ')} {t.children[0]}"
                             f"[{', '.join(map(str, dims))}])", t)
        return TensorType(dtype, dims) if kind == "tensor_type" else BufferType(dtype, dims)

    def value(self, t):
        kind = t.data
        if kind == "int":
            return int(t.children[0])
        if kind == "float":
            return float(t.children[0])
        if kind == "pos_inf":
            return float("inf")
        if kind == "neg_inf":
            return float("-inf")
        if kind == "nan":
            return float("nan")
        if kind == "true":
            return True
        if kind == "false":
            return False
        if kind == "string":
            return json.loads(t.children[0])
        if kind == "symbol":
            return str(t.children[0])
        if kind == "product":  # left to right, as the canonical text reads
            dim = self.value(t.children[0])
            for op, factor in zip(t.children[1::2], t.children[2::2]):
                f = self.value(factor)
                try:
                    dim = product_dim([dim, f]) if str(op.children[0]) == "*" else \
                        quotient_dim(dim, f)
                except (IndivisibleDim, ZeroDivisionError) as e:
                    raise self.error(f"bad dim: {e}", t) from None
            return dim
        if kind == "list":
            return [self.value(c) for c in t.children if c is not None]
        raise self.error(f"bad attribute value {kind}", t)

    def define(self, scope: _Scope, tok: Token, value) -> None:
        name = str(tok)[1:]
        if scope.values.get(name) is not None or (scope.lookup(name) is not None):
            raise self.error(f"value %{name} defined twice", tok)
        scope.values[name] = value
        value.name_hint = None if name.isdigit() else name

    def use(self, scope: _Scope, tok: Token):
        v = scope.lookup(str(tok)[1:])
        if v is None:
            raise self.error(f"use of undefined value {tok}", tok)
        return v

    def params(self, children):
        out = []
        for p in children:
            if p is None:
                continue
            out.append((p.children[0], self.type(p.children[1])))
        return out

    def func(self, t: Tree) -> FuncOp:
        name_tok = t.children[0]
        params, result_types, ops = [], [], []
        for c in t.children[1:]:
            if isinstance(c, Tree) and c.data == "param":
                params.append(c)
            elif isinstance(c, Tree) and c.data in ("scalar_type", "tensor_type", "buffer_type"):
                result_types.append(self.type(c))
            elif c is not None:
                ops.append(c)
        ps = self.params(params)
        func = FuncOp.build(str(name_tok)[1:], [ty for _, ty in ps], [], result_types,
                            loc=self.loc(name_tok))
        scope = _Scope()
        for (tok, _), arg in zip(ps, func.args):
            self.define(scope, tok, arg)
        self.block(ops, func.body, scope)
        return func

    def block(self, ops, block: Block, scope: _Scope) -> None:
        for op in ops:
            block.append(self.op(op, scope))

    def op(self, t: Tree, scope: _Scope):
        if t.data == "return_op":
            vals = [self.use(scope, v) for v in t.children if v is not None]
            return ReturnOp(vals, loc=self.loc(t))
        results_tree, opname = t.children[0], t.children[1]
        operands, attributes, types, regions = [], {}, [], []
        for c in t.children[2:]:
            if c is None:
                continue
            if isinstance(c, Token) and c.type == "VALUE":
                operands.append(self.use(scope, c))
            elif c.data == "attrdict":
                for a in c.children:
                    if a is None:
                        continue
                    key = str(a.children[0])
                    if key in attributes:
                        raise self.error(f"attribute '{key}' given twice", a)
                    attributes[key] = self.value(a.children[1])
            elif c.data in ("scalar_type", "tensor_type", "buffer_type"):
                types.append(self.type(c))
            elif c.data == "region":
                regions.append(c)
        cls = self.registry.get(str(opname))
        if cls is None:
            raise self.error(f"unknown op '{opname}'", opname)
        result_toks = [] if results_tree is None else list(results_tree.children)
        if len(result_toks) != len(types):
            raise self.error(f"{opname}: {len(result_toks)} results named but "
                             f"{len(types)} result types given", opname)
        built_regions = []
        for r in regions:
            params = [c for c in r.children if isinstance(c, Tree) and c.data == "param"]
            body = [c for c in r.children if isinstance(c, Tree) and c.data != "param"]
            ps = self.params(params)
            block = Block([ty for _, ty in ps])
            inner = _Scope(scope)
            for (tok, _), arg in zip(ps, block.args):
                self.define(inner, tok, arg)
            self.block(body, block, inner)
            built_regions.append(Region([block]))
        if len(built_regions) != cls.num_regions:
            raise self.error(f"{opname} takes {cls.num_regions} region(s), got {len(built_regions)}",
                             opname)
        try:
            op = cls(operands, types, attributes, built_regions, loc=self.loc(opname))
        except VerifyError as e:
            raise self.error(e.message, opname) from None
        for tok, res in zip(result_toks, op.results):
            self.define(scope, tok, res)
        return op


def parse_ir(source: str, registry: OpRegistry, filename: str = "<ir>",
             verify: bool = True) -> ModuleOp:
    """Parse IR text into a module of the ops ``registry`` knows; verify it unless
    ``verify`` is False. (``mlfuse.dialects.parse_ir`` hands it every mlfuse dialect.)"""
    module = IRParser(normalize_newlines(source), filename, registry).parse()  # positions as editors count
    if verify:
        from mlfuse.ir.verifier import verify as run_verify
        run_verify(module)
    return module
