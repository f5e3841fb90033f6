"""What one call of a generated host function does, recorded as a plan.

A host function (``mlfuse/codegen/host.py``) binds dims from its arguments'
shapes, allocates buffers with ``cuda.device_array`` and launches kernels with
``kernel[grid, block](args)``. Every choice it makes (blocks per grid, the row
variant and its thread count, the launches an empty space skips) follows from the
shapes alone, so calls with arguments of the same shapes do the same thing.

``trace_call`` runs the host function once with stand-ins for ``cuda`` and for its
kernels that record each allocation and launch and then do it (the call's results are
real), and turns the record into a :class:`CallPlan`: the buffers, each launch with
the source of every argument (a parameter, a buffer, a constant), and the results.
A launcher may replay that plan for later calls without running the host function.

The plan is read off the host function itself rather than rebuilt from the IR, so it
is exact by construction and follows the code generator as that changes. The
stand-ins live in a copy of the function's globals: the generated module is left
untouched and stays standalone. Anything the record cannot account for (an array from
elsewhere, a launch on a stream of its own, another ``cuda`` call) leaves the call
as it is and gives no plan, with the reason.
"""
from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mlfuse.codegen.abi import is_tiled_kernel


class Source(NamedTuple):
    """Where a launch argument or a result comes from."""

    kind: str      # "param" (index into the call's arguments), "buffer" (index into
    value: object  # CallPlan.buffers) or "constant" (the value itself)


@dataclass(frozen=True)
class Buffer:
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Launch:
    kernel: str                     # the kernel's name in the generated module
    dispatcher: object              # the kernel object the host function launched
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[Source, ...]


@dataclass(frozen=True)
class CallPlan:
    buffers: tuple[Buffer, ...]
    launches: tuple[Launch, ...]
    results: tuple[Source, ...]


class Untraceable(Exception):
    """The host function did something a plan cannot replay."""


def _dim3(value) -> tuple[int, int, int]:
    """A grid or block size as Numba takes it (an int or a tuple of up to 3) -> 3 ints."""
    dims = tuple(value) if isinstance(value, tuple) else (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise Untraceable(f"launch dimensions {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


class Trace:
    """The record of one host call. ``launch_values`` holds the objects each launch was
    passed (what a launcher packs parameters from); it keeps the call's arrays alive, so
    drop the trace once the plan is bound."""

    def __init__(self, params, launching: bool = True):
        self.launching = launching  # False: a dry trace records launches without them
        self._params = {id(p): i for i, p in enumerate(params)}
        self._buffers: dict[int, int] = {}
        self._keep = list(params)  # ids stay unique while the objects live
        self.buffers: list[Buffer] = []
        self.launches: list[Launch] = []
        self.launch_values: list[tuple] = []
        self.refused: str | None = None
        self.plan: CallPlan | None = None

    def refuse(self, reason: str) -> None:
        self.refused = self.refused or reason

    def source(self, value) -> Source:
        if id(value) in self._params:
            return Source("param", self._params[id(value)])
        if id(value) in self._buffers:
            return Source("buffer", self._buffers[id(value)])
        if isinstance(value, (bool, int, float, np.integer, np.floating)):
            return Source("constant", value)  # a dim or a constant: fixed by the shapes
        raise Untraceable(f"a {type(value).__name__} that is neither a parameter nor a buffer")

    def buffer(self, array, shape, dtype) -> None:
        shape = tuple(shape) if isinstance(shape, tuple) else (shape,)
        self._buffers[id(array)] = len(self.buffers)
        self._keep.append(array)
        self.buffers.append(Buffer(tuple(int(d) for d in shape), np.dtype(dtype)))

    def launch(self, name: str, dispatcher, config, args) -> None:
        try:
            config = config if isinstance(config, tuple) else (config,)
            if len(config) not in (2, 3, 4):
                raise Untraceable(f"launch configuration {config!r}")
            grid, block, stream, shared = (config + (0, 0))[:4]
            if stream:
                raise Untraceable("a launch on a stream other than the default")
            sources = tuple(self.source(a) for a in args)
            self.launches.append(Launch(name, dispatcher, _dim3(grid), _dim3(block), int(shared),
                                        sources))
            self.launch_values.append(tuple(args))
        except Untraceable as e:
            self.refuse(f"kernel {name}: {e}")

    def finish(self, results: tuple) -> None:
        if self.refused:
            return
        try:
            sources = tuple(self.source(r) for r in results)
        except Untraceable as e:
            self.refuse(f"result: {e}")
            return
        # a result buffer with values that no recorded launch was passed was written by
        # something the record did not see (a kernel swapped for another object): a plan
        # would replay without it and return the buffer unwritten
        passed = {a.value for la in self.launches for a in la.args if a.kind == "buffer"}
        for n, src in enumerate(sources):
            if src.kind == "buffer" and src.value not in passed and \
                    math.prod(self.buffers[src.value].shape):
                self.refuse(f"result {n}: written by no recorded launch")
                return
        self.plan = CallPlan(tuple(self.buffers), tuple(self.launches), sources)


class _RecordingCuda:
    """``cuda`` as the host function sees it: allocations are recorded."""

    def __init__(self, real, trace: Trace):
        self._real, self._trace = real, trace

    def device_array(self, shape, dtype=np.float64, strides=None, order="C", stream=0):
        array = self._real.device_array(shape, dtype=dtype, strides=strides, order=order,
                                        stream=stream)
        if strides is not None or order != "C" or stream:
            self._trace.refuse("an allocation with strides, order or a stream")
        self._trace.buffer(array, shape, dtype)
        return array

    def __getattr__(self, name):
        self._trace.refuse(f"calls cuda.{name}")
        return getattr(self._real, name)


class _RecordingKernel:
    """A kernel as the host function sees it: each launch is recorded, then done (or,
    in a dry trace, only recorded)."""

    def __init__(self, name: str, kernel, trace: Trace):
        self._name, self._kernel, self._trace = name, kernel, trace

    def __getitem__(self, config):
        configured = self._kernel[config]

        def launch(*args):
            self._trace.launch(self._name, self._kernel, config, args)
            return configured(*args) if self._trace.launching else None
        return launch

    def __getattr__(self, name):
        self._trace.refuse(f"uses {self._name}.{name}")
        return getattr(self._kernel, name)


class _RecordingTiles:
    """A contraction's ``_TiledKernel`` as the host function sees it: ``tiles[config]``
    is a recording kernel; the tile table, the last launch shape and the tile model's
    inputs pass through (the host's ``_contraction_geometry`` reads and writes them)."""

    def __init__(self, name: str, tiles, trace: Trace):
        self._name, self._tiles, self._trace = name, tiles, trace

    def __getitem__(self, config):
        return _RecordingKernel(f"{self._name}{list(config)}", self._tiles[config], self._trace)

    @property
    def tuned(self):
        return self._tiles.tuned

    @property
    def tiles(self):
        return self._tiles.tiles

    def shared_bytes(self, config):
        return self._tiles.shared_bytes(config)

    def threads(self, bm, bn):
        return self._tiles.threads(bm, bn)

    def plan(self, *sizes):
        """The tile model's choice (the kernel's own ``plan``: it launches nothing)."""
        return self._tiles.plan(*sizes)

    def __getattr__(self, name):
        """What the tile model reads (k_step, max_split, fma_per_us, value_bytes,
        step_us, shape, narrow_tiles, gather): fixed facts of the kernel, passed through."""
        if name in ("k_step", "max_split", "fma_per_us", "value_bytes", "step_us", "shape",
                    "narrow_tiles", "gather"):
            return getattr(self._tiles, name)
        raise AttributeError(name)

    @property
    def last_shape(self):
        return self._tiles.last_shape

    @last_shape.setter
    def last_shape(self, shape):
        self._tiles.last_shape = shape


def _is_kernel(value) -> bool:
    """A Numba CUDA kernel (or the simulator's): launched as ``kernel[grid, block](...)``."""
    return hasattr(value, "py_func") and callable(getattr(type(value), "__getitem__", None))


def trace_call(host, device_args, num_results: int, launching: bool = True):
    """Call ``host(*device_args)`` and record it: (its results, the :class:`Trace`).
    ``trace.plan`` is the plan, or None with ``trace.refused`` saying why. With
    ``launching`` False no kernel runs (a dry trace: the results hold garbage), which
    lists the kernels a call needs before any is compiled (runtime/precompile.py)."""
    trace = Trace(device_args, launching)
    scope = dict(host.__globals__)
    for name, value in host.__globals__.items():
        if _is_kernel(value):
            scope[name] = _RecordingKernel(name, value, trace)
        elif is_tiled_kernel(value):
            scope[name] = _RecordingTiles(name, value, trace)
    if "cuda" in scope:
        scope["cuda"] = _RecordingCuda(scope["cuda"], trace)
    recording = types.FunctionType(host.__code__, scope, host.__name__, host.__defaults__,
                                   host.__closure__)
    results = recording(*device_args)
    trace.finish((results,) if num_results == 1 else tuple(results))
    return results, trace
