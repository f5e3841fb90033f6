"""mlfuse's dialects, one module each: ``tensor`` (values), ``loops`` (buffers and
loop nests), ``fused`` (kernels). ``arith`` holds the scalar ops the lower two share,
generated from the same elementwise table as the tensor ops (``elementwise``).

This folder sits at the top of the checkout and is installed as ``mlfuse.dialects``
(pyproject.toml maps it; ``mlfuse/__init__.py`` maps it the same way when mlfuse runs
from a checkout), so the wheel puts no ``dialects`` package into site-packages.

Nothing registers by being imported: :func:`default_registry` lists the dialects.
"""
from __future__ import annotations

from functools import lru_cache

from mlfuse.ir import builtin
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.registry import OpRegistry

from mlfuse.dialects import arith, fused, loops, tensor
from mlfuse.dialects import tensor_indexing  # noqa: F401  (declares its ops on tensor.DIALECT)
from mlfuse.dialects import tensor_windows  # noqa: F401  (declares its ops on tensor's dialect)

DIALECTS = (builtin.DIALECT, arith.DIALECT, tensor.DIALECT, loops.DIALECT, fused.DIALECT)


@lru_cache(maxsize=None)
def default_registry() -> OpRegistry:
    """Every op mlfuse knows, for parsing IR text at any level."""
    return OpRegistry(DIALECTS)


def parse_ir(source: str, filename: str = "<ir>", verify: bool = True) -> ModuleOp:
    """Parse IR text of any mlfuse level (``mlfuse.ir.parser.parse_ir`` with
    :func:`default_registry`)."""
    from mlfuse.ir.parser import parse_ir as parse_with
    return parse_with(source, default_registry(), filename, verify)
