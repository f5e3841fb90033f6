"""NumPy's side of the IR dtypes: the NumPy dtype that holds each, and the facts about
floats (is it one, its eps and range) that NumPy answers for its own floats only.

bf16 has no NumPy dtype. Host arrays, the interpreters (the oracles) and the tests
use ``ml_dtypes.bfloat16``, the bfloat16 NumPy extension JAX and TensorFlow use:
every NumPy ufunc runs on it, computing in f32 and rounding each result to bf16
(round to nearest even), as an f16 array computes in f32 and rounds to f16. NumPy
does not count it as a float: its ``kind`` is "V" and ``np.finfo`` refuses it, so
code that asks "is this a float, what is its eps" asks here. Kernels keep bf16 as
16-bit words (uint16) and compute in f32; mlfuse/codegen/bf16.py says how.

i64 is NumPy's int64: it wraps around on overflow in NumPy and in kernels alike.
"""
from __future__ import annotations

import ml_dtypes  # registers the NumPy dtype name "bfloat16"
import numpy as np

from mlfuse.ir.types import NUMPY_DTYPE

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_IR_DTYPE = {np.dtype(v): k for k, v in NUMPY_DTYPE.items()}


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of IR dtype ``dtype`` (f16 ... bool)."""
    return np.dtype(NUMPY_DTYPE[dtype])


def ir_dtype(dtype) -> str | None:
    """The IR dtype a NumPy dtype holds, or None."""
    return _IR_DTYPE.get(np.dtype(dtype))


def convert(x, dtype) -> np.ndarray:
    """``x`` cast to NumPy dtype ``dtype`` as kernels cast it: to bf16 by way of f32 (a
    double or an integer is rounded to f32 first, then to bf16: two roundings, as the
    device converts; ml_dtypes rounds once from 0.7 on, earlier versions twice), to any
    other dtype as NumPy's astype."""
    x, dtype = np.asarray(x), np.dtype(dtype)
    if dtype == BFLOAT16 and x.dtype not in (BFLOAT16, np.float32, np.float16):
        x = x.astype(np.float32)
    return x.astype(dtype)


def is_float(dtype) -> bool:
    """Whether NumPy dtype ``dtype`` is a float (bfloat16 included)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype == BFLOAT16


def finfo(dtype):
    """``np.finfo`` of a float dtype, bfloat16 included (``ml_dtypes.finfo``)."""
    dtype = np.dtype(dtype)
    return ml_dtypes.finfo(dtype) if dtype == BFLOAT16 else np.finfo(dtype)


def eps(dtype) -> float:
    """The float dtype's machine epsilon, 0.0 for an exact (integer, bool) dtype."""
    return float(finfo(dtype).eps) if is_float(dtype) else 0.0


# What a device array holding each IR dtype holds, where that differs from numpy_dtype:
# kernels take bf16 as its 16 bits (mlfuse/codegen/bf16.py; Numba has no bf16 arrays).
_DEVICE = {"bf16": np.dtype(np.uint16)}


def device_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of the device arrays that kernels take for IR dtype ``dtype``."""
    return _DEVICE.get(dtype) or numpy_dtype(dtype)


def from_saved(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` as read back by np.load, for a value of IR dtype ``dtype``: np.savez
    stores an ml_dtypes bfloat16 array as 2-byte raw values ('|V2'), viewed here as bf16."""
    if dtype == "bf16" and array.dtype.kind == "V" and array.dtype.itemsize == 2:
        return array.view(BFLOAT16)
    return array
