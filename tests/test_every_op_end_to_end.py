"""Every tensor op, one small program each, through the whole pipeline: its lowering
(loops interpreter), the fused and unfused IR, and the generated kernels fused and
unfused under the CUDA simulator, all against the tensor-level NumPy interpreter.
Operands broadcast, dims are symbolic, and N = 37 is no multiple of any block size."""
import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.elementwise import ELEMENTWISE
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.interp import run_loops, run_tensor
from mlfuse.dialects import default_registry
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close

DIMS = {"N": 37}
X = "x: f32[N, 3]"
UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu",
         "sin", "cos", "erf", "floor", "ceil", "round", "log1p", "expm1", "softplus", "hardswish",
         "hardsigmoid"]
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
COMPARE = ["lt", "le", "gt", "ge", "eq", "ne"]


def program(params: str, result: str, body: str) -> str:
    return f"func f({params}) -> {result} {{\n    return {body}\n}}\n"


CASES = {
    **{op: program(X, "f32[N, 3]", f"{op}(x)") for op in UNARY},
    # y broadcasts along N
    **{op: program(f"{X}, y: f32[3]", "f32[N, 3]", f"{op}(x, y)") for op in BINARY},
    # eq/ne on equal elements too: y repeats x's first row
    **{op: program(f"{X}, y: f32[1, 3]", "bool[N, 3]", f"{op}(x, y)") for op in COMPARE},
    "where": program(f"c: bool[N, 1], {X}, y: f32[3]", "f32[N, 3]", "where(c, x, y)"),
    **{op: program("c: bool[N, 3], d: bool[3]", "bool[N, 3]", expr) for op, expr in
       (("logical_and", "c & d"), ("logical_or", "c | d"), ("logical_not", "~c"))},
    # a dim as a value, in the partner's dtype: concrete in the kernel, symbolic from its size
    "dim_size": program(X, "f32[N, 3]", "x / N + rsqrt(N)"),
    "constant": program(X, "f32[N, 3]", "x * 2.5"),
    "cast": program(X, "(f64[N, 3], i32[N, 3], bool[N, 3])",
                    "cast(x, dtype=f64), cast(x * 3.0, dtype=i32), cast(relu(x), dtype=bool)"),
    "sum": program(X, "f32[3]", "sum(x, axis=0)"),                      # a symbolic axis
    "max": program(X, "f32[N, 1]", "max(x, axis=1, keepdims=true)"),
    "min": program(X, "f32[]", "min(x)"),                               # everything
    "mean": program("x: f32[N, 3, 2]", "f32[3]", "mean(x, axis=[0, -1])"),
    "reshape": program(X, "f32[3, N]", "reshape(x, [3, N])"),
    "transpose": program("x: f32[N, 3, 2]", "f32[2, N, 3]", "transpose(x, perm=[2, 0, 1])"),
    "broadcast_to": program(f"{X}, y: f32[3]", "f32[2, N, 3]", "broadcast_to(y, [2, N, 3])"),
    "matmul": program(f"{X}, w: f32[3, 5], a: f32[2, N, 3], b: f32[2, 3, 4]",
                      "(f32[N, 5], f32[2, N, 4])", "matmul(x, w), matmul(a, b)"),
    # strided and dilated on concrete sizes; 'same' padding over a symbolic width
    "conv2d": program("x: f32[2, 2, 5, 7], w: f32[3, 2, 3, 2], v: f32[1, 2, 3, N], "
                      "k: f32[2, 2, 3, 3]", "(f32[2, 3, 3, 4], f32[1, 2, 3, N])",
                      "conv2d(x, w, stride=[2, 2], padding=[1, 1], dilation=[1, 2]), "
                      "conv2d(v, k, padding=1)"),
    # grouped: 4 output channels over 2 groups of 1 input channel (depthwise, multiplier 2)
    "conv2d_groups": program("x: f32[2, 2, 5, 4], w: f32[4, 1, 3, 2]", "f32[2, 4, 5, 4]",
                             "conv2d(x, w, padding=[1, 1], dilation=[1, 2], groups=2)"),
    # ceil_mode windows past the input, padding, a symbolic 'same' width
    "max_pool2d": program("x: f32[2, 3, 5, N], v: f32[1, 2, 1, 13]",
                          "(f32[2, 3, 3, N], f32[1, 2, 1, 7])",
                          "max_pool2d(x, [3, 3], stride=[2, 1], padding=1, ceil_mode=true), "
                          "max_pool2d(v, [1, 3], stride=[1, 2], dilation=[1, 2], padding=[0, 2])"),
    "avg_pool2d": program("x: f32[2, 3, 5, 6]", "(f32[2, 3, 3, 4], f32[2, 3, 3, 4])",
                          "avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=true, "
                          "count_include_pad=false), avg_pool2d(x, [2, 2], padding=1, "
                          "stride=2, ceil_mode=true)"),
    "argmax": program(X, "(i32[N], i32[1, 3])", "argmax(x, axis=1), argmax(x, 0, keepdims=true)"),
    "argmin": program(X, "i32[N]", "argmin(-x, axis=-1)"),
    "cumsum": program(X, "(f32[N, 3], f32[N, 3])",
                      "cumsum(x, axis=0), cumsum(x, axis=1, exclusive=true, reverse=true)"),
    "softmax": program(X, "f32[N, 3]", "softmax(x, axis=0)"),
    "layernorm": program(f"{X}, g: f32[3], b: f32[3]", "f32[N, 3]", "layernorm(x, g, b, eps=0.1)"),
    "rmsnorm": program(f"{X}, g: f32[3]", "f32[N, 3]", "rmsnorm(x, g)"),
    # index maps (tests/test_indexing_ops.py has more): reversed and strided windows, an
    # integer index, parts on both sides of a symbolic axis, a border, wrapped and
    # out-of-range gather indices (i32 inputs are in [-5, 5]), positions
    "slice": program("x: f32[N, 6]", "(f32[N, 3], f32[6], f32[2, N])",
                     "x[:, ::-2], x[0], transpose(x[..., 1:5:3])"),
    "concat": program(f"{X}, y: f32[N, 2]", "(f32[N, 5], f32[2*N, 3])",
                      "concat([x, exp(y)], axis=1), concat([x, -x])"),
    "pad": program(X, "f32[N, 6]", "pad(x, [[0, 0], [1, 2]], value=-1.5)"),
    "gather": program(f"{X}, i: i32[2, 4]", "(f32[N, 2, 4], f32[2, 4, 3])",
                      "take(x, i, axis=1), take(x, i)"),
    "iota": program(X, "(f32[N, 3], i32[N, 3])",
                    "x + iota([N, 3], axis=1, dtype=f32), iota([N, 3])"),
}


def inputs(func):
    args = random_inputs(func, DIMS, seed=11)
    if func.args[-1].name_hint == "y" and func.args[-1].type.shape == (1, 3):
        args[-1] = args[0][:1].copy()  # equal elements for eq/ne
    return args


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN from log/sqrt/pow of negatives
@pytest.mark.parametrize("op", sorted(CASES))
def test_op_agrees_with_the_interpreter_at_every_level(op):
    source = CASES[op]
    func = parse_program(source, f"{op}.fuse").funcs[0]
    args = inputs(func)
    with np.errstate(all="ignore"):
        want = run_tensor(func, args)
        got = {f"{level} fuse={fuse}": run_loops(
            compile_text(source, f"{op}.fuse", level=level, fuse=fuse).funcs[0], args)
            for level, fuse in (("loops", True), ("fused", True), ("fused", False))}
        for fuse in (True, False):
            out = mlfuse.compile_source(source, f"{op}.fuse", fuse=fuse,
                                        target="simulator").f(*args)
            got[f"kernels fuse={fuse}"] = out if isinstance(out, tuple) else (out,)
    ops, reduced = program_size(func)
    for what, results in got.items():
        assert len(results) == len(want), what
        for k, (g, w) in enumerate(zip(results, want)):
            assert_close(g, w, ops, f"{op}: {what}, result {k}", reduced)


def test_the_cases_cover_every_tensor_op():
    covered = {op.name for source in CASES.values()
               for op in parse_program(source, "t.fuse").funcs[0].body.ops}
    assert covered | {"func.return"} >= {n for n in default_registry() if n.startswith("tensor.")}
    assert {f"tensor.{n}" for n in ELEMENTWISE} <= covered
