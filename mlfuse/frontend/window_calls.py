"""Builders of the .fuse built-ins for the windowed ops (dialects/tensor_windows.py) and
the elementwise sugar around them: pooling (global pooling is a mean or max over the
spatial axes), argmax/argmin, cumsum, clip. ``calls.py`` declares their signatures.

Each builder takes the call site (builder.FunctionBuilder) and the bound arguments,
checks what the op's verifier cannot place (an axis argument), and emits the ops.
"""
from __future__ import annotations

from mlfuse.dialects import tensor as T
from mlfuse.dialects import tensor_windows as W
from mlfuse.dialects.shapes import normalize_axes
from mlfuse.errors import MlfuseError
from mlfuse.ir.core import VerifyError


def _one_axis(args, rank: int) -> int:
    try:
        (axis,) = normalize_axes(args["axis"], rank)
    except VerifyError as e:
        raise MlfuseError(e.message, args.loc("axis")) from None
    return axis


def pool(cls, attrs):
    """max_pool2d / avg_pool2d: stride defaults to the kernel, as in torch."""
    def build(site, args):
        x = site.tensor(args["x"], "x", args.loc("x"))
        values = {a: args[a] for a in attrs}
        if values["stride"] is None:
            values["stride"] = list(args["kernel"])
        return site.emit(cls, [x], values, args.call_loc)
    return build


def global_pool(reduction: str):
    """global_avg_pool2d / global_max_pool2d: mean / max over H and W, kept as 1 x 1."""
    def build(site, args):
        x = site.tensor(args["x"], "x", args.loc("x"))
        if x.type.rank != 4:
            raise MlfuseError(f"global pooling takes an NCHW tensor, got {x.type}", args.loc("x"))
        return site.emit(T.REDUCE_OPS[reduction], [x], {"axis": [2, 3], "keepdims": True},
                         args.call_loc)
    return build


def arg_reduce(cls):
    def build(site, args):
        x = site.tensor(args["x"], "x", args.loc("x"))
        return site.emit(cls, [x], {"axis": _one_axis(args, x.type.rank),
                                    "keepdims": args["keepdims"]}, args.call_loc)
    return build


def cumsum(site, args):
    x = site.tensor(args["x"], "x", args.loc("x"))
    return site.emit(W.CumsumOp, [x], {"axis": _one_axis(args, x.type.rank),
                                       "exclusive": args["exclusive"],
                                       "reverse": args["reverse"]}, args.call_loc)


def clip(site, args):
    """minimum(maximum(x, lo), hi): nan in x (or a bound) stays nan, and lo > hi gives
    hi, as np.clip; literal bounds take x's dtype."""
    low = site.elementwise("maximum", [args["x"], args["lo"]], args.call_loc)
    return site.elementwise("minimum", [low, args["hi"]], args.call_loc)
