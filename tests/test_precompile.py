"""Parallel kernel compilation before a first call (mlfuse/runtime/precompile.py) on the
CPU: a dry trace lists a call's kernels and their argument types without running any;
only kernels neither compiled nor in the disk cache become tasks, a contraction's with
its tile configuration; the worker loads the generated file and reports a kernel it
cannot compile instead of failing; precompiling is off under the simulator. Real
compiles (a GPU context per worker) are exercised by benchmarks/models.py's first-call
times on a GPU."""
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest
from numba import cuda

import mlfuse
from mlfuse.runtime import precompile
from mlfuse.runtime.compile_worker import compile_tasks
from mlfuse.runtime.launch_plan import trace_call

MATMUL = ("func mm(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
          "    y = relu(matmul(x, w) + b)\n    return y * 2.0 + 1.0\n}\n")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def _args():
    rng = np.random.default_rng(0)
    return [cuda.to_device(rng.standard_normal(s).astype(np.float32))
            for s in ((6, 5), (5, 7), (7,))]


class _Spy:
    """A kernel that counts its launches (trace_call wraps what has a py_func)."""

    def __init__(self, kernel):
        self.kernel, self.py_func, self.runs = kernel, kernel.py_func, 0

    def __getitem__(self, config):
        def launch(*args):
            self.runs += 1
            return self.kernel[config](*args)
        return launch


def test_a_dry_trace_records_every_launch_and_runs_none(monkeypatch):
    module = mlfuse.compile_source(MATMUL, "mm.fuse", fuse=False)
    host = module.mm.host
    spies = {name: _Spy(value) for name, value in host.__globals__.items()
             if hasattr(value, "py_func") and not name.startswith("_")}
    for name, spy in spies.items():
        monkeypatch.setitem(host.__globals__, name, spy)
    _, trace = trace_call(host, _args(), 1, launching=False)
    names = [launch.kernel for launch in trace.launches]
    assert len(names) == len(module.kernels("mm")) >= 3
    assert any(name.startswith("mm_0[") for name in names)  # the matmul's tile config
    assert all(len(v) == len(la.args) for la, v in zip(trace.launches, trace.launch_values))
    assert spies and sum(s.runs for s in spies.values()) == 0
    trace_call(host, _args(), 1)  # and a real trace runs them
    assert sum(s.runs for s in spies.values()) == len(names) - 1  # all but the tiled one


class _FakeDispatcher:
    """What precompile reads of a Numba CUDA dispatcher, and what it installs there."""

    py_func = None

    def __init__(self, compiled=(), cached=False):
        self.overloads = {t: object() for t in compiled}
        self.cached = cached

    def enable_caching(self):
        pass

    def add_overload(self, kernel, argtypes):
        self.overloads[argtypes] = kernel

    def typeof_pyval(self, value):
        return type(value).__name__


def _launch(name, dispatcher):
    return types.SimpleNamespace(kernel=name, dispatcher=dispatcher)


def test_tasks_are_the_kernels_neither_compiled_nor_cached(monkeypatch):
    monkeypatch.setattr(precompile, "_in_disk_cache", lambda d, t: d.cached)
    fresh, tile = _FakeDispatcher(), _FakeDispatcher()
    trace = types.SimpleNamespace(
        launches=[_launch("f_0", fresh), _launch("f_1", _FakeDispatcher(compiled=[("int",)])),
                  _launch("f_2", _FakeDispatcher(cached=True)),
                  _launch("f_3[128, 64, True, False, True]", tile), _launch("f_0", fresh)],
        launch_values=[(1,), (2,), (3,), (4, 5.0), (6,)])
    assert precompile.missing_kernels(trace) == [
        ("f_0", None, ("int",)), ("f_3", (128, 64, True, False, True), ("int", "float"))]


def test_kernels_sharing_one_dispatcher_are_one_task(monkeypatch):
    # codegen/shared_code.py aliases a repeated layer's kernel: f_1 = f_0
    monkeypatch.setattr(precompile, "_in_disk_cache", lambda d, t: False)
    shared = _FakeDispatcher()
    trace = types.SimpleNamespace(
        launches=[_launch("f_0", shared), _launch("f_1", shared), _launch("f_1", shared)],
        launch_values=[(1,), (2,), (3.0,)])
    assert precompile.missing_kernels(trace) == [("f_0", None, ("int",)),
                                                 ("f_1", None, ("float",))]


def test_shares_spread_the_tile_kernels_over_the_workers():
    tile = (64, 64, True, False, False)
    tasks = [("t0", tile, ()), ("t1", tile, ()), ("k0", None, ()), ("k1", None, ()),
             ("t2", tile, ()), ("k2", None, ())]
    shares = precompile.balanced_shares(tasks, 3)
    assert sorted(t for share in shares for t in share) == list(range(6))
    assert [sum(tasks[t][1] is not None for t in share) for share in shares] == [1, 1, 1]
    assert precompile.balanced_shares(tasks[:2], 8) == [[0], [1]]


def test_a_kernels_compile_cost_follows_its_bytecode():
    def small(a):
        a[0] = 1

    def large(a, b):
        for i in range(a.size):
            b[i] = a[i] * 2 + a[i - 1] - b[i] / 3 if i else a[0]
    scope = {"s": types.SimpleNamespace(py_func=small), "l": types.SimpleNamespace(py_func=large)}
    cost = [precompile.compile_cost((name, None, ()), scope) for name in ("s", "l", "gone")]
    assert cost[0] < cost[1] and cost[2] == precompile.KERNEL_COST
    assert precompile.compile_cost(("t", (64, 64, True, True, False), ())) == \
        precompile.TILE_COST


class _Compiling(_FakeDispatcher):
    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def compile(self, argtypes):
        self.compiled.append(argtypes)


def test_this_process_compiles_a_share_while_the_workers_run(capfd):
    module = mlfuse.compile_source(MATMUL, "mm.fuse")
    path = module.python_module.__file__
    here = []
    tile = (64, 64, True, False, False)
    scope = {f"k{i}": _Compiling(here) for i in range(4)}
    scope["t"] = {tile: _Compiling(here)}
    tasks = [(f"k{i}", None, (f"type{i}",)) for i in range(4)] + [("t", tile, ("tile",))]
    # 2 workers, each starting a tile kernel's cost late: this process takes the tile
    # kernel, then the others go to the least loaded (ties to this process); the
    # workers' (under the simulator: nothing to compile) are reported
    assert precompile.run_workers(path, tasks, 2, scope) == len(here) == 3
    assert sorted(here) == [("tile",), ("type0",), ("type3",)]
    assert capfd.readouterr().err.count("a kernel compile worker") == 2
    # two loop-free kernels cost less than a worker's start: no worker starts
    here.clear()
    assert precompile.run_workers(path, tasks[:2], 2, scope) == 2
    assert sorted(here) == [("type0",), ("type1",)]
    assert "a kernel compile worker" not in capfd.readouterr().err


def test_a_simulator_kernel_is_left_to_its_launch():
    plain = _FakeDispatcher()
    plain.enable_caching = None  # the simulator's kernels have no disk cache
    trace = types.SimpleNamespace(launches=[_launch("g_0", plain)], launch_values=[(1,)])
    assert precompile.missing_kernels(trace) == []


def test_precompiling_needs_no_disk_cache(monkeypatch):
    from mlfuse.runtime import loader
    monkeypatch.setattr(loader, "simulator_enabled", lambda: False)
    monkeypatch.setenv("MLFUSE_KERNEL_CACHE", "0")
    monkeypatch.setenv("MLFUSE_COMPILE_WORKERS", "3")
    assert precompile.workers_wanted() == 3


def test_kernels_a_worker_hands_back_are_installed_in_their_dispatchers(tmp_path, monkeypatch,
                                                                         capfd):
    from mlfuse.runtime import compile_worker
    monkeypatch.setattr(compile_worker, "rebuilt", lambda data: ("kernel", data))
    tiles = {(64, 64, True, False, False): _FakeDispatcher()}
    scope = {"f_0": _FakeDispatcher(), "f_1": tiles, "f_2": _FakeDispatcher(compiled=[("int",)])}
    tasks = [("f_0", None, ("int",)), ("f_1", (64, 64, True, False, False), ("float",)),
             ("f_2", None, ("int",)), ("gone", None, ("int",))]
    out = tmp_path / "kernels.pickle"
    out.write_bytes(pickle.dumps([(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]))
    assert precompile.install(scope, tasks, str(out)) == 2  # f_2 had it; "gone" is no name
    assert scope["f_0"].overloads == {("int",): ("kernel", b"a")}
    assert tiles[(64, 64, True, False, False)].overloads == {("float",): ("kernel", b"b")}
    assert "gone" in capfd.readouterr().err
    assert precompile.install(scope, tasks, str(tmp_path / "missing.pickle")) == 0


def test_precompiling_is_off_under_the_simulator(monkeypatch):
    monkeypatch.setenv("MLFUSE_COMPILE_WORKERS", "4")
    assert precompile.workers_wanted() == 0
    module = mlfuse.compile_source(MATMUL, "mm.fuse")
    assert precompile.precompile(module.mm.host, _args(), 1) == 0
    x, w, b = (a.copy_to_host() for a in _args())
    np.testing.assert_allclose(module.mm(x, w, b), np.maximum(x @ w + b, 0) * 2 + 1,
                               rtol=1e-5, atol=1e-5)


def test_a_worker_reports_a_kernel_it_cannot_compile_and_goes_on():
    module = mlfuse.compile_source(MATMUL, "mm.fuse")
    path = module.python_module.__file__
    tasks = [("no_such_kernel", None, ()), ("mm_0", (32, 128, True, True, False), ())]
    # under the simulator a kernel has nothing to compile: each task fails and is reported
    worker = subprocess.run([sys.executable, "-m", "mlfuse.runtime.compile_worker"],
                            input=pickle.dumps((path, tasks)), capture_output=True, check=True)
    assert worker.stdout.strip() == b"0"
    assert b"no_such_kernel" in worker.stderr and b"mm_0[32, 128" in worker.stderr
    assert compile_tasks(path, []) == 0
    out = path + ".kernels"
    assert compile_tasks(path, tasks, out) == 0  # and the file it hands back is empty
    with open(out, "rb") as f:
        assert pickle.load(f) == []


def test_workers_run_in_parallel_and_their_failures_cost_nothing(capfd):
    module = mlfuse.compile_source(MATMUL, "mm.fuse")
    path = module.python_module.__file__
    tasks = [(f"missing_{i}", None, ()) for i in range(3)]
    assert precompile.run_workers(path, tasks, 2) == 0
    err = capfd.readouterr().err
    assert err.count("a kernel compile worker") == 2
    assert all(f"missing_{i}" in err for i in range(3))
