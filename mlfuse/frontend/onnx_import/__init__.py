"""The ONNX frontend: an ONNX graph -> one tensor-dialect function -> the usual passes.

    model = mlfuse.compile_onnx("model.onnx")
    (y,) = model(x)                 # graph inputs positionally; outputs as a tuple

Needs the ``onnx`` package (``pip install mlfuse[onnx]``). docs/onnx.md lists the
supported operators and how initializers become parameters.
"""
from __future__ import annotations

from mlfuse.errors import MlfuseError

__all__ = ["compile_onnx", "import_onnx", "require_onnx"]


def require_onnx() -> None:
    """Import onnx, or say what to install."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise MlfuseError("compiling ONNX models needs the 'onnx' package: "
                          "pip install 'mlfuse[onnx]' (or pip install onnx)") from None


def import_onnx(model, static_inputs: dict | None = None):
    """An ONNX model (a path, bytes or a ModelProto) as an :class:`ImportedGraph`: a
    verified tensor-dialect module whose one function takes the graph inputs, then
    the initializers that became parameters. ``static_inputs`` {name: array} fixes
    graph inputs at compile time (e.g. a Reshape's shape fed as an input)."""
    require_onnx()
    from mlfuse.frontend.onnx_import.graph import import_model
    return import_model(model, static_inputs)


def compile_onnx(model, fuse: bool = True, target: str | None = None,
                 fuse_options: dict | None = None, static_inputs: dict | None = None,
                 matmul_precision: str | None = None):
    """Import, lower, fuse, generate and load an ONNX model; returns an
    :class:`OnnxModel` called with the graph inputs (NumPy or device arrays) that
    returns a tuple of the graph outputs. ``matmul_precision``: as for
    ``mlfuse.compile_source`` ("highest", "high" or "medium")."""
    require_onnx()  # before importing the modules that import onnx
    from mlfuse.frontend.onnx_import.compiled import compile_imported
    return compile_imported(import_onnx(model, static_inputs), fuse, target, fuse_options,
                            matmul_precision)
