"""The benchmark suite: every case of benchmarks/cases.py in one process, timed for
mlfuse (fused and unfused), PyTorch eager, torch.compile and CuPy, all on the same
inputs and each checked against mlfuse's NumPy interpreter.

    python benchmarks/run.py                    # on a GPU: writes benchmarks/results/
    python benchmarks/run.py --only softmax     # some cases
    python benchmarks/run.py --dry-run          # tiny sizes, simulator, no timings
    python benchmarks/run.py --markdown-from benchmarks/results/latest.json  # print the table
    python benchmarks/run.py --markdown-from benchmarks/results/latest.json --update-md BENCHMARKS.md

Device times: CUDA events around back-to-back calls after a warm-up, median of
repeats, inputs rotated when they fit in L2 (mlfuse.tools.benchmark.time_gpu). The
small_latency case reports host microseconds per call over 2000 calls instead.
A peer passes its check when mlfuse.tools.checking.compare accepts every element and
||out - ref|| / ||ref|| <= REL_ERROR_LIMIT (which TF32 would not meet). A case with
``matmul_precision`` compiles mlfuse at that precision (compared at its unit:
checking.matmul_eps); a case with ``f64_error`` also records each peer's
max |out - exact| / max |exact| against the program evaluated in float64 by the NumPy
interpreter (``f64_errors``; printed under the table).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from cases import CASES  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PEERS = ("mlfuse", "mlfuse_unfused", "torch", "torch_compile", "cupy")
LATENCY_CALLS = 2000
# ||out - ref|| / ||ref|| above this fails a check: float32 4096-term dot products
# measured ~1.2e-6 (sequential sum) against TF32's ~7.7e-4; this sits between them
REL_ERROR_LIMIT = 3e-5
TIMING_BUDGET_MS = 800  # per peer and case (the suite's wall, about 12 minutes on the H100 in
# December 2026, is mostly compiling: a device call of 10 minutes takes it in two, --only)


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def importable(name: str) -> bool:
    try:
        __import__(name)
        return True
    except Exception:  # a broken install counts as absent, as a missing one does
        return False


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for name in ("numpy", "numba", "numba_cuda", "torch", "cupy", "mlfuse"):
        out[name] = getattr(sys.modules[name], "__version__", "?") if importable(name) else None
    return out


def available_peers(timed: bool) -> set:
    """The peers this machine can run: on the GPU every importable one; in --dry-run
    mlfuse on the simulator and PyTorch eager on the CPU (its functions get checked)."""
    peers = {"mlfuse", "mlfuse_unfused"}
    if importable("torch"):
        peers |= {"torch", "torch_compile"} if timed else {"torch"}
    if timed and importable("cupy"):
        peers.add("cupy")
    return peers


def run_case(case, dims, timed: bool, peers: set, for_sizes: bool = False) -> dict:
    """Check every peer against the NumPy interpreter on the same inputs; when
    ``timed``, time each one too. Returns the case's entry of the results JSON.
    ``for_sizes``: mlfuse compiled for these sizes (``--dim``), not for symbols."""
    import numpy as np
    import mlfuse
    from mlfuse.tools.benchmark import relative_error, rotations
    from mlfuse.cli.bench import bytes_moved
    from mlfuse.pipeline import parse_program
    from mlfuse.interp import run_tensor
    from mlfuse.tools.checking import compare, matmul_eps, program_size, random_inputs
    module = parse_program(case.source, f"{case.name}.fuse")
    func = module.funcs[0]
    inputs = random_inputs(func, dims, seed=0)
    log(f"{case.name}: reference (NumPy interpreter)")
    expected_all = run_tensor(func, inputs)  # several for a case with several results
    expected = expected_all[0]
    ops, reduced = program_size(func)
    result = {p: None for p in PEERS}
    result.update(checked=True, errors={}, rel_errors={},
                  bytes_fused=bytes_moved(func, dims)[1])  # explain's model, for GB/s
    exact = float64_reference(case, inputs) if case.f64_error else None
    units = {}  # peer -> the relative error unit of its matmul precision

    def check(label, got_all):
        got_all = got_all if isinstance(got_all, (tuple, list)) else (got_all,)
        if len(got_all) != len(expected_all):
            result["checked"] = False
            log(f"  {label}: MISMATCH {len(got_all)} results, expected {len(expected_all)}")
            return
        for k, (want, got) in enumerate(zip(expected_all[1:], got_all[1:]), 1):
            c = compare(want, got, ops, reduced, unit=units.get(label, 0.0))
            if not c.ok:
                result["checked"] = False
                log(f"  {label}: result {k} MISMATCH {c.message}")
        got = got_all[0]
        c = compare(expected, got, ops, reduced, unit=units.get(label, 0.0))
        if exact is not None:
            result.setdefault("f64_errors", {})[label] = float(
                np.abs(got.astype(np.float64) - exact).max() / np.abs(exact).max())
        rel = relative_error(expected, got)
        result["errors"][label] = c.max_abs_error
        result["rel_errors"][label] = rel
        # a result coarser than float32 (f16) carries its own rounding: the limit scales
        if _is_bf16(expected):  # ml_dtypes' bfloat16, whose finfo NumPy does not have
            import ml_dtypes
            coarse = float(ml_dtypes.finfo(expected.dtype).eps) / np.finfo(np.float32).eps
        else:
            coarse = np.finfo(expected.dtype).eps / np.finfo(np.float32).eps \
                if expected.dtype.kind == "f" else 1.0
        limit = REL_ERROR_LIMIT * max(1.0, coarse)
        if not c.ok or not rel <= limit:
            result["checked"] = False
            log(f"  {label}: MISMATCH {c.message}, max abs error {c.max_abs_error:.3g}, "
                f"relative error {rel:.3g} (limit {limit:g})")

    calls = {}
    for label, fuse in (("mlfuse", True), ("mlfuse_unfused", False)):
        if label in peers:
            log(f"{case.name}: compiling {label}")
            mod = mlfuse.compile_source(case.source, f"{case.name}.fuse", fuse=fuse,
                                        target="cuda" if timed else "simulator",
                                        matmul_precision=case.matmul_precision,
                                        fuse_options={"dims": dims} if for_sizes else None)
            calls[label] = mod[func.sym_name]
            units[label] = matmul_eps(mod.kernels(func.sym_name))
    if "torch" in peers:
        calls["torch"] = case.torch_fn
    if "torch_compile" in peers:
        import torch
        calls["torch_compile"] = torch.compile(case.torch_fn)  # compiles on its first call
    if "cupy" in peers and case.cupy_factory is not None:
        calls["cupy"] = case.cupy_factory()
    # every peer reads the same device memory: set 0 is the checked inputs, further
    # sets (only when the inputs fit in L2) are fresh random ones to rotate through
    n_sets = rotations(sum(a.nbytes for a in inputs)) if timed and not case.latency else 1
    sets = [shared_arrays(inputs, timed)]
    sets += [shared_arrays(random_inputs(func, dims, seed=k), timed) for k in range(1, n_sets)]
    for label, fn in calls.items():
        log(f"{case.name}: {label}: first call and check")
        arg_sets = [_args_for(label, s) for s in sets]
        try:
            got = fn(*arg_sets[0])
        except Exception as e:  # reported, not fatal: the other cases still run
            log(f"  {label} failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}")
            result["errors"][label] = f"failed: {type(e).__name__}"
            if label.startswith("mlfuse"):  # a peer may lack an op; mlfuse must not fail
                result["checked"] = False
            continue
        check(label, tuple(map(_to_numpy, got)) if isinstance(got, (tuple, list))
              else _to_numpy(got))
        if timed:
            log(f"{case.name}: {label}: timing")
            result[label] = (_host_latency(fn, arg_sets[0]) if case.latency
                             else _device_time(fn, arg_sets))
    return result


def float64_reference(case, inputs):
    """The case's program evaluated in float64 by the NumPy interpreter (its f32 types
    read as f64, the inputs widened exactly): the result the f64_errors are measured
    against."""
    import numpy as np
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    func = parse_program(case.source.replace("f32", "f64"), f"{case.name}_f64.fuse").funcs[0]
    (exact,) = run_tensor(func, [np.asarray(a, np.float64) for a in inputs])
    return exact


def shared_arrays(host_arrays, timed: bool) -> list:
    """The inputs as every peer will see them: torch CUDA tensors when torch is there
    (the others get views of the same memory), else Numba device arrays; NumPy arrays
    in --dry-run."""
    if not timed:
        return host_arrays
    if importable("torch"):
        return [_torch_tensor(a).cuda() for a in host_arrays]
    from numba import cuda
    return [cuda.to_device(a) for a in host_arrays]


def _is_bf16(a) -> bool:
    return str(getattr(a, "dtype", "")) in ("bfloat16", "torch.bfloat16")


def _torch_tensor(a):
    """A host array as a torch tensor (bf16, an ml_dtypes array: through its bits)."""
    import numpy as np
    import torch
    if _is_bf16(a):
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _args_for(label, arrays):
    """One peer's view of ``shared_arrays``: no copies on the GPU."""
    if label.startswith("mlfuse"):  # Numba views of CUDA tensors; torch.bfloat16 tensors
        # (no __cuda_array_interface__) and NumPy arrays (the simulator) as they are
        from numba import cuda
        return [a if _is_bf16(a) or not hasattr(a, "__cuda_array_interface__")
                else cuda.as_cuda_array(a) for a in arrays]
    if label == "cupy":
        import cupy
        return [cupy.asarray(a) for a in arrays]
    import torch
    return [a if isinstance(a, torch.Tensor) else _torch_tensor(a) for a in arrays]


def _to_numpy(x):
    import numpy as np
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if hasattr(x, "detach"):
        if _is_bf16(x):  # NumPy has no bf16: the bits, as ml_dtypes' bfloat16
            import ml_dtypes
            import torch
            return x.detach().view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
        return x.detach().cpu().numpy()
    if hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def _device_time(fn, arg_sets) -> float:
    """Median ms per call, cycling through the input sets."""
    from mlfuse.tools.benchmark import time_gpu
    t = time_gpu(lambda i: fn(*arg_sets[i]), n_sets=len(arg_sets), repeats=11,
                 budget_ms=TIMING_BUDGET_MS)
    return round(t.median_ms, 4)


def _host_latency(fn, args) -> float:
    """Host microseconds per call, over LATENCY_CALLS calls, synchronized at the end."""
    from numba import cuda
    for _ in range(20):
        fn(*args)
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(LATENCY_CALLS):
        fn(*args)
    cuda.synchronize()
    return round((time.perf_counter() - start) / LATENCY_CALLS * 1e6, 2)


REQUIRED = {"device": str, "date": str, "versions": dict, "cases": dict}
CASE_FIELDS = PEERS + ("checked",)


def schema_problems(results: dict) -> list[str]:
    """What keeps ``results`` from the documented latest.json schema (empty: none)."""
    problems = [f"{key}: missing or not {kind.__name__}" for key, kind in REQUIRED.items()
                if not isinstance(results.get(key), kind)]
    if not isinstance(results.get("copy_GBps"), (int, float, type(None))):
        problems.append("copy_GBps: not a number")
    for name, entry in (results.get("cases") or {}).items():
        problems += [f"{name}.{f}: missing" for f in CASE_FIELDS if f not in entry]
        problems += [f"{name}.{p}: not a time" for p in PEERS
                     if not isinstance(entry.get(p), (int, float, type(None)))
                     or isinstance(entry.get(p), bool)]
        if not isinstance(entry.get("checked"), bool):
            problems.append(f"{name}.checked: not true/false")
    return problems


def write_results(results: dict, out: Path) -> None:
    for problem in schema_problems(results):
        log(f"results schema: {problem}")
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{results['device'].replace(' ', '_')}-{results['date']}"
    for path in (out / f"{stem}.json", out / "latest.json"):
        path.write_text(json.dumps(results, indent=2) + "\n")
    (out / "latest.md").write_text(markdown(results))


def markdown(results: dict) -> str:
    """The results as the Markdown table of BENCHMARKS.md."""
    from mlfuse.tools.benchmark import markdown_table
    rows = []
    for name, r in results["cases"].items():
        latency = name == "small_latency"
        best_peer = min((r[p] for p in ("torch", "torch_compile", "cupy") if r.get(p)), default=None)
        ratio = None  # says in words whether mlfuse wins or loses against the best peer
        if r.get("mlfuse") and best_peer:
            x = r["mlfuse"] / best_peer
            ratio = f"{x:.2f}x slower" if x >= 1 else f"{1 / x:.2f}x faster"
        share = None  # of the measured copy bandwidth, by explain's bytes-moved model
        if not latency and r.get("mlfuse") and r.get("bytes_fused") and results.get("copy_GBps"):
            share = f"{100 * r['bytes_fused'] / (r['mlfuse'] * 1e6) / results['copy_GBps']:.0f}%"
        rows.append([name, "us (host)" if latency else "ms", r.get("mlfuse"),
                     r.get("mlfuse_unfused"), r.get("torch"), r.get("torch_compile"),
                     r.get("cupy"), ratio, share, "yes" if r.get("checked") else "NO"])
    head = (f"Device: **{results['device']}**; date: {results['date']}; copy bandwidth "
            f"{results['copy_GBps']} GB/s (read + write).\n")
    packages = ", ".join(f"{k} {v}" for k, v in (results.get("versions") or {}).items() if v)
    if packages:
        head += f"Packages: {packages}.\n"
    if results.get("command"):
        wall = f" ({results['wall_s']:.0f} s wall)" if results.get("wall_s") else ""
        head += f"Command: `{results['command']}`{wall}.\n"
    head += "\n"
    table = markdown_table(
        ["case", "unit", "mlfuse", "mlfuse unfused", "torch", "torch.compile", "cupy",
         "mlfuse vs best peer", "mlfuse % of copy BW", "all checked"], rows)
    for name, r in results["cases"].items():  # max |out - exact| / max |exact|, float64 exact
        if r.get("f64_errors"):
            errors = ", ".join(f"{p} {e:.2e}" for p, e in r["f64_errors"].items())
            table += f"\n{name}: error against float64: {errors}\n"
    return head + table


TABLE_START, TABLE_END = "<!-- results table: benchmarks/run.py --update-md -->", "<!-- end of results -->"


def update_markdown_file(path: Path, table: str) -> None:
    """Replace the generated block of ``path`` (BENCHMARKS.md), keeping the prose around it."""
    text = path.read_text()
    if TABLE_START not in text or TABLE_END not in text:
        raise SystemExit(f"{path}: no {TABLE_START} ... {TABLE_END} block to replace")
    before, rest = text.split(TABLE_START, 1)
    after = rest.split(TABLE_END, 1)[1]
    path.write_text(f"{before}{TABLE_START}\n{table}{TABLE_END}{after}")


def peer_columns(r: dict, copy_gbps: float) -> list:
    """A run_case result as the sweep scripts' table columns: mlfuse, torch, torch.compile
    (ms), mlfuse over the faster peer, its share of the copy bandwidth (the bytes a fused
    kernel moves) and whether every peer was checked."""
    ms = r.get("mlfuse")
    best = min((r[k] for k in ("torch", "torch_compile") if r.get(k)), default=None)
    bw = (r["bytes_fused"] / (ms * 1e-3) / 1e9 / copy_gbps * 100
          if ms and r.get("bytes_fused") else None)
    return [ms, r.get("torch"), r.get("torch_compile"), f"{ms / best:.2f}" if ms and best else "-",
            f"{bw:.0f}%" if bw else "-", "yes" if r["checked"] else "NO"]


def gpu_setup(needs: str) -> bool:
    """What every timed script does first: torch.compile's cache under /tmp (not in the
    repository or the home folder), a CUDA GPU or a message on stderr (``needs`` says
    what needs it; False: none), and mlfuse's caching allocator installed before any
    Numba CUDA call, as `mlfuse bench` does."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/mlfuse-bench-inductor")
    from mlfuse.runtime.device import gpu_present
    if not gpu_present():
        sys.stderr.write(f"{needs} a CUDA GPU\n")
        return False
    from mlfuse.runtime.memory import install
    install()
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", help="run only this case (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="tiny sizes on the simulator, no timing")
    p.add_argument("--markdown-from", help="print the Markdown table of a results JSON and exit")
    p.add_argument("--update-md", metavar="FILE",
                   help="with --markdown-from: put the table into FILE's generated block")
    p.add_argument("--out", default=str(RESULTS), help="folder for the results")
    args = p.parse_args(argv)
    if args.markdown_from:
        table = markdown(json.loads(Path(args.markdown_from).read_text()))
        if args.update_md:
            update_markdown_file(Path(args.update_md), table)
        else:
            print(table, end="")
        return 0
    if args.dry_run:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    cases = [c for c in CASES if not args.only or c.name in args.only]
    timed = not args.dry_run
    device = "simulator"
    if timed:
        if not gpu_setup("benchmarks need (use --dry-run to check the script)"):
            return 2
        from numba import cuda
        device = cuda.get_current_device().name
        device = device.decode() if isinstance(device, bytes) else device
    results = {"device": device, "date": datetime.date.today().isoformat(), "versions": versions(),
               "command": "python benchmarks/run.py" + "".join(f" --only {o}" for o in args.only or []),
               "copy_GBps": None, "cases": {}}
    if timed:
        from mlfuse.cli.bench import measure_copy_bandwidth
        from mlfuse.runtime.memory import active
        log("measuring copy bandwidth")
        results["copy_GBps"] = round(measure_copy_bandwidth() / 1e9, 1)
        results["mlfuse_caching_allocator"] = active()
    peers = available_peers(timed)
    if "torch" in peers:
        import torch
        # exact float32 matmuls and convolutions, as mlfuse computes them (TF32 would
        # fail the relative-error check and time a different computation)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    log(f"peers: {', '.join(p for p in PEERS if p in peers)}")
    suite_started = time.perf_counter()
    for case in cases:
        case_peers = peers
        if not timed and not case.simulate:
            log(f"{case.name}: --dry-run checks only the CPU peers (too big for the simulator)")
            case_peers = peers - {"mlfuse", "mlfuse_unfused"}
        started = time.perf_counter()
        results["cases"][case.name] = run_case(case, case.dims_for(args.dry_run), timed, case_peers)
        results["cases"][case.name]["wall_s"] = round(time.perf_counter() - started, 1)
        results["wall_s"] = round(time.perf_counter() - suite_started, 1)
        log(f"{case.name}: done in {time.perf_counter() - started:.1f} s")
        if timed:  # after every case, so a run cut short still leaves its numbers
            write_results(results, Path(args.out))
    print(markdown(results) if timed else json.dumps(results["cases"], indent=1))
    return 0 if all(r["checked"] for r in results["cases"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
