"""Tuning: the tile shape and K split of each contraction kernel, searched on the
device for the sizes of a call, and remembered on disk.

A contraction kernel (``mlfuse/codegen/contraction.py``) may take any tile shape
of the module's CONTRACTION_TILES and split K into shares (split-K); without tuning
the host picks both by a model (``_contraction_plan``, mlfuse/codegen/tile_model.py).
``tune(function, args)`` times the function with each candidate for each of its
contraction kernels in turn (the others keep theirs), on the device, and keeps the
fastest. The candidates: every tile, each without a split, with the split the model
would give that tile, and with half and twice that (up to the kernel's max_split). The
choice goes into the kernel's ``tuned`` table for those sizes and into a cache file,
keyed by the device's name and the hash of the generated source, so a later compile of
the same program on the same device starts tuned (``apply_cached``). ``mlfuse bench --tune`` runs the search. Pointwise and row launch
shapes are not searched per call: their defaults come from measured sweeps
(``mlfuse.hardware``, docs/perf-notes.md).

The cache: ``$MLFUSE_CACHE_DIR/tuning.json`` (else ``~/.cache/mlfuse``):
``{device: {source sha256: {kernel: {"m,n,k,batch": [BM, BN, splits]}}}}`` (an entry
of two, from before split-K, means no split).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass

from mlfuse.codegen.abi import is_tiled_kernel
from mlfuse.runtime.loader import cache_dir


@dataclass
class TileChoice:
    kernel: str
    shape: tuple[int, int, int, int]               # (m, n, k, batch)
    times_ms: dict[tuple[int, int, int], float]    # (BM, BN, splits) -> median ms of the
                                                   # whole function
    model: tuple[int, int, int]                    # what the model would have picked

    @property
    def best(self) -> tuple[int, int, int]:
        return min(self.times_ms, key=self.times_ms.get)


def tiled_kernels(python_module) -> dict:
    """The contraction kernels (``_TiledKernel``s) of a generated module, by name."""
    return {name: value for name, value in vars(python_module).items()
            if is_tiled_kernel(value)}


def source_key(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _cache_path():
    return cache_dir() / "tuning.json"


def _read_cache() -> dict:
    try:
        return json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_cache(data: dict) -> None:
    path = _cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _shape_key(shape) -> str:
    return ",".join(str(int(s)) for s in shape)


def apply_cached(python_module, source: str, device: str) -> int:
    """Fill each contraction kernel's ``tuned`` table from the cache; returns how many
    entries it found."""
    entries = _read_cache().get(device, {}).get(source_key(source), {})
    found = 0
    for name, kernel in tiled_kernels(python_module).items():
        for shape, tile in entries.get(name, {}).items():
            kernel.tuned[tuple(int(s) for s in shape.split(","))] = tuple(tile) + (1,) * (
                3 - len(tile))  # an entry from before split-K: no split
            found += 1
    return found


def remember(source: str, device: str, choices: list[TileChoice]) -> None:
    data = _read_cache()
    entries = data.setdefault(device, {}).setdefault(source_key(source), {})
    for c in choices:
        entries.setdefault(c.kernel, {})[_shape_key(c.shape)] = list(c.best)
    _write_cache(data)


def candidates(python_module, kernel, shape) -> list[tuple[int, int, int]]:
    """The (BM, BN, splits) the search times for ``kernel`` at ``shape`` (m, n, k, batch):
    each tile without a split, with the model's split for that tile, and with half and
    twice that, within the kernel's max_split; a split that would give K in as many
    shares as a smaller one (each share whole K steps) is not timed twice."""
    k_size = max(1, shape[2])

    def shares(splits):  # the shares that hold some K (as the kernel divides it)
        share = -(-k_size // splits)
        share = -(-share // kernel.k_step) * kernel.k_step
        return -(-k_size // share)

    out = []
    for tile in kernel.tiles:
        model = kernel.plan([tile], *shape, python_module.SM_COUNT)[0][2]
        for splits in (1, model // 2, model, model * 2):
            if 1 <= splits <= kernel.max_split and (*tile, shares(splits)) not in out:
                out.append((*tile, shares(splits)))
    return out


def tune(compiled_function, python_module, args, timer, progress=None) -> list[TileChoice]:
    """Search the tile shape of each contraction kernel that ``compiled_function``
    launches for the sizes of ``args`` (device arrays); ``timer(fn) -> ms`` times one
    call of ``fn``. Leaves the best tile in each kernel's ``tuned`` table and returns
    what it measured. The function's launch plans are dropped (they hold tiles)."""
    kernels = tiled_kernels(python_module)
    for k in kernels.values():
        k.last_shape = None
    compiled_function.host(*args)  # the model's choice: records each kernel's sizes
    launched = {name: k for name, k in kernels.items() if k.last_shape is not None}
    choices = []
    for name, kernel in launched.items():
        shape = kernel.last_shape
        kernel.tuned.pop(shape, None)
        model = python_module._contraction_geometry(kernel, *shape)[0]
        times = {}
        for plan in candidates(python_module, kernel, shape):
            if progress:
                progress(f"tuning {name} {shape}: tile {plan[0]}x{plan[1]}, K in {plan[2]}")
            kernel.tuned[shape] = plan
            times[plan] = timer(lambda: compiled_function.host(*args))
        choice = TileChoice(name, shape, times, tuple(model))
        kernel.tuned[shape] = choice.best
        choices.append(choice)
    if compiled_function.fast_path is not None:
        compiled_function.fast_path.plans.clear()
        compiled_function.fast_path.refused.clear()
    return choices
