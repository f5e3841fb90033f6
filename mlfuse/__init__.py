"""mlfuse: a kernel-fusing compiler from .fuse tensor programs to Numba CUDA kernels."""
__version__ = "0.1.0"
