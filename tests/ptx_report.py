"""Compile every kernel of a .fuse file for the H100 (sm_90) without a GPU and report
what the GPU would run: one JSON line per kernel with its f64 instructions, registers,
spilled bytes, shared memory and whether it uses warp shuffles.

    CUDA_HOME=/usr/local/cuda python tests/ptx_report.py [--no-fuse] FILE.fuse... [R=1024 ...]

Needs the CUDA toolkit (NVVM and ptxas), not a GPU, and NUMBA_ENABLE_CUDASIM unset.
The generated host function runs with NumPy arrays standing in for device arrays and
records each launch's argument types; each kernel is then compiled with
``numba.cuda.compile_ptx`` for those types and assembled with ``ptxas -v``.
(tests/test_ptx.py runs this for every example.)
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import types

import numba
import numpy as np
from numba import cuda
import numba.cuda.dispatcher as dispatcher

from mlfuse.codegen import generate
from mlfuse.driver import lower, parse_program
from mlfuse.runtime import load_source
from mlfuse.testing import bind_dims, random_inputs

# Typing a call to a device function asks for the current device's compute capability;
# with no GPU there is none, so answer for the H100 the code is compiled for.
dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
OPTIONS = ("fastmath", "lineinfo", "launch_bounds", "max_registers")


def launches(module, funcs, dims) -> dict:
    """{kernel name: (dispatcher, argument types)} of one call of every function."""
    seen = {}

    class Recorder:
        def __init__(self, name, kernel):
            self.name, self.kernel = name, kernel

        def __getitem__(self, launch_config):
            def launch(*args):
                seen.setdefault(self.name, (self.kernel, tuple(numba.typeof(a) for a in args)))
            return launch

    kernels = {n: v for n, v in vars(module).items()
               if type(v).__name__ == "CUDADispatcher" and not v.targetoptions.get("device")}
    for name, kernel in kernels.items():
        setattr(module, name, Recorder(name, kernel))
    module.cuda = types.SimpleNamespace(device_array=lambda shape, dtype: np.empty(shape, dtype))
    try:
        for func in funcs:
            getattr(module, func.sym_name)(*random_inputs(func, bind_dims(func, dims, 64)))
    finally:
        module.cuda = cuda
        for name, kernel in kernels.items():
            setattr(module, name, kernel)
    return seen


def report(name: str, kernel, signature) -> dict:
    options = {k: v for k, v in kernel.targetoptions.items() if k in OPTIONS}
    ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0), **options)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        done = subprocess.run(["ptxas", "-arch=sm_90", "-v", f.name, "-o", "/dev/null"],
                              capture_output=True, text=True, check=True)
    info = done.stderr

    def number(pattern):
        m = re.search(pattern, info)
        return int(m.group(1)) if m else 0
    lines = [line.split() for line in ptx.splitlines()
             if line.strip() and not line.strip().startswith(("//", ".", "{", "}", "$"))]
    code = [words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            for words in lines]  # the opcode, after a predicate such as @%p1
    return {"kernel": name,
            "f64": sorted({op for op in code if ".f64" in op}),
            "registers": number(r"Used (\d+) registers"),
            "spill_bytes": number(r"(\d+) bytes spill stores") + number(r"(\d+) bytes spill loads"),
            "stack_bytes": number(r"(\d+) bytes stack frame"),
            "shared_bytes": number(r"(\d+) bytes smem"),
            "shuffles": any(op.startswith("shfl.sync") for op in code)}


def main(argv: list[str]) -> None:
    fuse = "--no-fuse" not in argv
    dims = {k: int(v) for k, v in (a.split("=") for a in argv if "=" in a)}
    for path in (a for a in argv if a.endswith(".fuse")):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        funcs = parse_program(text, path).funcs
        source = generate(lower(parse_program(text, path), "fused", fuse), "cuda")
        module = load_source(source, "ptx_report")
        for name, (kernel, signature) in launches(module, funcs, dims).items():
            print(json.dumps({"file": path, **report(name, kernel, signature)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
