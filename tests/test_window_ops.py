"""Windowed ops (dialects/tensor_windows.py): pooling, grouped conv2d, argmax/argmin, cumsum
and dims as values. The NumPy oracle against loops written from torch's and ONNX's
definitions; every level (loops interpreter, fused and unfused IR, simulated kernels)
against the oracle; what the fusion pass does with them; their frontend errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.frontend import parse_source
from mlfuse.interp import run_loops, run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs
from mlfuse.tools.explain import explain_module

from helpers import assert_close, assert_error_at

RNG = np.random.default_rng(7)


def run_every_level(source: str, args: list, dims: dict | None = None):
    """The oracle's results, after checking every lower level and the kernels (fused and
    unfused, simulator) against them."""
    func = parse_program(source, "t.fuse").funcs[0]
    with np.errstate(all="ignore"):
        want = run_tensor(func, args)
        got = {f"{level} fuse={fuse}": run_loops(
            compile_text(source, "t.fuse", level=level, fuse=fuse).funcs[0], args)
            for level, fuse in (("loops", True), ("fused", True), ("fused", False))}
    for fuse in (True, False):
        out = mlfuse.compile_source(source, "t.fuse", fuse=fuse, target="simulator").f(*args)
        got[f"kernels fuse={fuse}"] = out if isinstance(out, tuple) else (out,)
    ops, reduced = program_size(func, dims=dims)
    for what, results in got.items():
        for k, (g, w) in enumerate(zip(results, want)):
            assert_close(g, w, ops, f"{what}, result {k}", reduced)
    return want


# -- pooling: the oracle against torch's definition, loop by loop ----------------------
def torch_out_size(size, k, s, p, d, ceil):
    """at::native::pooling_output_shape."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def torch_pool(x, kind, kernel, stride, pad, dilation=(1, 1), ceil=False, include=True):
    """max_pool2d / avg_pool2d as torch's CPU kernels compute them, one output at a time."""
    n, c, h, w = x.shape
    oh, ow = (torch_out_size(sz, kernel[a], stride[a], pad[a], dilation[a], ceil)
              for a, sz in enumerate((h, w)))
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * stride[0] - pad[0], j * stride[1] - pad[1]
            if kind == "max":
                taps = [x[:, :, h0 + a * dilation[0], w0 + b * dilation[1]]
                        for a in range(kernel[0]) for b in range(kernel[1])
                        if 0 <= h0 + a * dilation[0] < h and 0 <= w0 + b * dilation[1] < w]
                out[:, :, i, j] = np.max(np.stack(taps), axis=0)  # nan wins, as torch's
                continue
            h1, w1 = min(h0 + kernel[0], h + pad[0]), min(w0 + kernel[1], w + pad[1])
            pool_size = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            total = x[:, :, h0:h1, w0:w1].astype(np.float64).sum(axis=(2, 3))
            out[:, :, i, j] = total / (pool_size if include else (h1 - h0) * (w1 - w0))
    return out


POOLS = [  # kind, kernel, stride, padding, dilation, ceil_mode, count_include_pad, H, W
    ("max", (3, 3), (2, 2), (1, 1), (1, 1), False, True, 7, 6),
    ("max", (3, 2), (2, 1), (1, 0), (1, 2), True, True, 8, 7),
    ("max", (2, 2), (2, 2), (0, 0), (1, 1), True, True, 5, 5),   # ceil: a window past the end
    ("max", (3, 3), (3, 3), (1, 1), (2, 1), True, True, 9, 8),
    ("avg", (3, 3), (2, 2), (1, 1), (1, 1), False, True, 7, 6),
    ("avg", (3, 3), (2, 2), (1, 1), (1, 1), True, False, 6, 7),
    ("avg", (2, 2), (2, 2), (1, 1), (1, 1), True, True, 5, 6),   # past the right padding
    ("avg", (3, 2), (3, 2), (1, 0), (1, 1), True, False, 8, 5),
    ("avg", (1, 1), (2, 2), (0, 0), (1, 1), False, True, 5, 5),
]


def pool_source(kind, kernel, stride, pad, dilation, ceil, include, h, w, n=2, c=3):
    dil = f", dilation={list(dilation)}" if kind == "max" else ""
    inc = f", count_include_pad={str(include).lower()}" if kind == "avg" else ""
    oh, ow = (torch_out_size(sz, kernel[a], stride[a], pad[a], dilation[a], ceil)
              for a, sz in enumerate((h, w)))
    return (f"func f(x: f32[{n}, {c}, {h}, {w}]) -> f32[{n}, {c}, {oh}, {ow}] {{\n"
            f"    return {kind}_pool2d(x, {list(kernel)}, stride={list(stride)}, "
            f"padding={list(pad)}{dil}, ceil_mode={str(ceil).lower()}{inc})\n}}\n")


@pytest.mark.parametrize("case", POOLS, ids=[f"{c[0]}{i}" for i, c in enumerate(POOLS)])
def test_pool_oracle_matches_torchs_definition(case):
    kind, kernel, stride, pad, dilation, ceil, include, h, w = case
    x = RNG.standard_normal((2, 3, h, w)).astype(np.float32)
    x[0, 0, 1, 1] = np.nan
    func = parse_source(pool_source(*case)).funcs[0]
    (got,) = run_tensor(func, [x])
    want = torch_pool(x, kind, kernel, stride, pad, dilation, ceil, include)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _onnx_pool(kind, x, kernel, stride, pad, dilation, ceil, include):
    import onnxruntime
    from onnx import TensorProto, helper
    attrs = {"kernel_shape": list(kernel), "strides": list(stride), "pads": list(pad) * 2,
             "ceil_mode": int(ceil)}
    if kind == "max":
        attrs["dilations"] = list(dilation)
    else:
        attrs["count_include_pad"] = int(include)
    node = helper.make_node("MaxPool" if kind == "max" else "AveragePool", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x.shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # not the warning about ONNX's inferred shape
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("case", POOLS, ids=[f"{c[0]}{i}" for i, c in enumerate(POOLS)])
def test_pool_oracle_matches_onnx_runtime(case):
    """ONNX Runtime computes torch's sizes and divisors, ceil_mode included (ONNX's own
    shape inference disagrees with both for a last window starting in the padding)."""
    pytest.importorskip("onnxruntime")
    kind, kernel, stride, pad, dilation, ceil, include, h, w = case
    x = RNG.standard_normal((2, 3, h, w)).astype(np.float32)
    (got,) = run_tensor(parse_source(pool_source(*case)).funcs[0], [x])
    want = _onnx_pool(kind, x, kernel, stride, pad, dilation, ceil, include)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", POOLS[1::2] + POOLS[2:3], ids=lambda c: f"{c[0]}{c[1]}{c[5]}")
def test_pool_agrees_at_every_level(case):
    x = RNG.standard_normal((2, 3, case[7], case[8])).astype(np.float32)
    x[1, 2, 0, 0] = np.inf
    run_every_level(pool_source(*case), [x])


def test_pools_over_a_symbolic_same_window_and_f64():
    source = ("func f(x: f64[N, 2, H, W]) -> (f64[N, 2, H, W], f64[N, 2, H, W], f64[N, 2, 1, 1]) {\n"
              "    return max_pool2d(x, 3, stride=1, padding=1), "
              "avg_pool2d(x, [3, 5], stride=1, padding=[1, 2], count_include_pad=false), "
              "global_max_pool2d(x)\n}\n")
    x = RNG.standard_normal((2, 2, 4, 5))
    a, b, g = run_every_level(source, [x], {"N": 2, "H": 4, "W": 5})
    np.testing.assert_allclose(a, torch_pool(x, "max", (3, 3), (1, 1), (1, 1)))
    np.testing.assert_allclose(b, torch_pool(x, "avg", (3, 5), (1, 1), (1, 2), include=False))
    np.testing.assert_array_equal(g, x.max(axis=(2, 3), keepdims=True))


def test_pool_lowering_clamps_only_where_a_tap_may_leave_the_input():
    def lowered(source):
        return [op.name for op in compile_text(source, "t.fuse", level="loops").walk()]
    plain = lowered(pool_source("max", (2, 2), (2, 2), (0, 0), (1, 1), False, True, 4, 4))
    assert "arith.where" not in plain and "arith.minimum" not in plain
    padded = lowered(pool_source(*POOLS[0]))
    assert "arith.where" in padded and "loops.masked_load" not in padded
    ceil = lowered(pool_source(*POOLS[2]))  # no padding, but the last window overhangs
    assert "arith.minimum" in ceil and "arith.maximum" not in ceil


# -- fusion around windows -----------------------------------------------------------------
RELU_POOL = """func f(x: f32[N, 8, 32, 32], b: f32[8, 1, 1]) -> f32[N, 8, 16, 16] {
    p = max_pool2d(relu(x + b), 3, stride=2, padding=1)
    return p * 2.0 + 1.0
}"""
CONV_POOL = """func f(x: f32[N, 8, 32, 32], w: f32[8, 8, 3, 3]) -> f32[N, 8, 16, 16] {
    return max_pool2d(relu(conv2d(x, w, padding=1)), 3, stride=2, padding=1)
}"""


def kernel_sources(source, dims=None):
    module = compile_text(source, "t.fuse", fuse_options={"dims": dims or {"N": 8}})
    return [k["sources"] for k in module.funcs[0].body.ops if isinstance(k, KernelOp)]


def test_elementwise_producer_and_consumer_fuse_into_the_pool():
    (sources,) = kernel_sources(RELU_POOL)
    assert [s.split(" = ")[1] for s in sources] == [
        "tensor.add", "tensor.relu", "tensor.max_pool2d", "tensor.mul", "tensor.add"]
    source = RELU_POOL.replace("8, 32, 32]", "2, 7, 7]").replace("8, 16, 16]", "2, 4, 4]") \
        .replace("[8, 1", "[2, 1")
    x = RNG.standard_normal((1, 2, 7, 7)).astype(np.float32)
    b = RNG.standard_normal((2, 1, 1)).astype(np.float32)
    (got,) = run_every_level(source, [x, b], {"N": 1})
    want = torch_pool(np.maximum(x + b, 0), "max", (3, 3), (2, 2), (1, 1)) * 2 + 1
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_conv_before_a_pool_stays_in_memory():
    """The pool reads each conv output up to 9 times: fusing would recompute the conv's
    reduction per tap. The relu between them joins one side (here the pool, recomputed
    per tap); the conv is a kernel of its own."""
    kernels = kernel_sources(CONV_POOL)
    assert len(kernels) == 2
    assert [s.split(" = ")[1] for s in kernels[0]] == ["tensor.conv2d"]
    assert "tensor.max_pool2d" in " ".join(kernels[1])
    report = explain_module(compile_text(CONV_POOL, "t.fuse", level="loops"), {"N": 8})[0]
    kept = {d["producer"]: d["reason"] for d in report.decisions if d["action"] == "kept"}
    assert "does not fit one iteration space" in kept["conv2d"], kept


def test_recomputing_a_pointwise_producer_per_tap_is_what_the_cost_model_weighs():
    """relu + bias read 9 times per output (a 3 x 3 window, stride 1): still fused, since
    the recomputation costs flops and saves a full write and read of the intermediate."""
    source = RELU_POOL.replace("stride=2", "stride=1").replace("16, 16]", "32, 32]")
    (report,) = explain_module(compile_text(source, "t.fuse", level="loops"), {"N": 64})
    assert report.kernels_after == 1 and report.bytes_after < report.bytes_before


# -- grouped convolution -----------------------------------------------------------------
def naive_grouped_conv(x, w, groups, stride, pad, dilation):
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2))
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // (o // groups)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                           j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out


GROUPED = [  # groups, C, O, kernel, stride, padding, dilation
    (2, 4, 6, (3, 3), (1, 1), (1, 1), (1, 1)),
    (3, 3, 3, (3, 3), (2, 2), (1, 1), (1, 1)),   # depthwise
    (4, 4, 8, (3, 2), (1, 2), (2, 0), (2, 1)),   # depthwise, multiplier 2
]


@pytest.mark.parametrize("case", GROUPED, ids=lambda c: f"g{c[0]}")
def test_grouped_conv_agrees_with_its_definition_at_every_level(case):
    groups, c, o, kernel, stride, pad, dilation = case
    x = RNG.standard_normal((2, c, 6, 7)).astype(np.float32)
    w = RNG.standard_normal((o, c // groups) + kernel).astype(np.float32)
    want = naive_grouped_conv(x, w, groups, stride, pad, dilation)
    source = (f"func f(x: f32[2, {c}, 6, 7], w: f32[{o}, {c // groups}, {kernel[0]}, {kernel[1]}]) "
              f"-> f32{list(want.shape)} {{\n    return relu(conv2d(x, w, stride={list(stride)}, "
              f"padding={list(pad)}, dilation={list(dilation)}, groups={groups}))\n}}\n")
    (got,) = run_every_level(source, [x, w])
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-5, atol=1e-5)


def test_a_grouped_conv_is_not_taken_for_a_gemm_but_groups_one_is():
    """Its input channel depends on the output channel, so the contraction analysis finds
    no N side of the input alone; it runs as a loop nest, one thread per output walking
    its window (a window is neither rows nor columns for the reduction schedules)."""
    def schedules(groups, per_group):
        source = (f"func f(x: f32[N, 8, 8, 8], w: f32[8, {per_group}, 3, 3]) -> f32[N, 8, 8, 8] "
                  f"{{\n    return conv2d(x, w, padding=1, groups={groups})\n}}\n")
        module = compile_text(source, "t.fuse")
        return [k["schedule"] for k in module.funcs[0].body.ops if isinstance(k, KernelOp)]
    assert schedules(1, 8) == ["contraction"]
    assert schedules(2, 4) == ["pointwise"]
    assert schedules(8, 1) == ["pointwise"]


# -- argmax / argmin -------------------------------------------------------------------
def test_arg_reductions_take_the_first_extreme_and_the_first_nan():
    x = np.array([[1, 3, 3, 0], [np.nan, 2, np.nan, 9], [-np.inf] * 4, [5, np.inf, 1, np.inf]],
                 np.float32)
    source = ("func f(x: f32[4, 4]) -> (i32[4], i32[4], i32[1, 4], i32[4, 1]) {\n"
              "    return argmax(x, axis=1), argmin(x, axis=1), argmax(x, 0, keepdims=true), "
              "argmin(-x, axis=-1, keepdims=true)\n}\n")
    a, b, c, d = run_every_level(source, [x])
    np.testing.assert_array_equal(a, [1, 0, 0, 1])
    np.testing.assert_array_equal(b, [3, 0, 0, 2])
    np.testing.assert_array_equal(c, [[1, 3, 1, 3]])
    np.testing.assert_array_equal(d[:, 0], [1, 0, 0, 1])


SCHEDULED = {  # programs whose kernels run under different reduction schedules
    "argmax rows": "func f(x: f32[R, C]) -> i32[R] { return argmax(x, axis=1) }",
    "argmin short rows": "func f(x: f32[R, 5]) -> i32[R] { return argmin(x * 2.0, axis=1) }",
    "argmax columns": "func f(x: f32[R, C]) -> i32[C] { return argmax(x, axis=0) }",
    "cumsum rows": "func f(x: f32[R, C]) -> f32[R, C] { return cumsum(x, axis=1) }",
    "cumsum columns": "func f(x: i32[R, C]) -> i32[R, C] { return cumsum(x, 0, reverse=true) }",
}


@pytest.mark.parametrize("name", sorted(SCHEDULED))
def test_scan_and_arg_reductions_are_right_under_their_schedules(name):
    """The row schedules split each reduction over threads: the second reduction of an
    argmax (the first index holding the extreme) must combine the threads' minima."""
    source = SCHEDULED[name]
    func = parse_program(source, "t.fuse").funcs[0]
    (x,) = random_inputs(func, {"R": 5, "C": 70}, seed=2)
    if x.dtype.kind == "f":
        x[2, -1] = x[2, 3] = np.float32(9.0)  # a tie; argmax takes the first
        x[3, [1, -2]] = np.nan
    run_every_level(source, [x], {"R": 5, "C": 70})


def test_arg_reductions_and_cumsum_choose_reduction_schedules():
    """The schedules the test above ran (unbound dims, as compile_source compiles them):
    a block per row, a group of threads per short row, a block per strip of columns (the
    argmax's two reductions walking the column), a thread per point for a row's scan, and
    split-columns for a column's scan (its chunks sized per call: the cost model prices it
    within 5% of a thread per point at the default sizes, schedules.PER_CALL_MARGIN)."""
    got = {name: [k["schedule"] for k in compile_text(src, "t.fuse").funcs[0].body.ops
                  if isinstance(k, KernelOp)] for name, src in SCHEDULED.items()}
    assert got == {"argmax rows": ["row"], "argmin short rows": ["warp-rows"],
                   "argmax columns": ["strips"], "cumsum rows": ["pointwise"],
                   "cumsum columns": ["split-columns"]}


def test_cumsum_follows_onnx_cumsum():
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    source = ("func f(x: f32[3, N]) -> (f32[3, N], f32[3, N], f32[3, N], f32[3, N]) {\n"
              "    return cumsum(x, axis=1), cumsum(x, 1, exclusive=true), "
              "cumsum(x, 1, reverse=true), cumsum(x, 1, exclusive=true, reverse=true)\n}\n")
    got = run_every_level(source, [x], {"N": 6})
    flipped = x[:, ::-1]
    zero = np.zeros((3, 1), np.float32)
    want = [np.cumsum(x, 1), np.concatenate([zero, np.cumsum(x, 1)[:, :-1]], 1),
            np.cumsum(flipped, 1)[:, ::-1],
            np.concatenate([zero, np.cumsum(flipped, 1)[:, :-1]], 1)[:, ::-1]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# -- dims as values ----------------------------------------------------------------------
def test_dims_as_values_take_their_partners_dtype_and_the_runtime_size():
    source = ("func f(x: f32[N, D], k: i32[N]) -> (f32[N, D], i32[N], f16[]) {\n"
              "    return x * rsqrt(D) + N, k * D, cast(N + D, dtype=f16)\n}\n")
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    k = np.arange(3, dtype=np.int32)
    a, b, c = run_every_level(source, [x, k], {"N": 3, "D": 5})
    np.testing.assert_allclose(a, x * np.float32(1 / math.sqrt(5)) + 3, rtol=1e-6)
    np.testing.assert_array_equal(b, k * 5)
    assert c.dtype == np.float16 and c == 8


# -- errors ---------------------------------------------------------------------------------
HEAD = "func f(x: f32[N, 3, 8, 8], w: f32[6, 1, 3, 3], i: i32[N]) -> i32[N] {\n"
ERRORS = [
    ("pool padding past half the window", "    r = max_pool2d(x, 3, padding=2)\n", "2:9",
     "padding 2 is more than half the window 3"),
    ("pool window too big", "    r = avg_pool2d(x, 9)\n", "2:9", "window 9 (dilation 1) does not fit size 8"),
    ("pool bad kernel", "    r = max_pool2d(x, [2, 2, 2])\n", "2:23",
     "expected an integer or a list of two integers"),
    ("pool no dilation for avg", "    r = avg_pool2d(x, 2, dilation=2)\n", "2:26",
     "avg_pool2d has no parameter 'dilation'"),
    ("pool rank", "    r = max_pool2d(i, 2)\n", "2:9", "takes an NCHW input"),
    ("pool int", "    r = max_pool2d(cast(x, dtype=i32), 2)\n", "2:9", "needs a float operand"),
    ("pool symbolic", "func g(x: f32[1, 1, H, H], i: i32[N]) -> i32[N] {\n    r = max_pool2d(x, 2)\n", "2:9",
     "over symbolic size H needs stride 1 and 'same' padding"),
    ("global pool rank", "    r = global_avg_pool2d(i)\n", "2:27", "global pooling takes an NCHW tensor"),
    ("groups divide", ("func g(x: f32[1, 4, 4, 4], w: f32[4, 1, 1, 1], i: i32[N]) -> i32[N] {\n"
                       "    r = conv2d(x, w, groups=2)\n"), "2:9", "conv2d weights must have 2 input channels per group"),
    ("groups channels", "    r = conv2d(x, w, groups=2)\n", "2:9",
     "groups=2 must divide the input channels (3)"),
    ("groups symbolic", ("func g(x: f32[1, C, 4, 4], w: f32[2, 1, 1, 1], i: i32[N]) -> i32[N] {\n"
                         "    r = conv2d(x, w, groups=2)\n"), "2:9", "needs concrete channel counts"),
    ("argmax axis", "    r = argmax(i, axis=1)\n", "2:24", "axis 1 is out of range for rank 1"),
    ("argmax needs axis", "    r = argmax(i)\n", "2:9", "argmax is missing argument 'axis'"),
    ("argmax bool", "    r = argmax(i > 0, axis=0)\n", "2:9", "does not take bool tensors"),
    ("cumsum bool", "    r = cumsum(i > 0, axis=0)\n", "2:9", "does not sum bool tensors"),
    ("dim without partner", "    r = sum(N)\n", "2:13", "x must be a tensor, not N"),
    ("dim function without partner", "    r = sum(rsqrt(N))\n", "2:13",
     "use cast(rsqrt(N), dtype=...)"),
    ("dim compared", "    r = where(N > 2, i, i)\n", "2:17", "gt needs a tensor among its data operands"),
    ("dim as a bool", "    r = where(i > 0, i > 0, N)\n", "2:29", "dim N cannot stand for a bool operand"),
    ("unknown dim", "    r = i * M\n", "2:13", "undefined name 'M'"),
]


@pytest.mark.parametrize("body, position, message", [e[1:] for e in ERRORS],
                         ids=[e[0] for e in ERRORS])
def test_errors_point_at_the_offending_token(body, position, message):
    assert_error_at((body if body.startswith("func") else HEAD + body) + "    return i\n}\n",
                    position, message)


def test_dim_size_in_ir_text_must_name_a_parameter_dim():
    from mlfuse.dialects import parse_ir
    from mlfuse.ir.core import VerifyError
    text = "func @f(%x: f32[R]) -> (f32[]) {\n  %d = tensor.dim_size {sym = K} : f32[]\n  return %d\n}\n"
    with pytest.raises(VerifyError, match="K is not a dim of the function's parameters"):
        parse_ir(text)
    parse_ir(text.replace("sym = K", "sym = R"))


def test_fuse_printer_writes_the_windowed_ops_back():
    from mlfuse.frontend.fuse_printer import print_fuse
    source = ("func f(x: f32[N, 4, 7, 7], w: f32[8, 2, 3, 3], c: bool[N]) -> "
              "(f32[N, 4, 4, 4], f32[N, 4, 4, 4], f32[N, 8, 7, 7], i32[N, 4, 7], f32[N, 4, 7, 7], bool[N]) {\n"
              "    return max_pool2d(x, 3, stride=2, dilation=[1, 2], padding=[1, 2]), "
              "avg_pool2d(x, 2, stride=2, ceil_mode=true, count_include_pad=false), "
              "conv2d(x, w, padding=1, groups=2), argmin(x, axis=2) + argmax(x, axis=3), "
              "cumsum(x / N, axis=1, exclusive=true, reverse=true), c & ~c | c\n}\n")
    def ops(module):  # what each op is; value names may differ
        return [(op.name, op.attributes, [str(r.type) for r in op.results])
                for op in module.funcs[0].body.ops]
    module = parse_source(source)
    text = print_fuse(module)
    again = parse_source(text, "printed.fuse")
    assert ops(again) == ops(module) and print_fuse(again) == text
