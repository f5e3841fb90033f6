"""The oracle: runs a tensor-dialect function on NumPy arrays with NumPy semantics.

Every op computes in its own dtype (f32 in, f32 arithmetic; no silent f64), so
its results are what every lower level and every kernel is compared with. The one
widening: bf16 sums (sum, mean, matmul, conv2d, and the composites' sums) add up
in f32 and round once, as kernels (which compute bf16 in f32) and PyTorch do; a
running sum in bf16 itself stalls (1000 ones add up to 256), which is no answer
to compare a kernel with.
Composite ops are computed directly from their definitions, which lets the same
oracle check the ``decompose`` pass.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from mlfuse.dialects import tensor
from mlfuse.dialects.shapes import normalize_axes
from mlfuse.dtypes import BFLOAT16, convert
from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import FuncOp, ReturnOp
from mlfuse.ir.core import Operation

from mlfuse.interp.common import apply_elementwise, bind_arguments, numpy_dtype, resolve_shape, scalar
from mlfuse.interp.indexing_rules import INDEXING_RULES
from mlfuse.interp.tensor_windows import WINDOW_RULES


def run_tensor(func: FuncOp, args: list) -> list[np.ndarray]:
    """Run ``func`` (tensor dialect) on ``args``; returns one array per result
    (scalar parameters and results are 0-d arrays)."""
    values, dims = bind_arguments(func, args)
    env: dict[int, np.ndarray] = {id(p): v for p, v in zip(func.args, values)}
    for op in func.body.ops:
        if isinstance(op, ReturnOp):
            return [np.array(env[id(v)]) for v in op.operands]
        inputs = [env[id(v)] for v in op.operands]
        out = _evaluate(op, inputs, dims)
        want = resolve_shape(op.result.type.shape, dims, op)
        if out.shape != want or out.dtype != numpy_dtype(op.result.type.dtype):
            raise MlfuseError(f"{op.name} computed {out.dtype}{list(out.shape)} but its type is "
                              f"{op.result.type} with {dims}", op.loc)
        env[id(op.result)] = out
    raise MlfuseError(f"function '{func.sym_name}' does not end in return", func.loc)


def _evaluate(op: Operation, inputs: list[np.ndarray], dims: dict[str, int]) -> np.ndarray:
    if isinstance(op, tensor.ElementwiseOp):
        return apply_elementwise(op.spec, inputs, op.result.type.dtype, op)
    rule = _RULES.get(op.name)
    if rule is None:
        raise MlfuseError(f"the tensor interpreter does not know op '{op.name}'", op.loc)
    with np.errstate(all="ignore"):  # inf and nan are results to compare, not errors
        return np.asarray(rule(op, *inputs, dims=dims))


def _constant(op, *, dims):
    return scalar(op["value"], op.result.type.dtype)


def _cast(op, x, *, dims):
    return convert(x, numpy_dtype(op["dtype"]))


def _accumulated(np_reduce: Callable, x: np.ndarray, **kwargs) -> np.ndarray:
    """``np_reduce`` (np.sum, np.mean) of ``x`` in x's dtype: bf16 adds up in f32 and
    rounds once; a sum's dtype= keeps integer sums in i32 (NumPy would widen them to
    int64); NumPy's mean of f16 adds up in f32 itself."""
    if x.dtype == BFLOAT16:
        return np.asarray(np_reduce(x, dtype=np.float32, **kwargs)).astype(x.dtype)
    if np_reduce is np.sum:
        kwargs["dtype"] = x.dtype
    return np_reduce(x, **kwargs)


def _reduction(np_reduce: Callable) -> Callable:
    def rule(op, x, *, dims):
        kwargs = {"axis": tuple(op["axis"]), "keepdims": op["keepdims"]}
        if np_reduce in (np.sum, np.mean):
            return _accumulated(np_reduce, x, **kwargs)
        return np_reduce(x, **kwargs)
    return rule


def _reshape(op, x, *, dims):
    return x.reshape(resolve_shape(tuple(op["shape"]), dims, op))


def _transpose(op, x, *, dims):
    return np.transpose(x, op["perm"])


def _broadcast_to(op, x, *, dims):
    return np.broadcast_to(x, resolve_shape(tuple(op["shape"]), dims, op))


def _matmul(op, a, b, *, dims):
    if a.dtype in (BFLOAT16, np.float16):  # f32 sums rounded once, as ml_dtypes' bf16 and
        # NumPy's f16 matmul compute them, but through BLAS (theirs took minutes at 4096^3)
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.matmul(a, b)


def _conv2d(op, x, w, *, dims):
    """Cross-correlation: zero-pad, take every (dilated, strided) window, contract."""
    (sh, sw), (ph, pw), (dh, dw) = op["stride"], op["padding"], op["dilation"]
    kh, kw = w.shape[2:]
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    windows = np.lib.stride_tricks.sliding_window_view(padded, span, axis=(2, 3))
    # windows[n, c, oh, ow, a, b]: keep dilated taps and strided output positions
    windows = windows[:, :, ::sh, ::sw, ::dh, ::dw]
    groups = op.attributes.get("groups", 1)
    if x.dtype == BFLOAT16:  # einsum has no bf16 loops: sum the f32 products, round once
        windows, w = windows.astype(np.float32), w.astype(np.float32)
    if groups == 1:
        out = np.einsum("ncxykl,ockl->noxy", windows, w, dtype=windows.dtype, optimize=True)
    else:  # output channel o reads the input channels of its group, o // (O / groups)
        n, c, oh, ow = windows.shape[:4]
        grouped = windows.reshape(n, groups, c // groups, oh, ow, kh, kw)
        per_group = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
        out = np.einsum("ngcxykl,gockl->ngoxy", grouped, per_group, dtype=windows.dtype,
                        optimize=True).reshape(n, w.shape[0], oh, ow)
    out = out.astype(x.dtype)
    # A sum starts from +0 (as the kernels' accumulators and torch do), so an output
    # that sees only padding is +0; einsum keeps the -0 of one product 0 * -w, whose
    # sign 1/x would then show. Adding +0 turns -0 into +0 and changes nothing else.
    return out + x.dtype.type(0)


def _softmax(op, x, *, dims):
    (axis,) = normalize_axes(op["axis"], x.ndim)
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / _accumulated(np.sum, shifted, axis=axis, keepdims=True)


def _layernorm(op, x, gamma, beta, *, dims):
    (axis,) = normalize_axes(op["axis"], x.ndim)
    axes = tuple(range(axis, x.ndim))
    mean = _accumulated(np.mean, x, axis=axes, keepdims=True)
    var = _accumulated(np.mean, (x - mean) * (x - mean), axis=axes, keepdims=True)
    eps = x.dtype.type(op["eps"])
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _rmsnorm(op, x, gamma, *, dims):
    eps = x.dtype.type(op["eps"])
    return x / np.sqrt(_accumulated(np.mean, x * x, axis=-1, keepdims=True) + eps) * gamma


_RULES: dict[str, Callable] = {
    "tensor.constant": _constant,
    "tensor.cast": _cast,
    "tensor.sum": _reduction(np.sum),
    "tensor.max": _reduction(np.max),
    "tensor.min": _reduction(np.min),
    "tensor.mean": _reduction(np.mean),
    "tensor.reshape": _reshape,
    "tensor.transpose": _transpose,
    "tensor.broadcast_to": _broadcast_to,
    "tensor.matmul": _matmul,
    "tensor.conv2d": _conv2d,
    "tensor.softmax": _softmax,
    "tensor.layernorm": _layernorm,
    "tensor.rmsnorm": _rmsnorm,
    **INDEXING_RULES,
    **WINDOW_RULES,
}
