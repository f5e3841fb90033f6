"""The built-in functions of .fuse: one signature per name, binding Python-style.

Each :class:`Signature` lists its parameters (tensors, or compile-time constants
of a kind such as ``axes`` or ``dims``) and a builder that turns the bound
arguments into tensor ops. The same table produces the op reference in
docs/language.md (see ``reference.py``), so the documentation cannot drift.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from mlfuse.dialects import tensor as T
from mlfuse.dialects import tensor_indexing as TI
from mlfuse.dialects import tensor_windows as W
from mlfuse.dialects.elementwise import ELEMENTWISE
from mlfuse.dialects.shapes import normalize_axes
from mlfuse.errors import Location, MlfuseError
from mlfuse.ir.core import VerifyError

from mlfuse.frontend.indexing import (build_arange, build_concat, build_iota, build_matmul,
                                      build_pad, build_split, build_take)
from mlfuse.frontend.window_calls import arg_reduce, clip, cumsum, global_pool, pool
from mlfuse.frontend.literals import Deferred, Literal
from mlfuse.frontend.static import convert_static

REQUIRED = object()


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensor", or a compile-time kind of ``static.convert_static``
    default: Any = REQUIRED
    shown_default: str | None = None  # how the reference prints the default

    def describe(self) -> str:
        if self.default is REQUIRED:
            return self.name
        shown = self.shown_default or str(self.default).lower()
        return f"{self.name}={shown}"


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]
    build: Callable[["CallSite", "BoundArgs"], Any]
    result: str  # result shape and dtype, for the reference
    ops: tuple = ()  # the tensor op classes it builds, whose docs give the semantics
    group: str = "Shape and layout"  # the reference's section

    def describe(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"


class BoundArgs:
    """Arguments bound to parameter names, each with its source position."""

    def __init__(self, call_loc: Location):
        self.values: dict[str, Any] = {}
        self.locs: dict[str, Location] = {}
        self.call_loc = call_loc

    def __getitem__(self, name: str):
        return self.values[name]

    def loc(self, name: str) -> Location:
        return self.locs.get(name, self.call_loc)


class CallSite(Protocol):
    """What a builder needs from the function being built (builder.FunctionBuilder)."""

    def emit(self, cls, operands, attributes, loc): ...  # one op -> its result
    def elementwise(self, name, operands, loc): ...  # literals folded or typed
    def tensor(self, value, what, loc): ...  # the value, if it is not a literal
    def constant(self, literal, dtype): ...  # a literal as a dtype constant


def bind(sig: Signature, positional, keywords, call_loc, evaluate) -> BoundArgs:
    """Bind ``positional`` [(tree, loc)] and ``keywords`` [(name, name_loc, tree, loc)] to
    ``sig``'s parameters; ``evaluate(tree, kind, loc)`` turns an argument into its value."""
    bound = BoundArgs(call_loc)
    trees: dict[str, tuple] = {}
    if len(positional) > len(sig.params):
        extra_loc = positional[len(sig.params)][1]
        raise MlfuseError(f"{sig.name} takes {len(sig.params)} argument(s) but "
                          f"{len(positional)} were given", extra_loc)
    for param, (tree, loc) in zip(sig.params, positional):
        trees[param.name] = (tree, loc)
    names = [p.name for p in sig.params]
    for key, key_loc, tree, loc in keywords:
        if key not in names:
            raise MlfuseError(f"{sig.name} has no parameter '{key}' "
                              f"(parameters: {', '.join(names)})", key_loc)
        if key in trees:
            raise MlfuseError(f"{sig.name} got two values for '{key}'", key_loc)
        trees[key] = (tree, loc)
    for param in sig.params:
        if param.name in trees:
            tree, loc = trees[param.name]
            bound.values[param.name] = evaluate(tree, param.kind, loc)
            bound.locs[param.name] = loc
        elif param.default is REQUIRED:
            raise MlfuseError(f"{sig.name} is missing argument '{param.name}' "
                              f"(signature: {sig.describe()})", call_loc)
        else:
            bound.values[param.name] = convert_static(param.kind, param.default, call_loc)
    return bound


def _axis(args: BoundArgs, rank: int, name: str = "axis") -> list[int]:
    """Normalized axes of ``args[name]`` (None: all axes), with errors at the argument."""
    axis = args[name]
    try:
        return normalize_axes(list(range(rank)) if axis is None else axis, rank)
    except VerifyError as e:
        raise MlfuseError(e.message, args.loc(name)) from None


# -- builders -----------------------------------------------------------------------
def _elementwise(name, arity):
    def build(site: CallSite, args: BoundArgs):
        return site.elementwise(name, [args[p.name] for p in _ELEMENTWISE_PARAMS[arity]],
                                args.call_loc)
    return build


def _reduction(name):
    def build(site, args):
        x = site.tensor(args["x"], "x", args.loc("x"))
        return site.emit(T.REDUCE_OPS[name], [x], {"axis": _axis(args, x.type.rank),
                                                   "keepdims": args["keepdims"]}, args.call_loc)
    return build


def _cast(site, args):
    x, dtype = args["x"], args["dtype"]
    if isinstance(x, (Literal, Deferred)):  # cast is how a literal or a dim alone gets a dtype
        return site.constant(x, dtype)
    return site.emit(T.CastOp, [x], {"dtype": dtype}, args.call_loc)


def _with_attrs(cls, tensors, attrs=()):
    """A builder for an op taking ``tensors`` and copying constant ``attrs`` from the call."""
    def build(site, args):
        operands = [site.tensor(args[n], n, args.loc(n)) for n in tensors]
        return site.emit(cls, operands, {a: args[a] for a in attrs}, args.call_loc)
    return build


def _transpose(site, args):
    x = site.tensor(args["x"], "x", args.loc("x"))
    perm = args["perm"]
    if perm is None:
        perm = list(reversed(range(x.type.rank)))
    return site.emit(T.TransposeOp, [x], {"perm": perm}, args.call_loc)


def _single_axis(cls, tensors, attrs=()):
    """A builder for a composite with one ``axis``, checked here so errors point at it."""
    def build(site, args):
        operands = [site.tensor(args[n], n, args.loc(n)) for n in tensors]
        _axis(args, operands[0].type.rank)
        return site.emit(cls, operands, {a: args[a] for a in ("axis",) + attrs}, args.call_loc)
    return build


# -- the table ----------------------------------------------------------------------
_ELEMENTWISE_PARAMS = {1: (Param("x", "tensor"),),
                       2: (Param("x", "tensor"), Param("y", "tensor")),
                       3: (Param("cond", "tensor"), Param("x", "tensor"), Param("y", "tensor"))}
_X = Param("x", "tensor")


def _elementwise_result(spec) -> str:
    if spec.accepts == "where":
        return "broadcast shape of cond, x, y; dtype of x and y (cond is bool)"
    dtype = "bool" if spec.result_bool else "the operands' dtype"
    shape = "x's shape" if spec.arity == 1 else "broadcast shape of x and y"
    return f"{shape}; {dtype}"


_REDUCE_RESULT = "x's shape without the reduced axes (kept as 1 with keepdims=true); x's dtype"

_POOL_RESULT = ("[N, C, OH, OW] with OH = (H + 2*padding - dilation*(KH-1) - 1 "
                "(+ stride-1 with ceil_mode)) // stride + 1; x's dtype")
_STRIDE = Param("stride", "pair_or_none", None, "kernel")
_WINDOW_SIGNATURES = [
    Signature("max_pool2d", (_X, Param("kernel", "pair"), _STRIDE, Param("padding", "pair", 0),
                             Param("dilation", "pair", 1), Param("ceil_mode", "bool", False)),
              pool(W.MaxPool2dOp, ("kernel", "stride", "padding", "dilation",
                                                "ceil_mode")),
              _POOL_RESULT, (W.MaxPool2dOp,), "Windows"),
    Signature("avg_pool2d", (_X, Param("kernel", "pair"), _STRIDE, Param("padding", "pair", 0),
                             Param("ceil_mode", "bool", False),
                             Param("count_include_pad", "bool", True)),
              pool(W.AvgPool2dOp, ("kernel", "stride", "padding", "ceil_mode",
                                                "count_include_pad")),
              _POOL_RESULT.replace("dilation*(KH-1) - 1", "KH"), (W.AvgPool2dOp,), "Windows"),
    Signature("global_avg_pool2d", (_X,), global_pool("mean"),
              "[N, C, 1, 1]; x's dtype (mean over axes [2, 3])", (T.MeanOp,), "Windows"),
    Signature("global_max_pool2d", (_X,), global_pool("max"),
              "[N, C, 1, 1]; x's dtype (max over axes [2, 3])", (T.MaxOp,), "Windows"),
    *[Signature(name, (_X, Param("axis", "int"), Param("keepdims", "bool", False)),
                arg_reduce(cls), "x's shape without axis (kept as 1 with "
                "keepdims=true); i32", (cls,), "Windows")
      for name, cls in (("argmax", W.ArgmaxOp), ("argmin", W.ArgminOp))],
    Signature("cumsum", (_X, Param("axis", "int"), Param("exclusive", "bool", False),
                         Param("reverse", "bool", False)),
              cumsum, "x's shape and dtype", (W.CumsumOp,), "Windows"),
    Signature("clip", (_X, Param("lo", "tensor"), Param("hi", "tensor")), clip,
              "broadcast shape of x, lo, hi; x's dtype (minimum(maximum(x, lo), hi))",
              (T.ELEMENTWISE_OPS["maximum"], T.ELEMENTWISE_OPS["minimum"]), "Elementwise"),
]

SIGNATURES: dict[str, Signature] = {}
for _name, _spec in ELEMENTWISE.items():
    SIGNATURES[_name] = Signature(_name, _ELEMENTWISE_PARAMS[_spec.arity],
                                  _elementwise(_name, _spec.arity), _elementwise_result(_spec),
                                  (T.ELEMENTWISE_OPS[_name],), "Elementwise")
for _name, _cls in T.REDUCE_OPS.items():
    SIGNATURES[_name] = Signature(
        _name, (_X, Param("axis", "axes", None, "all"), Param("keepdims", "bool", False)),
        _reduction(_name), _REDUCE_RESULT, (_cls,), "Reductions")
for _sig in [
    Signature("cast", (_X, Param("dtype", "dtype")), _cast,
              "x's shape; the given dtype (on a literal: a rank-0 constant)", (T.CastOp,),
              "Elementwise"),
    Signature("reshape", (_X, Param("shape", "dims")), _with_attrs(T.ReshapeOp, ("x",), ("shape",)),
              "the given shape (same element count); x's dtype", (T.ReshapeOp,)),
    Signature("broadcast_to", (_X, Param("shape", "dims")),
              _with_attrs(T.BroadcastToOp, ("x",), ("shape",)),
              "the given shape; x's dtype", (T.BroadcastToOp,)),
    Signature("transpose", (_X, Param("perm", "ints", None, "reversed")), _transpose,
              "x's dims permuted; x's dtype", (T.TransposeOp,)),
    Signature("matmul", (Param("a", "tensor"), Param("b", "tensor")), build_matmul,
              "NumPy matmul: operands of any rank >= 1, batch dims broadcast (built from "
              "reshapes, broadcasts and the op's forms); the operands' dtype", (T.MatmulOp,),
              "Contractions"),
    Signature("conv2d", (_X, Param("w", "tensor"), Param("stride", "pair", 1),
                         Param("padding", "pair", 0), Param("dilation", "pair", 1),
                         Param("groups", "int", 1)),
              _with_attrs(T.Conv2dOp, ("x", "w"), ("stride", "padding", "dilation", "groups")),
              "[N, O, OH, OW] with OH = (H + 2*padding - dilation*(KH-1) - 1) // stride + 1; "
              "x's dtype", (T.Conv2dOp,), "Contractions"),
    Signature("concat", (Param("xs", "tensors"), Param("axis", "int", 0)), build_concat,
              "the operands' shape with their sizes on axis added; their dtype", (TI.ConcatOp,),
              "Indexing"),
    Signature("split", (_X, Param("parts", "parts"), Param("axis", "int", 0)), build_split,
              "one value per part (assign them to as many names): x cut on axis into `parts` "
              "equal parts, or into parts of the listed sizes", (TI.SliceOp,), "Indexing"),
    Signature("pad", (_X, Param("widths", "pads"), Param("value", "float", 0.0)), build_pad,
              "each axis d longer by widths[d][0] + widths[d][1]; x's dtype", (TI.PadOp,),
              "Indexing"),
    Signature("take", (_X, Param("indices", "tensor"), Param("axis", "int", 0)), build_take,
              "x.shape[:axis] + indices.shape + x.shape[axis+1:]; x's dtype (indices i32, or an "
              "integer literal)", (TI.GatherOp,), "Indexing"),
    Signature("iota", (Param("shape", "dims"), Param("axis", "int", 0),
                       Param("dtype", "dtype", "i32")), build_iota,
              "the given shape; the given dtype", (TI.IotaOp,), "Indexing"),
    Signature("arange", (Param("start", "number"), Param("stop", "number", None, "none"),
                         Param("step", "number", 1), Param("dtype", "dtype", None, "auto")),
              build_arange, "[ceil((stop - start) / step)]: start + i*step computed in dtype "
              "(auto: i32 if start, stop and step are integers, else f32); arange(n) is "
              "0, 1, ..., n-1", (TI.IotaOp,), "Indexing"),
    *_WINDOW_SIGNATURES,
    Signature("softmax", (_X, Param("axis", "int", -1)), _single_axis(T.SoftmaxOp, ("x",)),
              "x's shape and dtype", (T.SoftmaxOp,), "Composites"),
    Signature("layernorm", (_X, Param("gamma", "tensor"), Param("beta", "tensor"),
                            Param("axis", "int", -1), Param("eps", "float", 1e-5)),
              _single_axis(T.LayernormOp, ("x", "gamma", "beta"), ("eps",)),
              "x's shape and dtype", (T.LayernormOp,), "Composites"),
    Signature("rmsnorm", (_X, Param("gamma", "tensor"), Param("eps", "float", 1e-6)),
              _with_attrs(T.RmsnormOp, ("x", "gamma"), ("eps",)), "x's shape and dtype",
              (T.RmsnormOp,), "Composites"),
]:
    SIGNATURES[_sig.name] = _sig
