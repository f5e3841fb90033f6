"""A caching device allocator for Numba, like PyTorch's: a freed buffer is kept and
handed out again for a request of the same (rounded) size, instead of going back
to cuMemFree, which synchronizes the device, and cuMemAlloc, which is slow.

Every compiled function allocates its results (and intermediates) on each call;
with Numba's default allocator that costs more than a fused kernel over 256 MiB
takes to run. Reuse is safe because mlfuse launches everything on the default
stream: work that wrote a buffer is ordered before work that writes it again.

Numba takes a memory manager when it creates its context, so ``install()`` must
run before any Numba CUDA call (``active()`` tells whether it took). Set
MLFUSE_CACHING_ALLOCATOR=0 to keep Numba's own. ``release()`` frees what is cached.
"""
from __future__ import annotations

import os
import weakref
from collections import defaultdict

_ROUND = 512  # bytes: sizes round up to this, so nearby requests share buffers


def _rounded(size: int) -> int:
    return max(_ROUND, -(-size // _ROUND) * _ROUND)


def _manager_class():
    from numba.cuda.cudadrv import driver as drv

    class LentPointer(drv.MemoryPointer):
        """A cached device address lent out: it goes back to its free list when the last
        reference to this pointer dies. ``__del__`` rather than a finalizer: weakref.finalize
        costs four times the rest of an allocation (~1.7 us), paid by every compiled call.

        The free lists hold raw addresses, not Numba's owned pointers: when a lent pointer
        dies in a reference cycle, the cyclic collector runs weakref callbacks before
        ``__del__``, so an owned pointer it held would already have freed its memory by
        the time ``__del__`` put it back (seen on the GPU as a ReferenceError, and worse,
        a freed address handed out again)."""

        def __init__(self, context, pointer, size, free):
            self._pointer, self._free = pointer, free  # first: __del__ must find them
            super().__init__(context, pointer, size)

        def __del__(self):
            self._free.append(self._pointer)

    class CachingMemoryManager(drv.NumbaCUDAMemoryManager):
        def __init__(self, *args, **kwargs):
            # not in initialize(): Numba calls that each time it hands out the context
            super().__init__(*args, **kwargs)
            self.cached = defaultdict(list)  # rounded size -> device addresses not in use
            self.hits = self.misses = 0
            # Numba first builds a dummy manager with context=None (set_memory_manager
            # checks the plugin's interface): it allocates nothing
            self._context = weakref.proxy(self.context) if self.context is not None else None

        def memalloc(self, size):
            rounded = _rounded(size)
            free = self.cached[rounded]
            if free:
                pointer = free.pop()
                self.hits += 1
            else:
                self.misses += 1
                try:
                    pointer = self._allocate(rounded)
                except drv.CudaAPIError:
                    self.release()  # out of memory: give the cache back and retry once
                    pointer = self._allocate(rounded)
            return LentPointer(self._context, pointer, size, free)

        def _allocate(self, nbytes):
            # Numba's retry: flush its own pending frees on out-of-memory, then try again.
            # The address is never freed while mlfuse runs, only by release() or with the
            # context, so it needs no finalizer.
            return self._attempt_allocation(lambda: drv.driver.cuMemAlloc(nbytes))

        def _free_device(self, pointer):
            drv.driver.cuMemFree(pointer)

        def release(self):
            for pointers in self.cached.values():
                while pointers:
                    self._free_device(pointers.pop())
            self.deallocations.clear()

        def reset(self):
            self.cached.clear()  # the context's teardown frees its memory
            super().reset()

    return CachingMemoryManager


_installed = None


def install() -> bool:
    """Make Numba use the caching allocator (before its CUDA context exists)."""
    global _installed
    if _installed is not None:
        return _installed
    if os.environ.get("MLFUSE_CACHING_ALLOCATOR", "1") == "0":
        _installed = False
        return False
    from numba import config
    if config.ENABLE_CUDASIM:
        _installed = False
        return False
    from numba import cuda
    # Numba reads this when it creates its context; one made earlier keeps its allocator
    cuda.set_memory_manager(_manager_class())
    _installed = True
    return True


def active() -> bool:
    """Whether the current Numba context allocates through the cache."""
    from numba import cuda
    return hasattr(cuda.current_context().memory_manager, "cached")


def release() -> None:
    """Free every cached buffer (of the current context)."""
    from numba import cuda
    manager = cuda.current_context().memory_manager
    if hasattr(manager, "release"):
        manager.release()
