import os

# Kernels run under Numba's CUDA simulator in tests (no GPU needed). Numba reads this
# when numba.cuda is first imported, so it must be set before any test module imports it.
# The GPU fuzzing profile (MLFUSE_FUZZ=gpu, tests/test_fuzz_equivalence.py only) runs the
# same properties on a real GPU instead.
if os.environ.get("MLFUSE_FUZZ") != "gpu":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
