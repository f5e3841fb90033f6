"""Checking a compiled function's arguments, moving them to the device and results back.

Every check runs before anything is copied or launched; each failure is one
:class:`ArgumentError` naming the function and the parameter. Arguments are never
cast: a float64 array for an f32 parameter is an error, not a silent copy.

Kinds of argument: NumPy arrays (copied to the device; results come back as NumPy),
Numba device arrays, and objects with ``__cuda_array_interface__`` (PyTorch, CuPy:
wrapped without a copy; results come back as the same library's arrays). Python and
NumPy scalars are accepted for rank-0 parameters.

bf16 (docs/language.md): on the host, ``ml_dtypes.bfloat16`` NumPy arrays, and bf16
results come back as such. On the device, kernels take a bf16 array as its 16-bit
words (mlfuse/codegen/bf16.py): a ``torch.bfloat16`` CUDA tensor (PyTorch has no
``__cuda_array_interface__`` for bf16: mlfuse reinterprets the tensor's memory as
int16, no copy) and its results come back as torch.bfloat16; Numba and CuPy arrays,
which have no bf16 dtype, pass and get back uint16 arrays of the bits
(``array.view(np.uint16)`` of the same memory).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlfuse.dtypes import BFLOAT16, device_dtype, finfo, numpy_dtype
from mlfuse.errors import ArgumentError, ArgumentValueError
from mlfuse.ir.builtin import FuncOp
from mlfuse.ir.dims import quotient_dims
from mlfuse.ir.types import FLOAT_DTYPES, INT_BITS, Dim, IndivisibleDim, dim_value, shape_problem

HOST = "numpy"


@dataclass(frozen=True)
class Param:
    name: str
    dtype: str                 # IR dtype: f16 bf16 f32 f64 i32 i64 bool
    shape: tuple[Dim, ...]

    @property
    def np_dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype)

    @property
    def device_dtype(self) -> np.dtype:
        """The dtype of the device array a kernel takes (bf16: uint16, its bits)."""
        return device_dtype(self.dtype)

    def describe(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Signature:
    func: str
    params: tuple[Param, ...]
    num_results: int
    made: tuple[tuple[str, tuple[Dim, ...]], ...] = ()
    # (name, shape) of every array a call allocates (results and intermediates), whose
    # sizes are checked once the arguments bind the symbolic dims, before any launch
    results: tuple[str, ...] = ()  # the results' IR dtypes
    quotients: tuple[str, ...] = ()  # dims such as C*H*W/8, which must divide

    @staticmethod
    def of(func: FuncOp) -> "Signature":
        params = tuple(Param(a.name_hint or f"arg{i}", a.type.dtype, tuple(a.type.shape))
                       for i, a in enumerate(func.args))
        made = tuple((op.results[0].name_hint or "a result", tuple(op.results[0].type.shape))
                     for op in func.body.ops if op.name == "loops.alloc")
        results = tuple(t.dtype for t in func["result_types"])
        return Signature(func.sym_name, params, len(results), made, results,
                         tuple(quotient_dims(func)))

    def positional(self, args: tuple, kwargs: dict) -> tuple:
        """``args`` followed by the parameters ``kwargs`` names, in parameter order."""
        names = [p.name for p in self.params]
        for name in kwargs:
            if name not in names:
                raise self.error(f"has no parameter '{name}' (parameters: {', '.join(names)})")
            if names.index(name) < len(args):
                raise self.error(f"parameter '{name}' given by position and by name")
        rest = names[len(args):]
        missing = [n for n in rest if n not in kwargs]
        if missing:
            raise self.error(f"missing argument(s) {', '.join(missing)}")
        return tuple(args) + tuple(kwargs[n] for n in rest)

    def error(self, message: str, param: Param | None = None, value: bool = False) -> ArgumentError:
        """``value``: the argument is of the right kind but its value cannot be taken
        (a ValueError as well)."""
        where = f"parameter '{param.name}' of @{self.func}" if param else f"@{self.func}"
        return (ArgumentValueError if value else ArgumentError)(f"{where}: {message}")


def kind_of(value) -> str | None:
    """"numpy", "numba", "torch", "cupy", "cuda_array" (another device array),
    "scalar", or None for anything else."""
    if isinstance(value, np.ndarray):
        return HOST
    if getattr(value, "__cuda_ndarray__", False):
        return "numba"
    if _is_torch_bf16(value):  # no __cuda_array_interface__: asking for it raises
        return "torch"
    if hasattr(value, "__cuda_array_interface__"):
        library = type(value).__module__.split(".")[0]
        return library if library in ("torch", "cupy") else "cuda_array"
    if isinstance(value, (bool, int, float, np.generic)):
        return "scalar"
    return None


def _scalar(sig: Signature, p: Param, value) -> np.ndarray:
    """A 0-d array of ``p``'s dtype holding ``value``; no lossy conversion."""
    if p.shape:
        raise sig.error(f"expects an array of shape {p.describe()}, got a scalar", p)
    if isinstance(value, np.generic):
        if value.dtype != p.np_dtype:
            raise sig.error(f"expects {p.dtype} ({p.np_dtype}), got a {value.dtype} scalar", p)
        return np.array(value)
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if p.dtype == "bool":
        fits = isinstance(value, bool)
    elif p.dtype in INT_BITS:
        bits = INT_BITS[p.dtype]
        fits = is_int and -2 ** (bits - 1) <= value < 2 ** (bits - 1)
    else:  # a float parameter takes Python ints and floats
        fits = is_int or isinstance(value, float)
    if not fits:
        raise sig.error(f"expects {p.dtype}, got {type(value).__name__} {value!r}", p)
    if p.dtype in FLOAT_DTYPES:
        return _float_scalar(sig, p, value)
    return np.array(value, dtype=p.np_dtype)


def _float_scalar(sig: Signature, p: Param, value) -> np.ndarray:
    """``value`` rounded to ``p``'s dtype, which must not overflow it: a finite number
    beyond the largest finite value would silently become inf (10**400 does not even
    fit a Python float)."""
    largest = finfo(p.np_dtype).max
    beyond = sig.error(f"{value!r} is beyond the largest {p.dtype} ({largest}); pass inf "
                       "explicitly if that is meant", p, value=True)
    try:
        as_float = float(value)
    except OverflowError:
        raise beyond from None
    with np.errstate(over="ignore"):
        array = np.array(as_float, dtype=p.np_dtype)
    if np.isinf(array) and not np.isinf(as_float):
        raise beyond
    return array


def _is_torch_bf16(value) -> bool:
    return type(value).__module__.split(".")[0] == "torch" and \
        str(getattr(value, "dtype", "")) == "torch.bfloat16" and getattr(value, "is_cuda", False)


def _as_numba(sig: Signature, p: Param, value):
    from numba import cuda
    if not hasattr(cuda, "as_cuda_array"):
        raise sig.error(f"a {type(value).__module__} device array needs a GPU; the CUDA "
                        "simulator only takes NumPy and Numba arrays", p)
    if _is_torch_bf16(value):  # the same memory as int16 words, seen as uint16 bits
        if value.requires_grad:
            raise sig.error("is a tensor that requires grad; pass .detach()", p)
        import torch
        return cuda.as_cuda_array(value.view(torch.int16)).view(np.uint16)
    return cuda.as_cuda_array(value)


def _contiguous(array) -> bool:
    if isinstance(array, np.ndarray):
        return array.flags.c_contiguous
    return array.is_c_contiguous()


def _check_dtype(sig: Signature, p: Param, array, kind: str) -> None:
    """A host array holds ``p``'s NumPy dtype; a device array what kernels take (bf16:
    uint16 bits; a torch.bfloat16 tensor is seen as such by ``_as_numba``)."""
    want = p.np_dtype if kind in (HOST, "scalar") else p.device_dtype
    if array.dtype == want:
        return
    if want == p.np_dtype:
        raise sig.error(f"expects dtype {p.np_dtype} ({p.dtype}), got {array.dtype}; "
                        "arguments are never cast", p)
    raise sig.error(f"expects {p.dtype} as a device array of its {want.itemsize * 8}-bit words, "
                    f"dtype {want} (a torch.{p.np_dtype} tensor, or a {want} view of Numba or "
                    f"CuPy memory), got {array.dtype}; arguments are never cast", p)


def _check_array(sig: Signature, p: Param, array, dims: dict[str, tuple[int, str]],
                 kind: str = HOST) -> None:
    if array.ndim != len(p.shape):
        raise sig.error(f"expects rank {len(p.shape)} ({p.describe()}), got an array of rank "
                        f"{array.ndim} (shape {tuple(array.shape)})", p)
    _check_dtype(sig, p, array, kind)
    for axis, (want, got) in enumerate(zip(p.shape, array.shape)):
        if isinstance(want, int) and want != got:
            raise sig.error(f"dim {axis} must be {want} ({p.describe()}), got {got} "
                            f"(shape {tuple(array.shape)})", p)
        if isinstance(want, str) and want.isidentifier():  # products: _check_products
            bound = dims.setdefault(want, (got, p.name))
            if bound[0] != got:
                raise sig.error(f"dim {want} is {bound[0]} from {bound[1]} but {got} from {p.name}")
    if not _contiguous(array):
        raise sig.error("must be C-contiguous (pass np.ascontiguousarray(...) or a copy)", p)
    if 0 in tuple(array.shape):  # e.g. max over an empty axis would have no value
        raise sig.error(f"is empty (shape {tuple(array.shape)}); mlfuse has no empty arrays: "
                        "every size is positive (docs/language.md)", p, value=True)


def _check_products(sig: Signature, values, dims: dict[str, int]) -> None:
    """Product dims of parameters (B*H, in IR text) against the sizes their factors got."""
    for p, value in zip(sig.params, values):
        for axis, want in enumerate(p.shape):
            if isinstance(want, str) and not want.isidentifier():
                try:
                    size = dim_value(want, dims)
                except IndivisibleDim as e:
                    raise sig.error(f"dim {axis}: {e}", p, value=True) from None
                if size is None:
                    raise sig.error(f"dim {axis} is {want}, whose factors no parameter binds "
                                    "alone", p)
                if value.shape[axis] != size:
                    raise sig.error(f"dim {axis} must be {want} = {size}, got "
                                    f"{value.shape[axis]}", p)


def _check_sizes(sig: Signature, dims: dict[str, int]) -> None:
    """Every array the call allocates is indexable (int64 index arithmetic in every
    kernel: sizes past 2**31 elements run, past 2**62 are refused here, before any
    allocation or launch)."""
    for d in sig.quotients:
        try:
            dim_value(d, dims)
        except IndivisibleDim as e:
            raise sig.error(f"{e}; the sizes do not fit the program's shapes",
                            value=True) from None
    for name, shape in sig.made:
        problem = shape_problem(shape, dims)
        if problem:
            sizes = ", ".join(str(dim_value(d, dims) or d) for d in shape)
            raise sig.error(f"{name} would be [{sizes}]: {problem}", value=True)


@dataclass
class BoundCall:
    device_args: list
    kind: str            # the kind results come back as


def bind_arguments(sig: Signature, args: tuple) -> BoundCall:
    """Check ``args`` against ``sig`` and put them on the device."""
    from numba import cuda
    if len(args) != len(sig.params):
        names = ", ".join(p.name for p in sig.params)
        raise sig.error(f"takes {len(sig.params)} argument(s) ({names}), got {len(args)}")
    values, kinds, dims = [], [], {}
    for p, value in zip(sig.params, args):
        if isinstance(value, np.ma.MaskedArray):
            raise sig.error("is a masked array (numpy.ma), whose mask would be ignored; pass "
                            "its .filled(...) values or its .data", p)
        kind = kind_of(value)
        if kind is None:
            raise sig.error(f"expects a NumPy or device array, got {type(value).__name__}", p)
        if kind == "scalar":
            value = _scalar(sig, p, value)
        elif kind not in (HOST, "numba"):
            value = _as_numba(sig, p, value)
        _check_array(sig, p, value, dims, kind)
        if kind in (HOST, "scalar") and p.device_dtype != p.np_dtype:
            value = value.view(p.device_dtype)  # bf16: its bits, as kernels take it
        values.append(value)
        kinds.append(kind)
    _check_products(sig, values, {name: size for name, (size, _) in dims.items()})
    _check_sizes(sig, {name: size for name, (size, _) in dims.items()})
    arrays = [(p, k) for p, k in zip(sig.params, kinds) if k != "scalar"]
    host = [p for p, k in arrays if k == HOST]
    device = [(p, k) for p, k in arrays if k != HOST]
    if host and device:
        raise sig.error(f"parameter '{host[0].name}' is a NumPy array but '{device[0][0].name}' is "
                        "a device array: pass all arguments on the host or all on the device")
    moved = [v if getattr(v, "__cuda_ndarray__", False) else cuda.to_device(v) for v in values]
    return BoundCall(moved, device[0][1] if device else HOST)


def convert_result(array, kind: str, dtype: str | None = None):
    """A device result (of IR dtype ``dtype``) as the kind of array the call was given."""
    bf16 = dtype == "bf16"
    if kind == HOST:
        host = array.copy_to_host()
        return host.view(BFLOAT16) if bf16 else host
    if kind == "torch":
        import torch
        if bf16:  # PyTorch takes no uint16 through the interface: int16, then the bits
            # (as one axis: Numba's view of a 0-d device array fails, "unhashable list")
            words = array.reshape(array.size).view(np.int16)
            return torch.as_tensor(words, device="cuda").view(torch.bfloat16).reshape(array.shape)
        return torch.as_tensor(array, device="cuda")
    if kind == "cupy":
        import cupy
        return cupy.asarray(array)
    return array
