"""The runtime and the Python API: argument checks before any launch, host and device
arrays in and out, scalar parameters, the source cache and linecache registration."""
import linecache
import subprocess
import sys
import traceback

import numpy as np
import pytest
from numba import cuda

import mlfuse
from mlfuse.api import compile_ir
from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.dialects import parse_ir
from mlfuse.runtime.loader import default_target, load_source

PROGRAM = """\
func @axpy(%a: buf<f32[]>, %x: buf<f32[N, 3]>, %y: buf<f32[N, 3]>) -> (buf<f32[N, 3]>, buf<f32[N, 3]>) {
  %t = loops.alloc : buf<f32[N, 3]>
  %u = loops.alloc : buf<f32[N, 3]>
  loops.parallel {extents = [N, 3]} (%i: index, %j: index) {
    %av = loops.load %a : f32
    %xv = loops.load %x, %i, %j : f32
    %yv = loops.load %y, %i, %j : f32
    %p = arith.mul %av, %xv : f32
    %s = arith.add %p, %yv : f32
    loops.store %s, %t, %i, %j
    %d = arith.sub %xv, %yv : f32
    loops.store %d, %u, %i, %j
  }
  return %t, %u
}
func @count(%n: buf<i32[]>, %x: buf<f32[4]>) -> (buf<f32[4]>) {
  %t = loops.alloc : buf<f32[4]>
  loops.parallel {extents = [4]} (%i: index) {
    %nv = loops.load %n : i32
    %f = arith.cast %nv {dtype = "f32"} : f32
    %xv = loops.load %x, %i : f32
    %s = arith.add %f, %xv : f32
    loops.store %s, %t, %i
  }
  return %t
}
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(path))
    return path


@pytest.fixture
def module():
    return compile_ir(parse_ir(PROGRAM), name="program")


@pytest.fixture
def launches(module, monkeypatch):
    """Calls reaching each host function (where kernels are launched)."""
    calls = []
    for f in module.functions.values():
        host = f.host
        monkeypatch.setattr(f, "host", lambda *a, _host=host: calls.append(a) or _host(*a))
    return calls


def arrays(n=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal((n, 3)).astype(np.float32)


# -- results -------------------------------------------------------------------------

def test_numpy_in_gives_numpy_out_and_several_results_a_tuple(module):
    x, y = arrays()
    t, u = module.axpy(np.float32(2.0), x, y)
    assert isinstance(t, np.ndarray) and t.dtype == np.float32
    np.testing.assert_allclose(t, 2 * x + y, rtol=4 * np.finfo(np.float32).eps)
    np.testing.assert_array_equal(u, x - y)


def test_numba_device_arrays_in_give_device_arrays_out(module):
    x, y = arrays()
    t, u = module["axpy"](1.5, cuda.to_device(x), cuda.to_device(y))
    assert getattr(t, "__cuda_ndarray__", False) and not isinstance(t, np.ndarray)
    np.testing.assert_array_equal(u.copy_to_host(), x - y)


@pytest.mark.parametrize("scalar", [3, 3.0, np.float32(3.0), np.array(3.0, np.float32)])
def test_float_scalar_parameter_takes_python_and_numpy_scalars(module, scalar):
    x, y = arrays()
    t, _ = module.axpy(scalar, x, y)
    np.testing.assert_allclose(t, 3 * x + y, rtol=4 * np.finfo(np.float32).eps)


def test_int_scalar_parameter_takes_a_python_int(module):
    np.testing.assert_array_equal(module.count(5, np.arange(4, dtype=np.float32)),
                                  np.arange(5, 9, dtype=np.float32))


def test_unknown_function_is_named_in_the_error(module):
    with pytest.raises(AttributeError, match="no function 'nope' \\(have: axpy, count\\)"):
        module.nope
    with pytest.raises(KeyError, match="no function 'nope'"):
        module["nope"]


# -- argument errors: raised before any launch ---------------------------------------------

def _bad_calls():
    x, y = arrays()
    return {
        "count": ((2.0, x), "@axpy: takes 3 argument\\(s\\) \\(a, x, y\\), got 2"),
        "rank": ((2.0, x[0], y), "parameter 'x' of @axpy: expects rank 2 \\(f32\\[N, 3\\]\\), "
                                 "got an array of rank 1"),
        "dtype": ((2.0, x, y.astype(np.float64)), "parameter 'y' of @axpy: expects dtype float32 "
                                                   "\\(f32\\), got float64; arguments are never cast"),
        "concrete dim": ((2.0, x[:, :2].copy(), y), "parameter 'x' of @axpy: dim 1 must be 3"),
        "symbolic dim": ((2.0, x, np.vstack([y, y])), "@axpy: dim N is 4 from x but 8 from y"),
        "non-contiguous": ((2.0, np.asfortranarray(x), y),
                           "parameter 'x' of @axpy: must be C-contiguous"),
        "host/device mix": ((2.0, x, cuda.to_device(y)),
                            "parameter 'x' is a NumPy array but 'y' is a device array"),
        "scalar dtype": ((np.float64(2.0), x, y), "parameter 'a' of @axpy: expects f32 \\(float32\\), "
                                                  "got a float64 scalar"),
        "scalar for array": ((2.0, 1.0, y), "parameter 'x' of @axpy: expects an array of shape "
                                            "f32\\[N, 3\\], got a scalar"),
        "not an array": ((2.0, x.tolist(), y), "parameter 'x' of @axpy: expects a NumPy or device "
                                               "array, got list"),
    }


@pytest.mark.parametrize("case", list(_bad_calls()))
def test_bad_arguments_raise_one_argument_error_before_any_launch(module, launches, case):
    args, message = _bad_calls()[case]
    with pytest.raises(ArgumentError, match=message) as info:
        module.axpy(*args)
    assert isinstance(info.value, MlfuseError) and isinstance(info.value, TypeError)
    assert launches == []


@pytest.mark.parametrize("value", [2.5, True, 2**31])
def test_int_scalar_parameter_refuses_floats_bools_and_out_of_range(module, launches, value):
    with pytest.raises(ArgumentError, match="parameter 'n' of @count: expects i32"):
        module.count(value, np.zeros(4, np.float32))
    assert launches == []


# -- targets, loading, the cache -------------------------------------------------------------

def test_simulator_is_the_default_target_and_cuda_is_refused_under_it():
    assert default_target() == "simulator"
    with pytest.raises(MlfuseError, match="target 'cuda' cannot run under NUMBA_ENABLE_CUDASIM"):
        compile_ir(parse_ir(PROGRAM), target="cuda")


def test_compiled_module_exposes_source_ir_and_target(module):
    assert module.target == "simulator"
    assert "def axpy(a, x, y):" in module.source
    assert [f.sym_name for f in module.ir.funcs] == ["axpy", "count"]
    assert {"axpy", "count"} <= set(dir(module))


def test_second_compile_reuses_the_cached_file(cache_dir):
    first = compile_ir(parse_ir(PROGRAM), name="program")
    files = list(cache_dir.iterdir())
    assert [f.name for f in files] == [f.name for f in cache_dir.glob("program_*.py")]
    stamp = files[0].stat().st_mtime_ns
    second = compile_ir(parse_ir(PROGRAM), name="program")
    assert list(cache_dir.iterdir()) == files and files[0].stat().st_mtime_ns == stamp
    assert files[0].read_text() == first.source == second.source


def test_generated_lines_show_in_linecache_and_tracebacks():
    source = "def f(x):\n    return x.shape[0]  # generated line\n"
    module = load_source(source, "tiny")
    assert linecache.getline(module.__file__, 2) == "    return x.shape[0]  # generated line\n"
    with pytest.raises(AttributeError) as info:
        module.f(None)
    text = "".join(traceback.format_exception(info.value))
    assert "return x.shape[0]  # generated line" in text and module.__file__ in text


def test_load_source_works_with_an_unwritable_cache(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(blocker / "sub"))  # a dir under a file
    module = load_source("VALUE = 41 + 1\n", "tiny")
    assert module.VALUE == 42 and linecache.getline(module.__file__, 1) == "VALUE = 41 + 1\n"


def test_import_mlfuse_is_lazy():
    script = ("import sys, mlfuse\n"
              "assert 'numba' not in sys.modules and 'lark' not in sys.modules\n"
              "import mlfuse.api\n"
              "assert mlfuse.compile_source is mlfuse.api.compile_source\n"
              "assert mlfuse.compile_file is mlfuse.api.compile_file\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_compile_file_reads_errors_as_mlfuse_errors(tmp_path):
    with pytest.raises(MlfuseError, match="cannot read .*missing.fuse"):
        mlfuse.compile_file(tmp_path / "missing.fuse")


def test_compile_file_reports_bytes_that_are_not_utf8_as_an_mlfuse_error(tmp_path):
    junk = tmp_path / "junk.fuse"
    junk.write_bytes(b"func f(x: f32[N]) -> f32[N] {\n  return x \xff\n}\n")
    with pytest.raises(MlfuseError, match="junk.fuse:2:12: error: byte 0xff is not UTF-8"):
        mlfuse.compile_file(junk)


def test_arguments_may_be_given_by_parameter_name():
    m = mlfuse.compile_source("func f(x: f32[N], b: f32[N]) -> f32[N] {\n    return x - b\n}\n",
                              target="simulator")
    x, b = np.arange(5, dtype=np.float32), np.ones(5, np.float32)
    np.testing.assert_array_equal(m.f(x, b=b), x - b)
    np.testing.assert_array_equal(m.f(b=b, x=x), x - b)
    with pytest.raises(ArgumentError, match="has no parameter 'y'"):
        m.f(x, y=b)
    with pytest.raises(ArgumentError, match="'x' given by position and by name"):
        m.f(x, x=x)
    with pytest.raises(ArgumentError, match="missing argument"):
        m.f(x=x)
