"""Compile every kernel of a .fuse program for sm_90 without a GPU and report what
ptxas says (registers, spills, shared memory) and which wide loads the PTX has.

    CUDA_HOME=/usr/local/cuda-13.0 python benchmarks/ptx_check.py examples/conv_block.fuse

Needs libNVVM (a CUDA toolkit), NVRTC (pip install nvidia-cuda-nvrtc) and ptxas; the
simulator must be off. A development aid: it checks code quality, not correctness."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba import cuda  # noqa: E402
from numba.cuda import dispatcher as _dispatcher  # noqa: E402


class _Hopper:  # device functions ask the current device for its compute capability
    compute_capability = (9, 0)


_dispatcher.get_current_device = lambda: _Hopper()  # no driver here: compile for sm_90

import mlfuse  # noqa: E402
from mlfuse.codegen.emit_kernel import kernel_interface  # noqa: E402
from mlfuse.codegen.emit_scalar import STORAGE_TYPE  # noqa: E402
from mlfuse.driver import compile_text  # noqa: E402

PATTERNS = {"ld.global.v4": r"ld\.global(\.nc)?\.v4\.f32", "ld.shared.v4": r"ld\.shared\.v4\.f32",
            "ld.global.f32": r"ld\.global(\.nc)?\.f32", "ld.shared.f32": r"ld\.shared\.f32",
            "fma": r"fma\.rn\.f32", "shfl": r"shfl\.sync"}


def signature(op) -> str:
    iface = kernel_interface(op)
    types = [f"{STORAGE_TYPE[b.type.dtype]}[{', '.join([':'] * (b.type.rank - 1) + ['::1'])}]"
             if b.type.rank else f"{STORAGE_TYPE[b.type.dtype]}[::1]" for b in iface.buffers]
    return f"void({', '.join(types + ['int64'] * len(iface.symbols))})"


def report(kernel, sig: str, label: str) -> None:
    bounds = kernel.targetoptions.get("launch_bounds")
    ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0), launch_bounds=bounds)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        open(path, "w").write(ptx)
        r = subprocess.run(["ptxas", "-arch=sm_90", "-v", path, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    info = "; ".join(line.split("info    :")[-1].strip() for line in r.stderr.splitlines()
                     if "Used" in line or "spill" in line)
    counts = ", ".join(f"{k} {len(re.findall(p, ptx))}" for k, p in PATTERNS.items())
    print(f"{label}: {info or r.stderr.strip()[:300]}\n    {counts}")


def main(path: str) -> None:
    text = open(path).read()
    mod = mlfuse.compile_source(text, path, target="cuda")
    ir = compile_text(text, path)
    for func in ir.funcs:
        for op in func.body.ops:
            if op.name != "fused.kernel":
                continue
            name, sig = op["kernel_name"], signature(op)
            obj = getattr(mod.python_module, name, None)
            if hasattr(obj, "factory"):  # a contraction: every tile configuration
                for bm, bn in mod.python_module.CONTRACTION_TILES:
                    for va, vb in ((True, True), (False, False)):
                        k = obj.factory(bm, bn, va, vb)
                        report(k, sig, f"{name}[{bm}x{bn} vector={va},{vb}]")
            else:
                for attr in dir(mod.python_module):
                    if attr == name or attr.startswith(name + "_"):
                        k = getattr(mod.python_module, attr)
                        if hasattr(k, "py_func"):
                            report(k, sig, attr)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
