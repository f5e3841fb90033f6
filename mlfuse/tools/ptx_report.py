"""What the GPU would run, without a GPU: every kernel of a program compiled for the
H100 (sm_90a, as Numba compiles for it) by Numba and assembled by ptxas, with what they report.

    CUDA_HOME=/usr/local/cuda python -m mlfuse.tools.ptx_report [--no-fuse] [--json]
        [--matmul-precision=highest|high|medium] [--first-tile] [--sass=DIR]
        [--copies=A,B] [--tile=BMxBN[,BMxBN...]] [--split-first] [--wide]
        [--dim=NAME=SIZE ...] [--hw=NAME=VALUE ...] FILE.fuse...

``--sass=DIR`` also writes each kernel's machine code (nvdisasm of ptxas's cubin) to
DIR/KERNEL.sass and counts its instructions: what an instruction-bound kernel runs.
``--copies=A,B``: a tensor-core contraction's operands copied A and B values at a time
(its VECTOR_A, VECTOR_B: 0 gathers) instead of 16 bytes, and only the tiles its host
would pick then (a TF32 kernel's narrow tiles where a copy is under 16 bytes).
``--tile=BMxBN``: a contraction's kernels of that tile shape only (its SASS in seconds);
several, comma-separated: those.
``--split-first``: the split-K form of the first tile shape only (the others unsplit).
``--wide``: a SIMT contraction's tiles in their WIDE form (64-bit flat offsets, as the
host launches them where an operand has 2**31 values or more: codegen/simt_fetch.py).
``--dim=NAME=SIZE`` (repeatable): the passes plan for that size of a symbolic dim (as
``mlfuse opt --dim``; the kernels still take every size).
``--hw=NAME=VALUE`` (repeatable): the program compiled and its code generated with that
field of the hardware target (mlfuse/hardware.py) changed, e.g.
``--hw=column_lanes_rows=one``: a variant's registers before it is made the default.

Needs the CUDA toolkit (NVVM and ptxas; Numba also asks NVRTC for the architectures it
supports) but no GPU, and NUMBA_ENABLE_CUDASIM unset. Where the toolkit lacks NVRTC or
nvdisasm (as the development machine's /usr/local/cuda does), ``pip install -e '.[ptx]'``
adds NVIDIA's wheels of both. Each kernel is compiled for the
argument types its launch passes, which follow from the IR (C-contiguous arrays of the
buffers' dtypes and ranks, int64 dims); every variant is compiled (vector and scalar,
both row variants) and every tile shape of a contraction, unsplit and with split-K
(and split-K's second kernel). One line per kernel: its
registers, spilled and stack bytes, shared memory, the f64 instructions in its PTX (a
silent f64 promotion shows here), whether it uses warp shuffles, and its 16-byte loads.
tests/test_ptx.py runs it on every example.
"""
from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types as pytypes

from mlfuse.codegen.abi import is_tiled_kernel
from mlfuse.hardware import hw_setting

_OPTIONS = ("fastmath", "lineinfo", "launch_bounds", "max_registers")


def _patch_device_lookup() -> None:
    """Typing a call to a device function asks for the current device's compute
    capability; with no GPU there is none, so answer for the H100 compiled for."""
    from numba.cuda import dispatcher
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))


def _wheel_tool(name: str) -> str | None:
    """A CUDA tool from NVIDIA's wheels (the ``ptx`` extra: nvidia-cuda-nvdisasm puts it
    in site-packages/nvidia/cu*/bin), or None."""
    import glob
    import site
    for root in site.getsitepackages():
        found = sorted(glob.glob(os.path.join(root, "nvidia", "cu*", "bin", name)))
        if found:
            return found[-1]
    return None


def signature(op, kernel: str = ""):
    """The Numba signature of the kernel ``op`` (a fused.kernel or loops.parallel) as its
    host function launches it; for a contraction, ``kernel`` says which: "" (its tiles,
    not split: the workspace parameter gets the first buffer), "split" (its tiles
    writing partial sums) or "finish" (split-K's second kernel)."""
    from numba.core import types

    from mlfuse.codegen.kernel_code import kernel_interface
    from mlfuse.codegen.scalar import STORAGE_TYPE
    iface = kernel_interface(op)
    args = [types.Array(getattr(types, STORAGE_TYPE[b.type.dtype].rstrip("_") if
                                STORAGE_TYPE[b.type.dtype] != "bool_" else "boolean"),
                        b.type.rank, "C") for b in iface.buffers]
    args += [types.int64] * len(iface.symbols)
    schedule = op.attributes.get("schedule")
    if schedule in (None, "pointwise"):  # a lean kernel's magic numbers (codegen/addressing.py)
        from mlfuse.codegen.addressing import lean_divisors
        from mlfuse.codegen.emit_kernel import pointwise_variant
        if pointwise_variant(op) == "pointwise-prefetch":
            args += [types.int64] * (2 * len(lean_divisors(op)))
    if schedule in ("split-rows", "split-columns") or kernel in ("stages", "column-lanes"):
        # the partial buffers and n_split (a row kernel's split plan: split_stages.py); the
        # column stages' vector epilogue takes its own chunk count too
        from mlfuse.codegen import schedule_split, split_stages
        partial_dtypes = (schedule_split if kernel == "" else split_stages).partial_dtypes
        args += [types.Array(getattr(types, d), 1, "C") for d in partial_dtypes(op)]
        args += [types.int64] * (2 if kernel == "column-lanes" else 1)
    elif schedule == "warp-rows" or kernel == "short":  # the threads per row
        args.append(types.int64)
    elif schedule == "contraction":  # the partial sums (split-K), and the second kernel's
        from mlfuse.codegen.split_k import partial_dtype  # number of shares
        args.append(types.Array(getattr(types, partial_dtype(op)), 2, "C") if kernel
                    else args[0])
        if kernel == "finish":
            args.append(types.int64)
    return types.void(*args)


def compile_kernel(kernel, sig, sass: str | None = None) -> dict:
    """PTX for sm_90 and what ptxas says of it; with ``sass`` (a file name), the
    machine code too, disassembled by nvdisasm ($NVDISASM or on the PATH) into that file."""
    from numba import cuda
    options = {k: v for k, v in kernel.targetoptions.items() if k in _OPTIONS}
    # sm_90a, as Numba compiles for an H100 (numba/cuda/codegen.py, _ensure_cc): the
    # arch-specific target that warpgroup MMA (wgmma) needs
    ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0, "a"), **options)
    with tempfile.TemporaryDirectory() as tmp:
        source, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(source, "w", encoding="utf-8") as f:
            f.write(ptx)
        info = subprocess.run(["ptxas", "-arch=sm_90a", "-v", source, "-o", cubin],
                              capture_output=True, text=True, check=True).stderr
        machine = _disassemble(cubin, sass) if sass else {}

    def number(pattern):
        m = re.search(pattern, info)
        return int(m.group(1)) if m else 0
    lines = [line.split() for line in ptx.splitlines()
             if line.strip() and not line.strip().startswith(("//", ".", "{", "}", "$"))]
    code = [words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            for words in lines]  # the opcode, after a predicate such as @%p1
    return {"f64": sorted({op for op in code if ".f64" in op}),
            "registers": number(r"Used (\d+) registers"),
            "spill_bytes": number(r"(\d+) bytes spill stores") + number(r"(\d+) bytes spill loads"),
            "stack_bytes": number(r"(\d+) bytes stack frame"),
            # static (ptxas) and dynamic (a tensor-core kernel's stages, given at launch)
            "shared_bytes": number(r"(\d+) bytes smem") + getattr(kernel, "dynamic_shared", 0),
            "shuffles": any(op.startswith("shfl.sync") for op in code),
            **_memory_counts(code), **_integer_counts(code),
            "fma": sum(op.startswith("fma.") for op in code),
            "mma": sum(op.startswith("mma.sync") for op in code),
            # (inside the braces of its inline asm: counted in the text)
            "wgmma": ptx.count("wgmma.mma_async"),
            # ptxas's warnings (a wgmma pipeline it serialized says so here)
            "warnings": [line.strip() for line in info.splitlines() if "warning" in line.lower()],
            **machine}


def _disassemble(cubin: str, path: str) -> dict:
    """Write the SASS of ``cubin`` to ``path``; its instruction count and the counts of
    the opcodes that say most about a memory-bound kernel's cost."""
    tool = os.environ.get("NVDISASM") or shutil.which("nvdisasm") or _wheel_tool("nvdisasm")
    if not tool:
        raise SystemExit("--sass needs nvdisasm: on the PATH or named by $NVDISASM")
    text = subprocess.run([tool, "-c", cubin], capture_output=True, text=True,
                          check=True).stdout
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    ops = re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", text,
                     re.MULTILINE)
    return {"sass": len(ops),
            "sass_counts": dict(collections.Counter(op.split(".")[0] for op in ops)
                                .most_common(12))}


def _memory_counts(code: list[str]) -> dict:
    """Loads and stores of global memory (a kernel's buffers), scalar and 16-byte, and
    16-byte loads of any space (shared-memory tiles too)."""
    def global_(op):
        return not any(space in op for space in (".shared", ".local", ".param", ".const"))
    loads = [op for op in code if op.startswith("ld.") and global_(op)]
    stores = [op for op in code if op.startswith("st.") and global_(op)]
    return {"loads": sum(".v4." not in op for op in loads),
            "v4_loads": sum(".v4." in op for op in code if op.startswith("ld.")),
            "global_v4_loads": sum(".v4." in op for op in loads),
            "stores": sum(".v4." not in op for op in stores),
            "v4_stores": sum(".v4." in op for op in stores)}


def _integer_counts(code: list[str]) -> dict:
    """Integer arithmetic in the PTX (index math, mostly): all of it, and the divisions
    and remainders (a 64-bit one is a long subroutine on the GPU)."""
    arith = ("add.", "sub.", "mul.", "mad.", "div.", "rem.", "shl.", "shr.")
    ints = [op for op in code if op.startswith(arith)
            and re.search(r"\.(s|u)(32|64)\b", op) and ".f" not in op]
    return {"int_ops": len(ints),
            "int_divisions": sum(op.startswith(("div.", "rem.")) for op in ints),
            "int64_divisions": sum(op.startswith(("div.", "rem.")) and op.endswith("64")
                                   for op in ints)}


def _kernels_of(op, python_module, all_tiles: bool = True, copies=None, only=None,
                split_all: bool = True, wide: bool = False):
    """(label, dispatcher, signature) of every kernel the module has for ``op``: its
    variants, or every tile shape (with 16-byte operand reads where it has them) of a
    contraction, unsplit and, where K may be split, split (and the second kernel);
    ``all_tiles`` False: the first (largest) tile shape only; ``only``: those (BM, BN);
    ``split_all`` False: the split form of the first tile only (a split tile differs from
    its unsplit one in where the accumulator goes, not in its main loop); ``wide``: a
    SIMT contraction's WIDE tiles instead."""
    name = op["kernel_name"] if op.name == "fused.kernel" else None
    for attr, value in vars(python_module).items():
        if name is None or not (attr == name or attr.startswith(name + "_")):
            continue
        if is_tiled_kernel(value):
            # operand reads at their widest: 16 bytes (a tensor-core kernel's VECTOR_* is
            # the values a copy takes; a SIMT kernel's reads it as true)
            a, b = (16 // value.value_bytes,) * 2 if copies is None else copies
            tiles = value.tiles
            if (a, b) != (16 // value.value_bytes,) * 2 and value.narrow_tiles is not None:
                tiles = value.narrow_tiles
            wide_form = ((True,), " wide") if wide and value.shape is not None else ((), "")
            for n, (bm, bn) in enumerate(tiles if all_tiles else tiles[:1]):
                if only is not None and (bm, bn) not in only:
                    continue
                yield (f"{attr}[{bm}x{bn}{wide_form[1]}]",
                       value.factory(bm, bn, a, b, False, *wide_form[0]), signature(op))
                if value.max_split > 1 and (split_all or n == 0):
                    yield (f"{attr}[{bm}x{bn} split{wide_form[1]}]",
                           value.factory(bm, bn, a, b, True, *wide_form[0]),
                           signature(op, "split"))
        elif hasattr(value, "py_func") and not value.targetoptions.get("device"):
            finish = op.attributes.get("schedule") == "contraction"
            staged = re.search(r"(_stage\d+|_epilogue|_combine(_blocks)?\d*)(_vector|_lean)?$", attr) and op.attributes.get("split_stages")
            short = re.search(r"_short(_vector)?$", attr) and op.attributes.get("warp_rows")
            lanes = attr.endswith("_epilogue_vector") and op.attributes.get("schedule") == "strips"
            yield attr, value, signature(op, "finish" if finish else "column-lanes" if lanes
                                         else "stages" if staged else "short" if short else "")


def report(path: str, text: str, fuse: bool = True, matmul_precision: str | None = None,
           all_tiles: bool = True, sass_dir: str | None = None, copies=None, only=None,
           split_all: bool = True, wide: bool = False, hw_fields: dict | None = None,
           dims: dict | None = None):
    """Yield one dict per kernel of the program at ``path`` (f32 contractions at
    ``matmul_precision``; a contraction's first tile shape only unless ``all_tiles``;
    ``copies``: a tensor-core contraction's (VECTOR_A, VECTOR_B), else 16 bytes;
    ``hw_fields``: the hardware target's fields changed for the code generated;
    ``dims``: sizes the passes plan for, as ``mlfuse opt --dim``)."""
    _patch_device_lookup()
    from mlfuse.codegen import generate
    from mlfuse.pipeline import compile_text
    from mlfuse.runtime.loader import load_source
    import dataclasses

    from mlfuse.hardware import get_target, target_in_effect
    hw = dataclasses.replace(get_target(), **(hw_fields or {}))
    with target_in_effect(hw):  # (the schedule choices read the knobs too)
        module = compile_text(text, path, fuse=fuse, matmul_precision=matmul_precision,
                              fuse_options={"dims": dims} if dims else None)
        python_module = load_source(generate(module, "cuda", hw), "ptx_report")
    for func in module.funcs:
        for op in func.body.ops:
            if op.name not in ("fused.kernel", "loops.parallel"):
                continue
            for label, kernel, sig in _kernels_of(op, python_module, all_tiles, copies, only,
                                                  split_all, wide):
                yield {"file": path, "func": func.sym_name, "kernel": label,
                       "schedule": op.attributes.get("schedule", "pointwise"),
                       "variant": op.attributes.get("variant", ""),
                       **compile_kernel(kernel, sig, sass_dir and os.path.join(
                           sass_dir, re.sub(r"[^\w.-]", "_", label) + ".sass"))}


def main(argv: list[str]) -> int:
    fuse, as_json = "--no-fuse" not in argv, "--json" in argv
    precision = next((a.split("=", 1)[1] for a in argv if a.startswith("--matmul-precision=")),
                     None)
    sass_dir = next((a.split("=", 1)[1] for a in argv if a.startswith("--sass=")), None)
    copies = next((tuple(int(c) for c in a.split("=", 1)[1].split(",")) for a in argv
                   if a.startswith("--copies=")), None)
    only = next((tuple(tuple(int(v) for v in t.split("x")) for t in a.split("=", 1)[1].split(","))
                 for a in argv if a.startswith("--tile=")), None)
    hw_fields = {}
    for a in argv:
        if a.startswith("--hw="):
            name, value = hw_setting(a[len("--hw="):])
            hw_fields[name] = value
    from mlfuse.cli.options import parse_dims  # (mlfuse opt --dim's reading and checks)
    dims = parse_dims([a[len("--dim="):] for a in argv if a.startswith("--dim=")])
    if sass_dir:
        os.makedirs(sass_dir, exist_ok=True)
    for path in (a for a in argv if not a.startswith("--")):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for r in report(path, text, fuse, precision, "--first-tile" not in argv, sass_dir, copies,
                        only, "--split-first" not in argv, "--wide" in argv, hw_fields, dims):
            if as_json:
                print(json.dumps(r), flush=True)
            else:
                print(f"{r['kernel']}: {r['registers']} registers, {r['spill_bytes']} B spilled, "
                      f"{r['stack_bytes']} B stack, {r['shared_bytes']} B shared; "
                      f"{r['v4_loads']} 16-byte loads, {r['fma']} fma, {r['mma']} mma, "
                      f"{r['wgmma']} wgmma, "
                      f"shuffles {r['shuffles']}, "
                      f"f64 {r['f64'] or 'none'}"
                      + (f"; {r['sass']} SASS instructions {r['sass_counts']}" if sass_dir else "")
                      + "".join(f"\n  ptxas: {line}" for line in r["warnings"]),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
