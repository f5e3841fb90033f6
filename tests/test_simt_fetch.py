"""The SIMT tile's operand fetches (mlfuse/codegen/simt_fetch.py): plain operands read at
flat offsets planned once a tile, the partial K step fetched first, 32-bit offsets
unless the host sets WIDE. Under the simulator, every K tail (K under a step, a step
and one, ...), split K, a batched P.V stored through a head merge and the WIDE kernel
agree with the interpreter; the generated text: the K loop checks no K, the host asks
for WIDE only past 2**31 values; ptxas: the WIDE tiles do not spill."""
import re

import pytest
from helpers import assert_close
from test_ptx import kernels, toolchain_problem

import mlfuse
from mlfuse.codegen import generate
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import program_size, random_inputs

MATMUL = ("func f(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
          "    return relu(matmul(x, w) + b)\n}\n")
ATTN_TAIL = ("func f(p: f32[B, H, S, S], v: f32[B, H, S, D]) -> f32[B, S, H*D] {\n"
             "    return reshape(transpose(matmul(p, v), [0, 2, 1, 3]), [B, S, H*D])\n}\n")
LINEAR = ("func f(x: f32[B, 12], w: f32[20, 12]) -> f32[B, 20] {\n"
          "    return matmul(x, transpose(w))\n}\n")


def _check(source, dims, shape, configs, wide=False):
    """Run ``source`` with each (BM, BN, splits) of ``configs`` forced at the kernel's
    (m, n, k, batch) ``shape`` (``wide``: the WIDE kernels), against the interpreter."""
    module = mlfuse.compile_source(source, "fetch.fuse", target="simulator")
    tiled = module.python_module.f_0
    if wide:  # as the host launches it for an operand of 2**31 values or more
        factory = tiled.factory
        tiled.factory = lambda *config: factory(*config[:5], True)
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=11)
    want = run_tensor(func, args)[0]
    ops, reduced = program_size(func)
    for config in configs:
        tiled.tuned[shape] = config
        assert_close(module.f(*args), want, ops, f"{config}", reduced)
    assert all(len(config) == 5 for config in tiled.kernels)  # WIDE only where true


@pytest.mark.parametrize("k", [1, 7, 8, 9, 16, 17, 33])
def test_every_k_tail_agrees(k):
    """The partial step first (K under a step: only it), then the full ones; K steps
    of 8 (16 x 16) and 16 (8 x 8), unsplit and in shares."""
    _check(MATMUL, {"M": 11, "N": 9, "K": k}, (11, 9, k, 1), [(16, 16, 1), (8, 8, 1),
                                                                (16, 16, 2), (8, 8, 3)])


def test_a_batched_product_stored_through_a_head_merge_agrees():
    """attn_tail's P.V: A and B at batch-dependent flat offsets, ragged M, N and K."""
    _check(ATTN_TAIL, {"B": 2, "H": 3, "S": 13, "D": 6}, (13, 6, 13, 6),
           [(16, 16, 1), (8, 8, 1), (16, 16, 2)])


def test_the_wide_kernels_agree():
    _check(MATMUL, {"M": 11, "N": 9, "K": 37}, (11, 9, 37, 1), [(16, 16, 1), (8, 8, 3)],
           wide=True)
    _check(ATTN_TAIL, {"B": 2, "H": 2, "S": 9, "D": 5}, (9, 5, 9, 4), [(8, 8, 2)], wide=True)


def test_a_k_major_weight_agrees():
    _check(LINEAR, {"B": 7}, (7, 20, 12, 1), [(16, 16, 1), (8, 8, 2)])


def test_the_k_loop_checks_no_k_and_the_host_asks_wide_past_2_31():
    source = generate(compile_text(ATTN_TAIL, "t.fuse"), target="cuda")
    factory = source[source.index("def _tiles_f_0"):source.index("def f(")]
    loop = factory[re.search(r"while \w+ < steps:", factory).start():factory.index("# epilogue")]
    assert "left" not in loop and "k_size" not in loop and "if VECTOR_A" in loop, loop
    assert "OFFSET = numba.uint64 if WIDE else numba.uint32" in factory
    assert "a_off = cuda.local.array(A_GROUPS, OFFSET)" in factory
    host = source[source.index("def f("):]
    assert "+ ((True,) if B * H * S * S >= 2**31 or B * H * S * D >= 2**31 else ())" in host
    static = generate(compile_text(LINEAR.replace("B, 12", "5, 12").replace("B, 20", "5, 20"),
                                   "t.fuse"), target="cuda")
    assert "a_off = cuda.local.array(A_GROUPS, numba.uint32)" in static
    assert "(True,)" not in static[static.index("def f("):]


def test_the_wide_tiles_compile_without_spills(tmp_path):
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    path = tmp_path / "attn.fuse"
    path.write_text(ATTN_TAIL)
    found = kernels("--tile=128x128,128x64", "--wide", str(path))
    tiles = [k for k in found if "wide]" in k["kernel"]]
    assert len(tiles) == 4, found  # unsplit and split
    assert all(k["spill_bytes"] == 0 and k["stack_bytes"] == 0 for k in tiles), tiles
