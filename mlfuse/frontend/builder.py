"""Walk the Lark tree of a .fuse file and build tensor-dialect IR with source locations.

Every user mistake becomes one MlfuseError at the token that caused it: the name
for scope errors, the operator for ``x + y`` shape or dtype errors, the function
name for call errors, the argument itself for a bad argument.
"""
from __future__ import annotations

import difflib

from lark import Token, Tree

from mlfuse.dialects.elementwise import BINARY_OPERATORS, ELEMENTWISE, UNARY_OPERATORS
from mlfuse.dialects.tensor import ELEMENTWISE_OPS
from mlfuse.errors import Location, MlfuseError
from mlfuse.syntax.lark_errors import location_of
from mlfuse.ir.builtin import FuncOp, ModuleOp, ReturnOp
from mlfuse.ir.core import Value, VerifyError
from mlfuse.ir.types import (DTYPES, MAX_ELEMENTS, IndivisibleDim, TensorType, product_dim,
                             quotient_dim)

from mlfuse.frontend.calls import SIGNATURES, bind
from mlfuse.dialects.tensor_windows import DimSizeOp
from mlfuse.frontend.indexing import Index, Rest, Values, Window, subscript
from mlfuse.frontend.literals import Deferred, Literal, constant_op, fold, parse_number
from mlfuse.frontend.static import Name, convert_static


class SourceContext:
    """The file being compiled: turns tree nodes into Locations."""

    def __init__(self, source: str, filename: str):
        self.source = source
        self.filename = filename

    def loc(self, node) -> Location:
        return location_of(node, self.filename, self.source)

    def error(self, message: str, node) -> MlfuseError:
        return MlfuseError(message, self.loc(node))


def _suggest(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def build_module(tree: Tree, ctx: SourceContext) -> ModuleOp:
    module = ModuleOp(result_types=[])
    defined: dict[str, Location] = {}
    for func_tree in tree.children:
        name_tok = func_tree.children[0]
        if str(name_tok) in defined:
            raise ctx.error(f"function '{name_tok}' is already defined at {defined[str(name_tok)]}",
                            name_tok)
        defined[str(name_tok)] = ctx.loc(name_tok)
        module.body.append(FunctionBuilder(ctx).build(func_tree))
    return module


class FunctionBuilder:
    """Builds one FuncOp; also the ``CallSite`` the built-in function builders use."""

    def __init__(self, ctx: SourceContext):
        self.ctx = ctx
        self.scope: dict[str, Value | Literal] = {}
        self.defined_at: dict[str, str] = {}  # name -> "parameter at file:line:col"
        self.symbols: set[str] = set()
        self.func: FuncOp | None = None

    # -- function, parameters, types ------------------------------------------------
    def build(self, tree: Tree) -> FuncOp:
        name_tok, *rest = tree.children
        split = next(i for i, c in enumerate(rest) if isinstance(c, Tree) and c.data == "results")
        params = [c for c in rest[:split] if c is not None]
        results_tree, body = rest[split], rest[split + 1:]
        arg_types = [self.type(p.children[1]) for p in params]
        self.symbols = {d for t in arg_types for d in t.shape if isinstance(d, str)}
        result_types = [self.type(t, result=True) for t in results_tree.children]
        self.func = FuncOp.build(str(name_tok), arg_types, [str(p.children[0]) for p in params],
                                 result_types, loc=self.ctx.loc(name_tok))
        for p, arg in zip(params, self.func.args):
            self.define(p.children[0], arg, "parameter")
        self.statements(body, name_tok, result_types)
        return self.func

    def type(self, tree: Tree, result: bool = False) -> TensorType:
        dtype_tok, shape = tree.children
        if str(dtype_tok) not in DTYPES:
            raise self.ctx.error(f"unknown dtype '{dtype_tok}'{_suggest(str(dtype_tok), DTYPES)}"
                                 f" (dtypes: {', '.join(DTYPES)})", dtype_tok)
        dims = [] if shape is None else [d for d in shape.children if d is not None]
        elements = 1
        shape_dims = []
        for d in dims:
            if isinstance(d, Tree) and not result:  # B*H
                raise self.ctx.error("a parameter's dims are integers or names; a product such "
                                     "as B*H may only appear in result types", d)
            factors = d.children[::2] if isinstance(d, Tree) else [d]
            for f in factors:
                if f.type == "NUMBER" and not (f.isdigit() and int(f) >= 1):
                    raise self.ctx.error(f"dims must be positive integers, got {f}", f)
                if f.type == "NAME" and result and str(f) not in self.symbols:
                    raise self.ctx.error(f"result dim '{f}' is not a dim of any parameter", f)
            dim = self.dim_value(factors[0])
            if isinstance(d, Tree):
                for op_tree, f in zip(d.children[1::2], factors[1:]):
                    dim = self.dim_arith(dim, str(op_tree.children[0]), self.dim_value(f),
                                         op_tree.children[0])
            elements *= dim if isinstance(dim, int) else 1
            if elements > MAX_ELEMENTS:
                raise self.ctx.error(f"a tensor of more than 2**62 elements is too large to "
                                     f"index (concrete dims up to here: {elements})", d)
            shape_dims.append(dim)
        return TensorType(str(dtype_tok), tuple(shape_dims))

    @staticmethod
    def dim_value(tok: Token):
        return int(tok) if tok.type == "NUMBER" else str(tok)

    def dim_arith(self, a, op: str, b, node):
        """``a * b`` or ``a / b`` of dims (ints, names, products, quotients): a dim.
        A quotient is exact: integers that do not divide are an error here, symbolic
        sizes are checked when the function is called."""
        if op == "*":
            return product_dim([a, b])
        if b == 0:
            raise self.ctx.error("a dim divided by 0", node)
        try:
            return quotient_dim(a, b)
        except IndivisibleDim:
            raise self.ctx.error(f"{a} / {b} is not a whole number: a dim must be an integer "
                                 "size", node) from None

    def define(self, name_tok: Token, value, what: str) -> None:
        name = str(name_tok)
        if name in self.scope:
            raise self.ctx.error(f"'{name}' is already defined (as a {self.defined_at[name]}); "
                                 "names cannot be rebound", name_tok)
        self.scope[name] = value
        self.defined_at[name] = f"{what} at {self.ctx.loc(name_tok)}"
        if isinstance(value, Value) and value.name_hint is None:
            value.name_hint = name  # printed IR then reads like the source

    # -- statements -----------------------------------------------------------------
    def statements(self, body, name_tok: Token, result_types) -> None:
        for i, stmt in enumerate(body):
            try:
                if stmt.data == "assign":
                    self.assign(stmt.children[:-1], stmt.children[-1])
                    continue
                if i != len(body) - 1:
                    raise self.ctx.error("statement after return", body[i + 1])
                self.ret(stmt, result_types)
                return
            except RecursionError:  # the tree walk recurses once per nesting level
                raise self.ctx.error("expression nested too deeply", stmt) from None
        raise self.ctx.error(f"function '{name_tok}' has no return statement", name_tok)

    def assign(self, names: list[Token], tree) -> None:
        """``a = e``, or ``a, b, c = e`` where e gives that many values (split)."""
        value = self.expr(tree)
        several = isinstance(value, Values)
        if len(names) == 1 and not several:
            self.define(names[0], value, "value")
            return
        count = len(value) if several else 1
        if len(names) == 1:
            raise self.ctx.error(f"the right side gives {count} values; assign them to {count} "
                                 "names (a, b, ... = ...)", names[0])
        if count != len(names):
            raise self.ctx.error(f"{len(names)} names but the right side gives {count} "
                                 f"value{'s' if count > 1 else ''}", names[0])
        for name, v in zip(names, value):
            self.define(name, v, "value")

    def ret(self, stmt: Tree, result_types) -> None:
        values = [self.tensor(self.expr(e), "a returned value", self.ctx.loc(e))
                  for e in stmt.children]
        got = [v.type for v in values]
        if len(values) != len(result_types):
            raise self.ctx.error(
                f"returns {len(values)} value(s) ({', '.join(map(str, got))}) but the function "
                f"declares {len(result_types)} ({', '.join(map(str, result_types))})", stmt)
        for k, (e, t, want) in enumerate(zip(stmt.children, got, result_types), 1):
            if t != want:
                raise self.ctx.error(f"return value {k} has type {t} but the function declares "
                                     f"{want}", e)
        self.func.body.append(ReturnOp(values, loc=self.ctx.loc(stmt)))

    # -- expressions ----------------------------------------------------------------
    def expr(self, tree) -> Value | Literal:
        """The value of an expression. Operators (``x0 + x1 + ... + x999`` is a tree
        999 levels deep) are evaluated with an explicit stack, operands left to right
        as a recursive walk would; calls nest through ``call`` (and a program nesting
        them past Python's limit gets the 'nested too deeply' error)."""
        if tree.data not in ("binary", "unary"):
            return self.leaf(tree)
        values: list = []
        stack = [(tree, False)]
        while stack:
            node, ready = stack.pop()
            if node.data not in ("binary", "unary"):
                values.append(self.leaf(node))
            elif not ready:
                stack.append((node, True))
                operands = [node.children[1]] if node.data == "unary" else \
                    [node.children[0], node.children[2]]
                stack.extend((c, False) for c in reversed(operands))
            elif node.data == "unary":
                op_tok = node.children[0].children[0]
                values.append(self.elementwise(UNARY_OPERATORS[str(op_tok)], [values.pop()],
                                               self.ctx.loc(node)))
            else:
                rhs, lhs = values.pop(), values.pop()
                op_tok = node.children[1].children[0]
                values.append(self.elementwise(BINARY_OPERATORS[str(op_tok)], [lhs, rhs],
                                               self.ctx.loc(op_tok)))
        return values.pop()

    def leaf(self, tree) -> Value | Literal:
        """The value of an expression that is not an operator."""
        kind = tree.data
        if kind == "number":
            return parse_number(str(tree.children[0]), self.ctx.loc(tree))
        if kind == "name":
            return self.lookup(tree.children[0])
        if kind == "call":
            return self.call(tree)
        if kind == "subscript_expr":
            return self.subscript(tree)
        what = {"list": "a list", "true": "true", "false": "false"}
        raise self.ctx.error(f"{what.get(kind, kind)} is not a value here", tree)

    def lookup(self, tok: Token):
        name = str(tok)
        if name in self.scope:
            return self.scope[name]
        if name in self.symbols:  # a dim as a value: its size at call time
            loc = self.ctx.loc(tok)
            return Deferred(name, lambda dtype: self.dim_size(name, dtype, loc), loc)
        raise self.ctx.error(f"undefined name '{tok}'{_suggest(name, [*self.scope, *self.symbols])}",
                             tok)

    def dim_size(self, sym: str, dtype: str, loc: Location) -> Value:
        if dtype == "bool":
            raise MlfuseError(f"dim {sym} cannot stand for a bool operand", loc)
        op = DimSizeOp(attributes={"sym": sym}, result_types=[TensorType(dtype, ())], loc=loc)
        self.func.body.append(op)
        return op.result

    def call(self, tree: Tree):
        name_tok, *args = tree.children
        sig = SIGNATURES.get(str(name_tok))
        if sig is None:
            raise self.ctx.error(f"unknown function '{name_tok}'{_suggest(str(name_tok), SIGNATURES)}",
                                 name_tok)
        positional, keywords = [], []
        for a in args:
            if a is None:
                continue
            if a.data == "kwarg":
                key, value = a.children
                keywords.append((str(key), self.ctx.loc(key), value, self.ctx.loc(value)))
            elif keywords:
                raise self.ctx.error("positional argument after a keyword argument", a)
            else:
                positional.append((a, self.ctx.loc(a)))
        call_loc = self.ctx.loc(name_tok)
        bound = bind(sig, positional, keywords, call_loc, self.argument)
        return sig.build(self, bound)

    def subscript(self, tree: Tree) -> Value:
        """``x[...]``: each item a constant index, a slice a:b:c, or ...; built by
        indexing.subscript."""
        base, *items = tree.children
        loc = self.ctx.loc(tree)
        x = self.tensor(self.expr(base), "a subscripted value", self.ctx.loc(base))
        return subscript(lambda cls, ops, attrs: self.emit(cls, ops, attrs, loc), x,
                         [self.subscript_item(item, tree) for item in items])

    def subscript_item(self, item, tree: Tree):
        # a lone ':' or '...' has no position of its own: the subscript's
        loc = self.ctx.loc(item if isinstance(item, Token) or not item.meta.empty else tree)
        if isinstance(item, Tree) and item.data == "ellipsis":
            return Rest(loc)
        if isinstance(item, Tree) and item.data == "slice":
            start, stop, step = (None if c is None else self.static_int(c) for c in item.children)
            step_tree = item.children[2]
            return Window(start, stop, step, loc,
                          loc if step_tree is None else self.ctx.loc(step_tree))
        return Index(self.static_int(item, "take(x, indices, axis) gathers at tensor indices"),
                     loc)

    def static_int(self, tree, hint: str = "") -> int:
        """A subscript bound or index: an integer constant."""
        value = self.static(tree) if tree.data in ("number", "unary") else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.ctx.error("a subscript takes integer constants" + (f"; {hint}" if hint
                                                                          else ""), tree)
        return value

    def argument(self, tree, kind: str, loc: Location):
        if kind == "tensor":
            return self.single(self.expr(tree), loc)
        if kind == "tensors":  # a list of values, concat([a, b]), or a split's values
            if tree.data == "list":
                return [self.single(self.expr(c), self.ctx.loc(c)) for c in tree.children
                        if c is not None]
            value = self.expr(tree)
            if not isinstance(value, Values):
                raise MlfuseError("expected a list of values such as [a, b]", loc)
            return list(value)
        return convert_static(kind, self.static(tree), loc, self.symbols)

    def single(self, value, loc: Location):
        """``value``, which must be one value (not the several a split gives)."""
        if isinstance(value, Values):
            raise MlfuseError(f"this gives {len(value)} values; assign them to as many names "
                              "(a, b = split(...)) and use those", loc)
        return value

    def static(self, tree):
        """A compile-time argument as Python: numbers (with unary minus), true/false,
        lists, and bare names (dims, dtypes)."""
        kind = tree.data
        if kind == "number":
            return parse_number(str(tree.children[0]), self.ctx.loc(tree)).value
        if kind == "unary" and str(tree.children[0].children[0]) == "-":
            inner = self.static(tree.children[1])
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner
        elif kind in ("true", "false"):
            return kind == "true"
        elif kind == "name":
            return Name(str(tree.children[0]), self.ctx.loc(tree))
        elif kind == "list":
            return [self.static(c) for c in tree.children if c is not None]
        elif kind == "binary" and str(tree.children[1].children[0]) in ("*", "/"):
            return self.static_product(tree)
        raise self.ctx.error("expected a constant here (a number, true/false, a list or a name)",
                             tree)

    def static_product(self, tree: Tree):
        """``B*H`` (or ``2*N``, ``4*8``, ``C / 8 * H * W``, ``C / G``) in a constant: a
        product or quotient dim, or an int."""
        factors = [self.static(c) for c in (tree.children[0], tree.children[2])]
        op_tok = tree.children[1].children[0]
        if not all(isinstance(f, (int, Name)) and not isinstance(f, bool) for f in factors):
            what = "multiplies" if str(op_tok) == "*" else "divides"
            raise self.ctx.error(f"a {'product' if what == 'multiplies' else 'quotient'} in a "
                                 f"constant {what} integers and dim names", op_tok)
        dim = self.dim_arith(factors[0], str(op_tok), factors[1], op_tok)
        return dim if isinstance(dim, int) else Name(dim, self.ctx.loc(tree))

    # -- the CallSite interface used by calls.py ---------------------------------------
    def emit(self, cls, operands, attributes, loc: Location) -> Value:
        try:
            op = cls(operands, attributes=attributes, loc=loc)
        except VerifyError as e:
            raise MlfuseError(e.message, loc) from None
        self.func.body.append(op)
        return op.result

    def elementwise(self, name: str, operands, loc: Location):
        """An elementwise op; literal operands fold together or take their partner's dtype."""
        operands = [self.single(o, loc) for o in operands]
        spec = ELEMENTWISE[name]
        if spec.accepts == "bool":
            number = next((o for o in operands if isinstance(o, (Literal, Deferred))), None)
            if number is not None:
                raise MlfuseError(f"{name} takes bool operands, not {number} (a comparison "
                                  "combined with & or | needs parentheses: (x > 0) & (y < 1))",
                                  number.loc)
        if all(isinstance(o, Literal) for o in operands):
            return fold(spec, operands, loc)
        data = operands[1:] if spec.accepts == "where" else operands
        partner = next((o.type.dtype for o in data if isinstance(o, Value)), None)
        if partner is None and all(isinstance(o, (Literal, Deferred)) for o in operands) \
                and not spec.result_bool and spec.accepts not in ("bool", "where"):
            # dims (and literals) only: typed once the result meets a partner or a cast
            text = f"{name}({', '.join(map(str, operands))})"
            return Deferred(text, lambda dtype: self.emit(
                ELEMENTWISE_OPS[name], [self.constant(o, dtype) for o in operands], None, loc),
                loc)
        if partner is None:
            raise MlfuseError(f"{name} needs a tensor among its data operands to give the "
                              "literals and dims a dtype (or cast one: cast(D, dtype=f32))", loc)
        typed = [self.constant(o, partner) if isinstance(o, (Literal, Deferred)) else o
                 for o in operands]
        return self.emit(ELEMENTWISE_OPS[name], typed, None, loc)

    def tensor(self, value, what: str, loc: Location) -> Value:
        self.single(value, loc)
        if isinstance(value, Literal):
            raise MlfuseError(f"{what} must be a tensor, not the literal {value} (a literal alone "
                              "has no dtype; use cast(..., dtype=...))", loc)
        if isinstance(value, Deferred):
            raise MlfuseError(f"{what} must be a tensor, not {value}, which uses a dim as a value "
                              f"and has no dtype alone; use cast({value}, dtype=...)", loc)
        return value

    def constant(self, literal: Literal | Deferred, dtype: str) -> Value:
        if isinstance(literal, Deferred):
            return literal.build(dtype)
        op = constant_op(literal, dtype)
        self.func.body.append(op)
        return op.result
