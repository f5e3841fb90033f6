"""What the tensor and loops interpreters share: binding arguments to parameters
(symbolic dims included) and evaluating one entry of the elementwise table."""
from __future__ import annotations

import numpy as np

from mlfuse.dialects.elementwise import ElementwiseSpec
from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.ir.builtin import FuncOp
from mlfuse.ir.core import Operation
from mlfuse import dtypes
from mlfuse.ir.types import INT_DTYPES, Dim, IndivisibleDim, dim_value, symbols_of


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of an IR dtype; loop indices are int64 arrays in the interpreters."""
    return np.dtype(np.int64) if dtype == "index" else dtypes.numpy_dtype(dtype)


def scalar(value, dtype: str) -> np.ndarray:
    """A 0-d array holding ``value`` in ``dtype`` (a constant attribute's value)."""
    if dtype in ("index", "bool") + INT_DTYPES:
        value = int(value)
    return np.array(value, dtype=numpy_dtype(dtype))


def bind_arguments(func: FuncOp, args: list) -> tuple[list[np.ndarray], dict[str, int]]:
    """Check ``args`` against ``func``'s parameter types and bind its symbolic dims.

    Returns private copies of the arguments (so that no interpreter can write into
    the caller's arrays) and the dims. A Python scalar takes its parameter's dtype;
    NumPy arrays and scalars must have exactly the parameter's dtype.
    """
    params = func.args
    if len(args) != len(params):
        raise ArgumentError(f"function '{func.sym_name}' takes {len(params)} argument(s), "
                            f"got {len(args)}", func.loc)
    dims: dict[str, int] = {}
    copies, products = [], []
    for k, (param, arg) in enumerate(zip(params, args)):
        want = param.type
        what = f"argument {k} (%{param.name_hint or k}) of '{func.sym_name}'"
        if isinstance(arg, (bool, int, float)):
            arr = np.array(arg, dtype=numpy_dtype(want.dtype))  # weak, as NumPy's NEP 50
        else:
            arr = np.array(arg)  # a copy
        if arr.dtype != numpy_dtype(want.dtype):
            raise ArgumentError(f"{what} must be {want.dtype}, got {arr.dtype}", func.loc)
        if arr.ndim != len(want.shape):
            raise ArgumentError(f"{what} must have rank {len(want.shape)} ({want}), got shape "
                                f"{arr.shape}", func.loc)
        for axis, (d, n) in enumerate(zip(want.shape, arr.shape)):
            if isinstance(d, str) and not d.isidentifier():  # a product: once all are bound
                products.append((what, axis, d, n))
                continue
            expected = dims.setdefault(d, n) if isinstance(d, str) else d
            if n != expected:
                if isinstance(d, str):
                    d = f"{d} ({d} = {expected} from an earlier argument)"
                raise ArgumentError(f"{what}: dim {axis} is {n}, expected {d}", func.loc)
        copies.append(arr)
    for what, axis, d, n in products:
        try:
            expected = dim_value(d, dims)
        except IndivisibleDim as e:
            raise ArgumentError(f"{what}: {e}", func.loc) from None
        if expected is None:
            raise ArgumentError(f"{what}: dim {axis} is {d}, whose factors no argument binds "
                                "alone", func.loc)
        if n != expected:
            raise ArgumentError(f"{what}: dim {axis} is {n}, expected {d} = {expected}", func.loc)
    return copies, dims


def resolve_shape(shape: tuple[Dim, ...], dims: dict[str, int], op: Operation) -> tuple[int, ...]:
    """Concrete sizes of ``shape``; a symbol no argument bound, or a quotient that does
    not divide, is an error at ``op``."""
    try:
        sizes = tuple(dim_value(d, dims) for d in shape)
    except IndivisibleDim as e:
        raise MlfuseError(f"{op.name}: {e}", op.loc) from None
    if None in sizes:
        unbound = next(s for s in symbols_of(shape) if s not in dims)
        raise MlfuseError(f"{op.name}: symbolic dim {unbound} is not bound by any argument",
                          op.loc)
    return sizes


def apply_elementwise(spec: ElementwiseSpec, args: list[np.ndarray], result_dtype: str,
                      op: Operation) -> np.ndarray:
    """NumPy semantics of ``spec`` on ``args``, checked to stay in ``result_dtype``
    (a silent promotion, say to f64, would make the oracle compare the wrong thing)."""
    out = np.asarray(spec.numpy(*args))
    if out.dtype != numpy_dtype(result_dtype):
        raise MlfuseError(f"{op.name}: NumPy computed {out.dtype}, the IR says {result_dtype} "
                          "(interpreter bug)", op.loc)
    return out
