"""What the GPU would run, checked without a GPU: compiles every kernel that mlfuse
generates for the memory-bound benchmark cases to PTX for the H100 (sm_90) and runs
``ptxas -v`` on it. Per kernel it prints registers, spilled bytes and stack frame
(a register-held schedule must show 0 spilled, 0 stack), and counts of the global
loads and stores by width (v4 = 16-byte vector accesses). Needs the CUDA toolkit
(``CUDA_HOME``, for libNVVM and ptxas), not a GPU:

    CUDA_HOME=/usr/local/cuda-13.0 python benchmarks/ptx_report.py [--case softmax]
        [--knob row_values_per_thread=16 --knob row_threads=256 ...] [--keep DIR]

``--knob`` sets a field of the default ``mlfuse.target`` Target (as the probe does).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cases import CASES  # noqa: E402

MEMORY_BOUND = ("ew_chain", "ew_chain10", "softmax", "layernorm", "sumsq")
_KERNEL_DEF = re.compile(r"^@cuda\.jit\(launch_bounds=([^)]*\)?)\)\ndef (\w+)\(([^)]*)\):", re.M)


def parse_knobs(pairs: list[str]):
    """The default Target with ``name=value`` fields replaced (ints where they parse)."""
    from mlfuse.target import get_target
    values = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        values[name] = int(value) if re.fullmatch(r"-?\d+", value) else value
    return dataclasses.replace(get_target(), **values)


def kernel_signatures(source: str, func) -> dict[str, tuple[str, str]]:
    """Each kernel of ``source``: (launch bounds text, Numba signature), its buffer
    parameters typed from the function's buffers of the same name, dims as int64."""
    from mlfuse.codegen.emit_scalar import STORAGE_TYPE
    from mlfuse.codegen.names import identifier
    from mlfuse.ir.types import BufferType
    buffers = {}
    for op in [None] + list(func.body.ops):
        values = func.args if op is None else op.results
        for v in values:
            if isinstance(v.type, BufferType):
                buffers.setdefault(identifier(v.name_hint or ""), v.type)
    signatures = {}
    for bounds, name, params in _KERNEL_DEF.findall(source):
        types = []
        for p in [p.strip() for p in params.split(",")]:
            t = buffers.get(p)
            if t is None:
                types.append("int64")
            else:
                dims = [":"] * (len(t.shape) - 1) + ["::1"] if t.shape else ["::1"]
                types.append(f"{STORAGE_TYPE[t.dtype]}[{', '.join(dims)}]")
        signatures[name] = (bounds, f"void({', '.join(types)})")
    return signatures


def ptx_counts(ptx: str) -> str:
    loads = len(re.findall(r"\bld\.global(?:\.(?!v\d)\w+)*\.(?:f32|s32|b32|u32)\b", ptx))
    loads4 = len(re.findall(r"\bld\.global(?:\.\w+)*\.v4\.", ptx))
    stores = len(re.findall(r"\bst\.global(?:\.(?!v\d)\w+)*\.(?:f32|s32|b32|u32)\b", ptx))
    stores4 = len(re.findall(r"\bst\.global(?:\.\w+)*\.v4\.", ptx))
    return f"ld {loads} / ld.v4 {loads4}, st {stores} / st.v4 {stores4}"


def without_gpu(cc=(9, 0)) -> None:
    """Let device functions compile with no GPU present: Numba asks the current device
    for its compute capability when a kernel calls one; answer ``cc`` instead."""
    from types import SimpleNamespace

    from numba.cuda import dispatcher
    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc)


def report(case, hw, keep: Path | None) -> list[str]:
    from numba import cuda

    from mlfuse.codegen import generate
    from mlfuse.driver import compile_text
    from mlfuse.runtime import load_source
    fused = compile_text(case.source, f"{case.name}.fuse", level="fused")
    source = generate(fused, "cuda", hw)
    module = load_source(source, case.name)
    ptxas = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "ptxas"
    lines = []
    for name, (bounds, signature) in kernel_signatures(source, fused.funcs[0]).items():
        bound = eval(bounds, vars(module))  # the module constant(s) the kernel declares
        ptx, _ = cuda.compile_ptx(getattr(module, name).py_func, signature, cc=(9, 0),
                                  launch_bounds=bound)
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{name}.ptx").write_text(ptx)
        done = subprocess.run([str(ptxas), "-arch=sm_90", "-v", f.name, "-o", os.devnull],
                              capture_output=True, text=True)
        os.unlink(f.name)
        info = done.stderr
        regs = re.search(r"Used (\d+) registers", info)
        spill = re.search(r"(\d+) bytes spill stores", info)
        stack = re.search(r"(\d+) bytes stack frame", info)
        lines.append(f"{name:28} bounds {str(bound):10} {regs.group(1) if regs else '?':>3} regs, "
                     f"{spill.group(1) if spill else '?'} B spilled, "
                     f"{stack.group(1) if stack else '?'} B stack; {ptx_counts(ptx)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument("--knob", action="append", default=[], help="Target field=value")
    parser.add_argument("--keep", type=Path, help="write each kernel's PTX there")
    opts = parser.parse_args()
    hw = parse_knobs(opts.knob)
    without_gpu()
    for case in [c for c in CASES if c.name in (opts.case or MEMORY_BOUND)]:
        for line in report(case, hw, opts.keep):
            print(f"{case.name:10} {line}", flush=True)


if __name__ == "__main__":
    main()
