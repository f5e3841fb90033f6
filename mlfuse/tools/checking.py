"""Inputs and comparisons for checking compiled code against the NumPy interpreter
(used by ``mlfuse run``, ``mlfuse bench`` and the tests).

Tolerance: generated kernels round differently from NumPy (fused multiply-adds,
CUDA's libm, the order of a reduction). Each rounding errs by at most half an ulp,
and CUDA's transcendental functions by a few ulps, so results of unit scale are
compared with ``rtol = atol = 4 * eps(dtype) * (ops + reduced)``, where ``ops``
counts the ops on the longest path and ``reduced`` the terms of the longest
reduction. After a reduction an element near zero still carries the error of
its large terms, so there each element's scale is at least the root mean square
of the whole result. NaN must
appear exactly where the reference has NaN, and infinities must match exactly;
integers and bools must match exactly.

A function whose f32 contractions ran at a lower matmul precision (TF32, 3xTF32:
mlfuse/matmul_precision.py) is compared with that precision's unit in place of the
dtype's eps where it is the larger (``matmul_eps``): 2^-10 for TF32, 2^-21 for 3xTF32.

The one exception is not a tolerance: an element whose NaN/inf status (or bool
value) the evaluation order decides, such as ``inf * (x - mean(x))`` over equal
values (0 in one summation order, one ulp in another: NaN against ±inf). Callers
that pass ``undecided`` (from ``mlfuse.interp.rounding.rounding_decided``, which
finds those elements by checking the reference computation itself) leave them
out of the comparison; docs/fuzzing.md gives the reasoning.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import FuncOp
from mlfuse.ir.types import dim_value
from mlfuse.dtypes import eps, is_float, numpy_dtype


def bind_dims(func: FuncOp, dims: dict, default: int | None = None) -> dict:
    out = dict(dims)
    for a in func.args:
        for d in a.type.shape:
            if isinstance(d, str) and d not in out:
                if default is None:
                    raise MlfuseError(f"give a size for dim {d} of function {func.sym_name} "
                                      f"with --dim {d}=SIZE")
                out[d] = default
    return out


def random_inputs(func: FuncOp, dims: dict | None = None, seed: int = 0,
                  low: float | None = None) -> list[np.ndarray]:
    """One random array per parameter of ``func`` (tensor or buffer types alike).
    Floats are standard normal (or uniform in [low, low + 1], e.g. to keep log and
    sqrt real), integers in [-5, 5], bools fair coins; rank-0 parameters get 0-d arrays."""
    rng = np.random.default_rng(seed)
    dims = dims or {}
    args = []
    for a in func.args:
        shape = tuple(dims[d] if isinstance(d, str) else d for d in a.type.shape)
        dtype = numpy_dtype(a.type.dtype)
        if is_float(dtype):
            values = rng.standard_normal(shape) if low is None else rng.uniform(low, low + 1, shape)
        elif dtype.kind == "i":
            values = rng.integers(-5, 6, shape)
        else:
            values = rng.random(shape) < 0.5
        args.append(np.array(values, dtype=dtype, order="C"))
    return args


def tolerance(dtype, ops: int = 1, reduced: int = 1, unit: float = 0.0) -> float:
    """rtol = atol for a result in ``dtype`` (see the module docstring); 0 for exact types.
    ``unit``: a coarser relative error unit than the dtype's eps that some step had
    (a TF32 matmul: ``matmul_eps``)."""
    if not is_float(dtype):
        return 0.0
    return 4 * max(eps(dtype), unit) * (max(ops, 1) + max(reduced, 1) - 1)


def matmul_eps(kernels) -> float:
    """The relative error unit of the coarsest contraction among ``kernels`` (kernel ops,
    e.g. ``CompiledModule.kernels(name)``) at a lower matmul precision, else 0."""
    from mlfuse.matmul_precision import VARIANT_EPS
    return max((VARIANT_EPS.get(k.attributes.get("variant"), 0.0) for k in kernels),
               default=0.0)


@dataclass
class Comparison:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    message: str
    allowance_used: float = 0.0  # the largest error as a share of its element's allowance
    left_out: int = 0            # undecided elements not compared


def compare(reference: np.ndarray, got: np.ndarray, ops: int = 1, reduced: int = 1,
            precision=None, undecided: np.ndarray | None = None, xp=np,
            unit: float = 0.0) -> Comparison:
    """``precision``: the dtype whose eps sets the tolerance, when the result was computed
    in a coarser dtype than its own (an f32 sum cast to f64); the result's dtype if None.
    ``unit``: the relative error unit of a lower matmul precision (``matmul_eps``).
    ``undecided``: a mask of elements the evaluation order decides, left out.
    ``xp``: the array module to compare with (NumPy; CuPy compares on the GPU)."""
    reference, got = xp.asarray(reference), xp.asarray(got)
    if reference.shape != got.shape:
        return Comparison(False, math.inf, math.inf, f"shape {got.shape} != {reference.shape}")
    if reference.dtype != got.dtype:
        return Comparison(False, math.inf, math.inf, f"dtype {got.dtype} != {reference.dtype}")
    left_out = 0
    if undecided is not None and np.any(undecided):
        keep = ~xp.broadcast_to(xp.asarray(undecided), reference.shape)
        left_out = int(reference.size - xp.count_nonzero(keep))
        reference, got = reference[keep], got[keep]
    result = _compare_decided(reference, got, ops, reduced, precision, xp, unit)
    result.left_out = left_out
    if left_out:
        result.message += f"; {left_out} undecided element(s) left out"
    return result


def _compare_decided(reference, got, ops: int, reduced: int, precision, xp,
                     unit: float = 0.0) -> Comparison:
    if not is_float(reference.dtype):
        bad = int(xp.count_nonzero(reference != got))
        return Comparison(bad == 0, float(bad > 0), float(bad > 0),
                          "exact" if bad == 0 else f"{bad} elements differ")
    ref64, got64 = reference.astype(np.float64), got.astype(np.float64)
    nan_ref, nan_got = xp.isnan(ref64), xp.isnan(got64)
    if not xp.array_equal(nan_ref, nan_got):
        return Comparison(False, math.inf, math.inf,
                          f"NaN in {int(nan_got.sum())} places, reference has {int(nan_ref.sum())}")
    inf_ref = xp.isinf(ref64)
    if not xp.array_equal(ref64[inf_ref], got64[inf_ref]) or xp.isinf(got64[~inf_ref]).any():
        return Comparison(False, math.inf, math.inf, "infinities differ")
    finite = ~(nan_ref | inf_ref)
    diff = xp.abs(ref64[finite] - got64[finite])
    scale = xp.abs(ref64[finite])
    max_abs = float(diff.max()) if diff.size else 0.0
    nonzero = scale > 0  # relative to a zero reference means nothing
    max_rel = float((diff[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0
    tol = tolerance(reference.dtype if precision is None else precision, ops, reduced, unit)
    if reduced > 1 and diff.size:
        # long sums cancel: an element near zero still carries the rounding error of
        # its large terms, whose size the root mean square of the result stands for
        scale = xp.maximum(scale, float(xp.sqrt(xp.mean(ref64[finite] ** 2))))
    allowance = tol + tol * scale
    ok = bool(xp.all(diff <= allowance))
    used = float((diff / allowance).max()) if diff.size and tol > 0 else float(max_abs > 0)
    return Comparison(ok, max_abs, max_rel, f"rtol = atol = {tol:.2e}", used)


def program_size(func: FuncOp, default_dim: int = 1024, dims: dict | None = None) -> tuple[int, int]:
    """(ops, terms of the longest reduction) of a tensor-level function, for ``tolerance``.
    Symbolic dims count as their sizes in ``dims`` where the caller knows them (the
    sizes the results were computed at: a sum of 2 terms is not allowed the error of
    1024), else as ``default_dim``; a compound dim (a reshape's ``H*W``, ``C/8``) as the
    product or quotient of its symbols' (before, as ``default_dim`` whole: group norm's
    statistics over [H*W, C/8] at 3 x 5 and 16 channels were allowed an error of 0.5)."""
    def size(d):  # a product or quotient of symbols ("H*W", "C/8") from theirs
        return dim_value(d, dims or {}, default_dim, exact=False)

    reduced = 1
    for op in func.body.ops:
        if "axis" in op.attributes and op.operands:
            shape, axes = op.operands[0].type.shape, op.attributes["axis"]
            axes = axes if isinstance(axes, list) else [axes]
            reduced = max(reduced, math.prod(size(shape[a]) for a in axes if a < len(shape)))
        elif op.name == "tensor.matmul":
            reduced = max(reduced, size(op.operands[0].type.shape[-1]))
        elif op.name == "tensor.conv2d":
            _, c, kh, kw = op.operands[1].type.shape
            reduced = max(reduced, size(c) * kh * kw)
        elif "kernel" in op.attributes:  # pooling: a reduction over each window
            reduced = max(reduced, math.prod(op.attributes["kernel"]))
    return len(func.body.ops), reduced
