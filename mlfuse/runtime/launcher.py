"""The fast path of a compiled function's call: a plan per argument description,
launched through the CUDA driver.

Numba's path costs tens of microseconds of host time per kernel: the argument checks
and wrapping (``runtime_args.bind_arguments``), then per launch the dispatcher types
every argument, finds the overload and marshals each parameter; results are
``cuda.device_array``s and, for PyTorch callers, wrapped again. Here a call:

1. reads its arguments (``launch_kinds.READERS``: type, dtype, shape, strides, ...,
   and the data pointer) and looks the description up among this function's plans.
   A plan exists only for a description the normal path has accepted before:
   ``bind_arguments`` checks a call from exactly these properties, so a hit passes
   the same checks, and anything else (a new shape, a wrong dtype, a non-contiguous
   view, host arrays, scalars, an unknown kind) takes the normal path, which raises
   the same ArgumentErrors as ever;
2. on a hit, makes each buffer as the caller's kind of array (Numba device arrays,
   PyTorch tensors, CuPy arrays), writes the data pointers into each kernel's
   parameters, packed once (``launch_driver``), and launches the kernels in order on
   the default stream: nothing synchronises, nothing is copied.

A plan repeats what the host function did for the call it was recorded from
(``launch_plan``), so the description must hold everything the host function's
choices depend on: the shapes and strides, and the alignment of each data pointer
(up to 256 bytes: a vector kernel is chosen for aligned rows). The pointers
themselves are not in it.

On a miss that the normal path accepts, the call runs the host function once with a
recording (``launch_plan.trace_call``) and binds the plan for later calls.
``MLFUSE_LAUNCH`` picks the driver binding: "bindings" (the default: cuda-bindings,
Numba's own route to the driver) or "ctypes" (libcuda through ctypes), both about
0.6 us a launch call against a stub driver; or "numba" for Numba's own launches on
every call. The simulator has no driver: its
calls take the normal path.
"""
from __future__ import annotations

import os
import threading
from functools import partial

from mlfuse.errors import MlfuseError
from mlfuse.runtime.cuda_driver import LAUNCHES, ParamBlock, Unpackable, function_handle, pack_arguments
from mlfuse.runtime.launch_kinds import READERS, allocator
from mlfuse.runtime.launch_plan import Source, Trace, trace_call
from mlfuse.runtime.arguments import Signature, kind_of

MODES = ("numba",) + tuple(LAUNCHES)
_MOST_PLANS = 256  # per function; beyond this the oldest plan is dropped


def launch_mode() -> str:
    mode = os.environ.get("MLFUSE_LAUNCH", "bindings")
    if mode not in MODES:
        raise MlfuseError(f"MLFUSE_LAUNCH={mode!r}: choose one of {', '.join(MODES)}")
    return mode


class FastPath:
    """The plans of one compiled function, by the description of its arguments.
    ``bind(trace, kinds, args)`` turns a recorded call into a callable that repeats it
    for new arguments of the same description (``DriverCall``)."""

    def __init__(self, signature: Signature, bind):
        self.signature, self.bind = signature, bind
        self.plans: dict = {}    # description -> bound plan, or None: no plan (see refused)
        self.refused: dict = {}  # description -> why its calls take the normal path
        self._read: dict = {}    # exact argument type -> its kind's reader

    def read(self, args):
        """(description, data pointers) of ``args``; (None, None) where an argument is
        of no known kind. A pointer enters the description by its alignment alone: its
        lowest set bit, at most 256."""
        read, parts, pointers = self._read, [], []
        try:
            for a in args:
                part, pointer = read[type(a)](a)
                low = pointer | 256
                parts.append((part, low & -low))
                pointers.append(pointer)
        except Exception:  # an unknown type (KeyError), or an object its kind cannot read
            return None, None
        return tuple(parts), pointers

    def call_and_plan(self, host, args, call):
        """Make the call the normal path has checked (``call`` from bind_arguments) and,
        when its arguments are all device arrays of known kinds, record it as a plan."""
        kinds = [kind_of(a) for a in args]
        if not all(k in READERS for k in kinds):
            return host(*call.device_args)
        for a, k in zip(args, kinds):
            self._read.setdefault(type(a), READERS[k])
        key, _ = self.read(args)
        if key is None or key in self.plans:
            return host(*call.device_args)
        results, trace = trace_call(host, call.device_args, self.signature.num_results)
        bound, why = None, trace.refused
        if trace.plan is not None:
            try:
                bound = self.bind(trace, kinds, args)
            except Unpackable as e:
                why = str(e)
        if len(self.plans) >= _MOST_PLANS:
            oldest = next(iter(self.plans))
            del self.plans[oldest]
            self.refused.pop(oldest, None)
        self.plans[key] = bound
        if why:
            self.refused[key] = why
        return results


def _overload(dispatcher, values):
    """The compiled kernel a Numba dispatcher launched for ``values``."""
    kernel = dispatcher.overloads.get(tuple(dispatcher.typeof_pyval(v) for v in values))
    if kernel is None:
        raise Unpackable("no compiled kernel for the recorded arguments")
    for flag in ("debug", "cooperative", "launch_config_sensitive"):
        if getattr(kernel, flag, False):
            raise Unpackable(f"a {flag.replace('_', '-')} kernel launches through Numba")
    return kernel


def _ensure_context() -> None:
    from numba import cuda
    cuda.current_context()  # makes Numba's context current on this thread


class DriverCall:
    """A recorded call bound to the driver: each kernel's compiled function and packed
    parameters, each buffer's allocator, and where every data pointer goes."""

    def __init__(self, trace: Trace, kinds: list[str], args, launch_class):
        plan, n_params = trace.plan, len(args)

        def index(source: Source) -> int:  # into the call's params + buffers
            if source.kind == "constant":
                raise Unpackable("an array argument that is a constant")
            return source.value if source.kind == "param" else n_params + source.value

        # buffers (intermediates too) are made as the caller's kind: the first argument's
        self._allocate = [allocator(kinds[0], b, args[0]) for b in plan.buffers]
        self._launches = []
        for launch, values in zip(plan.launches, trace.launch_values):
            kernel = _overload(launch.dispatcher, values)
            words, slots = pack_arguments(kernel._prepare_args, kernel.argument_types, values)
            params = ParamBlock(words)
            patches = tuple((slot, index(launch.args[position])) for position, slot in slots)
            go = launch_class(launch.kernel, function_handle(kernel), launch.grid, launch.block,
                              launch.shared_bytes, params)
            self._launches.append((go, params.words, patches, params))
        self._results = [index(s) for s in plan.results]
        self._single = len(self._results) == 1
        self._lock = threading.Lock()  # the packed words are shared by this plan's calls
        self._thread = threading.get_ident()  # the thread whose context is current

    def __call__(self, args, pointers: list):
        """Results of the plan for ``args``, whose data pointers are ``pointers``."""
        if threading.get_ident() != self._thread:
            _ensure_context()
        objects = list(args)
        for allocate in self._allocate:
            array, pointer = allocate()
            objects.append(array)
            pointers.append(pointer)
        with self._lock:
            for launch, words, patches, _ in self._launches:
                for slot, i in patches:
                    words[slot] = pointers[i]
                launch()
        if self._single:
            return objects[self._results[0]]
        return tuple([objects[i] for i in self._results])


def fast_path(target: str, signature: Signature) -> FastPath | None:
    """The fast path of a function compiled for ``target``, or None (Numba's launches)."""
    mode = launch_mode()
    if target != "cuda" or mode == "numba":
        return None
    return FastPath(signature, partial(DriverCall, launch_class=LAUNCHES[mode]))
