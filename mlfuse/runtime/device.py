"""Which device runs the kernels: a CUDA GPU, or Numba's CUDA simulator.

Numba reads NUMBA_ENABLE_CUDASIM when numba.cuda is first imported, so the
choice is made here, before that import, by asking the CUDA driver directly.
"""
from __future__ import annotations

import ctypes
import os
import sys
from functools import lru_cache


@lru_cache(maxsize=None)
def gpu_present() -> bool:
    """True when the CUDA driver loads and sees at least one device."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def choose_device(force_simulator: bool = False, announce: bool = True) -> str:
    """Return "cuda" or "simulator" and set up Numba accordingly (before numba.cuda loads)."""
    if force_simulator or not gpu_present():
        if "numba.cuda" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
            from numba import cuda
            if cuda.is_available():
                return "cuda"
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        target = "simulator"
        why = "forced by --simulator" if force_simulator else "no CUDA GPU found"
    else:
        target, why = "cuda", "a CUDA GPU"
    if announce:
        sys.stderr.write(f"mlfuse: running on {'Numba CUDA simulator' if target == 'simulator' else 'GPU'}"
                         f" ({why})\n")
    return target


def device_name() -> str:
    """The current CUDA device's name (e.g. "NVIDIA H100 80GB HBM3")."""
    from numba import cuda
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)
