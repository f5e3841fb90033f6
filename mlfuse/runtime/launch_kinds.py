"""The kinds of device array a planned call takes and returns (``runtime_args.kind_of``
names them): how the launcher reads one, and makes one.

Reading an array gives its part of the fast-path key and its data pointer. The key
part holds everything the argument checks (``runtime_args.bind_arguments``) and the
packed kernel parameters depend on: type, dtype, shape, strides; for PyTorch also the
device and whether it requires grad, which decide whether it has a
``__cuda_array_interface__`` at all. The pointer changes from call to call; the
launcher keys on its alignment only (see ``launcher.FastPath.read``).
"""
from __future__ import annotations

import numpy as np

from mlfuse.runtime.cuda_driver import device_pointer
from mlfuse.runtime.launch_plan import Buffer


def _numba(a):
    return (type(a), a.dtype, a.shape, a.strides), device_pointer(a)


def _torch(t):
    return (type(t), t.dtype, t.shape, t.stride(), t.get_device(), t.requires_grad), t.data_ptr()


def _cupy(a):
    return (type(a), a.dtype, a.shape, a.strides, a.device.id), a.data.ptr


READERS = {"numba": _numba, "torch": _torch, "cupy": _cupy}


class NumbaArrays:
    """New Numba device arrays of one shape and dtype.

    ``cuda.device_array`` costs more host time than the launch it feeds (shape and
    strides normalised, a dummy array built, the context looked up). Here a new array
    is a copy of the attributes of one made once, with fresh memory from the context's
    memory manager (mlfuse's caching allocator where installed): the same object
    ``cuda.device_array`` would return."""

    def __init__(self, buffer: Buffer):
        from numba import cuda
        self._buffer = buffer
        template = cuda.device_array(buffer.shape, dtype=buffer.dtype)
        self._cls = type(template)
        self._attributes = {k: v for k, v in vars(template).items() if k != "gpu_data"}
        self._nbytes = template.alloc_size
        self._memalloc = cuda.current_context().memalloc

    def __call__(self):
        if not self._nbytes:  # Numba gives an empty array a null pointer of its own
            from numba import cuda
            return cuda.device_array(self._buffer.shape, dtype=self._buffer.dtype), 0
        memory = self._memalloc(self._nbytes)
        array = self._cls.__new__(self._cls)
        array.__dict__.update(self._attributes)
        array.gpu_data = memory
        return array, int(memory.handle)


def _torch_tensors(buffer: Buffer, like):
    import torch
    # uint16 buffers hold bf16 bits (the only uint16 buffers codegen makes, see
    # mlfuse.dtypes.device_dtype): PyTorch callers get them back as bf16 tensors
    dtype = torch.bfloat16 if buffer.dtype == np.uint16 else getattr(torch, buffer.dtype.name)
    shape, device = buffer.shape, like.device

    def allocate():
        tensor = torch.empty(shape, dtype=dtype, device=device)
        return tensor, tensor.data_ptr()
    return allocate


def _cupy_arrays(buffer: Buffer, like):
    import cupy
    shape, dtype = buffer.shape, buffer.dtype

    def allocate():
        array = cupy.empty(shape, dtype=dtype)
        return array, array.data.ptr
    return allocate


def allocator(kind: str, buffer: Buffer, like):
    """A function making a new array of ``buffer``'s shape and dtype, of ``kind`` (like
    ``like``, an argument of that kind): () -> (array, data pointer)."""
    if kind == "torch":
        return _torch_tensors(buffer, like)
    if kind == "cupy":
        return _cupy_arrays(buffer, like)
    return NumbaArrays(buffer)
