"""What the runtime and tools may rely on in a generated module (its ABI), apart from
``ENTRY_POINTS``: facts about the objects it defines, so that launch plans, tuning,
explain and the PTX report need not import an emitter."""
from __future__ import annotations


def is_tiled_kernel(value) -> bool:
    """Whether a generated module's ``value`` is a contraction's ``_TiledKernel``: its
    kernels by tile configuration (``kernels``), made by ``factory``, for the tile
    shapes ``tiles``."""
    return hasattr(value, "factory") and isinstance(getattr(value, "kernels", None), dict)


__all__ = ["is_tiled_kernel"]
