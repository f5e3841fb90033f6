"""A fix to Numba's CUDA simulator that generated kernels need.

The simulator runs each thread of a block as a Python thread. ``cuda.shared.array``
finds a line's array in a dict that it fills on first use, with a get and then a set:
threads that reach the line together may each make an array of their own and then
share nothing through it (seen as NaN from uninitialised memory in a tensor-core
kernel of 128 threads, and as a rare wrong 3xTF32 result). ``patch_shared_arrays``
makes the first use atomic; it runs before any generated module executes under the
simulator (``runtime.loader.load_source``).
"""
from __future__ import annotations

import sys
import threading
import traceback

_patched = False
_lock = threading.Lock()


def patch_shared_arrays() -> None:
    global _patched
    if _patched:
        return
    import numpy as np
    from numba.core import types
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    from numba.np import numpy_support

    original = FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory, or its error
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        # the caller's file and line name the array, as in the simulator
        caller = tuple(traceback.extract_stack(sys._getframe(), limit=2)[0][0:2])
        res = self._allocations.get(caller)
        if res is None:
            with _lock:
                res = self._allocations.get(caller)
                if res is None:
                    res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    FakeCUDAShared.array = array
    _patched = True
