"""Vector variants (VECTOR_WIDTH values per load or store): the host launches one only
for whole, aligned vectors and the scalar kernel otherwise; both agree with NumPy
under the simulator, whose stand-in for a vector access faults on a misaligned
address as the GPU does, so a wrong choice by the host cannot pass unseen."""
import ast
import dataclasses
import glob
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlfuse.codegen import generate
from mlfuse.dialects import parse_ir
from mlfuse.runtime.loader import load_source
from mlfuse.hardware import get_target

from helpers import assert_close, record_launches
from test_codegen import BROADCAST, CHAIN, NORM, SOFTMAX, _kernel_text, rng_array, row_reduce

ROOT = Path(__file__).resolve().parent.parent
# two vectors per pointwise thread, so the vector loop runs more than once
HW = dataclasses.replace(get_target(), pointwise_per_thread=8)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def kernel_names(source: str) -> list[str]:
    return re.findall(r"^@cuda\.jit\ndef (\w+)\(", source, flags=re.M)


def launch(text: str, *arrays, hw=HW):
    """The program's first function on device copies of ``arrays`` (or device arrays
    as given): its result(s) on the host, and the kernels it launched."""
    from numba import cuda
    source = generate(parse_ir(text), "simulator", hw)
    module = load_source(source, "vector_test")
    launched = record_launches(module, kernel_names(source))
    args = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    out = next(iter(module.ENTRY_POINTS.values()))(*args)
    got = tuple(o.copy_to_host() for o in out) if isinstance(out, tuple) else out.copy_to_host()
    return got, launched


def offset_by_one(array: np.ndarray):
    """A device array holding ``array`` one element past a 16-byte boundary."""
    from numba import cuda
    flat = np.concatenate([np.zeros(1, array.dtype), array.ravel()])
    return cuda.to_device(flat)[1:].reshape(array.shape)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# -- pointwise -----------------------------------------------------------------------

@pytest.mark.parametrize("n", [4, 1032])
def test_chain_takes_the_vector_kernel_for_whole_aligned_vectors(n):
    x, b = rng_array(n, seed=1), rng_array(n, seed=2)
    got, launched = launch(CHAIN, x, b)
    assert_close(got, np.maximum(x * np.float32(2) + b, np.float32(0)), n_ops=3)
    assert launched == ["chain_0_vector"]


@pytest.mark.parametrize("n", [1, 37, 1030])
def test_chain_off_the_vector_width_takes_the_scalar_kernel(n):
    x, b = rng_array(n, seed=1), rng_array(n, seed=2)
    got, launched = launch(CHAIN, x, b)
    assert_close(got, np.maximum(x * np.float32(2) + b, np.float32(0)), n_ops=3)
    assert launched == ["chain_0"]


def test_chain_with_a_misaligned_input_takes_the_scalar_kernel():
    x, b = rng_array(64, seed=1), rng_array(64, seed=2)
    got, launched = launch(CHAIN, offset_by_one(x), b)
    assert_close(got, np.maximum(x * np.float32(2) + b, np.float32(0)), n_ops=3)
    assert launched == ["chain_0"]


def test_the_simulated_vector_access_faults_on_a_misaligned_address_like_the_gpu():
    from numba import cuda
    module = load_source(generate(parse_ir(CHAIN), "simulator", HW), "misaligned")
    x = offset_by_one(rng_array(8))
    out = cuda.device_array(8, np.float32)
    with pytest.raises(Exception, match="misaligned vector access"):
        module.chain_0_vector[1, 2](x, cuda.to_device(rng_array(8)), out, 8)


MIXED = """\
func @mix(%x: buf<f32[N, M]>, %y: buf<f32[N]>) -> (buf<f32[N, M]>, buf<f32[M, N]>) {
  %t = loops.alloc : buf<f32[N, M]>
  %u = loops.alloc : buf<f32[M, N]>
  loops.parallel {extents = [N, M]} (%i: index, %j: index) {
    %a = loops.load %x, %i, %j : f32
    %b = loops.load %y, %i : f32
    %s = arith.add %a, %b : f32
    loops.store %s, %t, %i, %j
    loops.store %a, %u, %j, %i
  }
  return %t, %u
}
"""


@pytest.mark.parametrize("m,kernel", [(8, "mix_0_vector"), (6, "mix_0")])
def test_two_dim_space_takes_vectors_only_where_they_stay_within_a_row(m, kernel):
    """x and t move as vectors along j; y[i] and the transposed store u[j, i] are not
    vector accesses and go value by value in the same kernel."""
    x, y = rng_array((5, m)), rng_array(5, seed=4)
    (t, u), launched = launch(MIXED, x, y)
    assert_close(t, x + y[:, None])
    np.testing.assert_array_equal(u, x.T)
    assert launched == [kernel]


def test_vector_accesses_are_the_last_axis_neighbours_and_the_rest_go_value_by_value():
    """Same-shape accesses (x, t) move as vectors at the flat index itself (lean
    addressing: no divmod, no multi-dimensional index); y[i] and the transposed u[j, i]
    go value by value, indexed by the unsigned loop indices."""
    kernel = _kernel_text(generate(parse_ir(MIXED), "simulator", HW), "mix_0_vector")
    assert "_load_vector(x_flat, (first,), x_vals, vec * VECTOR_WIDTH)" in kernel
    assert "y_vals[slot] = y[u0]" in kernel
    assert "_store_vector(t_flat, (first,), t_vals, vec * VECTOR_WIDTH)" in kernel
    assert re.search(r"u\[u1\w*_lane, u0\w*\] = a", kernel), kernel


def test_constant_innermost_extent_decides_the_vector_variant_when_generating():
    assert "def bias_0_vector(" in generate(parse_ir(BROADCAST), "simulator")
    six = BROADCAST.replace("4]", "6]").replace(", 4]", ", 6]")
    assert "_vector" not in generate(parse_ir(six), "simulator")
    x, y = rng_array((7, 4)), rng_array(4, seed=3)
    got, launched = launch(BROADCAST, x, y)
    assert_close(got, x + y)
    assert launched == ["bias_0_vector"]


# -- rows ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,kernel", [((3, 48), "softmax_0_vector"),
                                          ((3, 50), "softmax_0_peeled"),
                                          ((2, 4), "softmax_0_vector")])
def test_softmax_rows_take_the_vector_kernel_when_their_length_allows(shape, kernel):
    x = rng_array(shape)
    got, launched = launch(SOFTMAX, x)
    assert_close(got, softmax(x), n_ops=shape[1] + 4)
    assert launched == [kernel]


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # inf - inf, as in NumPy
def test_vector_softmax_propagates_nan_and_inf_like_numpy():
    x = rng_array((4, 40))
    x[0, 17] = np.nan   # a NaN anywhere makes the whole row NaN
    x[1, 39] = np.inf   # inf - inf in the last vector of the row
    x[2, 0] = -np.inf   # exp(-inf) = 0
    x[3, :] = -np.inf   # max = -inf: every value NaN
    with np.errstate(invalid="ignore"):
        want = softmax(x)
    got, launched = launch(SOFTMAX, x)
    assert_close(got, want, n_ops=44)
    assert np.isnan(got[0]).all() and np.isnan(got[3]).all() and not np.isnan(got[2]).any()
    assert launched == ["softmax_0_vector"]


@pytest.mark.parametrize("combiner,init,numpy", [("max", "-inf", np.max), ("min", "inf", np.min)])
def test_vector_row_max_and_min_propagate_nan(combiner, init, numpy):
    x = rng_array((3, 40))
    x[0, 17] = np.nan
    x[2, 39] = np.nan
    got, launched = launch(row_reduce(combiner, init, "row"), x)
    assert_close(got, numpy(x, axis=1))
    assert np.isnan(got[0]) and np.isnan(got[2]) and not np.isnan(got[1])
    assert launched == ["reduce_0_vector"]


def test_vector_i32_row_sum_stays_exact():
    x = np.random.default_rng(0).integers(-1000, 1000, (3, 64)).astype(np.int32)
    got, launched = launch(row_reduce("add", "0", "row", "i32"), x)
    np.testing.assert_array_equal(got, x.sum(axis=1, dtype=np.int32))
    assert launched == ["reduce_0_vector"]


@pytest.mark.parametrize("misaligned, kernel", [(None, "norm_0_vector"), ("x", "norm_0"),
                                                ("g", "norm_0_peeled")])
def test_row_kernel_takes_the_scalar_kernel_when_any_vector_buffer_is_misaligned(misaligned,
                                                                                 kernel):
    """A misaligned row buffer (x): the scalar kernel; a misaligned parameter (g): the
    peeled kernel, which moves x and out as vectors and reads g a value at a time."""
    x, g = rng_array((4, 24)), rng_array(24, seed=5)
    args = [offset_by_one(a) if name == misaligned else a for name, a in (("x", x), ("g", g))]
    got, launched = launch(NORM, *args)
    assert_close(got, (x - x.sum(axis=1, keepdims=True)) * g, n_ops=26)
    assert launched == [kernel]


def test_vector_row_loads_each_vector_once_and_stores_it_whole():
    kernel = _kernel_text(generate(parse_ir(NORM), "simulator"), "norm_0_vector")
    assert kernel.count("_load_vector(x, (i, first), x_vals, vec * VECTOR_WIDTH)") == 1
    assert "_load_vector(g, (first,), g_vals, vec * VECTOR_WIDTH)" in kernel
    assert "_store_vector(out, (i, first), out_vals, vec * VECTOR_WIDTH)" in kernel
    assert not re.search(r"\b(x|g|out)\[", kernel)  # nothing value by value


# -- the generated module ------------------------------------------------------------

def test_cuda_module_defines_the_vector_intrinsics_and_imports_only_numba_and_llvmlite():
    source = generate(parse_ir(SOFTMAX), "cuda")
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split(".")[0])
    assert modules == {"math", "numpy", "numba", "llvmlite"}
    assert "_load_vector = _vector_intrinsic(_vector_load)" in source
    assert "_store_vector = _vector_intrinsic(_vector_store)" in source
    assert 'f"ld.global{LOAD_CACHE}.v{VECTOR_WIDTH}.{ptx}' in source
    assert 'f"st.global{STORE_CACHE}.v{VECTOR_WIDTH}.{ptx}' in source
    assert "llvmlite" not in generate(parse_ir(SOFTMAX), "simulator")


def test_vector_width_one_generates_no_vector_variant():
    hw = dataclasses.replace(get_target(), vector_width=1)
    for text in (CHAIN, SOFTMAX):
        source = generate(parse_ir(text), "cuda", hw)
        kernels = re.findall(r"^def (\w+)\(", source, flags=re.M)
        assert not [k for k in kernels if k.endswith("_vector")], kernels
        # llvmlite only for the flat views of row kernels' buffers (flat_rows.py)
        assert "llvmlite" not in source or "_flat(x)" in source


def test_points_per_thread_must_be_a_multiple_of_the_vector_width():
    with pytest.raises(ValueError, match="pointwise_per_thread must be a multiple"):
        dataclasses.replace(get_target(), pointwise_per_thread=6)


def _cuda_home() -> str | None:
    found = [os.environ.get("CUDA_HOME", "")] + sorted(glob.glob("/usr/local/cuda*"))
    return next((h for h in found if h and os.path.exists(f"{h}/bin/ptxas")), None)


def _ptx_rows(*programs) -> dict:
    """ptx_report's row of each kernel of ``programs``, by kernel name: PTX for the H100
    through Numba, registers and spills from ptxas, with no GPU."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(CUDA_HOME=_cuda_home(), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "mlfuse.tools.ptx_report", "--json",
                           *map(str, programs)], capture_output=True, text=True, env=env,
                          timeout=300)
    if done.returncode and "nvrtc" in done.stderr.lower():
        pytest.skip("Numba cannot find NVRTC here")
    assert done.returncode == 0, done.stderr[-2000:]
    return {r["kernel"]: r for r in map(json.loads, done.stdout.splitlines())}


@pytest.mark.skipif(_cuda_home() is None, reason="needs the CUDA toolkit (libNVVM, ptxas)")
def test_vector_kernels_compile_to_16_byte_accesses_without_spills():
    """For the H100, with no GPU: PTX through Numba, registers and spills from ptxas
    (mlfuse.tools.ptx_report)."""
    rows = _ptx_rows(ROOT / "examples" / "chain.fuse", ROOT / "examples" / "layernorm.fuse")
    chain = rows["chain_0_vector"]
    assert chain["global_v4_loads"] > 0 and chain["v4_stores"] > 0
    layernorm = rows["layernorm_0_vector"]
    assert layernorm["loads"] == 0 and layernorm["stores"] == 0  # all 16-byte accesses
    assert layernorm["global_v4_loads"] > 0 and layernorm["v4_stores"] > 0
    for r in rows.values():
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, r


# -- f16: vectors of 8 halves (16 bytes), computed in f32 -----------------------------
BIAS_GELU_F16 = """\
func @bias_gelu(%x: buf<f16[R, C]>, %b: buf<f16[C]>) -> (buf<f16[R, C]>) {
  %out = loops.alloc : buf<f16[R, C]>
  loops.parallel {extents = [R, C]} (%i: index, %j: index) {
    %xv = loops.load %x, %i, %j : f16
    %bv = loops.load %b, %j : f16
    %s = arith.add %xv, %bv : f16
    %g = arith.gelu %s : f16
    loops.store %g, %out, %i, %j
  }
  return %out
}
"""


@pytest.mark.parametrize("shape, kernel", [((3, 8), "bias_gelu_0_vector"),
                                           ((3, 6), "bias_gelu_0"), ((3, 4), "bias_gelu_0")])
def test_f16_pointwise_moves_whole_vectors_and_rounds_like_the_scalar_kernel(shape, kernel):
    """The vector kernel widens each half to f32 and rounds the result to nearest even
    on the way out: bit for bit what the scalar kernel stores."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float16)
    b = rng.standard_normal(shape[1:]).astype(np.float16)
    x[0, :2] = [np.inf, np.nan]
    got, launched = launch(BIAS_GELU_F16, x, b)
    assert launched == [kernel]
    s = x.astype(np.float32) + b.astype(np.float32)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    want = (np.float32(0.5) * s * (np.float32(1) + erf(s * np.float32(math.sqrt(0.5)))
                                   .astype(np.float32))).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3,
                               atol=1e-3, equal_nan=True)
    assert got.dtype == np.float16 and np.isnan(got[0, 1]) and got[0, 0] == np.inf


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [4, 12, 100, 104])
def test_sixteen_bit_pointwise_over_a_constant_extent_writes_every_value(dtype, n):
    """A constant extent of whole 8-byte vectors but not 16-byte ones (4, 12, 100) keeps
    4-lane vectors: the 16-byte kernel, launched without a test, left the last 4 values
    unwritten (the fuzz property ``kernels`` found ``2.0 + x0`` over bf16[4])."""
    import ml_dtypes
    import mlfuse
    source = f"func f(x0: {dtype}[{n}]) -> {dtype}[{n}] {{ return 2.0 + x0 }}"
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    x = np.arange(n, dtype=np.float32).astype(ml_dtypes.bfloat16 if dtype == "bf16" else np.float16)
    launched = record_launches(module.python_module, ["f_0", "f_0_vector"])
    got = np.asarray(module.f(x), dtype=np.float32)
    np.testing.assert_array_equal(got, np.arange(n, dtype=np.float32) + 2)
    assert launched == ["f_0_vector"]  # whole vectors of VECTOR_WIDTH: the vector kernel
    assert ("VECTOR_WIDTH_16" in _kernel_text(module.source, "f_0_vector")) == (n % 8 == 0)


@pytest.mark.skipif(_cuda_home() is None, reason="needs the CUDA toolkit (libNVVM, ptxas)")
def test_f16_vector_kernel_compiles_to_16_byte_accesses_without_spills(tmp_path):
    program = tmp_path / "bias_gelu_f16.fuse"
    program.write_text("func bias_gelu_f16(x: f16[R, C], b: f16[C]) -> f16[R, C] {\n"
                       "    return gelu(x + b)\n}\n")
    rows = _ptx_rows(program)
    vector = rows["bias_gelu_f16_0_vector"]
    assert vector["global_v4_loads"] > 0 and vector["v4_stores"] > 0, vector
    assert vector["spill_bytes"] == 0 and vector["stack_bytes"] == 0, vector


def test_sixteen_bit_rows_held_in_registers_move_16_byte_vectors():
    """An f16 row kernel's registers variant loads and stores 8 halves a vector (16
    bytes, as many values a thread as before); rows of whole 4-value vectors but not
    8-value ones take the peeled kernel (peeled_rows.py). Both agree with NumPy."""
    from numba import cuda

    from mlfuse.pipeline import compile_text
    module_ir = compile_text("func softmax(x: f16[R, C]) -> f16[R, C] "
                             "{ return softmax(x, axis=1) }", "s.fuse", level="fused")
    source = generate(module_ir, "simulator", HW)
    vector = _kernel_text(source, "softmax_0_vector")
    assert "_load_halves(" in vector and "_store_halves(" in vector
    assert "_load_vector(" not in vector
    # rows a warp holds take the short-row plan first: these are meant for a block
    source = re.sub(r"^SHORT_ROW_(VALUES|SCALARS) = \d+", r"SHORT_ROW_\1 = 0", source, flags=re.M)
    module = load_source(source, "halves_test")
    launched = record_launches(module, ["softmax_0", "softmax_0_vector", "softmax_0_peeled"])
    for columns in (48, 44):
        x = np.random.default_rng(columns).standard_normal((3, columns)).astype(np.float16)
        got = module.softmax(cuda.to_device(x)).copy_to_host()
        assert_close(got, softmax(x.astype(np.float32)).astype(np.float16), n_ops=5,
                     reduced=columns)
    assert launched == ["softmax_0_vector", "softmax_0_peeled"]
