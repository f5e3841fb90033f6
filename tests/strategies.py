"""Hypothesis strategies for random valid .fuse programs and inputs that stress them.

A program is a random DAG: each new value applies an op to earlier values (shared
subexpressions, values used by reductions and by elementwise ops alike), and the
function returns one to three of them. Shapes are tracked here with the same
broadcasting rule as the compiler, so every drawn program is valid. Programs print
as .fuse source: a failing case is a file that `mlfuse run` reproduces.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from dialects.shapes import broadcast_shapes
from mlfuse.ir.core import VerifyError

UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu",
         "silu", "sin", "cos", "erf"]
BINARY_OPS = ["+", "-", "*", "/"]
BINARY_FNS = ["maximum", "minimum", "pow"]
COMPARE = ["<", "<=", ">", ">=", "==", "!="]
REDUCE = ["sum", "max", "min", "mean"]
SYMBOLS = ("N", "M")


@dataclass
class Program:
    dtype: str
    params: list = field(default_factory=list)     # (name, shape)
    lines: list = field(default_factory=list)      # statements
    values: list = field(default_factory=list)     # (name, shape) available
    results: list = field(default_factory=list)

    def source(self) -> str:
        def ty(shape):
            return f"{self.dtype}[{', '.join(map(str, shape))}]"
        params = ", ".join(f"{n}: {ty(s)}" for n, s in self.params)
        shapes = dict(self.values)
        res = [ty(shapes[r]) for r in self.results]
        ret = res[0] if len(res) == 1 else f"({', '.join(res)})"
        body = "".join(f"    {line}\n" for line in self.lines)
        return f"func f({params}) -> {ret} {{\n{body}    return {', '.join(self.results)}\n}}\n"


def _broadcasts(a, b) -> bool:
    try:
        broadcast_shapes(a, b)
        return True
    except VerifyError:
        return False


dims = st.sampled_from([1, 2, 3, 4, "N", "M"])


@st.composite
def programs(draw, max_ops: int = 8, allow_compute: bool = True):
    p = Program(dtype=draw(st.sampled_from(["f32", "f64"])))
    base = tuple(draw(st.lists(dims, min_size=1, max_size=3)))
    for i in range(draw(st.integers(1, 3))):
        # parameters: the base shape, or a broadcastable suffix / size-1 variant of it
        shape = base
        if i and draw(st.booleans()):
            k = draw(st.integers(0, len(base)))
            shape = tuple(1 if draw(st.booleans()) else d for d in base[k:]) or base
        p.params.append((f"x{i}", shape))
    p.values = list(p.params)
    for n in range(draw(st.integers(1, max_ops))):
        name = f"v{n}"
        a, sa = draw(st.sampled_from(p.values))
        kind = draw(st.sampled_from(["unary", "binary", "binary", "literal", "compare", "reduce",
                                     "transpose", "reshape", "composite"]
                                    + (["matmul"] if allow_compute else [])))
        expr, shape = None, None
        if kind == "unary":
            expr, shape = f"{draw(st.sampled_from(UNARY))}({a})", sa
        elif kind in ("binary", "compare"):
            partners = [(b, sb) for b, sb in p.values if _broadcasts(sa, sb)]
            b, sb = draw(st.sampled_from(partners))
            shape = broadcast_shapes(sa, sb)
            if kind == "compare":
                expr = f"where({a} {draw(st.sampled_from(COMPARE))} {b}, {a}, {b})"
            elif draw(st.booleans()):
                expr = f"{a} {draw(st.sampled_from(BINARY_OPS))} {b}"
            else:
                expr = f"{draw(st.sampled_from(BINARY_FNS))}({a}, {b})"
        elif kind == "literal":
            lit = draw(st.sampled_from(["2.0", "0.5", "-1.0", "0.0", "3"]))
            op = draw(st.sampled_from(BINARY_OPS))
            expr = f"{a} {op} {lit}" if draw(st.booleans()) else f"{lit} {op} {a}"
            shape = sa
        elif kind == "reduce":
            axes = sorted(set(draw(st.lists(st.integers(0, len(sa) - 1), min_size=1, max_size=len(sa)))))
            keep = draw(st.booleans())
            if not keep and len(axes) == len(sa):
                keep = True  # keep rank >= 1 so later ops have an axis to work on
            axis = axes[0] if len(axes) == 1 and draw(st.booleans()) else axes
            axis_text = str(axis) if isinstance(axis, int) else f"[{', '.join(map(str, axes))}]"
            expr = (f"{draw(st.sampled_from(REDUCE))}({a}, axis={axis_text}, "
                    f"keepdims={'true' if keep else 'false'})")
            shape = tuple(1 if i in axes else d for i, d in enumerate(sa)) if keep else \
                tuple(d for i, d in enumerate(sa) if i not in axes)
        elif kind == "transpose":
            perm = draw(st.permutations(list(range(len(sa)))))
            expr, shape = f"transpose({a}, [{', '.join(map(str, perm))}])", tuple(sa[i] for i in perm)
        elif kind == "reshape":
            if all(isinstance(d, int) for d in sa):
                size = int(np.prod(sa))
                shape = (size,) if draw(st.booleans()) or size == 1 else (1, size)
            else:
                shape = tuple(d for d in sa if d != 1) + (1,)
            expr = f"reshape({a}, [{', '.join(map(str, shape))}])"
        elif kind == "composite":
            expr, shape = f"softmax({a}, axis={draw(st.integers(-len(sa), len(sa) - 1))})", sa
        elif kind == "matmul":
            wname = f"w{n}"
            if len(sa) == 1:  # a vector as a column: [n, 1] x [1, 3]
                p.params.append((wname, (1, 3)))
                expr, shape = f"matmul(reshape({a}, [{sa[0]}, 1]), {wname})", (sa[0], 3)
            elif len(sa) <= 3:  # [.., m, k] x [k, 3] (matmul takes ranks 2 and 3)
                p.params.append((wname, (sa[-1], 3)))
                expr, shape = f"matmul({a}, {wname})", tuple(sa[:-1]) + (3,)
        if expr is None:
            continue
        p.lines.append(f"{name} = {expr}")
        p.values.append((name, tuple(shape)))
    computed = [v for v in p.values if v not in p.params] or p.values
    picks = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3, unique=True))
    if computed[-1] not in picks:
        picks[0] = computed[-1]
    p.results = [n for n, _ in dict.fromkeys(picks)]
    return p


SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e4, -1e4, 1e-30]


@st.composite
def inputs_for(draw, func, dims: dict, special: bool = True):
    """Random arguments for a tensor-level function, some elements replaced by values
    that stress semantics (zeros, signs, infinities, NaN, large and tiny magnitudes)."""
    from mlfuse.testing import random_inputs
    args = random_inputs(func, dims, seed=draw(st.integers(0, 2 ** 16)))
    if special:
        for a in args:
            flat = a.reshape(-1)
            for i in draw(st.lists(st.integers(0, max(flat.size - 1, 0)), max_size=3)):
                if flat.size:
                    flat[i] = draw(st.sampled_from(SPECIAL))
    return args
