"""Importing this module registers every pass by name."""
import importlib
import pkgutil

from . import passes as _passes

for _info in pkgutil.iter_modules(_passes.__path__):
    importlib.import_module(f"{_passes.__name__}.{_info.name}")
