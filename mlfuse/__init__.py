"""mlfuse: a kernel-fusing compiler from .fuse tensor programs to Numba CUDA kernels."""
__version__ = "0.1.0"


def _map_checkout_dialects() -> None:
    """From a checkout, let ``import mlfuse.dialects`` find ``dialects/`` beside this
    package: the wheel installs that folder as ``mlfuse.dialects`` (pyproject.toml's
    package-dir), and an editable install maps it by its own finder. This finder goes
    last on the meta path, so it only answers where nothing else does, and it loads
    nothing until the first import (``import mlfuse`` stays cheap)."""
    import importlib.abc
    import importlib.util
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    folder = here.parent / "dialects"
    if (here / "dialects").is_dir() or not (folder / "__init__.py").is_file():
        return

    class CheckoutDialects(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "mlfuse.dialects":
                return None
            return importlib.util.spec_from_file_location(
                name, folder / "__init__.py", submodule_search_locations=[str(folder)])

    sys.meta_path.append(CheckoutDialects())


_map_checkout_dialects()

# The API loads lazily: ``import mlfuse`` stays cheap (no numba, no lark) until used.
_API = ("compile_source", "compile_file", "compile_ir")


def __getattr__(name):
    if name == "compile_onnx":  # needs the optional onnx package only when called
        from mlfuse.frontend.onnx_import import compile_onnx
        return compile_onnx
    if name in _API:
        from mlfuse import api
        return getattr(api, name)
    raise AttributeError(f"module 'mlfuse' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API) + ["compile_onnx"])
