"""Compiling a call's kernels in parallel, before its first launch.

Numba compiles a kernel when it is first launched, one after another, about a second
each (typing, lowering, NVVM, ptxas): a model of a hundred kernels spent minutes in its
first call. Before the first call with new argument shapes, ``precompile``:

1. runs the host function dry (``launch_plan.trace_call`` with ``launching=False``:
   every launch recorded with its arguments, none run), so the kernels the call needs
   and their argument types are known exactly, tile configurations included;
2. keeps those neither compiled in this process nor in the disk cache
   (runtime/kernel_cache.py);
3. has worker processes (``python -m mlfuse.runtime.compile_worker``) compile them in
   parallel: each loads the same generated file (``loader.load_file``: the same file
   name, so the same cache entries), compiles its share for the recorded types and
   hands the compiled kernels back (Numba's serialized form, cubins included) in a
   file, which this process installs in its own dispatchers (``add_overload``); with
   the disk cache on, the workers also write their cubins there for later processes.
   Meanwhile this process compiles a share itself (it pays no start). Shares are
   balanced by an estimate of each kernel's compile cost (``balanced_shares``).

The call then runs as it always did, and each launch finds its kernel compiled. Nothing
depends on the workers: one that fails or times out leaves its kernels to be compiled
at launch (or found in the disk cache), as before, and says why on stderr. Workers are
processes, not threads (Numba's compiler holds the GIL), started fresh (a forked child
cannot use the parent's CUDA context) and without the parent's ``__main__``.

Off under the simulator (nothing to compile), with one CPU and with
``MLFUSE_COMPILE_WORKERS=0``; that variable also sets the number of workers (default:
the CPUs less one, at most 8: each holds a CUDA context). The disk cache may be off
(``MLFUSE_KERNEL_CACHE=0``): the kernels come back through the workers' files.
"""
from __future__ import annotations

import ast
import contextlib
import os
import pickle
import re
import subprocess
import sys
import tempfile

from mlfuse.runtime.launch_plan import trace_call

MOST_WORKERS = 8
TIMEOUT_S = 900


def workers_wanted() -> int:
    """How many worker processes a precompile may start (0: none)."""
    from mlfuse.runtime.loader import simulator_enabled
    if simulator_enabled():
        return 0
    setting = os.environ.get("MLFUSE_COMPILE_WORKERS", "").strip()
    if setting:
        return max(0, int(setting))
    return min(MOST_WORKERS, max(0, (os.cpu_count() or 1) - 1))


def _in_disk_cache(dispatcher, argtypes) -> bool:
    """Whether Numba's disk cache holds ``dispatcher`` compiled for ``argtypes`` (its
    index, read without loading the entry). Unknown counts as absent: a worker then
    finds the entry itself."""
    try:
        cache = dispatcher._cache
        key = cache._index_key(argtypes, dispatcher.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - Numba internals: any doubt means "compile it"
        return False


def _task(launch, values):
    """(module attribute, tile configuration or None, argument types) of a recorded
    launch whose kernel is neither compiled here nor cached; None otherwise."""
    from mlfuse.runtime.kernel_cache import is_cuda_dispatcher
    dispatcher = launch.dispatcher
    if not is_cuda_dispatcher(dispatcher):
        return None  # not a CUDA dispatcher (the simulator's): nothing to compile
    argtypes = tuple(dispatcher.typeof_pyval(v) for v in values)
    if argtypes in dispatcher.overloads or _in_disk_cache(dispatcher, argtypes):
        return None
    m = re.fullmatch(r"(\w+)(\[.*\])?", launch.kernel)
    config = tuple(ast.literal_eval(m.group(2))) if m.group(2) else None
    return m.group(1), config, argtypes


def missing_kernels(trace) -> list:
    """The distinct tasks (see _task) of a dry trace's launches: one per dispatcher and
    argument types, so kernels that share their code under several names
    (codegen/shared_code.py) are compiled once, under the first name launched."""
    tasks, seen = [], set()
    for launch, values in zip(trace.launches, trace.launch_values):
        task = _task(launch, values)
        if task is not None and (id(launch.dispatcher), task[2]) not in seen:
            seen.add((id(launch.dispatcher), task[2]))
            tasks.append(task)
    return tasks


# What a kernel costs to compile, in bytes of its Python bytecode: Numba's frontend,
# NVVM and ptxas scale with the kernel's statements (mlfuse.tools.compile_profile on
# resnet18: about 0.1 s + 0.3 ms a byte; correlation 0.94). Without the kernel at hand:
# a contraction's tile kernel about 5000 bytes (about 2 s), others about 1000. A
# worker's start (Python, Numba, a CUDA context, the module) costs about a tile kernel.
FIXED_COST, TILE_COST, KERNEL_COST, START_COST = 300, 5000, 1000, 5000


def compile_cost(task, scope: dict | None = None) -> int:
    """The estimated cost of compiling ``task`` (see TILE_COST): its kernel's bytecode
    where ``scope`` (the module's globals) has it."""
    attr, config, _ = task
    try:
        kernel = scope[attr] if config is None else scope[attr][config]
        return FIXED_COST + len(kernel.py_func.__code__.co_code)
    except Exception:  # noqa: BLE001 - no kernel at hand: by its kind
        return TILE_COST if config is not None else KERNEL_COST


def balanced_shares(tasks: list, workers: int, starts: list[int] | None = None,
                    scope: dict | None = None) -> list[list[int]]:
    """The task indices each of at most ``workers`` workers compiles: the costliest
    first (``compile_cost``), each to the share with the least cost so far (longest
    processing time first), so that no worker is left with most of the tile kernels.
    ``starts``: the cost each worker has before its first task (its start), 0 where
    not given."""
    count = min(workers, len(tasks))
    shares, loads = [[] for _ in range(count)], list((starts or [])[:count])
    loads += [0] * (count - len(loads))
    costs = [compile_cost(task, scope) for task in tasks]
    for t in sorted(range(len(tasks)), key=lambda t: -costs[t]):
        least = loads.index(min(loads))
        shares[least].append(t)
        loads[least] += costs[t]
    return [sorted(share) for share in shares]


def run_workers(path: str, tasks: list, workers: int, scope: dict | None = None) -> int:
    """Compile ``tasks`` of the module at ``path`` in ``workers`` processes; the number
    compiled. Each worker is one process for its share (``balanced_shares``).
    With ``scope`` (the generated module's globals, as the host function sees them),
    this process compiles a share too while the workers run (it has no start to pay:
    its share is the first, larger by a start's cost), and the workers' kernels are
    installed in its dispatchers."""
    if scope is None:
        shares, own = balanced_shares(tasks, workers), []
    else:
        own, *shares = balanced_shares(tasks, workers + 1, [0] + [START_COST] * workers,
                                       scope)
        shares = [share for share in shares if share]  # no worker for nothing to do
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = []
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as files:
        for i, share in enumerate(shares):
            tasks_file = os.path.join(folder, f"share{i}.pickle")
            with open(tasks_file, "wb") as f:
                pickle.dump((path, [tasks[t] for t in share]), f)
            kernels_file = os.path.join(folder, f"kernels{i}.pickle")
            # output to files, not pipes: a worker never waits on this process to read
            out, err = (files.enter_context(open(os.path.join(folder, f"{n}{i}.txt"), "w+b"))
                        for n in "oe")
            procs.append((share, kernels_file, out, err, subprocess.Popen(
                [sys.executable, "-m", "mlfuse.runtime.compile_worker", tasks_file,
                 kernels_file], stdout=out, stderr=err, env=env)))
        done = compile_here(scope, [tasks[t] for t in own]) if own else 0
        for share, kernels_file, out, err, proc in procs:
            done += _finish(proc, out, err)
            if scope is not None:
                install(scope, [tasks[t] for t in share], kernels_file)
        return done


def compile_here(scope: dict, tasks: list) -> int:
    """Compile ``tasks`` in this process (into the dispatchers ``scope`` names, and the
    disk cache where it is on); how many. One that fails is left to its launch, which
    reports the error."""
    done = 0
    for attr, config, argtypes in tasks:
        try:
            dispatcher = scope[attr] if config is None else scope[attr][config]
            dispatcher.compile(argtypes)
            done += 1
        except Exception:  # noqa: BLE001, S110 - the launch compiles it again and says why
            pass
    return done


def install(scope: dict, tasks: list, kernels_file: str) -> int:
    """Add the kernels a worker compiled for ``tasks`` (its file: (task index, kernel)
    pairs) to the dispatchers ``scope`` names; how many. A file that is missing or
    unreadable installs nothing: those kernels compile at launch."""
    from mlfuse.runtime.compile_worker import rebuilt
    try:
        with open(kernels_file, "rb") as f:
            compiled = pickle.load(f)
    except Exception:  # noqa: BLE001 - the worker failed: it said why on stderr
        return 0
    count = 0
    for index, data in compiled:
        attr, config, argtypes = tasks[index]
        try:
            dispatcher = scope[attr] if config is None else scope[attr][config]
            if argtypes not in dispatcher.overloads:
                dispatcher.add_overload(rebuilt(data), argtypes)
                count += 1
        except Exception as e:  # noqa: BLE001 - left to compile at launch
            sys.stderr.write(f"mlfuse: a precompiled kernel {attr}{list(config or [])} was "
                             f"not installed ({type(e).__name__}: {e}); it compiles at launch\n")
    return count


def _finish(proc, out, err) -> int:
    """Wait for a worker; how many kernels it compiled (what it said on stderr, if
    anything, goes to ours). ``out`` and ``err``: the files its output went to."""
    try:
        proc.wait(timeout=TIMEOUT_S)
        timed_out = b""
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        timed_out = b"\ntimed out"
    said = []
    for f in (out, err):
        f.seek(0)
        said.append(f.read())
    out_text, err_text = said[0], said[1] + timed_out
    if err_text.strip():
        sys.stderr.write("mlfuse: a kernel compile worker: "
                         + err_text.decode(errors="replace").strip()[-2000:] + "\n")
    return int(out_text.strip()) if proc.returncode == 0 and out_text.strip().isdigit() else 0


def precompile(host, device_args, num_results: int) -> int:
    """Compile in parallel the kernels ``host(*device_args)`` will launch that are
    neither compiled nor cached; how many were compiled (see the module doc)."""
    workers = workers_wanted()
    path = host.__globals__.get("__file__", "")
    if workers < 1 or not os.path.isfile(path):
        return 0
    try:
        _, trace = trace_call(host, device_args, num_results, launching=False)
        tasks = missing_kernels(trace)
    except Exception:  # noqa: BLE001 - a call precompiling cannot follow compiles as before
        return 0
    if len(tasks) < 2:  # one kernel compiles as fast here as in a worker
        return 0
    return run_workers(path, tasks, workers, host.__globals__)
