"""Launching a compiled Numba kernel through the CUDA driver, its parameters packed once.

Numba's launch (``_Kernel.launch``) rebuilds every kernel parameter on each call: for
an array its meminfo, parent, size, itemsize, data pointer, shape and strides (in
bytes), for an int a ctypes value (``_Kernel._prepare_args``), then hands them to
cuda.core. For a plan (``mlfuse/runtime/launch_plan.py``) everything but the data pointers is
fixed by the argument shapes. So :func:`pack_arguments` runs Numba's own
``_prepare_args`` once (the layout is Numba's by construction, not restated here) into
a :class:`ParamBlock` of 8-byte words, and a call only writes the data pointers into
it before ``cuLaunchKernel`` reads the words (the driver copies them at the call).

Two ways to call ``cuLaunchKernel``: cuda-bindings (what Numba itself goes through)
and libcuda through ctypes. Both launch on the stream Numba launches on by default,
handle 0 (the legacy default stream, or the per-thread one where Numba is configured
for it), so that they stay ordered with everything else mlfuse and Numba do.
"""
from __future__ import annotations

import ctypes

from mlfuse.errors import MlfuseError

BACKENDS = ("bindings", "ctypes")
DEFAULT_STREAM = 0
_WORD = 8  # bytes per parameter slot: every parameter Numba passes fits in one


class Unpackable(Exception):
    """A kernel argument whose parameters cannot be packed once for all calls."""


def _word(value) -> int:
    """One parameter as the unsigned 64-bit word whose low bytes hold it."""
    if value is None:  # ctypes' c_void_p(0).value
        return 0
    if isinstance(value, int):
        return value & 0xFFFF_FFFF_FFFF_FFFF
    if isinstance(value, ctypes._SimpleCData) and ctypes.sizeof(value) <= _WORD:
        return int.from_bytes(bytes(value).ljust(_WORD, b"\0"), "little")
    raise Unpackable(f"a kernel parameter of type {type(value).__name__}")


def pack_arguments(prepare_args, argument_types, values):
    """The words Numba's ``prepare_args(ty, value, stream, retr, out)`` makes for
    ``values`` (each of its Numba type in ``argument_types``), and for each array
    argument (position, index of its data-pointer word): ``[(position, slot), ...]``."""
    from numba.cuda import types
    words, pointer_slots = [], []
    for position, (ty, value) in enumerate(zip(argument_types, values)):
        made, copy_back = [], []
        prepare_args(ty, value, DEFAULT_STREAM, copy_back, made)
        if copy_back:
            raise Unpackable(f"argument {position} is copied back after the launch")
        if isinstance(ty, types.Array):
            # meminfo, parent, size, itemsize, data, shape..., strides...: data is word 4
            if len(made) != 5 + 2 * ty.ndim or _word(made[4]) != device_pointer(value):
                raise Unpackable(f"argument {position}: an array ABI this launcher does not know")
            pointer_slots.append((position, len(words) + 4))
        words += [_word(v) for v in made]
    return words, pointer_slots


def device_pointer(array) -> int:
    """The data pointer of a Numba device array (0 for an empty one): the int that its
    ``device_ctypes_pointer`` wraps, read without making the ctypes object. The
    simulator's arrays are NumPy arrays underneath: their host address stands in."""
    try:
        return int(array.gpu_data.device_pointer)
    except (AttributeError, TypeError):  # no gpu_data, or a pointer int() does not take
        pass
    try:
        return array.device_ctypes_pointer.value or 0
    except AttributeError:
        return array.ctypes.data


class ParamBlock:
    """A kernel's parameters as 8-byte words, and the array of pointers to them that
    ``cuLaunchKernel`` takes as ``kernelParams`` (at ``address``)."""

    def __init__(self, words: list[int]):
        n = len(words)
        self.words = (ctypes.c_uint64 * n)(*words)
        base = ctypes.addressof(self.words)
        self.pointers = (ctypes.c_void_p * n)(*[base + _WORD * i for i in range(n)])
        self.address = ctypes.addressof(self.pointers)


def function_handle(kernel):
    """The CUfunction of a compiled Numba kernel (``_Kernel``) in the current context."""
    from cuda.bindings import driver as cu
    # bind sets the kernel's attributes (its shared-memory carveout) on the function, as
    # Numba does for a kernel it compiles; one rebuilt from the kernel cache or handed back
    # by a compile worker has not been bound
    kernel.bind()
    handle = kernel._codelibrary.get_cufunc().handle
    if isinstance(handle, cu.CUkernel):  # a library kernel: its function in this context
        err, handle = cu.cuKernelGetFunction(handle)
        _check(err, "cuKernelGetFunction")
    return handle


def _check(err, what: str) -> None:
    if err:
        from cuda.bindings import driver as cu
        try:
            name = cu.CUresult(int(err)).name
        except ValueError:
            name = str(int(err))
        raise MlfuseError(f"{what} failed: {name}")


def _per_thread_default_stream() -> bool:
    from numba.cuda.core import config
    return bool(getattr(config, "CUDA_PER_THREAD_DEFAULT_STREAM", 0))


class BindingsLaunch:
    """One launch through cuda-bindings' ``cuLaunchKernel``."""

    def __init__(self, name: str, function, grid, block, shared_bytes: int, params: ParamBlock):
        from cuda.bindings import driver as cu
        self.name, self._call = name, cu.cuLaunchKernel
        self._args = (cu.CUfunction(int(function)), *grid, *block, shared_bytes,
                      cu.CUstream(DEFAULT_STREAM), params.address, 0)

    def __call__(self) -> None:
        err, = self._call(*self._args)
        if err:
            _check(err, f"launching {self.name}")


_libcuda = None


def _libcuda_launch():
    """libcuda's cuLaunchKernel (its _ptsz twin where Numba uses the per-thread stream)."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    return _libcuda.cuLaunchKernel_ptsz if _per_thread_default_stream() else \
        _libcuda.cuLaunchKernel


class CtypesLaunch:
    """One launch through libcuda's ``cuLaunchKernel``, called with ctypes. No argtypes:
    the pointers go as ready c_void_p objects and the sizes as C ints, a fifth of the
    cost of converting through argtypes (0.6 against 2.8 us against a stub driver)."""

    def __init__(self, name: str, function, grid, block, shared_bytes: int, params: ParamBlock,
                 launch=None):
        self.name, self._call = name, launch or _libcuda_launch()
        self._args = (ctypes.c_void_p(int(function)), *grid, *block, shared_bytes,
                      ctypes.c_void_p(DEFAULT_STREAM), ctypes.c_void_p(params.address), None)

    def __call__(self) -> None:
        err = self._call(*self._args)
        if err:
            _check(err, f"launching {self.name}")


LAUNCHES = {"bindings": BindingsLaunch, "ctypes": CtypesLaunch}
