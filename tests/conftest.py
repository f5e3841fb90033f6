import os

# Kernels run under Numba's CUDA simulator in tests (no GPU needed). Numba reads this
# when numba.cuda is first imported, so it must be set before any test module imports it.
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
