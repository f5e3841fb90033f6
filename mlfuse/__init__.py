"""mlfuse: a kernel-fusing compiler from .fuse tensor programs to Numba CUDA kernels."""
__version__ = "0.1.0"

# The API loads lazily: ``import mlfuse`` stays cheap (no numba, no lark) until used.
_API = ("compile_source", "compile_file", "compile_ir")


def __getattr__(name):
    if name == "compile_onnx":  # needs the optional onnx package only when called
        from .onnx_import import compile_onnx
        return compile_onnx
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'mlfuse' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API) + ["compile_onnx"])
