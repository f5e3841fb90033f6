"""Hypothesis strategies for random valid .fuse programs and inputs that stress them.

A program is a random DAG: each statement applies one op to earlier values (so values
are shared: one value may feed a reduction, an elementwise op and a matmul alike), and
the function returns one to three of them. Every op of the language is drawn, with
valid attributes: shapes and dtypes are tracked here with the compiler's own
broadcasting rule, so every drawn program compiles. Programs shrink statement by
statement, and print as .fuse source that `mlfuse run` reproduces.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mlfuse.dialects.shapes import broadcast_shapes, dim_sum, slice_params
from mlfuse.ir.core import VerifyError
from mlfuse.ir.types import num_elements

# -- profiles (MLFUSE_FUZZ): examples per property, sizes and target -----------------
PROFILE = os.environ.get("MLFUSE_FUZZ", "ci")
EXAMPLES = {  # property -> examples in each profile
    "interpreters": {"ci": 250, "long": 10000, "gpu": 50},
    "kernels": {"ci": 60, "long": 1000, "gpu": 40},
    "overflow": {"ci": 20, "long": 300, "gpu": 15},
    "explain": {"ci": 150, "long": 5000, "gpu": 50},
    "mutations": {"ci": 200, "long": 10000, "gpu": 50},
    "calls": {"ci": 20, "long": 500, "gpu": 50},
    "permute": {"ci": 8, "long": 300, "gpu": 40},
    "short_rows": {"ci": 6, "long": 300, "gpu": 40},
    "grouped_views": {"ci": 6, "long": 300, "gpu": 40},
    "channels_last": {"ci": 6, "long": 300, "gpu": 40},
    "column_moments": {"ci": 6, "long": 300, "gpu": 40},
    "split_stages": {"ci": 6, "long": 300, "gpu": 40},
    "column_levels": {"ci": 6, "long": 300, "gpu": 40},
    "staged_rows": {"ci": 6, "long": 300, "gpu": 40},
    "split_reductions": {"ci": 8, "long": 300, "gpu": 40},
    "uniform_strips": {"ci": 6, "long": 300, "gpu": 40},
    "split_tiles": {"ci": 6, "long": 300, "gpu": 40},
}
SMALL_DIMS = {"N": 2, "M": 3}  # symbolic sizes for interpreters and the simulator
KERNEL_DIMS = {"N": 37, "M": 300} if PROFILE == "gpu" else SMALL_DIMS
TARGET = "cuda" if PROFILE == "gpu" else "simulator"
for _name in ("ci", "long", "gpu"):
    # ci is derandomized so that CI runs are repeatable; the others explore
    settings.register_profile(f"fuzz-{_name}", deadline=None, derandomize=_name == "ci",
                              suppress_health_check=list(HealthCheck), print_blob=True)
FUZZ = settings.get_profile(f"fuzz-{PROFILE}")


def fuzz_settings(prop: str) -> settings:
    """The profile's settings for one property (see EXAMPLES)."""
    return settings(FUZZ, max_examples=EXAMPLES[prop][PROFILE])


FLOATS = ("f32", "f64", "bf16")  # a program's dtype; integers come from casts
INTS = ("i32", "i64")
FLOAT_UNARY = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "gelu", "silu", "sin", "cos",
               "erf", "floor", "ceil", "round", "log1p", "expm1", "softplus", "hardswish",
               "hardsigmoid"]
SIGNED_UNARY = ["neg", "abs", "relu"]  # also defined on integers
FLOAT_BINARY = ["/", "**", "div", "pow"]
SIGNED_BINARY = ["+", "-", "*", "add", "sub", "mul", "maximum", "minimum"]
OPERATORS = {"+", "-", "*", "/", "**"}
COMPARE = ["<", "<=", ">", ">=", "==", "!=", "lt", "ge", "eq", "ne"]
REDUCE = ["sum", "max", "min", "mean"]
FLOAT_LITERALS = ["2.0", "0.5", "-1.0", "0.0", "3", "1e-3", ".25"]
INT_LITERALS = ["2", "-1", "0", "3"]
DIMS = [1, 2, 3, 4, "N", "M"]


@dataclass(frozen=True)
class Value:
    name: str
    shape: tuple
    dtype: str  # one of FLOATS, one of INTS or bool

    @property
    def concrete(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)


def type_text(dtype: str, shape) -> str:
    return f"{dtype}[{', '.join(map(str, shape))}]"


def dims_text(shape) -> str:
    return f"[{', '.join(map(str, shape))}]"


@dataclass
class Program:
    params: list = field(default_factory=list)   # Values
    lines: list = field(default_factory=list)    # statements
    values: list = field(default_factory=list)   # Values defined so far (params first)
    results: list = field(default_factory=list)  # Values returned

    def param(self, shape, dtype) -> Value:
        # a parameter's dims are integers or names (the language): an operand shaped like
        # a concat's result, [2*N], cannot be one, so such a draw is dropped (the long
        # profile drew matmul(concat([x1, x1], axis=1), x2) with x2: f32[2*N, 1])
        assume(all(isinstance(d, int) or str(d).isidentifier() for d in shape))
        v = Value(f"x{len(self.params)}", tuple(shape), dtype)
        self.params.append(v)
        self.values.append(v)
        return v

    def max_elements(self, dims: dict) -> int:
        return max(num_elements(v.shape, dims) for v in self.values)

    def source(self) -> str:
        params = ", ".join(f"{v.name}: {type_text(v.dtype, v.shape)}" for v in self.params)
        res = [type_text(v.dtype, v.shape) for v in self.results]
        ret = res[0] if len(res) == 1 else f"({', '.join(res)})"
        body = "".join(f"    {line}\n" for line in self.lines)
        names = ", ".join(v.name for v in self.results)
        return f"func f({params}) -> {ret} {{\n{body}    return {names}\n}}\n"


def _broadcast(a, b):
    try:
        return broadcast_shapes(a, b)
    except VerifyError:
        return None


def _call(fn: str, *args) -> str:
    return f"{fn}({', '.join(args)})"


def _apply(fn: str, a: str, b: str) -> str:
    return f"{a} {fn} {b}" if fn in OPERATORS else _call(fn, a, b)


# -- one statement per op kind: each returns (expression, shape, dtype) or None -------
def _unary(draw, p, a):
    if a.dtype == "bool":
        return None
    fns = SIGNED_UNARY + (FLOAT_UNARY if a.dtype not in INTS else [])
    fn = draw(st.sampled_from(fns + ["-"]))
    return (f"-{a.name}" if fn == "-" else _call(fn, a.name)), a.shape, a.dtype


def _binary(draw, p, a):
    if a.dtype == "bool":
        return None
    fn = draw(st.sampled_from(SIGNED_BINARY + (FLOAT_BINARY if a.dtype not in INTS else [])))
    if draw(st.integers(0, 3)) == 0:  # a literal (or a dim as a value) on either side
        lit = draw(st.sampled_from(INT_LITERALS if a.dtype in INTS else FLOAT_LITERALS))
        dims = sorted({d for v in p.params for d in v.shape if isinstance(d, str)})
        if dims and draw(st.integers(0, 2)) == 0:
            lit = draw(st.sampled_from(dims))
        x, y = (a.name, lit) if draw(st.booleans()) else (lit, a.name)
        return _apply(fn, x, y), a.shape, a.dtype
    b = draw(st.sampled_from([v for v in p.values if v.dtype == a.dtype
                              and _broadcast(a.shape, v.shape) is not None]))
    return _apply(fn, a.name, b.name), _broadcast(a.shape, b.shape), a.dtype


def _compare(draw, p, a):
    if a.dtype == "bool":
        return None
    b = draw(st.sampled_from([v for v in p.values if v.dtype == a.dtype
                              and _broadcast(a.shape, v.shape) is not None]))
    op = draw(st.sampled_from(COMPARE))
    expr = _call(op, a.name, b.name) if op.isalpha() else f"{a.name} {op} {b.name}"
    return expr, _broadcast(a.shape, b.shape), "bool"


def _where(draw, p, a):
    conds = [v for v in p.values if v.dtype == "bool"]
    if a.dtype != "bool" and not conds:
        return None
    a = a if a.dtype == "bool" else draw(st.sampled_from(conds))
    x = draw(st.sampled_from([v for v in p.values if v.dtype != "bool"]))
    ys = [v for v in p.values if v.dtype == x.dtype and _broadcast(x.shape, v.shape) is not None]
    shape = _broadcast(a.shape, x.shape)
    ys = [v for v in ys if shape is not None and _broadcast(shape, v.shape) is not None]
    if not ys:
        return None
    if draw(st.integers(0, 3)) == 0:  # a literal branch now and then
        lit = draw(st.sampled_from(INT_LITERALS if x.dtype in INTS else FLOAT_LITERALS))
        return _call("where", a.name, x.name, lit), shape, x.dtype
    y = draw(st.sampled_from(ys))
    return _call("where", a.name, x.name, y.name), _broadcast(shape, y.shape), x.dtype


def _logical(draw, p, a):
    """& | ~ of bool values (comparisons in parentheses, as the precedence needs)."""
    bools = [v for v in p.values if v.dtype == "bool"]
    if not bools:
        return None
    a = a if a.dtype == "bool" else draw(st.sampled_from(bools))
    op = draw(st.sampled_from(["&", "|", "~"]))
    if op == "~":
        return f"~{a.name}", a.shape, "bool"
    b = draw(st.sampled_from([v for v in bools if _broadcast(a.shape, v.shape) is not None]))
    return f"{a.name} {op} {b.name}", _broadcast(a.shape, b.shape), "bool"


def _clip(draw, p, a):
    if a.dtype == "bool":
        return None
    lits = INT_LITERALS if a.dtype in INTS else FLOAT_LITERALS  # (0.5 is no i64 bound)
    lo, hi = sorted(draw(st.sampled_from(lits)) for _ in range(2))
    return _call("clip", a.name, lo, hi), a.shape, a.dtype


def _nchw(a):
    """``a`` viewed as NCHW (leading 1s added): (expression, shape), or None past rank 4."""
    if not 1 <= len(a.shape) <= 4:
        return None
    shape = (1,) * (4 - len(a.shape)) + a.shape
    return (a.name if len(a.shape) == 4 else _call("reshape", a.name, dims_text(shape))), shape


def _pool(draw, p, a):
    """max_pool2d or avg_pool2d with a valid window (symbolic sizes: 'same' windows)."""
    viewed = _nchw(a) if a.dtype in FLOATS else None
    if viewed is None:
        return None
    x, shape = viewed
    kind = draw(st.sampled_from(["max_pool2d", "avg_pool2d"]))
    ceil = draw(st.booleans())
    attrs, out = [], []
    for size in shape[2:]:
        dilation = draw(st.sampled_from([1, 1, 2])) if kind == "max_pool2d" else 1
        if isinstance(size, str):
            kernel = draw(st.sampled_from([1, 3]))
            stride, pad = 1, dilation * (kernel - 1) // 2
        else:
            stride = draw(st.integers(1, 3))
            fits = [k for k in (1, 2, 3) if dilation * (k - 1) + 1 <= size]
            kernel = draw(st.sampled_from(fits))
            pad = draw(st.integers(0, (dilation * (kernel - 1) + 1) // 2))
        span = dilation * (kernel - 1) + 1
        if isinstance(size, str):
            out.append(size)
        else:
            n = (size + 2 * pad - span + (stride - 1 if ceil else 0)) // stride + 1
            out.append(n - 1 if ceil and (n - 1) * stride >= size + pad else n)
        attrs.append((kernel, stride, pad, dilation))
    text = [f"{key}=[{attrs[0][i]}, {attrs[1][i]}]"
            for i, key in enumerate(["kernel", "stride", "padding", "dilation"])]
    if kind == "avg_pool2d":
        text = text[:3] + [f"count_include_pad={draw(st.sampled_from(['true', 'false']))}"]
    text.append(f"ceil_mode={'true' if ceil else 'false'}")
    return _call(kind, x, *text), shape[:2] + tuple(out), a.dtype


def _scan(draw, p, a):
    """argmax/argmin (an i32 result) or cumsum along one axis."""
    if a.dtype == "bool" or not a.shape:
        return None
    rank = len(a.shape)
    axis = draw(st.integers(-rank, rank - 1))
    kind = draw(st.sampled_from(["argmax", "argmin", "cumsum"]))
    if kind == "cumsum":
        flags = [f"{f}={draw(st.sampled_from(['true', 'false']))}" for f in ("exclusive", "reverse")]
        return _call("cumsum", a.name, f"axis={axis}", *flags), a.shape, a.dtype
    keep = draw(st.booleans())
    shape = tuple(1 if i == axis % rank else d for i, d in enumerate(a.shape)) if keep else \
        tuple(d for i, d in enumerate(a.shape) if i != axis % rank)
    return (_call(kind, a.name, f"axis={axis}", f"keepdims={'true' if keep else 'false'}"),
            shape, "i32")


def _cast(draw, p, a):
    # float <-> float, bools to 0/1 values, integers to floats, bool and each other (their
    # values are small), and floats or integers to bool; never a float to an integer
    # (NaN and overflow have no defined integer value)
    floats = list(FLOATS)
    targets = {"bool": floats + list(INTS), **{i: floats + ["bool"] + list(INTS) for i in INTS}}
    to = draw(st.sampled_from([t for t in targets.get(a.dtype, floats + ["bool"]) if t != a.dtype]))
    return _call("cast", a.name, f"dtype={to}"), a.shape, to


def _reduce(draw, p, a):
    if a.dtype == "bool" or not a.shape:
        return None
    fn = draw(st.sampled_from(REDUCE if a.dtype not in INTS else REDUCE[:3]))
    rank = len(a.shape)
    keep = draw(st.booleans())
    form = draw(st.sampled_from(["all", "int", "list"]))
    if form == "all":
        args = [a.name] + (["keepdims=true"] if keep else [])
        axes = list(range(rank))
    else:
        axes = sorted(set(draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank))))
        written = [ax - rank if draw(st.booleans()) else ax for ax in axes]  # negatives too
        axis = str(written[0]) if form == "int" and len(axes) == 1 else dims_text(written)
        args = [a.name, f"axis={axis}", f"keepdims={'true' if keep else 'false'}"]
    shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape)) if keep else \
        tuple(d for i, d in enumerate(a.shape) if i not in axes)
    return _call(fn, *args), shape, a.dtype


def _centre(draw, p, a):
    """a combined with its own reduction over some axes (kept as 1s), broadcast back over
    them: x - mean(x, axis=0, keepdims=true), softmax-like statistics over a middle axis
    (the strips schedule's broadcast-back epilogue)."""
    if a.dtype not in FLOATS or not a.shape:
        return None
    rank = len(a.shape)
    axes = sorted(set(draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank))))
    fn = draw(st.sampled_from(REDUCE))
    op = draw(st.sampled_from(["-", "*", "+"]))
    stat = _call(fn, a.name, f"axis={dims_text(axes)}", "keepdims=true")
    return f"{a.name} {op} {stat}", a.shape, a.dtype


def _transpose(draw, p, a):
    if len(a.shape) < 2:
        return None
    if draw(st.booleans()):
        return _call("transpose", a.name), a.shape[::-1], a.dtype
    perm = draw(st.permutations(range(len(a.shape))))
    return _call("transpose", a.name, dims_text(perm)), tuple(a.shape[i] for i in perm), a.dtype


def _reshape(draw, p, a):
    if a.concrete:  # any factorization of the element count
        size, shape = int(np.prod(a.shape)), []
        while size > 1 and len(shape) < 3:
            f = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
            shape.append(f)
            size //= f
        shape = tuple(shape + ([size] if size > 1 else [])) or (1,)
    else:  # symbolic dims stay, in order; size-1 dims come and go
        shape = tuple(d for d in a.shape if d != 1)
        shape = shape[:1] + (1,) + shape[1:] if draw(st.booleans()) else shape
    return _call("reshape", a.name, dims_text(shape)), shape, a.dtype


def _broadcast_to(draw, p, a):
    # a result may only name dims that some parameter introduces
    known = [d for d in DIMS if isinstance(d, int) or any(d in v.shape for v in p.params)]
    shape = tuple(draw(st.sampled_from(known)) if d == 1 else d for d in a.shape)
    if len(shape) < 4:  # a new leading dim
        shape = tuple(draw(st.lists(st.sampled_from(known), max_size=1))) + shape
    if shape == a.shape:
        return None
    return _call("broadcast_to", a.name, dims_text(shape)), shape, a.dtype


def _composite(draw, p, a):
    if a.dtype not in FLOATS or not a.shape:
        return None
    rank = len(a.shape)
    kind = draw(st.sampled_from(["softmax", "layernorm", "rmsnorm"]))
    axis = draw(st.integers(-rank, rank - 1))
    if kind == "softmax":
        return _call("softmax", a.name, f"axis={axis}"), a.shape, a.dtype
    if kind == "rmsnorm":
        gamma = p.param(a.shape[-1:], a.dtype)
        return _call("rmsnorm", a.name, gamma.name, "eps=1e-3"), a.shape, a.dtype
    gamma, beta = p.param(a.shape[axis:], a.dtype), p.param(a.shape[axis:], a.dtype)
    # eps 0.1: layernorm multiplies the rounding of x - mean by 1/sqrt(var + eps), so on
    # rows of equal values a tiny eps would turn any summation order into a large error
    return (_call("layernorm", a.name, gamma.name, beta.name, f"axis={axis}", "eps=0.1"),
            a.shape, a.dtype)


def _matmul(draw, p, a):
    """[m,k]x[k,n], [b,m,k]x[b,k,n] or [b,m,k]x[k,n]; the right side a fresh weight, a
    value of fitting shape or ``a`` itself transposed (a Gram matrix)."""
    if a.dtype not in FLOATS or not 1 <= len(a.shape) <= 3:
        return None
    left, shape = a.name, a.shape
    if len(a.shape) == 1:
        shape = (a.shape[0], 1)
        left = _call("reshape", a.name, dims_text(shape))
    k = shape[-1]
    how = draw(st.sampled_from(["weight", "value", "gram"]))
    if how == "gram":
        perm = "[1, 0]" if len(shape) == 2 else "[0, 2, 1]"
        return _call("matmul", left, _call("transpose", left, perm)), shape[:-1] + shape[-2:-1], a.dtype
    fitting = [v for v in p.values if v.dtype == a.dtype and len(v.shape) in (2, 3) and v.shape[-2] == k
               and (len(v.shape) == 2 or (len(shape) == 3 and v.shape[0] == shape[0]))]
    if how == "value" and fitting:
        w = draw(st.sampled_from(fitting))
    else:
        batch = shape[:1] if len(shape) == 3 and draw(st.booleans()) else ()
        w = p.param(batch + (k, draw(st.sampled_from(DIMS))), a.dtype)
    return _call("matmul", left, w.name), shape[:-1] + w.shape[-1:], a.dtype


def _conv2d(draw, p, a):
    """conv2d of ``a`` viewed as NCHW (leading 1s added) with a fresh OIHW weight."""
    if a.dtype not in FLOATS or not 1 <= len(a.shape) <= 4:
        return None
    x = a.name
    shape = (1,) * (4 - len(a.shape)) + a.shape
    if len(a.shape) < 4:
        x = _call("reshape", a.name, dims_text(shape))
    window, attrs = [], []
    for size in shape[2:]:
        dilation = draw(st.sampled_from([1, 1, 2]))
        if isinstance(size, str):  # symbolic: only 'same' shapes are allowed
            kernel = draw(st.sampled_from([1, 3]))
            stride, pad = 1, dilation * (kernel - 1) // 2
        else:
            stride, pad = draw(st.integers(1, 2)), draw(st.integers(0, 1))
            fits = [k for k in (1, 2, 3) if dilation * (k - 1) + 1 <= size + 2 * pad]
            kernel = draw(st.sampled_from(fits))
        window.append(kernel)
        attrs.append((stride, pad, dilation))
    channels, groups = shape[1], 1
    if isinstance(channels, int) and channels > 1 and draw(st.booleans()):
        groups = draw(st.sampled_from([g for g in range(2, channels + 1) if channels % g == 0]))
    if groups > 1:  # grouped: per group 1 or 2 output channels
        w = p.param((groups * draw(st.integers(1, 2)), channels // groups) + tuple(window), a.dtype)
    else:
        w = p.param((draw(st.integers(1, 3)), channels) + tuple(window), a.dtype)
    out = []
    for size, kernel, (stride, pad, dilation) in zip(shape[2:], window, attrs):
        span = dilation * (kernel - 1) + 1
        out.append(size if isinstance(size, str) else (size + 2 * pad - span) // stride + 1)
    text = ", ".join(f"{key}=[{attrs[0][i]}, {attrs[1][i]}]"
                     for i, key in enumerate(["stride", "padding", "dilation"]))
    text += f", groups={groups}" if groups > 1 else ""
    return _call("conv2d", x, w.name, text), (shape[0], w.shape[0]) + tuple(out), a.dtype


def _slice(draw, p, a):
    """A subscript: per axis a whole ':' , an integer index or a window (a symbolic axis
    only whole, forwards or backwards, or its first or last element)."""
    if not a.shape:
        return None
    items, shape = [], []
    for size in a.shape:
        if isinstance(size, str):
            item = draw(st.sampled_from([":", "::-1", "0", "-1", "0:1", "-1:"]))
        else:
            item = draw(st.sampled_from([":", "index", "window"]))
            if item == "index":
                item = str(draw(st.integers(-size, size - 1)))
            elif item == "window":
                start, stop = draw(st.integers(-size, size - 1)), draw(st.integers(-size - 1, size))
                step = draw(st.sampled_from([1, 2, -1, -2]))
                count = slice_params(size, start, stop, step)[2]
                if count == 0:
                    return None
                item = f"{start}:{stop}:{step}"
        items.append(item)
        if ":" in item:
            shape.append(size if item in (":", "::-1") else 1 if item in ("0:1", "-1:") else
                         slice_params(size, *map(int, item.split(":")))[2])
    return f"{a.name}[{', '.join(items)}]", tuple(shape), a.dtype


def _concat(draw, p, a):
    """a joined with values of its dtype and shape off one axis (a itself too)."""
    if not a.shape:
        return None
    axis = draw(st.integers(0, len(a.shape) - 1))
    same = [v for v in p.values if v.dtype == a.dtype and len(v.shape) == len(a.shape)
            and all(x == y for k, (x, y) in enumerate(zip(v.shape, a.shape)) if k != axis)]
    parts = [a] + draw(st.lists(st.sampled_from(same), min_size=1, max_size=2))
    total = dim_sum([v.shape[axis] for v in parts])
    if total is None:
        return None
    shape = a.shape[:axis] + (total,) + a.shape[axis + 1:]
    written = axis - len(a.shape) if draw(st.booleans()) else axis
    return _call("concat", dims_text([v.name for v in parts]), f"axis={written}"), shape, a.dtype


def _pad(draw, p, a):
    if not a.shape or a.dtype == "bool":
        return None
    widths = [[0, 0] if isinstance(d, str) else [draw(st.integers(0, 2)), draw(st.integers(0, 2))]
              for d in a.shape]
    shape = tuple(d if isinstance(d, str) else d + lo + hi for d, (lo, hi) in zip(a.shape, widths))
    value = draw(st.sampled_from(INT_LITERALS if a.dtype == "i32" else FLOAT_LITERALS))
    return _call("pad", a.name, str(widths), f"value={value}"), shape, a.dtype


def _take(draw, p, a):
    """a gathered along an axis at a fresh i32 parameter's indices (inputs_for draws
    them in and out of range)."""
    if not a.shape:
        return None
    axis = draw(st.integers(0, len(a.shape) - 1))
    indices = p.param(tuple(draw(st.lists(st.sampled_from(DIMS), max_size=2))), "i32")
    shape = a.shape[:axis] + indices.shape + a.shape[axis + 1:]
    return _call("take", a.name, indices.name, f"axis={axis}"), shape, a.dtype


KINDS = {"unary": _unary, "binary": _binary, "compare": _compare, "where": _where,
         "cast": _cast, "reduce": _reduce, "transpose": _transpose, "reshape": _reshape,
         "broadcast_to": _broadcast_to, "composite": _composite, "matmul": _matmul,
         "conv2d": _conv2d, "slice": _slice, "concat": _concat, "pad": _pad, "take": _take,
         "logical": _logical, "clip": _clip, "pool": _pool, "scan": _scan, "centre": _centre}
ELEMENTWISE_KINDS = ["unary", "binary", "binary", "compare", "where", "cast", "logical", "clip"]


@st.composite
def programs(draw, max_ops: int = 8, contractions: bool = True):
    """A random valid program over one to three parameters that broadcast against a
    base shape of rank 1-3 (concrete and symbolic dims), in f32 or f64."""
    p = Program()
    dtype = draw(st.sampled_from(FLOATS))
    base = tuple(draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3)))
    for i in range(draw(st.integers(1, 3))):
        shape = base
        if i and draw(st.booleans()):  # a broadcastable suffix, some dims 1
            k = draw(st.integers(0, len(base)))
            shape = tuple(1 if draw(st.booleans()) else d for d in base[k:])
        p.param(shape, dtype)
    kinds = ELEMENTWISE_KINDS + ["reduce", "reduce", "centre", "transpose", "reshape", "broadcast_to",
                                 "composite", "slice", "concat", "pad", "take", "scan"] + (
        ["matmul", "conv2d", "pool"] if contractions else [])
    for n in range(draw(st.integers(1, max_ops))):
        a = draw(st.sampled_from(p.values))
        made = KINDS[draw(st.sampled_from(kinds))](draw, p, a)
        if made is not None:
            expr, shape, dtype = made
            p.lines.append(f"v{n} = {expr}")
            p.values.append(Value(f"v{n}", tuple(shape), dtype))
    computed = [v for v in p.values if v not in p.params] or p.values
    picks = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    p.results = [computed[-1]] + [v for v in picks if v != computed[-1]][:2]
    return p


# Large finite magnitudes are kept out of the default inputs: a sum of 1e4 and -1e4
# cancels, and its rounding error then depends on the terms, not on the (small) result
# that the tolerance rule scales with; they get their own property, with a looser rule.
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30]
HUGE = [1e4, -1e4, 1e30, -1e30, 3e38, -3e38, 1e300, -1e300, 88.0, 89.0, 710.0]


def _elements(dtype, special, huge):
    width = 64 if dtype == np.float64 else 32  # bf16 values: f32 ones, rounded
    normal = st.floats(-4, 4, width=width, allow_subnormal=False)
    extra = SPECIAL + (HUGE if huge else []) if special else []
    if not extra:
        return normal
    with np.errstate(over="ignore"):
        extra = [float(dtype(x)) for x in extra]  # 1e300 becomes inf in f32
    return st.one_of(normal, normal, normal, st.sampled_from(extra))


@st.composite
def inputs_for(draw, func, dims: dict, special: bool = True, huge: bool = False):
    """Arguments for a tensor-level function drawn element by element, so they shrink
    to zeros: floats in [-4, 4] mixed with values that stress semantics (signed zeros,
    infinities, NaN, large and tiny magnitudes; with ``huge``, magnitudes that overflow)."""
    from mlfuse.dtypes import BFLOAT16, numpy_dtype
    args = []
    for a in func.args:
        shape = tuple(dims[d] if isinstance(d, str) else d for d in a.type.shape)
        dtype = numpy_dtype(a.type.dtype)
        if dtype == np.int32:  # gather indices (strategies' only i32 parameters): some out of range
            array = draw(hnp.arrays(dtype, shape, elements=st.integers(-6, 6)))
        else:
            drawn = np.float32 if dtype == BFLOAT16 else dtype.type  # Hypothesis has no bf16
            array = draw(hnp.arrays(drawn, shape, elements=_elements(drawn, special, huge)))
            array = array.astype(dtype)
        args.append(np.ascontiguousarray(array) if array.ndim else array)
    return args


@st.composite
def permuted_programs(draw):
    """A transpose of rank 2-4 fused with elementwise work: ``op(transpose(x, perm), y)``
    (x maybe through a reshape splitting an axis, y maybe broadcast along some axes),
    maybe a second input read transposed, maybe reduced (a sum, max or mean over every
    axis or the last two), in f32, f16 or bf16, over dims long enough
    for transpose tiles (17, 20: part of a square) and short ones. Sizes are concrete, so the
    schedule the fuse pass picks is the one the simulator runs."""
    rank = draw(st.integers(2, 4))
    dtype = draw(st.sampled_from(["f32", "f16", "bf16"]))
    # 16 and 20: tiles' vector kernel (whole vectors); 17: the scalar one (ragged)
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 16, 17, 20]), min_size=rank,
                                max_size=rank)))
    assume(int(np.prod(shape)) <= 2048)  # the simulator runs a Python thread per point
    perm = draw(st.permutations(range(rank)))
    out = tuple(shape[i] for i in perm)
    p = Program()
    # x maybe read through a reshape that splits one of its axes in two (a ravel of two
    # axes in the kernel's index: coalesce-axes merges them back)
    split = draw(st.integers(0, rank - 2)) if rank > 2 and draw(st.booleans()) else None
    stored = shape if split is None else \
        shape[:split] + (shape[split] * shape[split + 1],) + shape[split + 2:]
    x = p.param(stored, dtype)
    source = x.name if split is None else _call("reshape", x.name, dims_text(shape))
    # y maybe broadcast along some axes (a bias over W alone: indexes one of two axes
    # coalesce-axes would otherwise merge, so they stay apart)
    kept = draw(st.lists(st.booleans(), min_size=rank, max_size=rank)) \
        if draw(st.booleans()) else [True] * rank
    y = p.param(tuple(d if k else 1 for d, k in zip(out, kept)), dtype)
    term = _call("transpose", source, dims_text(perm))
    op = draw(st.sampled_from(["+", "*", "-"]))
    expr = f"{term} {op} {y.name}"
    if draw(st.booleans()):
        z = p.param(shape, dtype)
        expr = f"maximum({expr}, {_call('transpose', z.name, dims_text(perm))})"
    p.lines.append(f"v0 = {_call('relu', expr) if draw(st.booleans()) else expr}")
    p.values.append(Value("v0", out, dtype))
    p.results = [p.values[-1]]
    # maybe reduced over every axis or the last two: a reduction that reads x permuted
    # and y along its innermost axis (a split through tiles, codegen/split_tiles.py)
    kind = draw(st.sampled_from([None, None, "sum", "max", "mean"]))
    if kind is not None:
        axes = list(range(rank)) if rank == 2 or draw(st.booleans()) else [rank - 2, rank - 1]
        kept = tuple(d for n, d in enumerate(out) if n not in axes)
        p.lines.append(f"v1 = {kind}(v0, axis={dims_text(axes)})")
        p.values.append(Value("v1", kept, dtype))
        p.results = [p.values[-1]]
    return p


@st.composite
def tiled_reduction_programs(draw, keep_points: bool = False):
    """A reduction of a transpose combined with a tensor of its shape:
    ``kind(unary(transpose(x, perm) op y), axis=...)`` over the last 2..rank axes
    (rank 2-4; y maybe broadcast along some axes), in f32, f16 or bf16. Sides of 8 and
    more make squares (13 and 17: ragged ones), shorter ones the flat split
    (codegen/split_tiles.py); axes of one value keep a nest level of extent 1.
    ``keep_points``: over the last 1..rank-1 axes instead (strips through tiles,
    codegen/schedule_strip_tiles.py, where the points' last axis is read by some)."""
    rank = draw(st.integers(2, 4))
    dtype = draw(st.sampled_from(["f32", "f16", "bf16"]))
    sides = [1, 8, 13, 33, 40] if keep_points else [1, 3, 8, 13, 17]  # (33, 40: strips
    shape = tuple(draw(st.lists(st.sampled_from(sides), min_size=rank,  # of 32 points)
                                max_size=rank)))
    # the simulator runs a Python thread per value
    assume(int(np.prod(shape)) <= (4096 if keep_points else 2048))
    perm = draw(st.permutations(range(rank)))
    out = tuple(shape[i] for i in perm)
    p = Program()
    x = p.param(shape, dtype)
    kept = draw(st.lists(st.booleans(), min_size=rank, max_size=rank)) \
        if draw(st.booleans()) else [True] * rank
    y = p.param(tuple(d if k else 1 for d, k in zip(out, kept)), dtype)
    expr = f"{_call('transpose', x.name, dims_text(perm))} {draw(st.sampled_from(['+', '*', '-']))} {y.name}"
    unary = draw(st.sampled_from([None, "abs", "relu", "exp"]))
    expr = _call(unary, expr) if unary else expr
    kind = draw(st.sampled_from(["sum", "max", "min", "mean"]))
    axes = list(range(rank - (draw(st.integers(1, rank - 1)) if keep_points else
                              draw(st.integers(2, rank))), rank))
    p.lines.append(f"v0 = {kind}({expr}, axis={dims_text(axes)})")
    p.values.append(Value("v0", tuple(d for n, d in enumerate(out) if n not in axes), dtype))
    p.results = [p.values[-1]]
    return p


@st.composite
def grouped_view_programs(draw):
    """Statistics over the trailing axes of a view of NCHW grouped by channels (group norm
    written through ``reshape(x, [N, G, C/G, H*W])`` or ``[N, G, C/G, H, W]``): a sum,
    max or mean of the view, or of a function of it, maybe centred and scaled by its
    variance, maybe reshaped back and given a per-channel affine, in f32 or f16. The
    shapes are symbolic; returns the program and small sizes to run it at (C a multiple
    of G, H and W from 1)."""
    dtype = draw(st.sampled_from(["f32", "f16"]))
    groups = draw(st.sampled_from([1, 2, 4]))
    sizes = {"N": draw(st.integers(1, 3)), "C": groups * draw(st.integers(1, 3)),
             "H": draw(st.integers(1, 4)), "W": draw(st.integers(1, 5))}
    five = draw(st.booleans())
    view = f"[N, {groups}, C / {groups}, H, W]" if five else f"[N, {groups}, C / {groups}, H * W]"
    axes = "[2, 3, 4]" if five else "[2, 3]"
    lines = [f"func f(x: {dtype}[N, C, H, W], g: {dtype}[C]) -> "]
    body = [f"    rows = reshape({'exp(x)' if draw(st.booleans()) else 'x'}, {view})"]
    kind = draw(st.sampled_from(["sum", "max", "mean", "norm"]))
    if kind == "norm":
        body += [f"    m = mean(rows, axis={axes}, keepdims=true)", "    d = rows - m",
                 f"    v = mean(d * d, axis={axes}, keepdims=true)",
                 "    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])"]
        affine = draw(st.booleans())
        body.append(f"    return {'y * reshape(g, [C, 1, 1])' if affine else 'y'}")
        result = f"{dtype}[N, C, H, W]"
    else:
        body.append(f"    return {kind}(rows * rows, axis={axes}, keepdims=true)")
        result = f"{dtype}[N, {groups}, 1, 1{', 1' if five else ''}]"
    return lines[0] + result + " {\n" + "\n".join(body) + "\n}\n", sizes


@st.composite
def interleaved_reduction_programs(draw):
    """A reduction whose axes a kept axis separates (split-reductions): statistics over
    [1, 3] of a channels-last view ``reshape(x, [N, H*W, G, C/G])``, over [1, 2, 4] of
    ``[N, H, W, G, C/G]``, or over [0, 2] of ``[B, S, 1-3]``: a sum, max or min of x or
    exp(x), a mean, squared deviations from a parameter constant over the axes, a
    variance about the mean (keepdims either way), or a normalisation (maybe scaled per
    channel), in f32, f16 or bf16. Symbolic shapes (compiled for symbols, the split
    happens at the default sizes); returns the program and small sizes to run it at."""
    dtype = draw(st.sampled_from(["f32", "f16", "bf16"]))
    layout = draw(st.sampled_from(["nhwc", "nhwc5", "bsd"]))
    groups = draw(st.sampled_from([1, 2, 4]))
    if layout == "bsd":
        sizes = {"B": draw(st.integers(1, 20)), "S": draw(st.integers(1, 3))}
        d = draw(st.integers(1, 3))  # a constant: B at the default size is 16 times it
        shape, view, axes, per = f"[B, S, {d}]", "x", "[0, 2]", str(d)
        kept, dropped = "[1, S, 1]", "[S]"
    else:
        sizes = {"N": draw(st.integers(1, 2)), "H": draw(st.integers(1, 4)),
                 "W": draw(st.integers(1, 5)), "C": groups * draw(st.integers(1, 3))}
        shape, per, dropped = "[N, H, W, C]", "C", f"[N, {groups}]"
        if layout == "nhwc5":
            view, axes = f"reshape(x, [N, H, W, {groups}, C / {groups}])", "[1, 2, 4]"
            kept = f"[N, 1, 1, {groups}, 1]"
        else:
            view, axes = f"reshape(x, [N, H * W, {groups}, C / {groups}])", "[1, 3]"
            kept = f"[N, 1, {groups}, 1]"
    body = [f"    r = {f'exp({view})' if draw(st.booleans()) else view}"]
    params = [f"x: {dtype}{shape}"]
    keep = draw(st.booleans())
    kind = draw(st.sampled_from(["sum", "max", "min", "mean", "deviation", "variance", "norm"]))
    result = kept if keep else dropped
    if kind in ("sum", "max", "min", "mean"):
        value = f"{kind}(r, axis={axes}, keepdims={str(keep).lower()})"
    elif kind == "deviation":
        params.append(f"c: {dtype}{kept}")
        value = f"mean((r - c) * (r - c), axis={axes}, keepdims={str(keep).lower()})"
    else:  # a variance's keepdims either way (a norm's kept, to broadcast back)
        keep = keep or kind == "norm"
        body += [f"    m = mean(r, axis={axes}, keepdims=true)", "    d = r - m",
                 f"    v = mean(d * d, axis={axes}, keepdims={str(keep).lower()})"]
        value, result = "v", kept if keep else dropped
        if kind == "norm":
            value, result = f"reshape(d * rsqrt(v + 1e-3), {shape})", shape
            if draw(st.booleans()):
                params.append(f"g: {dtype}[{per}]")
                value += " * g"
    body.append(f"    return {value}")
    return (f"func f({', '.join(params)}) -> {dtype}{result} {{\n" + "\n".join(body)
            + "\n}\n", sizes)


@st.composite
def channels_last_programs(draw):
    """A reduction over the channels of NCHW read as NHWC and stored NHWC (a layernorm,
    a max-centring, an L1 norm or a scale over ``transpose(x, [0, 2, 3, 1])``, maybe of
    exp(x)), its NHWC result maybe also returned NCHW or doubled: a strips kernel whose
    stores run along the reduced axis (codegen/strips_staged.py). f32 or f16, symbolic
    shapes; returns the program and small sizes to run it at (each from 1)."""
    dtype = draw(st.sampled_from(["f32", "f16"]))
    sizes = {"N": draw(st.integers(1, 2)), "C": draw(st.integers(1, 40)),
             "H": draw(st.integers(1, 3)), "W": draw(st.integers(1, 5))}
    source = "exp(x)" if draw(st.booleans()) else "x"
    kind = draw(st.sampled_from(["layernorm", "centre", "l1", "scale"]))
    value = {"layernorm": "layernorm(t, g, b)",
             "centre": "t - max(t, axis=-1, keepdims=true)",
             "l1": "t / (sum(abs(t), axis=-1, keepdims=true) + 1e-3)",
             "scale": "t * rsqrt(mean(t * t, axis=-1, keepdims=true) + 1e-5) * g"}[kind]
    extra = draw(st.sampled_from(["", "nchw", "double"]))
    nhwc = f"{dtype}[N, H, W, C]"
    results = {"": nhwc, "nchw": f"({nhwc}, {dtype}[N, C, H, W])",
               "double": f"({nhwc}, {nhwc})"}[extra]
    tail = {"": "y", "nchw": "y, transpose(y, [0, 3, 1, 2])", "double": "y, y * 2.0"}[extra]
    return (f"func f(x: {dtype}[N, C, H, W], g: {dtype}[C], b: {dtype}[C]) -> {results} {{\n"
            f"    t = transpose({source}, [0, 2, 3, 1])\n    y = {value}\n"
            f"    return {tail}\n}}\n"), sizes


@st.composite
def column_moments_programs(draw):
    """A variance over a leading or middle axis (``[R, C]`` over axis 0, ``[A, R, C]``
    over axis 1) or over neighbouring ones (``[A, R, C]`` over [0, 1], ``[A, R, S, C]``
    over [1, 2]: nests that flatten-column-nests walks as one loop) taken from the
    centred values, of x or exp(x): returned alone, normalised (maybe scaled per point),
    or normalised beside the mean, in f32 or f16. Compiled for long reduced axes
    (``COLUMN_MOMENT_DIMS``), strips hold no column on chip, so the variance joins the
    mean's pass (moments.py) in column stages or a split plan; returns the program and
    small sizes to run it at (each from 1)."""
    dtype = draw(st.sampled_from(["f32", "f16"]))
    layout = draw(st.sampled_from(["leading", "middle", "leading2", "middle2"]))
    shape, axis, kept = {"leading": ("[R, C]", "0", "[1, C]"),
                         "middle": ("[A, R, C]", "1", "[A, 1, C]"),
                         "leading2": ("[A, R, C]", "[0, 1]", "[1, 1, C]"),
                         "middle2": ("[A, R, S, C]", "[1, 2]", "[A, 1, 1, C]")}[layout]
    sizes = {"R": draw(st.integers(1, 70)), "C": draw(st.integers(1, 9))}
    if layout != "leading":
        sizes["A"] = draw(st.integers(1, 2))
    if layout == "middle2":
        sizes["S"] = draw(st.integers(1, 3))
    source = "exp(x)" if draw(st.booleans()) else "x"
    kind = draw(st.sampled_from(["variance", "normalise", "scaled", "with_mean"]))
    body = [f"    m = mean({source}, axis={axis}, keepdims=true)", f"    d = {source} - m",
            f"    v = mean(d * d, axis={axis}, keepdims=true)"]
    value = {"variance": "v", "normalise": "d * rsqrt(v + 1e-3)",
             "scaled": "d * rsqrt(v + 1e-3) * g", "with_mean": "d * rsqrt(v + 1e-3), m"}[kind]
    result = {"variance": f"{dtype}{kept}", "with_mean": f"({dtype}{shape}, {dtype}{kept})"}
    return (f"func f(x: {dtype}{shape}, g: {dtype}[C]) -> {result.get(kind, dtype + shape)} {{\n"
            + "\n".join(body) + f"\n    return {value}\n}}\n"), sizes


COLUMN_MOMENT_DIMS = {"A": 4, "R": 100352, "S": 4, "C": 64}  # columns no strip holds


@st.composite
def column_level_programs(draw):
    """Reductions over a leading or middle axis (``[R, C]`` over axis 0, ``[A, R, C]``
    over axis 1) of which one reads another's result, broadcast back: softmax, log-
    softmax, a max-shifted sum of squares, a centred variance's normalisation (left as
    written where compiled for columns the strips hold, ``COLUMN_LEVEL_DIMS``), of x or
    exp-free prologues, in f32 or f16: column stages over two levels
    (codegen/column_stages.py) where the host takes them. Returns the program and small
    sizes (each from 1)."""
    dtype = draw(st.sampled_from(["f32", "f16"]))
    middle = draw(st.booleans())
    shape, axis = ("[A, R, C]", 1) if middle else ("[R, C]", 0)
    sizes = {"R": draw(st.integers(1, 70)), "C": draw(st.integers(1, 9))}
    if middle:
        sizes["A"] = draw(st.integers(1, 2))
    source = draw(st.sampled_from(["x", "x * 0.5", "abs(x) + 1.0"]))
    kind = draw(st.sampled_from(["softmax", "log_softmax", "shifted_squares", "normalise"]))
    first = (f"mean({source}, axis={axis}, keepdims=true)" if kind == "normalise" else
             f"max({source}, axis={axis}, keepdims=true)")
    body = {"softmax": f"exp({source} - m) / sum(exp({source} - m), axis={axis}, keepdims=true)",
            "log_softmax": f"({source} - m) - log(sum(exp({source} - m), axis={axis}, "
                           "keepdims=true))",
            "shifted_squares": f"({source} - m) / (sum(({source} - m) * ({source} - m), "
                               f"axis={axis}, keepdims=true) + 1.0)",
            "normalise": f"({source} - m) * rsqrt(mean(({source} - m) * ({source} - m), "
                         f"axis={axis}, keepdims=true) + 1e-3)"}[kind]
    return (f"func f(x: {dtype}{shape}) -> {dtype}{shape} {{\n    m = {first}\n"
            f"    return {body}\n}}\n"), sizes


COLUMN_LEVEL_DIMS = {"A": 4, "R": 512, "C": 64}  # columns the strips hold: left as written


@st.composite
def split_stage_programs(draw):
    """A reduction over the whole of x [N] or [R, C] or over the rows of x [R, C] (a few
    rows) of an elementwise prologue, returned with the prologue's value and maybe a value
    that reads the reduction, in f32 or f16: the programs whose row kernels have a
    split plan (codegen/split_stages.py) with a for stored as the values are reduced.
    Returns the program and sizes of one to a few chunks a row under the simulator."""
    dtype = draw(st.sampled_from(["f32", "f16"]))
    kind = draw(st.sampled_from(["rows", "whole", "whole_2d"]))
    shape, kept, axis = {"rows": ("[R, C]", "[R, 1]", ", axis=1, keepdims=true"),
                         "whole": ("[N]", "[]", ""),
                         "whole_2d": ("[R, C]", "[]", "")}[kind]  # (its nest flattened)
    sizes = {"N": draw(st.integers(1, 2600))} if kind == "whole" else \
        {"R": draw(st.integers(1, 3)), "C": draw(st.integers(1, 2600 if kind == "rows" else 900))}
    prologue = draw(st.sampled_from(["x * 2.0 + 1.0", "exp(x)", "x + r", "abs(x) - 0.5"]))
    reduced = draw(st.sampled_from(["y", "y * y"]))
    combiner = draw(st.sampled_from(["sum", "mean", "max"]))
    results = [("y", dtype + shape), ("s", dtype + kept)]
    if draw(st.booleans()):
        results.append(("y - s", dtype + shape))
    types = ", ".join(t for _, t in results)
    return (f"func f(x: {dtype}{shape}, r: {dtype}{shape}) -> ({types}) {{\n"
            f"    y = {prologue}\n    s = {combiner}({reduced}{axis})\n"
            f"    return {', '.join(v for v, _ in results)}\n}}\n"), sizes


@st.composite
def short_row_programs(draw, symbolic: bool = False):
    """A reduction over the last axis of rows of one constant length a warp holds (the
    warp-rows vector groups of mlfuse/row_groups.py: 1 to 32 lanes a row, rows that the
    lanes' vectors fill raggedly, rows with no whole vectors), with an elementwise
    prologue and maybe a broadcast-back epilogue: softmax, layernorm, rmsnorm, or
    sum/max/mean of a product, in f32 or f16. Concrete sizes: the simulator runs the
    schedule the fuse pass picks. ``symbolic``: the shapes are [R, C] with the sizes
    bound per call (a row kernel's short-row plan, codegen/short_rows.py); returns the
    program and those sizes."""
    dtype = draw(st.sampled_from(["f32", "f16"]))
    cols = draw(st.sampled_from([4, 8, 12, 16, 20, 24, 36, 64, 100, 130]))
    rows = draw(st.integers(1, 4))
    if symbolic:
        sizes, (rows, cols) = {"R": rows, "C": cols}, ("R", "C")
    p = Program()
    x = p.param((rows, cols), dtype)
    pre = x.name
    if draw(st.booleans()):
        y = p.param((cols,) if draw(st.booleans()) else (rows, cols), dtype)
        pre = _apply(draw(st.sampled_from(["+", "*", "maximum"])), x.name, y.name)
    kind = draw(st.sampled_from(["softmax", "layernorm", "rmsnorm", "sum", "max", "mean"]))
    if kind == "softmax":
        expr, shape = _call("softmax", pre, "axis=1"), (rows, cols)
    elif kind == "layernorm":
        gamma, beta = p.param((cols,), dtype), p.param((cols,), dtype)
        expr, shape = _call(kind, pre, gamma.name, beta.name, "axis=-1", "eps=0.1"), (rows, cols)
    elif kind == "rmsnorm":
        expr, shape = _call(kind, pre, p.param((cols,), dtype).name, "eps=0.1"), (rows, cols)
    else:
        expr, shape = _call(kind, f"{pre} * {pre}" if kind == "sum" else pre, "axis=1"), (rows,)
    p.lines.append(f"v0 = {expr}")
    p.values.append(Value("v0", shape, dtype))
    p.results = [p.values[-1]]
    return (p, sizes) if symbolic else p
