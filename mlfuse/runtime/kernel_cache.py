"""The on-disk cache of compiled kernels: a second process that compiles the same
program loads the kernels' cubins instead of running NVVM again.

Numba-cuda's own cache (what ``@cuda.jit(cache=True)`` turns on) does the work. It
works for generated modules because load_source writes each one to a file under
cache_dir() and executes it from there, named by the sha256 of its source. An entry
is keyed by
  - the generated source: the file's name holds its hash, and the index also keeps
    the file's size and mtime and the kernel's bytecode hash;
  - the device: the compute capability and the CUDA runtime version (numba-cuda's
    ``magic_tuple``), and the Python version (in the file names);
  - the numba and numba-cuda versions (the index's header and key);
  - the argument types and, for a contraction's tile kernels, the tile (closure).
Entries lie in ``cache_dir()/__pycache__`` (``$MLFUSE_CACHE_DIR`` moves cache_dir();
``$NUMBA_CACHE_DIR``, if set, takes Numba's entries elsewhere). Numba writes each
file to a temporary name and renames it, so concurrent processes never see half a
file. ``MLFUSE_KERNEL_CACHE=0`` turns the cache off.

What mlfuse adds: an entry that cannot be read (a truncated or garbled file) is a
miss, not an error, and is written again after the compile; an unwritable cache
costs only the next process's compile. Hits and misses are Numba's per-dispatcher
counts (``dispatcher.stats``), which ``explain --compile`` reports.
"""
from __future__ import annotations

import os

_OFF = ("0", "off", "false", "no")


def enabled() -> bool:
    return os.environ.get("MLFUSE_KERNEL_CACHE", "1").strip().lower() not in _OFF


def enable_module(module) -> int:
    """Turn on the disk cache for every kernel of a generated module (its tiled
    contraction kernels as they are made); returns how many dispatchers it set."""
    if not enabled():
        return 0
    from mlfuse.codegen.contraction import is_tiled_kernel
    count = 0
    for value in list(vars(module).values()):
        if is_tiled_kernel(value):
            value.factory = _caching_factory(value.factory)
        elif is_cuda_dispatcher(value):
            enable_dispatcher(value)
            count += 1
    return count


def _caching_factory(factory):
    def make(*config):
        return enable_dispatcher(factory(*config))
    return make


def is_cuda_dispatcher(value) -> bool:
    # the simulator's kernels have no enable_caching: nothing to cache there
    return callable(getattr(value, "enable_caching", None)) and hasattr(value, "py_func")


def enable_dispatcher(dispatcher):
    """Give ``dispatcher`` Numba's disk cache, made tolerant (see the module doc)."""
    if is_cuda_dispatcher(dispatcher) and not getattr(dispatcher, "_mlfuse_cached", False):
        try:
            dispatcher.enable_caching()
        except RuntimeError:  # no writable place for it: run uncached
            return dispatcher
        tolerate_bad_entries(dispatcher._cache)
        dispatcher._mlfuse_cached = True
    return dispatcher


def tolerate_bad_entries(cache) -> None:
    """Make a Numba ``Cache`` treat an unreadable entry as a miss and rewrite it,
    and an unwritable cache as no cache."""
    load, save = cache.load_overload, cache.save_overload

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception:  # noqa: BLE001 - any unreadable entry: compile again
            cache.mlfuse_bad_entries = getattr(cache, "mlfuse_bad_entries", 0) + 1
            return None

    def save_overload(sig, data):
        try:
            save(sig, data)
        except Exception:  # noqa: BLE001 - a garbled index: start it afresh, once
            try:
                cache.flush()
                save(sig, data)
            except Exception:  # noqa: BLE001 - unwritable: the next process compiles
                pass

    cache.load_overload = load_overload
    cache.save_overload = save_overload


def cache_stats(dispatcher) -> tuple[int, int] | None:
    """(hits, misses) of the disk cache for a dispatcher, None if it has no cache."""
    if not getattr(dispatcher, "_mlfuse_cached", False):
        return None
    stats = dispatcher.stats
    return sum(stats.cache_hits.values()), sum(stats.cache_misses.values())
