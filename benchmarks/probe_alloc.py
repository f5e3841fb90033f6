"""Probe: does the caching allocator hit? Allocate and drop 256 MiB arrays."""
import gc
import sys
import time

sys.path.insert(0, ".")
import numpy as np  # noqa: E402

from mlfuse.runtime.memory import install  # noqa: E402

install()
from numba import cuda  # noqa: E402

mm = cuda.current_context().memory_manager
print(type(mm).__name__)
n = 1 << 26
for label in ("drop", "drop+gc"):
    t0 = time.perf_counter()
    for _ in range(50):
        a = cuda.device_array(n, np.float32)
        del a
        if label == "drop+gc":
            gc.collect()
    cuda.synchronize()
    print(label, f"{(time.perf_counter() - t0) / 50 * 1e6:.1f} us/alloc", "hits", mm.hits, "misses", mm.misses)
a = cuda.device_array(n, np.float32)
print("referrers of gpu_data:", [type(r).__name__ for r in gc.get_referrers(a.gpu_data)])
print(type(a.gpu_data).__name__, getattr(a.gpu_data, "refct", None))
