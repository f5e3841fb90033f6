"""Probe: memory-bound fused kernels against torch.compile (issue 6, targets 1-2).
Run on the GPU from the repository root (one process, under 3 minutes):

    python benchmarks/probe_memkern.py [--case NAME ...] [--no-sweep] [--dry-run]

For ew_chain, ew_chain10, softmax, layernorm and sumsq at the benchmark sizes, each
variant below is a set of ``mlfuse.hardware`` knobs (the generator's only parameters):
the module is generated with them, its host function runs once on fresh random
inputs (recording the kernels it launches: the "kernels" column says whether the
vector kernel was the one), the outputs are filled with NaN, the recorded launches
are replayed alone, and the result is checked against the NumPy interpreter (on the
GPU, with ``mlfuse.tools.checking.compare`` through CuPy). The kernel time is the replayed
launches' (CUDA events, median). torch eager and torch.compile run on the same
inputs, checked the same way. One failing variant does not stop the others; variants
still waiting when the time budget runs out are listed as skipped. Writes
probe_memkern.json and the log to $OUT when set. The table comes last.
``--dry-run`` checks the script itself on the CUDA simulator (small sizes, results
checked, nothing timed, no peers).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cases import CASES  # noqa: E402
from probe_codegen import LaunchRecorder, copy_bandwidth, kernel_resources  # noqa: E402

BUDGET_S = 160  # stop starting variants after this; the whole run stays under 3 minutes
_CACHE = {"load_cache": ".cs", "store_cache": ".cs"}
PER_ROW = {"row_blocks_per_sm": 0}
# label -> Target fields, most wanted first. The first two of each list run before the
# peers; the rest (the sweep) after them, one of each case in turn, while time is left.
POINTWISE = {
    "default": {},
    "v0 scalar": {"vector_width": 1},
    "ppt8": {"pointwise_per_thread": 8},
    "one pass": {"pointwise_blocks_per_sm": 0},
    "ld.cs st.cs": _CACHE,
    "ppt8 t256": {"pointwise_per_thread": 8, "threads_per_block": 256},
    "st.cs": {"store_cache": ".cs"},
    "ld.nc": {"load_cache": ".nc"},
    "ppt16 t256": {"pointwise_per_thread": 16, "threads_per_block": 256},
    "ppt8 one pass": {"pointwise_per_thread": 8, "pointwise_blocks_per_sm": 0},
    "ppt8 ld.cs st.cs": {"pointwise_per_thread": 8, **_CACHE},
}
NO_REUSE = {"row_reuse": False}
ROWS = {
    "default": {},
    "v0 scalar": {"vector_width": 1, "row_reuse": False},  # the defaults before this probe
    "8x512 per-row": PER_ROW,
    "4x1024 per-row": {**PER_ROW, "row_values_per_thread": 4, "row_threads": 1024},
    "8x512 per-row no-reuse": {**PER_ROW, **NO_REUSE},
    "16x256 per-row": {**PER_ROW, "row_values_per_thread": 16, "row_threads": 256},
    "8x512 per-row min3": {**PER_ROW, "row_min_blocks": 3},
    "4x1024 per-row no-reuse": {**PER_ROW, "row_values_per_thread": 4, "row_threads": 1024,
                                **NO_REUSE},
    "8x512 per-row min4": {**PER_ROW, "row_min_blocks": 4},
    "v0 scalar per-row": {**PER_ROW, "vector_width": 1, "row_reuse": False},
    "8x512 per-row ld.cs st.cs": {**PER_ROW, **_CACHE},
    "8x512 stride x8": {"row_blocks_per_sm": 8},
}
SWEEP = {"ew_chain": POINTWISE, "ew_chain10": POINTWISE, "softmax": ROWS, "layernorm": ROWS,
         "sumsq": ROWS}
_KERNEL_DEF = re.compile(r"^@cuda\.jit(?:\(launch_bounds=[^\n]*\))?\ndef (\w+)\(", re.M)


class Log:
    """Lines to stdout and, when $OUT is set, to $OUT/probe_memkern.log."""

    def __init__(self):
        out = os.environ.get("OUT")
        self.file = open(Path(out) / "probe_memkern.log", "w") if out else None

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        if self.file:
            self.file.write(text + "\n")
            self.file.flush()


class Device:
    """The GPU (CuPy compares, CUDA events time), or the simulator for --dry-run
    (NumPy compares, nothing is timed)."""

    def __init__(self, dry_run: bool):
        self.dry_run = dry_run
        if dry_run:
            import numpy
            self.xp = numpy
        else:
            import cupy
            self.xp = cupy

    def array(self, device_array):
        """A device result as an array of ``xp`` (a copy on the simulator); a tuple of
        them for a function of several results."""
        if isinstance(device_array, (tuple, list)):
            return tuple(self.array(a) for a in device_array)
        return device_array.copy_to_host() if self.dry_run else self.xp.asarray(device_array)

    def time_ms(self, call) -> float:
        if self.dry_run:
            return float("nan")
        from mlfuse.tools.benchmark import time_gpu
        return time_gpu(call, repeats=11, budget_ms=300).median_ms


@dataclasses.dataclass
class Prepared:
    """One case on the GPU: its function, inputs (Numba device arrays), reference
    (CuPy) and the tolerance inputs."""

    case: object
    func: object
    device: Device
    inputs: list
    reference: object
    ops: int
    reduced: int
    floor_ms: float


def prepare(case, device: Device, seed: int, gbs: float) -> Prepared:
    from numba import cuda

    from mlfuse.pipeline import parse_program
    from mlfuse.interp import run_tensor
    from mlfuse.tools.checking import program_size, random_inputs
    func = parse_program(case.source, f"{case.name}.fuse").funcs[0]
    inputs = random_inputs(func, case.dims_for(device.dry_run), seed=seed)
    expected = run_tensor(func, inputs)  # one array a result
    moved = sum(a.nbytes for a in inputs) + sum(e.nbytes for e in expected)
    ops, reduced = program_size(func)
    return Prepared(case, func, device, [cuda.to_device(a) for a in inputs],
                    [device.xp.asarray(e) for e in expected], ops, reduced,
                    moved / (gbs * 1e9) * 1e3)


def check(p: Prepared, got) -> tuple[bool, float]:
    """``got`` (an array of the device's ``xp``, or a tuple of them) against the NumPy
    interpreter's results."""
    from mlfuse.tools.checking import compare
    got = got if isinstance(got, (tuple, list)) else (got,)
    if len(got) != len(p.reference):
        return False, float("inf")
    checks = [compare(want, have, p.ops, p.reduced, xp=p.device.xp)
              for want, have in zip(p.reference, got)]
    return all(c.ok for c in checks), max(c.max_abs_error for c in checks)


def poison(array) -> None:
    """Fill a device array (or each of a tuple) with what no kernel computes here: NaN,
    or a sentinel int."""
    if isinstance(array, (tuple, list)):
        for a in array:
            poison(a)
        return
    import numpy as np
    fill = np.nan if array.dtype.kind == "f" else -12345
    array.copy_to_device(np.full(array.shape, fill, array.dtype))


def run_variant(p: Prepared, knobs: dict) -> dict:
    """Generate with ``knobs``, run, poison, replay, check and time the kernels alone."""
    from numba import cuda

    from mlfuse.codegen import generate
    from mlfuse.pipeline import compile_text
    from mlfuse.runtime.loader import load_source
    from mlfuse.hardware import get_target, target_in_effect
    hw = dataclasses.replace(get_target(), **knobs)
    with target_in_effect(hw):  # the schedule choices read the knobs too (strip_column_stages)
        fused = compile_text(p.case.source, f"{p.case.name}.fuse", level="fused")
    source = generate(fused, "simulator" if p.device.dry_run else "cuda", hw)
    module = load_source(source, p.case.name)
    kernels = {name: getattr(module, name) for name in _KERNEL_DEF.findall(source)}
    launches: list = []
    for name, kernel in kernels.items():
        setattr(module, name, LaunchRecorder(kernel, launches))
    start = time.perf_counter()
    out = module.ENTRY_POINTS[p.func.sym_name](*p.inputs)
    cuda.synchronize()
    first_call_s = time.perf_counter() - start  # compiling included
    for name, kernel in kernels.items():
        setattr(module, name, kernel)
    poison(out)  # whatever the replay does not write stays poisoned

    def replay(_):
        for kernel, config, kargs in launches:
            kernel[config](*kargs)
    replay(0)
    cuda.synchronize()
    ok, err = check(p, p.device.array(out))
    ms = p.device.time_ms(replay)
    host_ms = float("nan")
    if not p.device.dry_run:  # the host's time to issue the launches (no wait): where it
        start = time.perf_counter()  # is near ``ms``, the launches bound the call
        for _ in range(20):
            replay(0)
        host_ms = (time.perf_counter() - start) / 20 * 1e3
        cuda.synchronize()
    names = {id(k): n for n, k in kernels.items()}
    launched = [names[id(k)] for k, _, _ in launches]
    resources = [] if p.device.dry_run else kernel_resources(
        {n: kernels[n] for n in dict.fromkeys(launched)})
    return {"ok": ok, "err": err, "ms": ms, "kernels": launched, "grids": [str(c) for _, c, _
            in launches], "resources": resources, "first_call_s": first_call_s,
            "host_ms": host_ms}


def run_peers(p: Prepared, log) -> dict:
    if p.device.dry_run:
        return {}
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    args = [torch.as_tensor(a, device="cuda") for a in p.inputs]
    results = {}
    # each probe compiled afresh: a function compiled again at a second shape in one
    # process is recompiled with dynamic shapes, slower (channel softmax [32, 64, 112,
    # 112]: 0.168 ms after other shapes, 0.077 in shape_sweep, which resets too)
    torch._dynamo.reset()
    peers = (("torch", p.case.torch_fn), ("torch.compile", torch.compile(p.case.torch_fn)))
    for label, fn in peers:
        try:
            start = time.perf_counter()
            out = fn(*args)
            torch.cuda.synchronize()
            warm_s = time.perf_counter() - start
            ok, err = check(p, p.device.array(out))
            ms = p.device.time_ms(lambda _: fn(*args))
            results[label] = {"ok": ok, "err": err, "ms": ms, "first_call_s": warm_s}
            log(f"{p.case.name:10} [{label}] ok={ok} err={err:.2g} {ms:.4f} ms "
                f"(first call {warm_s:.1f} s)")
        except Exception as e:  # a peer failing must not lose mlfuse's numbers
            log(f"{p.case.name:10} [{label}] FAILED: {type(e).__name__}: {e}"[:400])
    return results


@dataclasses.dataclass
class Probe:
    """One row group of a knob-sweep probe: its label, the case at its sizes (a
    benchmarks/cases.py Case) and its variants (label -> mlfuse.hardware knobs)."""

    label: str
    case: object
    variants: dict


def probe_session(parser: argparse.ArgumentParser):
    """A knob probe's start, its flags parsed (``parser`` plus --dry-run): the simulator
    turned on for --dry-run (before numba.cuda is imported), mlfuse's caching allocator,
    then (opts, Log, Device, copy GB/s: 1 on the simulator)."""
    parser.add_argument("--dry-run", action="store_true", help="check the script on the simulator")
    opts = parser.parse_args()
    if opts.dry_run:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from mlfuse.runtime.memory import install
    install()
    return opts, Log(), Device(opts.dry_run), 1.0 if opts.dry_run else copy_bandwidth()


def sweep_probes(description: str, probes_for, sweep_flag: str | None = None) -> None:
    """The driver the knob-sweep probes share (probe_rows, probe_strips, probe_smemstrips,
    probe_smemrows): their flags (--case: labels starting so; --no-peers; --dry-run;
    ``sweep_flag``'s --no-sweep where given), each probe's case prepared once and its
    variants run (a failing one logged, the others kept), torch and torch.compile on the
    same inputs, and a table last: ms, % of the copy bandwidth's time for the bytes a
    perfect fused kernel moves, the time over the faster peer, ok, the grids launched.
    ``probes_for(opts, dry_run)`` gives the Probes (after NUMBA_ENABLE_CUDASIM is set)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--case", action="append", help="only probes whose label starts so")
    parser.add_argument("--no-peers", action="store_true", help="skip torch and torch.compile")
    if sweep_flag:
        parser.add_argument("--no-sweep", action="store_true", help=sweep_flag)
    opts, log, device, gbs = probe_session(parser)
    t0 = time.perf_counter()
    rows = []
    for probe in probes_for(opts, opts.dry_run):
        if opts.case and not any(probe.label.startswith(c) for c in opts.case):
            continue
        p = prepare(probe.case, device, 7, gbs)
        for variant, knobs in probe.variants.items():
            # a variant is hardware knobs, or (knobs, a context it is compiled in: a pass
            # turned off, probe_column_nests.py)
            knobs, around = knobs if isinstance(knobs, tuple) else (knobs, contextlib.nullcontext)
            try:
                with around():
                    r = run_variant(p, knobs)
            except Exception as e:  # one failing variant must not lose the others
                log(f"{probe.label:28} [{variant}] FAILED: {type(e).__name__}: {e}"[:600])
                continue
            log(f"{probe.label:28} [{variant}] ok={r['ok']} err={r['err']:.2g} {r['ms']:.4f} ms "
                f"host {r['host_ms']:.4f} ms kernels={r['kernels']} grids={r['grids']} "
                f"{'; '.join(r['resources'])}")
            rows.append((probe.label, variant, r["ms"], p.floor_ms, r["ok"], " ".join(r["grids"])))
        if not opts.no_peers and not opts.dry_run:
            for peer, r in run_peers(p, log).items():
                rows.append((probe.label, peer, r["ms"], p.floor_ms, r["ok"], ""))
        del p
    log(f"\n{'probe':28} {'variant':22} {'ms':>8} {'%copy':>6} {'/peer':>6} ok   grids  "
        f"(copy {gbs:.0f} GB/s; /peer: over the faster of torch and torch.compile)")
    for label, variant, ms, floor, ok, grids in rows:
        peers = [r[2] for r in rows if r[0] == label and r[1] in ("torch", "torch.compile")]
        ratio = f"{ms / min(peers):6.2f}" if peers else "     -"
        log(f"{label:28} {variant:22} {ms:8.4f} {100 * floor / ms:5.0f}% {ratio} "
            f"{'ok' if ok else 'BAD'}  {grids[:60]}")
    log(f"total {time.perf_counter() - t0:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument("--no-sweep", action="store_true", help="default and v0 variants only")
    t0 = time.perf_counter()
    opts, log, device, gbs = probe_session(parser)
    import numba
    from numba import cuda
    seed = int(time.time()) % 100000
    log(f"device {'simulator' if opts.dry_run else cuda.get_current_device().name}; numba "
        f"{numba.__version__}; seed {seed}; copy {gbs:.0f} GB/s")
    names = opts.case or list(SWEEP)
    results: dict = {"copy_gb_s": gbs, "seed": seed, "cases": {}}
    prepared: dict = {}
    # default and v0 of every case, then the peers, then the sweep: its n-th variant of
    # every case before any case's n+1-th, so that running out of time drops the last
    passes = [(name, label) for name in names for label in list(SWEEP[name])[:2]] + [
        ("peers", name) for name in names]
    longest = max(len(SWEEP[name]) for name in names)
    if not opts.no_sweep:
        passes += [(name, list(SWEEP[name])[n]) for n in range(2, longest) for name in names
                   if n < len(SWEEP[name])]
    for name, label in passes:
        case_name = label if name == "peers" else name
        if time.perf_counter() - t0 > BUDGET_S:
            log(f"{case_name:10} [{'peers' if name == 'peers' else label}] skipped: time budget")
            continue
        try:
            if case_name not in prepared:  # all five fit on the GPU together (~5 GB)
                case = next(c for c in CASES if c.name == case_name)
                prepared[case_name] = prepare(case, device, seed, gbs)
            p = prepared[case_name]
            entry = results["cases"].setdefault(case_name, {"floor_ms": p.floor_ms,
                                                            "variants": {}, "peers": {}})
            if name == "peers":
                entry["peers"] = run_peers(p, log)
                continue
            knobs = SWEEP[name][label]
            r = run_variant(p, knobs)
            r["knobs"] = knobs
            entry["variants"][label] = r
            log(f"{name:10} [{label}] ok={r['ok']} err={r['err']:.2g} {r['ms']:.4f} ms "
                f"kernels={r['kernels']} grids={r['grids']} {'; '.join(r['resources'])} "
                f"(first call {r['first_call_s']:.1f} s)")
        except Exception as e:  # one failing variant must not lose the others' numbers
            log(f"{case_name:10} [{label}] FAILED: {type(e).__name__}: {e}"[:600])
            log(traceback.format_exc()[-1500:])
    out = os.environ.get("OUT")
    if out:
        (Path(out) / "probe_memkern.json").write_text(json.dumps(results, indent=1))
    log(f"\nH100 kernel times (ms, median of CUDA events); floor = bytes moved / copy rate "
        f"({gbs:.0f} GB/s); total {time.perf_counter() - t0:.0f} s")
    log(f"{'case':10} {'variant':26} {'ms':>7} {'%floor':>6} {'vs t.comp':>9} ok  kernel")
    for case_name, entry in results["cases"].items():
        compiled = entry["peers"].get("torch.compile", {}).get("ms")
        rows = [(label, r["ms"], r["ok"], r["kernels"][-1] if r["kernels"] else "-")
                for label, r in entry["variants"].items()]
        rows += [(label, r["ms"], r["ok"], "-") for label, r in entry["peers"].items()]
        for label, ms, ok, kernel in rows:
            ratio = f"{ms / compiled:8.3f}x" if compiled else "        -"
            log(f"{case_name:10} {label:26} {ms:7.4f} {100 * entry['floor_ms'] / ms:5.0f}% "
                f"{ratio} {'ok' if ok else 'BAD'} {kernel}")


if __name__ == "__main__":
    main()
