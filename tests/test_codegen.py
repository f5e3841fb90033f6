"""Numba CUDA codegen: readable source, standalone modules, and kernels that agree
with NumPy under the CUDA simulator (both schedules, every arith op)."""
import ast
import dataclasses
import re
import subprocess
import sys

import numpy as np
import pytest

from mlfuse.dialects.elementwise import ELEMENTWISE
from mlfuse.api import compile_ir
from mlfuse.codegen import generate
from mlfuse.errors import ArgumentValueError, MlfuseError
from mlfuse.dialects import parse_ir
from mlfuse.hardware import get_target

from helpers import assert_close, record_launches


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def run(ir_text: str, *args, func=None):
    module = compile_ir(parse_ir(ir_text))
    name = func or module.ir.funcs[0].sym_name
    return module[name](*args)


CHAIN = """\
func @chain(%x: buf<f32[N]>, %b: buf<f32[N]>) -> (buf<f32[N]>) {
  %t = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i0: index) {
    %0 = loops.load %x, %i0 : f32
    %c = arith.constant {value = 2.0} : f32
    %1 = arith.mul %0, %c : f32
    %2 = loops.load %b, %i0 : f32
    %3 = arith.add %1, %2 : f32
    %4 = arith.relu %3 : f32
    loops.store %4, %t, %i0
  }
  return %t
}
"""

SOFTMAX = """\
func @softmax(%x: buf<f32[R, C]>) -> (buf<f32[R, C]>) {
  %out = loops.alloc : buf<f32[R, C]>
  fused.kernel {extents = [R], kernel_name = "softmax_0", schedule = "row", sources = ["tensor.max", "tensor.sub", "tensor.exp", "tensor.sum", "tensor.div"]} (%i: index) {
    %ninf = arith.constant {value = -inf} : f32
    %m = loops.reduce %ninf {combiner = "max", extent = C} : f32 (%k: index) {
      %v = loops.load %x, %i, %k : f32
      loops.yield %v
    }
    %zero = arith.constant {value = 0.0} : f32
    %s = loops.reduce %zero {combiner = "add", extent = C} : f32 (%k1: index) {
      %v1 = loops.load %x, %i, %k1 : f32
      %d = arith.sub %v1, %m : f32
      %e = arith.exp %d : f32
      loops.yield %e
    }
    loops.for {extent = C} (%k2: index) {
      %v2 = loops.load %x, %i, %k2 : f32
      %d2 = arith.sub %v2, %m : f32
      %e2 = arith.exp %d2 : f32
      %r = arith.div %e2, %s : f32
      loops.store %r, %out, %i, %k2
    }
  }
  return %out
}
"""


def row_reduce(combiner: str, init: str, schedule: str, dtype: str = "f32") -> str:
    """out[r] = combine(init, x[r, 0..C-1]), one kernel of the given schedule."""
    return f"""\
func @reduce(%x: buf<{dtype}[R, C]>) -> (buf<{dtype}[R]>) {{
  %out = loops.alloc : buf<{dtype}[R]>
  fused.kernel {{extents = [R], schedule = "{schedule}"}} (%i: index) {{
    %init = arith.constant {{value = {init}}} : {dtype}
    %acc = loops.reduce %init {{combiner = "{combiner}", extent = C}} : {dtype} (%k: index) {{
      %v = loops.load %x, %i, %k : {dtype}
      loops.yield %v
    }}
    loops.store %acc, %out, %i
  }}
  return %out
}}
"""


def rng_array(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- the generated source ------------------------------------------------------------

def test_chain_source_names_the_kernel_and_uses_a_grid_stride_loop_with_f32_constants():
    source = generate(parse_ir(CHAIN), "simulator")
    assert "@cuda.jit\ndef chain_0(x, b, t, N):" in source
    assert "while base < n_points:" in source  # grid-stride, no trip count to divide out
    assert "base = numba.uint64(base + stride)" in source
    assert "for slot in range(POINTS_PER_THREAD):" in source  # several points per thread
    assert "n_points = numba.uint64(N)" in source         # unsigned 64-bit flat indices
    assert "c = np.float32(2.0)" in source                # IR names kept, typed literal
    assert "relu = _maximum(add, np.float32(0.0))" in source
    assert "def chain(x, b):" in source and "ENTRY_POINTS = {'chain': chain}" in source


def test_fused_kernel_comment_lists_its_source_ops():
    source = generate(parse_ir(SOFTMAX), "simulator")
    assert "# sources: tensor.max, tensor.sub, tensor.exp, tensor.sum, tensor.div\n" \
           "@cuda.jit\ndef softmax_0(x, out, R, C):" in source


def _kernel_lines(source: str) -> list[str]:
    """Lines of @cuda.jit functions, docstrings and comments dropped."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
            if not body:  # a docstring only (a simulator twin with nothing to do)
                continue
            out += [lines[i - 1].split("#")[0]
                    for i in range(body[0].lineno, node.end_lineno + 1)]
    return out


@pytest.mark.parametrize("target", ["simulator", "cuda"])
def test_f32_kernels_have_no_bare_float_literal(target):
    gelu = CHAIN.replace("arith.relu", "arith.gelu")
    for text in (CHAIN, SOFTMAX, gelu, row_reduce("min", "inf", "row")):
        lines = _kernel_lines(generate(parse_ir(text), target))
        assert lines
        for line in lines:
            bare = re.sub(r"np\.float32\([^()]*\)", "", line)
            assert not re.search(r"(?<![\w.])\d+\.\d*|\d+e-?\d+|math\.(inf|nan)", bare), line


def test_cuda_row_kernels_use_warp_shuffles_and_the_simulator_does_not():
    cuda_source = generate(parse_ir(SOFTMAX), "cuda")
    sim_source = generate(parse_ir(SOFTMAX), "simulator")
    assert "cuda.shfl_xor_sync(0xFFFFFFFF, value, offset)" in cuda_source
    assert "shfl" not in sim_source and "cuda.syncthreads()" in sim_source


def test_ir_names_become_identifiers_that_shadow_nothing():
    text = CHAIN.replace("%c =", "%np =").replace(", %c :", ", %np :").replace(
        "%2 = loops.load", "%for = loops.load").replace(", %2 :", ", %for :").replace(
        "%t", "%chain_0")  # the result buffer is named like the kernel
    source = generate(parse_ir(text), "simulator")
    assert "np_ = np.float32(2.0)" in source and "for_ = b_vals[slot]" in source
    assert "chain_0_1 = cuda.device_array" in source
    x = rng_array(5)
    assert_close(run(text, x, x), np.maximum(x * np.float32(3), np.float32(0)), n_ops=3)


def test_generated_module_imports_only_math_numpy_and_numba(tmp_path):
    source = generate(parse_ir(CHAIN), "simulator")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported == {"math", "numpy", "numba"}
    (tmp_path / "gen_chain.py").write_text(source)
    script = (
        "import sys; sys.modules['mlfuse'] = None; sys.modules['dialects'] = None\n"
        "import numpy as np; from numba import cuda; import gen_chain\n"
        "x = np.arange(5, dtype=np.float32); b = np.ones(5, np.float32)\n"
        "print(gen_chain.chain(cuda.to_device(x), cuda.to_device(b)).copy_to_host().tolist())\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, env={"NUMBA_ENABLE_CUDASIM": "1", "PATH": ""}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1.0, 3.0, 5.0, 7.0, 9.0]"


def test_unknown_target_is_an_error():
    with pytest.raises(MlfuseError, match="unknown codegen target 'ptx'"):
        generate(parse_ir(CHAIN), "ptx")


def test_a_kernel_reading_the_buffer_it_writes_is_refused():
    text = CHAIN.replace("loops.load %b, %i0", "loops.load %t, %i0")
    with pytest.raises(MlfuseError, match="reads buffer %t that it also writes"):
        generate(parse_ir(text), "simulator")


# -- kernels against NumPy -----------------------------------------------------------

@pytest.mark.parametrize("n", [1, 37, 1000])
def test_chain_matches_numpy_for_sizes_off_the_block_size(n):
    x, b = rng_array(n, seed=1), rng_array(n, seed=2)
    assert_close(run(CHAIN, x, b), np.maximum(x * np.float32(2) + b, np.float32(0)), n_ops=3)


def test_an_empty_argument_is_refused_before_any_launch():
    # mlfuse has no empty arrays (docs/language.md): max over nothing would have no value
    with pytest.raises(ArgumentValueError, match="parameter 'x' of @chain: is empty"):
        run(CHAIN, np.zeros(0, np.float32), np.zeros(0, np.float32))


BROADCAST = """\
func @bias(%x: buf<f32[N, 4]>, %y: buf<f32[4]>) -> (buf<f32[N, 4]>) {
  %t = loops.alloc : buf<f32[N, 4]>
  loops.parallel {extents = [N, 4]} (%i: index, %j: index) {
    %a = loops.load %x, %i, %j : f32
    %b = loops.load %y, %j : f32
    %s = arith.add %a, %b : f32
    loops.store %s, %t, %i, %j
  }
  return %t
}
"""


def test_broadcast_add_unravels_two_indices():
    x, y = rng_array((7, 4)), rng_array(4, seed=3)
    assert_close(run(BROADCAST, x, y), x + y)


def test_three_dim_iteration_space_with_symbolic_dims_unravels_by_divmod():
    text = """\
func @t(%x: buf<f32[A, B, 5]>) -> (buf<f32[5, B, A]>) {
  %t = loops.alloc : buf<f32[5, B, A]>
  loops.parallel {extents = [A, B, 5]} (%a: index, %b: index, %c: index) {
    %v = loops.load %x, %a, %b, %c : f32
    loops.store %v, %t, %c, %b, %a
  }
  return %t
}
"""
    x = rng_array((2, 3, 5))
    source = generate(parse_ir(text), "simulator")
    # lean addressing: x, of the space's shape, is read at the flat index itself; the
    # transposed store unravels it: by a constant the compiler multiplies, by a symbol
    # a multiply-high with the host's magic numbers (a division past 2**31 points)
    assert "x_vals[slot] = x_flat[first]" in source
    assert "numba.uint64(first % numba.uint64(5))" in source
    assert "u0, u1 = _divmod_wide(rest_1, d_B, B_magic, B_shift)" in source
    np.testing.assert_array_equal(run(text, x), x.transpose(2, 1, 0))


def test_reduction_nest_on_the_pointwise_schedule_sums_each_row():
    x = rng_array((5, 9))
    assert_close(run(row_reduce("add", "0.0", "pointwise"), x), x.sum(axis=1), n_ops=9)


@pytest.mark.parametrize("shape", [(3, 50), (2, 7)])  # no empty arrays: refused, see above
def test_softmax_row_kernel_matches_numpy(shape):
    x = rng_array(shape)
    e = np.exp(x - x.max(axis=1, keepdims=True)) if shape[1] else x
    want = e / e.sum(axis=1, keepdims=True) if shape[1] else x
    assert_close(run(SOFTMAX, x), want, n_ops=shape[1] + 4)


def _kernel_text(source: str, name: str) -> str:
    """The source of one kernel (from its decorator to the next blank line)."""
    start = source.index(f"def {name}(")
    return source[start:source.index("\n\n", start)]


def test_softmax_registers_variant_reads_each_row_element_once():
    source = generate(parse_ir(SOFTMAX), "simulator")
    kernel = _kernel_text(source, "softmax_0")
    assert "x_vals = cuda.local.array(VALUES_PER_THREAD, numba.float32)" in kernel
    # one load of x (at its row's base in a flat view, flat_rows.py), three loops use it
    assert len(re.findall(r"\bx_flat\[", kernel)) == 1
    assert kernel.count("for slot in range(VALUES_PER_THREAD):") == 4  # fill + 3 loops
    # symbolic C: the host picks the variant by the row length
    assert "if C <= VALUES_PER_THREAD * REGISTER_ROW_THREADS:" in source
    assert "def softmax_0_streaming(x, out, R, C):" in source


def test_constant_row_length_needs_one_row_variant():
    short = generate(parse_ir(SOFTMAX.replace("C]", "64]").replace("= C}", "= 64}")), "simulator")
    long = generate(parse_ir(SOFTMAX.replace("C]", "9000]").replace("= C}", "= 9000}")),
                    "simulator")
    assert "def softmax_0(" in short and "_streaming" not in short
    # no registers variant: the streaming one, and the one holding rows in registers and
    # shared memory too (shared_rows.py), which the host picks by the shared memory a call needs
    assert "def softmax_0(" in long and "fits in registers" not in long
    assert "def softmax_0_shared(" in long
    assert "range(VALUES_PER_THREAD)" not in long and "max(1, VALUES_PER_THREAD // 2)" in long


def test_cuda_kernels_declare_their_launch_bounds():
    source = generate(parse_ir(SOFTMAX), "cuda")
    # the scalar fallback of the vector row kernel asks for two blocks per SM (its
    # registers left one: test_row_variants.test_the_scalar_fallback_asks_for_two_...)
    assert "@cuda.jit(launch_bounds=(REGISTER_ROW_THREADS, 2))\ndef softmax_0(" in source
    assert "@cuda.jit(launch_bounds=REGISTER_ROW_THREADS)\ndef softmax_0_vector(" in source
    assert "@cuda.jit(launch_bounds=1024)\ndef softmax_0_streaming(" in source


@pytest.mark.parametrize("values_per_thread,row_threads,variant", [(1, 32, "streaming"),
                                                                   (2, 32, "registers")])
def test_softmax_long_and_short_rows_take_their_variant_and_match_numpy(
        values_per_thread, row_threads, variant):
    """Small launch constants put a 50-value row in either variant on the simulator."""
    from mlfuse.runtime.loader import load_source
    hw = dataclasses.replace(get_target(), vector_width=1, row_values_per_thread=values_per_thread,
                             row_threads=row_threads, shared_row_bytes=0)  # (no held rows)
    module = load_source(generate(parse_ir(SOFTMAX), "simulator", hw), "softmax_variants")
    launched = record_launches(module, ("softmax_0", "softmax_0_streaming"))
    from numba import cuda
    x = rng_array((3, 50))
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(got, e / e.sum(axis=1, keepdims=True), n_ops=54)
    assert launched == ["softmax_0" if variant == "registers" else "softmax_0_streaming"]


NORM = """\
func @norm(%x: buf<f32[R, C]>, %g: buf<f32[C]>) -> (buf<f32[R, C]>) {
  %out = loops.alloc : buf<f32[R, C]>
  fused.kernel {extents = [R], schedule = "row"} (%i: index) {
    %zero = arith.constant {value = 0.0} : f32
    %s = loops.reduce %zero {combiner = "add", extent = C} : f32 (%k: index) {
      %v = loops.load %x, %i, %k : f32
      loops.yield %v
    }
    loops.for {extent = C} (%k2: index) {
      %v2 = loops.load %x, %i, %k2 : f32
      %gv = loops.load %g, %k2 : f32
      %d = arith.sub %v2, %s : f32
      %r = arith.mul %d, %gv : f32
      loops.store %r, %out, %i, %k2
    }
  }
  return %out
}
"""


def test_layernorm_like_row_loads_the_row_once_and_its_broadcast_operands_per_slot():
    kernel = _kernel_text(generate(parse_ir(NORM), "simulator"), "norm_0")
    assert len(re.findall(r"\bx_flat\[", kernel)) == 1 and "g_vals[slot] = g[k2]" in kernel
    x, g = rng_array((4, 70)), rng_array(70, seed=5)
    want = (x - x.sum(axis=1, keepdims=True)) * g
    assert_close(run(NORM, x, g), want, n_ops=72)


def test_pointwise_body_with_a_loop_keeps_one_point_per_thread():
    source = generate(parse_ir(row_reduce("add", "0.0", "pointwise")), "simulator")
    assert "for flat in range(start, n_points, stride):" in source
    assert "POINTS_PER_THREAD), THREADS_PER_BLOCK]" not in source


def test_pointwise_prefetch_loads_every_point_before_the_first_store():
    kernel = _kernel_text(generate(parse_ir(BROADCAST), "simulator"), "bias_0")
    first_store = kernel.index("t_flat[first] = ")
    assert kernel.index("x_vals[slot] = x_flat[first]") < first_store
    # y [4] broadcast over [N, 4]: the flat index mod 4 (a constant: no magic numbers)
    assert "_, first_mod = numba.uint64(first // numba.uint64(4)), " \
           "numba.uint64(first % numba.uint64(4))" in kernel
    assert kernel.index("y_vals[slot] = y[first_mod]") < first_store


@pytest.mark.parametrize("schedule", ["pointwise", "row"])
@pytest.mark.parametrize("combiner,init,numpy", [("max", "-inf", np.max), ("min", "inf", np.min)])
def test_max_and_min_combiners_propagate_nan_like_numpy(schedule, combiner, init, numpy):
    x = rng_array((3, 40))
    x[0, 17] = np.nan   # inside a row
    x[2, 39] = np.nan   # last element: the last thread's strided part
    got = run(row_reduce(combiner, init, schedule), x)
    assert_close(got, numpy(x, axis=1))
    assert np.isnan(got[0]) and np.isnan(got[2]) and not np.isnan(got[1])


def test_i32_row_sum_stays_int32_and_exact():
    x = np.random.default_rng(0).integers(-100, 100, (3, 45)).astype(np.int32)
    got = run(row_reduce("add", "0", "row", "i32"), x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, x.sum(axis=1, dtype=np.int32))


def test_full_reduction_to_a_rank0_output():
    text = """\
func @total(%x: buf<f32[N]>) -> (buf<f32[]>) {
  %t = loops.alloc : buf<f32[]>
  loops.parallel {extents = []} () {
    %z = arith.constant {value = 0.0} : f32
    %s = loops.reduce %z {combiner = "add", extent = N} : f32 (%k: index) {
      %v = loops.load %x, %k : f32
      loops.yield %v
    }
    loops.store %s, %t
  }
  return %t
}
"""
    x = rng_array(33)
    got = run(text, x)
    assert got.shape == () and got.dtype == np.float32
    assert_close(got, np.asarray(x.sum(dtype=np.float32)), n_ops=33)


def test_masked_load_reads_only_where_the_mask_holds():
    text = """\
func @shift(%x: buf<f32[N]>) -> (buf<f32[N]>) {
  %t = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i: index) {
    %one = arith.constant {value = 1} : index
    %ok = arith.ge %i, %one : bool
    %j = arith.sub %i, %one : index
    %v = loops.masked_load %x, %ok, %j {other = -7.0} : f32
    loops.store %v, %t, %i
  }
  return %t
}
"""
    x = rng_array(6)
    np.testing.assert_array_equal(run(text, x), np.concatenate([[-7.0], x[:-1]]).astype(np.float32))


def test_f64_program_computes_in_f64():
    text = CHAIN.replace("f32", "f64").replace("arith.relu", "arith.exp")
    x, b = rng_array(20, np.float64), rng_array(20, np.float64, seed=4)
    assert "np.float64(2.0)" in generate(parse_ir(text), "simulator")
    assert_close(run(text, x, b), np.exp(x * 2.0 + b), n_ops=3)


def test_f16_program_loads_into_f32_and_rounds_on_store():
    text = CHAIN.replace("f32", "f16")
    x, b = rng_array(20, np.float16), rng_array(20, np.float16, seed=4)
    want = np.maximum(x.astype(np.float32) * 2 + b.astype(np.float32), 0).astype(np.float16)
    got = run(text, x, b)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


def test_comparison_yields_a_bool_output():
    text = """\
func @gt(%x: buf<f32[N]>, %y: buf<f32[N]>) -> (buf<bool[N]>) {
  %t = loops.alloc : buf<bool[N]>
  loops.parallel {extents = [N]} (%i: index) {
    %a = loops.load %x, %i : f32
    %b = loops.load %y, %i : f32
    %c = arith.gt %a, %b : bool
    loops.store %c, %t, %i
  }
  return %t
}
"""
    x, y = rng_array(11), rng_array(11, seed=5)
    x[3] = np.nan
    got = run(text, x, y)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, x > y)


# -- every arith op ------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 30.0, -30.0],
                   np.float32)


def elementwise_program(ops: list[str], dtype: str) -> str:
    """One kernel computing every op of ``ops`` on (x, y) [where: on (x != y, x, y)]."""
    results = ", ".join(f"buf<{'bool' if ELEMENTWISE[o].result_bool else dtype}[N]>" for o in ops)
    lines = [f"func @ops(%x: buf<{dtype}[N]>, %y: buf<{dtype}[N]>) -> ({results}) {{"]
    for o in ops:
        out = "bool" if ELEMENTWISE[o].result_bool else dtype
        lines.append(f"  %out_{o} = loops.alloc : buf<{out}[N]>")
    lines.append("  loops.parallel {extents = [N]} (%i: index) {")
    lines.append(f"    %a = loops.load %x, %i : {dtype}\n    %b = loops.load %y, %i : {dtype}")
    lines.append("    %gt = arith.ne %a, %b : bool")
    for o in ops:
        spec = ELEMENTWISE[o]
        operands = {1: "%a", 2: "%a, %b", 3: "%gt, %a, %b"}[spec.arity]
        out = "bool" if spec.result_bool else dtype
        lines.append(f"    %r_{o} = arith.{o} {operands} : {out}\n"
                     f"    loops.store %r_{o}, %out_{o}, %i")
    lines.append("  }\n  return " + ", ".join(f"%out_{o}" for o in ops) + "\n}\n")
    return "\n".join(lines)


def _check_ops(ops, dtype, x, y, n_ops=8):
    got = run(elementwise_program(ops, dtype), x, y)
    for o, g in zip(ops, got if len(ops) > 1 else [got]):
        spec = ELEMENTWISE[o]
        args = {1: (x,), 2: (x, y), 3: (x != y, x, y)}[spec.arity]
        assert_close(g, np.asarray(spec.numpy(*args)).astype(g.dtype), n_ops=n_ops, what=o)


@pytest.mark.filterwarnings("ignore:.*encountered:RuntimeWarning")  # IEEE specials, as NumPy
def test_every_float_elementwise_op_matches_numpy_on_special_values():
    x = np.repeat(SPECIAL, len(SPECIAL))     # every pair of special values
    y = np.tile(SPECIAL, len(SPECIAL))
    _check_ops(sorted(o for o, s in ELEMENTWISE.items() if s.accepts != "bool"), "f32", x, y)


def test_bool_ops_match_numpy_on_every_pair():
    x, y = np.array([True, True, False, False]), np.array([True, False, True, False])
    _check_ops(sorted(o for o, s in ELEMENTWISE.items() if s.accepts in ("bool", "any", "where")),
               "bool", x, y)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_integer_ops_stay_int32_and_wrap_like_numpy():
    ops = [o for o, s in ELEMENTWISE.items() if s.accepts in ("number", "any", "where")]
    big = np.iinfo(np.int32).max
    x = np.array([3, -4, 0, big, -big - 1, 7], np.int32)
    y = np.array([5, -4, 9, 1, -1, -7], np.int32)
    _check_ops(ops, "i32", x, y)


CASTS = """\
func @casts(%x: buf<f32[N]>) -> (buf<i32[N]>, buf<bool[N]>, buf<f32[N]>, buf<f32[N]>) {
  %ti = loops.alloc : buf<i32[N]>
  %tb = loops.alloc : buf<bool[N]>
  %tf = loops.alloc : buf<f32[N]>
  %th = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i: index) {
    %a = loops.load %x, %i : f32
    %n = arith.cast %a {dtype = "i32"} : i32
    loops.store %n, %ti, %i
    %t = arith.cast %a {dtype = "bool"} : bool
    loops.store %t, %tb, %i
    %f = arith.cast %t {dtype = "f32"} : f32
    loops.store %f, %tf, %i
    %h = arith.cast %a {dtype = "f16"} : f16
    %back = arith.cast %h {dtype = "f32"} : f32
    loops.store %back, %th, %i
  }
  return %ti, %tb, %tf, %th
}
"""


def test_casts_match_numpy_astype():
    x = np.array([2.7, -2.7, 0.0, 1e-3, 65519.0, 0.1], np.float32)
    ti, tb, tf, th = run(CASTS, x)
    np.testing.assert_array_equal(ti, x.astype(np.int32))
    np.testing.assert_array_equal(tb, x.astype(bool))
    np.testing.assert_array_equal(tf, x.astype(bool).astype(np.float32))
    np.testing.assert_array_equal(th, x.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("reuse", [True, False])
def test_softmax_rows_compute_exp_once_per_value_when_reuse_is_on(reuse):
    hw = dataclasses.replace(get_target(), row_reuse=reuse)
    kernel = _kernel_text(generate(parse_ir(SOFTMAX), "simulator", hw), "softmax_0")
    assert kernel.count("exp(") == (1 if reuse else 2)
    assert ("e_vals[slot] = e" in kernel and "e2 = e_vals[slot]" in kernel) == reuse
    assert ("v2 = x_vals[slot]" not in kernel) == reuse  # the output loop needs no x
    from mlfuse.runtime.loader import load_source
    from numba import cuda
    module = load_source(generate(parse_ir(SOFTMAX), "simulator", hw), "softmax_reuse")
    x = rng_array((3, 50))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    got = module.softmax(cuda.to_device(x)).copy_to_host()
    assert_close(got, e / e.sum(axis=1, keepdims=True), n_ops=54)


def test_a_kept_value_is_not_shared_between_row_loops_of_different_extents():
    text = SOFTMAX.replace("%out = loops.alloc : buf<f32[R, C]>", "%out = loops.alloc : "
                           "buf<f32[R, D]>").replace("-> (buf<f32[R, C]>)", "-> (buf<f32[R, D]>)") \
        .replace("%x: buf<f32[R, C]>", "%x: buf<f32[R, C]>, %y: buf<f32[R, D]>") \
        .replace("loops.for {extent = C}", "loops.for {extent = D}") \
        .replace("%v2 = loops.load %x, %i, %k2", "%v2 = loops.load %y, %i, %k2")
    kernel = _kernel_text(generate(parse_ir(text), "simulator"), "softmax_0")
    assert kernel.count("exp(") == 2 and "e_vals" not in kernel
