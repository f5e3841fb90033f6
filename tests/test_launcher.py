"""The launch fast path (mlfuse/runtime/launcher.py and its parts) on the CPU: plans recorded
from generated host functions launch what the host function launches (pointwise, both
row variants, several kernels); a function with plans checks its arguments exactly as
one without (same errors, same messages); parameters are packed in Numba's own layout;
the ctypes launch hands the driver the packed words; the caching allocator's blocks
come back when their arrays die. The driver itself is exercised by
benchmarks/probe_launch.py on a GPU."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

import mlfuse
from mlfuse import api
from mlfuse.api import CompiledFunction, compile_ir
from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.dialects import parse_ir
from mlfuse.runtime.launch_plan import Source, _dim3, trace_call
from mlfuse.runtime.launcher import FastPath
from mlfuse.runtime.loader import load_source

from helpers import assert_close

CHAIN = "func chain(x: f32[N], b: f32[N]) -> f32[N] {\n    return relu(x * 2.0 + b) * 0.5 + x\n}\n"
SOFTMAX = """func softmax(x: f32[R, C]) -> f32[R, C] {
    m = max(x, axis=1, keepdims=true)
    e = exp(x - m)
    return e / sum(e, axis=1, keepdims=true)
}
"""
TWO_RESULTS = "func two(x: f32[R, C], b: f32[C]) -> (f32[R, C], f32[R]) {\n" \
              "    y = x * b\n    return y, sum(y, axis=1)\n}\n"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def device(*shape, seed=0, offset=0):
    """A random float32 device array whose data starts ``offset`` floats past a 256-byte
    boundary (the simulator's arrays live in host memory, aligned as it comes, and a
    plan holds for one alignment of each argument)."""
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    raw = cuda.device_array(values.size + 64 + offset, np.float32)
    start = (-raw._ary.ctypes.data % 256) // 4 + offset
    array = raw[start:start + values.size].reshape(shape)
    array.copy_to_device(values)
    return array


def small_rows_module(values_per_thread: int, row_threads: int, split_stage_rows: int = 0,
                      short_rows: int = 0):
    """The softmax module with launch constants small enough that a 50-value row takes
    the registers variant (2 x 32) or the streaming one (1 x 32) on the simulator; with
    ``split_stage_rows`` above the call's rows, a row too long for registers takes the
    split plan (codegen/split_stages.py) instead of the streaming kernel."""
    source = mlfuse.compile_source(SOFTMAX, "softmax.fuse").source
    source = re.sub(r"^VALUES_PER_THREAD = \d+", f"VALUES_PER_THREAD = {values_per_thread}",
                    source, flags=re.M)
    source = re.sub(r"^REGISTER_ROW_THREADS = \d+", f"REGISTER_ROW_THREADS = {row_threads}",
                    source, flags=re.M)
    source = re.sub(r"^SPLIT_STAGE_ROWS = \d+", f"SPLIT_STAGE_ROWS = {split_stage_rows}",
                    source, flags=re.M)
    if short_rows == 0:  # no short-row plan (codegen/short_rows.py): a block per row
        source = re.sub(r"^SHORT_ROW_(VALUES|SCALARS) = \d+", r"SHORT_ROW_\1 = 0", source,
                        flags=re.M)
    return load_source(source, "softmax_rows")


# -- plans are what the host function does -------------------------------------------

class _Spy:
    """A kernel that notes each launch (its configuration and arguments) and does it."""

    def __init__(self, name, kernel, seen):
        self.name, self.kernel, self.seen, self.py_func = name, kernel, seen, kernel.py_func

    def __getitem__(self, config):
        def launch(*args):
            self.seen.append((self.name, config, args))
            return self.kernel[config](*args)
        return launch


def _spied_launches(python_module, host_name, args):
    """(name, grid, block, arguments) of each launch of an ordinary call of the host
    function, arrays described as ("param", i) or ("buffer", shape, dtype)."""
    seen = []
    originals = {n: k for n, k in vars(python_module).items()
                 if hasattr(k, "py_func") and not k._device}  # the simulator's kernels
    try:
        for name, kernel in originals.items():
            setattr(python_module, name, _Spy(name, kernel, seen))
        getattr(python_module, host_name)(*args)
    finally:
        for name, kernel in originals.items():
            setattr(python_module, name, kernel)

    def describe(value):
        for i, a in enumerate(args):
            if value is a:
                return ("param", i)
        return ("buffer", value.shape, value.dtype) if hasattr(value, "shape") else value
    return [(name, _dim3(config[0]), _dim3(config[1]), [describe(v) for v in values])
            for name, config, values in seen]


def _plan_launches(plan):
    def describe(source):
        if source.kind == "buffer":
            b = plan.buffers[source.value]
            return ("buffer", b.shape, b.dtype)
        return ("param", source.value) if source.kind == "param" else source.value
    return [(la.kernel, la.grid, la.block, [describe(s) for s in la.args]) for la in plan.launches]


@pytest.mark.parametrize("case,columns", [("pointwise", 0), ("unfused", 0), ("registers", 50),
                                          ("registers", 20), ("held", 70), ("split", 70),
                                          ("short", 70), ("two", 0)])
def test_a_plan_launches_what_the_host_function_launches(case, columns):
    """Launches, grids, blocks and arguments as the host function makes them; the row
    constants are small so that 50 values fit in registers (2 x 32) and 70 do not (held
    in registers and shared memory a value at a time: its dynamic shared bytes; or, with
    the short-row plan on, a group of lanes per row)."""
    if case in ("registers", "held", "split", "short"):
        python_module = small_rows_module(2, 32, split_stage_rows=8 if case == "split" else 0,
                                          short_rows=int(case == "short"))
        name, args = "softmax", [device(3, columns)]
    elif case == "two":
        python_module = mlfuse.compile_source(TWO_RESULTS, "two.fuse", fuse=False).python_module
        name, args = "two", [device(3, 40), device(40, seed=1)]
    else:
        python_module = mlfuse.compile_source(CHAIN, "chain.fuse",
                                              fuse=case == "pointwise").python_module
        name, args = "chain", [device(300), device(300, seed=1)]
    host = python_module.ENTRY_POINTS[name]
    expected = _spied_launches(python_module, host.__name__, args)
    results, trace = trace_call(host, args, 2 if case == "two" else 1)
    assert trace.refused is None and trace.plan is not None
    assert _plan_launches(trace.plan) == expected
    kernels = [la.kernel for la in trace.plan.launches]
    assert len(kernels) == {"pointwise": 1, "unfused": 5, "registers": 1, "held": 1,
                            "split": 3, "short": 1, "two": 2}[case]  # two: y = x * b, then sum(y)
    if case == "split":  # max's partials, then the sum's, then the epilogue over each chunk
        assert kernels == ["softmax_0_stage0", "softmax_0_stage1", "softmax_0_epilogue"]
    if case in ("registers", "held"):
        assert kernels[0].startswith("softmax_0_shared_scalar" if case == "held" else "softmax_0")
        assert ("shared" in kernels[0]) == (case == "held")
    if case == "short":  # rows of 70: a group of lanes per row, the module's own limits
        assert kernels == ["softmax_0_short"]
    if case == "two":
        assert [s.kind for s in trace.plan.results] == ["buffer", "buffer"]


MATMUL = ("func mm(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
          "    return relu(matmul(x, w) + b)\n}\n")


def test_a_plan_holds_the_tiled_launch_of_a_contraction():
    """A contraction's kernel is one of a _TiledKernel's configurations: the plan must
    launch it too (a plan without it would return an unwritten result)."""
    module = mlfuse.compile_source(MATMUL, "mm.fuse")
    python_module, host = module.python_module, module.mm.host
    args = [device(20, 12), device(12, 24, seed=1), device(24, seed=2)]
    results, trace = trace_call(host, args, 1)
    assert trace.refused is None
    tiles, grid, threads = python_module._contraction_geometry(python_module.mm_0, 20, 24, 12, 1)
    launch, *finish = trace.plan.launches  # a K split's second kernel adds the shares
    assert len(finish) == (0 if tiles[2] == 1 else 1)
    assert launch.kernel.startswith("mm_0[")
    assert (launch.grid, launch.block) == (_dim3(grid), _dim3(threads))
    x, w, b = (a.copy_to_host() for a in args)
    assert_close(results.copy_to_host(), np.maximum(x @ w + b, 0), 3, "matmul", reduced=12)


def test_a_plan_gives_a_tensor_core_launch_its_dynamic_shared_memory():
    """The stages of a tensor-core kernel are dynamic shared memory: the recorded
    launch carries their bytes, which the driver launch then gives."""
    source = MATMUL.replace("f32", "f16")
    module = mlfuse.compile_source(source, "mm16.fuse")
    python_module, host = module.python_module, module.mm.host
    args = [cuda.to_device(a.copy_to_host().astype(np.float16))
            for a in (device(20, 16), device(16, 24, seed=1), device(24, seed=2))]
    results, trace = trace_call(host, args, 1)
    assert trace.refused is None
    (launch,) = trace.plan.launches
    (config,) = python_module.mm_0.kernels
    assert launch.shared_bytes == python_module.mm_0.shared_bytes(config) > 0
    assert launch.shared_bytes == python_module.mm_0[config].dynamic_shared


def test_a_plan_holds_both_kernels_and_the_workspace_of_a_split_k_launch():
    module = mlfuse.compile_source(MATMUL, "mm.fuse")
    python_module, host = module.python_module, module.mm.host
    python_module.mm_0.tuned[(3, 24, 40, 1)] = (16, 16, 3)  # K in 3 shares
    args = [device(3, 40), device(40, 24, seed=1), device(24, seed=2)]
    results, trace = trace_call(host, args, 1)
    assert trace.refused is None
    tiled, finish = trace.plan.launches
    assert tiled.kernel.startswith("mm_0[") and tiled.grid[1] == 3
    assert finish.kernel == "mm_0_finish"
    assert [b.shape for b in trace.plan.buffers] == [(3, 24), (3, 72)]  # result, partials
    assert finish.args[-2:] == (Source("buffer", 1), Source("constant", 3))
    x, w, b = (a.copy_to_host() for a in args)
    assert_close(results.copy_to_host(), np.maximum(x @ w + b, 0), 3, "split", reduced=40)


def test_an_empty_space_plans_no_launch():
    module = mlfuse.compile_source(CHAIN, "chain.fuse")
    x = cuda.device_array(0, np.float32)
    results, trace = trace_call(module.chain.host, [x, x], 1)
    assert trace.plan.launches == () and results.shape == (0,)


def test_a_host_function_that_uses_other_cuda_calls_gives_no_plan():
    module = mlfuse.compile_source(CHAIN, "chain.fuse")
    host = module.chain.host
    host.__globals__["_extra"] = lambda n: cuda.to_device(np.zeros(n, np.float32))
    code = "def wrapped(x, b):\n    return chain(_extra(x.shape[0]), b)\n"
    exec(code, host.__globals__)
    results, trace = trace_call(host.__globals__["wrapped"], [device(10), device(10)], 1)
    assert trace.plan is None and "neither a parameter nor a buffer" in trace.refused
    assert results.shape == (10,)


def test_a_result_no_recorded_launch_wrote_gives_no_plan():
    """A kernel swapped for an object the record does not stand in for (a script
    wrapping the module's kernels to see which ran) launches unseen: its plan would
    replay nothing and return the result unwritten, so none is made."""
    module = mlfuse.compile_source(CHAIN, "chain.fuse")
    host = module.chain.host
    kernels = {k: v for k, v in host.__globals__.items() if k.startswith("chain_0")
               and hasattr(v, "py_func")}

    class Wrapper:  # launches the real kernel, as the wrapping scripts do
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, config):
            return self.kernel[config]
    try:
        host.__globals__.update({k: Wrapper(v) for k, v in kernels.items()})
        x = device(10)
        results, trace = trace_call(host, [x, x], 1)
    finally:
        host.__globals__.update(kernels)
    assert trace.plan is None and "written by no recorded launch" in trace.refused
    assert results.shape == (10,)


# -- a function with plans checks arguments as one without -----------------------------

class Replay:
    """A plan run through the kernels' own launches: what DriverCall does, with the
    simulator's dispatchers in place of the driver."""

    def __init__(self, trace, kinds, args):
        self.plan, self.calls = trace.plan, 0

    def __call__(self, args, pointers):
        self.calls += 1
        objects = list(args) + [cuda.device_array(b.shape, dtype=b.dtype)
                                for b in self.plan.buffers]

        def value(source):
            if source.kind == "constant":
                return source.value
            return objects[source.value + (len(args) if source.kind == "buffer" else 0)]
        for la in self.plan.launches:
            la.dispatcher[la.grid, la.block](*[value(s) for s in la.args])
        results = [value(s) for s in self.plan.results]
        return results[0] if len(results) == 1 else tuple(results)


def planned(function: CompiledFunction, plans: list) -> CompiledFunction:
    def bind(trace, kinds, args):
        plans.append(Replay(trace, kinds, args))
        return plans[-1]
    return CompiledFunction(function.signature, function.host,
                            FastPath(function.signature, bind))


def test_a_second_call_of_the_same_shapes_replays_the_plan_without_the_checks(monkeypatch):
    module = mlfuse.compile_source(CHAIN, "chain.fuse", fuse=False)
    plans = []
    chain = planned(module.chain, plans)
    x, b = device(300), device(300, seed=1)
    first = chain(x, b).copy_to_host()
    assert len(plans) == 1 and plans[0].calls == 0
    checked = []
    monkeypatch.setattr(api, "bind_arguments", lambda *a: checked.append(a))
    x2, b2 = device(300, seed=2), device(300, seed=3)
    second = chain(x2, b2).copy_to_host()
    assert plans[0].calls == 1 and not checked
    xs, bs = x.copy_to_host(), b.copy_to_host()
    assert_close(first, np.maximum(xs * 2 + bs, 0) * 0.5 + xs, n_ops=5)
    xs, bs = x2.copy_to_host(), b2.copy_to_host()
    assert_close(second, np.maximum(xs * 2 + bs, 0) * 0.5 + xs, n_ops=5)


def test_plans_follow_shapes_and_results_match_the_normal_path():
    module = mlfuse.compile_source(TWO_RESULTS, "two.fuse")
    plans = []
    two = planned(module.two, plans)
    for rows in (3, 5, 3):
        x, b = device(rows, 40, seed=rows), device(40, seed=7)
        got = [r.copy_to_host() for r in two(x, b)]
        want = [r.copy_to_host() for r in module.two(x, b)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    assert len(plans) == 2 and [p.calls for p in plans] == [1, 0]


def test_an_argument_aligned_otherwise_gets_a_plan_of_its_own():
    module = mlfuse.compile_source(CHAIN, "chain.fuse")
    plans = []
    chain = planned(module.chain, plans)
    b = device(100, seed=1)
    for offset in (0, 1, 0, 1, 4, 64):  # 64 floats: 256 bytes, aligned as 0
        x = device(100, offset=offset)
        np.testing.assert_array_equal(chain(x, b).copy_to_host(), module.chain(x, b).copy_to_host())
    assert len(plans) == 3 and [p.calls for p in plans] == [2, 1, 0]


def _bad_calls():
    """Calls that must fail, many of them with the shapes of the warm-up call."""
    x, b = device(6, 16), device(16, seed=1)
    wide = device(6, 32, seed=2)
    return {
        "dtype": (cuda.to_device(np.ones((6, 16), np.float64)), b),
        "non-contiguous view of the same shape": (wide[:, ::2], b),
        "count": (x,),
        "rank": (device(6), b),
        "dim": (x, device(15)),
        "host and device": (np.ones((6, 16), np.float32), b),
        "scalar": (1.0, b),
        "list": ([1.0], b),
    }


def test_a_function_with_plans_raises_the_same_errors_as_one_without():
    module = mlfuse.compile_source(TWO_RESULTS, "two.fuse")
    plans = []
    two = planned(module.two, plans)
    two(device(6, 16), device(16, seed=1))  # the plan for these shapes
    two(device(6, 16), device(16, seed=1))
    assert len(plans) == 1 and plans[0].calls == 1
    for what, args in _bad_calls().items():
        with pytest.raises(ArgumentError) as plain:
            module.two(*args)
        with pytest.raises(ArgumentError) as fast:
            two(*args)
        assert str(fast.value) == str(plain.value), what
    assert plans[0].calls == 1


def test_host_arrays_and_scalars_take_the_normal_path_and_leave_no_plan():
    module = compile_ir(parse_ir("""\
func @scale(%a: buf<f32[]>, %x: buf<f32[N]>) -> (buf<f32[N]>) {
  %t = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i: index) {
    %av = loops.load %a : f32
    %xv = loops.load %x, %i : f32
    %p = arith.mul %av, %xv : f32
    loops.store %p, %t, %i
  }
  return %t
}
"""))
    plans = []
    scale = planned(module.scale, plans)
    x = np.arange(5, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(scale(2.0, x), 2 * x)
        np.testing.assert_array_equal(scale(np.float32(2.0), cuda.to_device(x)).copy_to_host(),
                                      2 * x)
    assert not plans and not scale.fast_path.plans


# -- parameters, launches, buffers ---------------------------------------------------

_PACKING = """
import ctypes, numpy as np
from cuda.bindings import driver as cu
from numba.cuda import types
from numba.cuda.dispatcher import _Kernel
from numba.cuda.cudadrv.devicearray import DeviceNDArray
from numba.cuda.cudadrv.driver import MemoryPointer
from mlfuse.runtime.cuda_driver import pack_arguments, Unpackable

class Stub:  # the state _Kernel._prepare_args reads
    extensions = []
prepare = _Kernel._prepare_args.__get__(Stub())
address = 0x7f0000001000
memory = MemoryPointer(None, cu.CUdeviceptr(address), 4 * 6 * 5)
x = DeviceNDArray((6, 5), (20, 4), np.float32, gpu_data=memory)
y = DeviceNDArray((30,), (4,), np.float32, gpu_data=memory)
f32_2d, f32_1d = types.Array(types.float32, 2, "C"), types.Array(types.float32, 1, "C")
words, slots = pack_arguments(prepare, (f32_2d, types.int64, f32_1d, types.int64),
                              (x, 6, y, -1))
print(words, slots)
assert words == [0, 0, 30, 4, address, 6, 5, 20, 4, 6, 0, 0, 30, 4, address, 30, 4,
                 2**64 - 1], words
assert slots == [(0, 4), (2, 14)], slots
def wrong(ty, value, stream, retr, out):
    out.extend([0, 0, 30, 4, 12345, 6, 5, 20, 4])
try:
    pack_arguments(wrong, (f32_2d,), (x,))
    raise SystemExit("a pointer Numba does not put at word 4 went unnoticed")
except Unpackable:
    pass
print("ok")
"""


def test_packed_parameters_are_numbas_own_with_the_data_pointer_at_word_4():
    """Numba's _prepare_args (the real one; the simulator has none, so in a plain
    process) packed for an f32[6, 5], an int64, an f32[30] and a negative int64."""
    _run_plain(_PACKING)


def _run_plain(code: str) -> None:
    """Run ``code`` in a Python without the simulator (Numba's real driver module, no GPU
    needed for what it does); it prints "ok" last."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


def test_the_ctypes_launch_hands_the_driver_the_patched_words():
    import ctypes
    from mlfuse.runtime.cuda_driver import CtypesLaunch, ParamBlock
    received = []
    prototype = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7,
                                 *[ctypes.c_void_p] * 3)

    def fake_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        words = [ctypes.cast(pointers[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(3)]
        received.append((function, (gx, gy, gz), (bx, by, bz), shared, stream, words, extra))
        return 0
    driver_function = prototype(fake_launch)
    params = ParamBlock([7, 0, 1 << 40])
    launch = CtypesLaunch("k", 0xABC, (4, 1, 1), (512, 1, 1), 0, params, launch=driver_function)
    params.words[1] = 0x7F00_0000_1000
    launch()
    assert received == [(0xABC, (4, 1, 1), (512, 1, 1), 0, None, [7, 0x7F00_0000_1000, 1 << 40],
                         None)]
    failing = CtypesLaunch("k", 1, (1, 1, 1), (1, 1, 1), 0, params,
                           launch=prototype(lambda *a: 1))  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(MlfuseError, match="launching k failed: CUDA_ERROR_INVALID_VALUE"):
        failing()


_LENDING_SETUP = """
import gc, weakref
from numba.cuda.cudadrv import driver as drv
from mlfuse.runtime.memory import _manager_class

class Context:
    pass
context = Context()
manager = _manager_class()(context=context)
address = drv.binding.CUdeviceptr(0x1000)
"""

_LENDING = _LENDING_SETUP + """
manager.cached[1024].append(address)
lent = manager.memalloc(1000)
assert manager.hits == 1 and not manager.cached[1024] and int(lent.handle) == 0x1000
view = lent.view(100)  # a view keeps its owner, and so the address, lent
del lent
assert not manager.cached[1024]
del view
assert manager.cached[1024] == [address]
print("ok")
"""

# A lent pointer that dies in a reference cycle (the cyclic collector runs weakref
# callbacks before __del__): its address comes back and can be lent again. With
# Numba's owned pointers in the free lists this lent freed memory (a ReferenceError on
# the GPU during the models benchmark).
_LENDING_IN_A_CYCLE = _LENDING_SETUP + """
manager.cached[1024].append(address)
class Holder:
    pass
holder = Holder()
holder.memory, holder.me = manager.memalloc(1000), holder
del holder
gc.collect()
assert manager.cached[1024] == [address]
again = manager.memalloc(1000)
assert int(again.handle) == 0x1000 and manager.hits == 2
print("ok")
"""

# A miss allocates; out of memory gives the cache back (each cached address freed) and
# retries once.
_OUT_OF_MEMORY = _LENDING_SETUP + """
freed, tries = [], []
def allocate(nbytes):
    tries.append(nbytes)
    if len(tries) == 1:
        raise drv.CudaAPIError(2, "out of memory")
    return drv.binding.CUdeviceptr(0x9000)
manager._allocate, manager._free_device = allocate, freed.append
manager.cached[512].append(address)
lent = manager.memalloc(2000)
assert tries == [2048, 2048] and freed == [address] and int(lent.handle) == 0x9000
assert manager.misses == 1 and not manager.cached[512]
print("ok")
"""


def test_a_cached_block_comes_back_when_the_last_array_on_it_dies():
    _run_plain(_LENDING)


def test_an_array_collected_in_a_reference_cycle_returns_a_live_address():
    _run_plain(_LENDING_IN_A_CYCLE)


def test_out_of_memory_frees_the_cache_and_retries_once():
    _run_plain(_OUT_OF_MEMORY)


def test_numba_accepts_the_caching_allocator():
    """set_memory_manager first builds the plugin with context=None to check it (a
    crash there once broke every compiled call on the GPU)."""
    _run_plain("from numba import cuda\nfrom mlfuse.runtime.memory import _manager_class\n"
               "cuda.set_memory_manager(_manager_class())\nprint('ok')\n")


# -- DriverCall, with the simulator's kernels behind a stand-in driver ----------------

class _FakeDevice:
    """Data pointers of simulator arrays (their NumPy buffers' addresses), and back."""

    def __init__(self):
        self.arrays = {}
        self.launches = 0

    def pointer(self, array) -> int:
        address = array._ary.ctypes.data
        self.arrays[address] = array
        return address

    def allocator(self, kind, buffer, like):
        def allocate():
            array = cuda.device_array(buffer.shape, dtype=buffer.dtype)
            return array, self.pointer(array)
        return allocate


class _FakeKernel:
    """A compiled kernel as DriverCall reads it, with Numba's parameter layout."""

    def __init__(self, dispatcher, values, device):
        from numba.cuda import types
        self.dispatcher, self.device = dispatcher, device
        self.argument_types = tuple(v._numba_type_ if hasattr(v, "_ary") else types.int64
                                    for v in values)

    def _prepare_args(self, ty, value, stream, retr, out):
        import ctypes
        if hasattr(value, "_ary"):
            out += [0, 0, value.size, value.dtype.itemsize, self.device.pointer(value),
                    *value.shape, *value.strides]
        else:
            out.append(ctypes.c_int64(value))


class _FakeLaunch:
    """cuLaunchKernel as the driver does it: parameters read from the packed words."""

    def __init__(self, name, kernel, grid, block, shared_bytes, params):
        self.name, self.kernel, self.grid, self.block, self.params = name, kernel, grid, block, \
            params

    def __call__(self):
        words, values, at = list(self.params.words), [], 0
        for ty in self.kernel.argument_types:
            if hasattr(ty, "ndim"):
                values.append(self.kernel.device.arrays[words[at + 4]])
                at += 5 + 2 * ty.ndim
            else:
                values.append(words[at])
                at += 1
        self.kernel.device.launches += 1
        self.kernel.dispatcher[self.grid, self.block](*values)


@pytest.mark.parametrize("source,fuse,shapes", [(CHAIN, False, [(300,), (300,)]),
                                                (TWO_RESULTS, True, [(4, 40), (40,)])])
def test_driver_calls_write_each_pointer_where_its_kernel_reads_it(monkeypatch, source, fuse,
                                                                   shapes):
    import mlfuse.runtime.cuda_driver
    import mlfuse.runtime.launcher as launcher
    from mlfuse.runtime.launcher import DriverCall
    fake = _FakeDevice()
    monkeypatch.setattr(launcher, "READERS", {"numba": lambda a: (
        (type(a), a.dtype, a.shape, a.strides), fake.pointer(a))})
    monkeypatch.setattr(launcher, "allocator", fake.allocator)
    monkeypatch.setattr(launcher, "_overload", lambda d, values: _FakeKernel(d, values, fake))
    monkeypatch.setattr(launcher, "function_handle", lambda kernel: kernel)
    monkeypatch.setattr(mlfuse.runtime.cuda_driver, "device_pointer", fake.pointer)
    module = mlfuse.compile_source(source, "f.fuse", fuse=fuse)
    function = next(iter(module.functions.values()))
    bound = []
    fast = CompiledFunction(function.signature, function.host, FastPath(
        function.signature, lambda *a: bound.append(DriverCall(*a, launch_class=_FakeLaunch))
        or bound[-1]))
    for seed in (1, 2, 3):
        args = [device(*s, seed=seed + 10 * i) for i, s in enumerate(shapes)]
        got, want = fast(*args), function(*args)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.copy_to_host(), w.copy_to_host())
    assert len(bound) == 1 and fake.launches == 2 * len(bound[0]._launches)  # calls 2 and 3
