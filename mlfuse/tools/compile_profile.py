"""Where a first call's compile time goes, without a GPU: the kernels a call would
compile, each compiled for the H100 (sm_90) as the first launch would, phase by phase.

    CUDA_HOME=/usr/local/cuda python -m mlfuse.tools.compile_profile [--json] [--dry]
        [--limit=N] MODEL.onnx | FILE.fuse ...

``--dry`` lists the kernels a first call compiles and compiles none (no CUDA toolkit
needed): how many compiles a model's first call costs, in seconds.

The kernels are the ones the first call launches: the host function runs dry
(``launch_plan.trace_call`` with ``launching=False``, as ``runtime/precompile.py`` does
before a first call) against stand-in device arrays of the program's static shapes, so
each contraction appears once per tile configuration its tile model picks, as on the
device. A kernel launched several times with the same argument types is one compile.
For each distinct (kernel, argument types):

Times are CPU seconds (this process's, and ptxas's), so a shared machine's load
inflates them less than wall time would.

- ``frontend_s``: Numba's typing and lowering to LLVM IR (device functions it calls
  included), with the share spent in type inference (``typing_s``);
- ``nvvm_s``: NVVM, LLVM IR -> PTX (the optimiser: unrolling, inlining);
- ``ptxas_s``: ptxas -O3 for sm_90, standing in for the driver's JIT at the launch;
- ``ptx_kb``: the PTX's size;
- ``same_as``: the first earlier kernel whose PTX is the same but for names (its
  entry point's mangled name): one compile could serve both.

The summary line sums each phase, counts the distinct kernels and the distinct PTX
(modulo names), and what a compile of only the distinct PTX would cost. A .fuse
program needs static shapes (no symbolic dims) to be traced.
"""
from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types as pytypes

import numpy as np


class _FakeDeviceArray:
    """Enough of a Numba device array for a dry host call: shape, dtype, strides and an
    aligned address (``_address``); ``typeof`` sees a C-contiguous array."""

    _next = 1 << 20

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in (shape if isinstance(shape, tuple) else (shape,)))
        self.dtype = np.dtype(dtype)
        self.ndim, self.size = len(self.shape), int(np.prod(self.shape, dtype=np.int64))
        strides, step = [], self.dtype.itemsize
        for d in reversed(self.shape):
            strides.append(step)
            step *= max(d, 1)
        self.strides = tuple(reversed(strides))
        self.device_ctypes_pointer = pytypes.SimpleNamespace(value=_FakeDeviceArray._next)
        _FakeDeviceArray._next += -(-self.size * self.dtype.itemsize // 256) * 256 + 256

    def numba_type(self):
        from numba.core import types
        from numba.np.numpy_support import from_dtype
        return types.Array(from_dtype(self.dtype), self.ndim, "C")


class _FakeCuda:
    """``cuda`` for a dry host call without a GPU: allocations make stand-ins."""

    def __init__(self, real):
        self._real = real

    def device_array(self, shape, dtype=np.float64, strides=None, order="C", stream=0):
        return _FakeDeviceArray(shape, dtype)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _typeof(value):
    from numba import typeof
    return value.numba_type() if isinstance(value, _FakeDeviceArray) else typeof(value)


def first_call_kernels(python_module, func, params: list) -> list:
    """[(label, dispatcher, argument types)] of the distinct kernels a first call of
    ``func`` (its host function in ``python_module``) with ``params`` (stand-in arrays
    and scalars) compiles, in launch order."""
    from mlfuse.runtime.launch_plan import trace_call
    host = python_module.ENTRY_POINTS[func.sym_name]
    scope = dict(host.__globals__, cuda=_FakeCuda(host.__globals__["cuda"]))
    dry = pytypes.FunctionType(host.__code__, scope, host.__name__, host.__defaults__,
                               host.__closure__)
    _, trace = trace_call(dry, params, len(func.return_op.operands), launching=False)
    seen, kernels = set(), []
    for launch, values in zip(trace.launches, trace.launch_values):
        argtypes = tuple(_typeof(v) for v in values)
        key = (id(launch.dispatcher), argtypes)
        if key not in seen:
            seen.add(key)
            kernels.append((launch.kernel, launch.dispatcher, argtypes))
    return kernels


def stand_in_params(func) -> list:
    """Stand-in arguments of ``func``: arrays of its parameters' static shapes."""
    from mlfuse.codegen.scalar import STORAGE_TYPE
    params = []
    for arg in func.args:
        t = arg.type
        if not hasattr(t, "shape"):
            params.append(np.dtype(STORAGE_TYPE[t.dtype]).type(1) if hasattr(t, "dtype") else 1)
            continue
        if not all(isinstance(d, int) for d in t.shape):
            raise SystemExit(f"{func.sym_name}: parameter {arg} has symbolic dims; "
                             "compile_profile needs static shapes")
        params.append(_FakeDeviceArray(tuple(t.shape), STORAGE_TYPE[t.dtype]))
    return params


def _pass_times():
    """A listener of numba-cuda's pass events that keeps exclusive seconds by pass name
    in its ``times`` (a device function's compile runs inside its caller's type
    inference)."""
    from numba.cuda.core import event

    class PassTimes(event.Listener):
        def __init__(self):
            self.times = collections.Counter()
            self._stack = []

        def on_start(self, ev):
            now = time.process_time()
            if self._stack:
                self.times[self._stack[-1][0]] += now - self._stack[-1][1]
            self._stack.append([ev.data["name"].split(" [")[0], now])

        def on_end(self, ev):
            now = time.process_time()
            top, started = self._stack.pop()
            self.times[top] += now - started
            if self._stack:
                self._stack[-1][1] = now
    return PassTimes()


_MANGLED = re.compile(r"_Z\w+|_cudapy_smem_\d+")


def compile_phases(dispatcher, argtypes) -> dict:
    """Compile ``dispatcher`` (a @cuda.jit kernel) for ``argtypes`` as its first launch
    would, timing each phase; its PTX too (``ptx``)."""
    from numba.core import types
    from numba.cuda import compiler
    from numba.cuda.core import event

    from mlfuse.tools.ptx_report import _OPTIONS
    options = {k: v for k, v in dispatcher.targetoptions.items() if k in _OPTIONS}
    passes = _pass_times()
    started = time.process_time()
    with event.install_listener("numba-cuda:run_pass", passes):
        lib, _ = compiler._compile_pyfunc_with_fixup(
            dispatcher.py_func, types.void(*argtypes), device=False, abi="numba",
            cc=(9, 0), **options)
    lowered = time.process_time()
    ptx = lib.get_asm_strs(cc=(9, 0))[0]
    nvvm = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "k.ptx")
        with open(source, "w", encoding="utf-8") as f:
            f.write(ptx)
        before = _children_cpu()
        subprocess.run(["ptxas", "-arch=sm_90", source, "-o", os.path.join(tmp, "k.cubin")],
                       check=True, capture_output=True)
        ptxas = _children_cpu() - before
    typing = sum(t for name, t in passes.times.items() if "type_inference" in name)
    return {"frontend_s": lowered - started, "typing_s": typing, "nvvm_s": nvvm - lowered,
            "ptxas_s": ptxas, "ptx_kb": len(ptx) / 1024, "ptx": ptx}


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (ptxas)."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_program(path: str):
    """(fused IR module, generated CUDA module) of a .onnx or .fuse program."""
    from mlfuse.codegen import generate
    from mlfuse.runtime.loader import load_source
    from mlfuse.tools.ptx_report import _patch_device_lookup
    _patch_device_lookup()
    if path.endswith(".onnx"):
        from mlfuse.dialects import parse_ir
        from mlfuse.frontend.onnx_import import import_onnx
        from mlfuse.ir.printer import print_ir
        from mlfuse.pipeline import lower
        module = lower(parse_ir(print_ir(import_onnx(path).module)), "fused", True, None)
    else:
        from mlfuse.pipeline import compile_text
        with open(path, encoding="utf-8") as f:
            module = compile_text(f.read(), path)
    return module, load_source(generate(module, "cuda"), "compile_profile")


def profile(path: str, limit: int | None = None):
    """Yield one dict per distinct kernel a first call of each func at ``path`` compiles."""
    module, python_module = load_program(path)
    ptx_seen: dict[str, str] = {}
    for func in module.funcs:
        kernels = first_call_kernels(python_module, func, stand_in_params(func))
        for label, dispatcher, argtypes in kernels[:limit]:
            row = compile_phases(dispatcher, argtypes)
            ptx = row.pop("ptx")
            canonical = _MANGLED.sub("K", ptx)
            row["same_as"] = ptx_seen.setdefault(canonical, label)
            yield {"file": path, "func": func.sym_name, "kernel": label, **row}


def summary(rows: list) -> dict:
    phases = ("frontend_s", "typing_s", "nvvm_s", "ptxas_s")
    total = {p: round(sum(r[p] for r in rows), 2) for p in phases}
    distinct = [r for r in rows if r["same_as"] == r["kernel"]]
    return {"kernels": len(rows), "distinct_ptx": len(distinct), **total,
            "all_s": round(sum(total[p] for p in phases if p != "typing_s"), 2),
            "distinct_s": round(sum(r[p] for r in distinct for p in phases
                                    if p != "typing_s"), 2),
            "ptx_kb": round(sum(r["ptx_kb"] for r in rows))}


def dry(path: str) -> dict:
    """The kernels a first call of each func at ``path`` compiles, none compiled: their
    count, the tile kernels among them, and their labels."""
    module, python_module = load_program(path)
    labels = [label for func in module.funcs
              for label, _, _ in first_call_kernels(python_module, func, stand_in_params(func))]
    return {"file": path, "kernels": len(labels),
            "tile_kernels": sum("[" in label for label in labels), "labels": labels}


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    limit = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--limit=")), None)
    for path in (a for a in argv if not a.startswith("--")):
        if "--dry" in argv:
            print(json.dumps(dry(path)), flush=True)
            continue
        rows = []
        for r in profile(path, limit):
            rows.append(r)
            if as_json:
                print(json.dumps(r), flush=True)
            else:
                same = "" if r["same_as"] == r["kernel"] else f"  = {r['same_as']}"
                print(f"{r['kernel']}: frontend {r['frontend_s']:.2f} s (typing "
                      f"{r['typing_s']:.2f}), nvvm {r['nvvm_s']:.2f} s, ptxas "
                      f"{r['ptxas_s']:.2f} s, {r['ptx_kb']:.0f} KB PTX{same}", flush=True)
        print(json.dumps({"file": path, **summary(rows)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
