"""Probe: where a suite case's time goes, kernel by kernel, beside torch.compile's kernels.
Run on the GPU from the repository root (a minute a case on an H100):

    python benchmarks/probe_kernels.py group_norm softmax_middle [--dims K=V,...]

For each case of benchmarks/cases.py or shape_sweep.py named (``--dims`` its sizes; a
sweep case at its first variant's, its dtype too): mlfuse's launches for one call (recorded
through the host function), each replayed alone through the driver (parameters packed
once, as the runtime launches) and timed with CUDA events (median),
with the kernel's registers and local bytes and the bytes it would move at the copy
bandwidth; then the whole call's launches back to back, checked against the NumPy
interpreter; then torch.compile's CUDA kernels on the same inputs (torch.profiler, the
average of 10 calls). ``--dims`` overrides the case's sizes (another shape of the same
program).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def driver_launch(dispatcher, config, args):
    """One recorded launch as mlfuse's runtime makes it (its parameters packed once,
    cuLaunchKernel through cuda-bindings: runtime/cuda_driver.py). Numba's own launch
    rebuilds the parameters each call, tens of microseconds of host time, more than a
    short kernel runs: timed back to back, it measured the host, not the kernel."""
    from mlfuse.runtime.cuda_driver import (
        BindingsLaunch,
        ParamBlock,
        function_handle,
        pack_arguments,
    )
    from mlfuse.runtime.launch_plan import _dim3
    from mlfuse.runtime.launcher import _overload
    kernel = _overload(dispatcher, args)
    words, _ = pack_arguments(kernel._prepare_args, kernel.argument_types, args)
    params = ParamBlock(words)
    shared = int(config[3]) if len(config) > 3 else 0
    go = BindingsLaunch(dispatcher.__name__, function_handle(kernel), _dim3(config[0]),
                        _dim3(config[1]), shared, params)
    go.params = params  # (kept alive with the launch)
    return go


def mlfuse_kernels(p, edit=None) -> list[tuple[str, str, float, str]]:
    """(kernel, grid, ms alone, resources) of each launch of one call, then the total;
    ``edit``: a function of the generated module's text, run on it first (a variant)."""
    from numba import cuda
    from probe_codegen import LaunchRecorder, kernel_resources
    from probe_memkern import _KERNEL_DEF, check

    from mlfuse.codegen import generate
    from mlfuse.pipeline import compile_text
    from mlfuse.runtime.loader import load_source
    source = generate(compile_text(p.case.source, f"{p.case.name}.fuse", level="fused"), "cuda")
    source = edit(source) if edit else source
    module = load_source(source, p.case.name)
    kernels = {name: getattr(module, name) for name in _KERNEL_DEF.findall(source)}
    launches: list = []
    for name, kernel in kernels.items():
        setattr(module, name, LaunchRecorder(kernel, launches))
    out = module.ENTRY_POINTS[p.func.sym_name](*p.inputs)
    cuda.synchronize()
    ok, err = check(p, p.device.array(out[0] if isinstance(out, tuple) else out))
    names = {id(k): n for n, k in kernels.items()}
    rows = []
    calls = [driver_launch(k, c, a) for k, c, a in launches]
    for (kernel, config, args), go in zip(launches, calls):
        name = names[id(kernel)]
        ms = p.device.time_ms(lambda _: go())
        rows.append((name, str(config[0]), ms, " ".join(kernel_resources({name: kernel}))))
    total = p.device.time_ms(lambda _: [go() for go in calls])
    rows.append(("(all, back to back)", "", total, f"ok={ok} err={err:.2g}"))
    return rows


def compile_kernels(p) -> list[tuple[str, str, float, str]]:
    """torch.compile's CUDA kernels of one call: (name, "", ms a call, count)."""
    import torch
    inputs = [torch.as_tensor(a, device="cuda") for a in p.inputs]
    f = torch.compile(p.case.torch_fn)
    for _ in range(3):
        f(*inputs)
    torch.cuda.synchronize()
    calls = 10
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            f(*inputs)
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        total_us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if total_us:
            rows.append((e.key[:60], "", total_us / calls / 1e3, f"{e.count // calls} a call"))
    return rows


def main() -> None:
    from cases import CASES
    from probe_memkern import Device, prepare
    from shape_sweep import VARIANTS, _extra_cases, in_dtype
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--dims", default="", help="K=V,... sizes for every case named")
    args = parser.parse_args()
    dims = {k: int(v) for k, v in (kv.split("=") for kv in args.dims.split(",") if kv)}
    device = Device(False)
    for name in args.cases:
        case = next((c for c in CASES if c.name == name), None)
        if case is None:  # a sweep case, at its first variant
            case = next(c for c in _extra_cases() if c.name == name)
            first = dict(VARIANTS[name][0])
            case = in_dtype(dataclasses.replace(case, dims={k: v for k, v in first.items()
                                                            if k != "dtype"}), first.get("dtype"))
        if dims:
            case = dataclasses.replace(case, dims={**case.dims, **dims})
        p = prepare(case, device, 7, 1.0)
        print(f"\n{name} {case.dims}")
        for who, rows in (("mlfuse", mlfuse_kernels(p)), ("torch.compile", compile_kernels(p))):
            for kernel, grid, ms, notes in rows:
                print(f"  {who:14} {kernel:44} {grid:14} {ms:8.4f} ms  {notes}")


if __name__ == "__main__":
    main()
