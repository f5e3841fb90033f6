"""f16 contractions on tensor cores (variant "mma-f16", mlfuse/codegen/emit_mma.py)
against the NumPy interpreter under the simulator, whose twins of the PTX helpers
follow the ISA's fragment layouts: sizes that leave partial tiles in M, N and K, both
operand paths (16-byte cp.async copies where the sizes allow, the value-by-value
gather elsewhere), batches, transposed operands and fused epilogues. And the
analysis the pass writes into the kernel prints, parses back and drives codegen."""
import numpy as np
import pytest

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.api import compile_ir
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.interp import run_tensor
from mlfuse.errors import MlfuseError
from mlfuse.dialects import parse_ir
from mlfuse.ir import print_ir
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


MATMUL = ("func f(x: f16[M, K], w: f16[K, N], b: f16[N]) -> f16[M, N] {\n"
          "    return relu(matmul(x, w) + b)\n}\n")
CASES = {
    # K and N multiples of 8: both operands copied 16 bytes at a time; M, N, K partial tiles
    "copied": (MATMUL, {"M": 19, "N": 24, "K": 40}),
    # odd K and N: both gathered value by value, zeros past the sizes
    "gathered": (MATMUL, {"M": 17, "N": 21, "K": 13}),
    # K a multiple of 4, N of 2: 8-byte copies of A, 4-byte copies of B
    "narrow_copies": (MATMUL, {"M": 9, "N": 18, "K": 20}),
    # K of 7 stages: the pipeline wraps around its 4 stages (two mma steps a stage)
    "long_k": (MATMUL, {"M": 9, "N": 16, "K": 200}),
    # 9 rows of tiles: blockIdx.x runs down groups of GROUP_M (8) rows, the last of one
    "grouped_tiles": (MATMUL, {"M": 137, "N": 16, "K": 16}),
    "batched": ("func f(x: f16[B, M, K], y: f16[B, K, N]) -> f16[B, M, N] {\n"
                "    return matmul(x, y) * 0.5\n}\n", {"B": 2, "M": 9, "N": 18, "K": 24}),
    "transposed_with_tanh": ("func f(x: f16[K, M], w: f16[N, K]) -> f16[M, N] {\n"
                             "    return tanh(matmul(transpose(x), transpose(w)))\n}\n",
                             {"M": 17, "N": 9, "K": 20}),
}


# (This test was flaky with 16 x 8 warp tiles: B fragments load two n8 tiles at a time
# (ldmatrix.x4.trans), so one n8 tile was never loaded and the mma read whatever the
# simulator's uninitialised local array held: right only by chance, depending on what
# ran before. The factory now refuses such a warp tile.)
def test_a_thin_tile_with_fewer_chunks_than_threads_copies_each_chunk_once(monkeypatch):
    """A 16 x 64 tile of four 16 x 16 warp tiles (128 threads) has 32 16-byte chunks of A
    a stage: threads past them copy nothing (on the GPU, the 16 x 128 decode tile)."""
    from mlfuse.codegen import helpers
    monkeypatch.setitem(helpers.MMA_GEOMETRY, "simulator",
                        {"tiles": ((16, 64),), "warps": ((16, 16),), "bk": 16})
    source = MATMUL.replace("func f(", "func thin(")  # a program of its own
    module = mlfuse.compile_source(source, "thin.fuse", target="simulator")
    assert "MMA_WARPS = ((16, 16),)" in module.source
    func = parse_program(source).funcs[0]
    dims = {"M": 5, "N": 40, "K": 24}
    args = random_inputs(func, dims, seed=6)
    (want,) = run_tensor(func, args)
    ops, reduced = program_size(func, dims=dims)
    assert_close(module.thin(*args), want, ops, "thin", reduced)


def test_one_mma_step_a_stage_and_two_stages_pipeline_the_same(monkeypatch):
    """Stages of 16 K values (one mma step: its fragments buffer 0 alone) and only two of
    them (each iteration refills the stage the last one read) over a K of 6 stages."""
    from mlfuse.codegen import helpers
    monkeypatch.setitem(helpers.MMA_GEOMETRY, "simulator",
                        {"tiles": ((16, 16),), "warps": ((16, 16),), "bk": 16, "stages": 2})
    source = MATMUL.replace("func f(", "func two(")  # a program of its own
    module = mlfuse.compile_source(source, "two.fuse", target="simulator")
    assert "MMA_BK = 16" in module.source and "MMA_STAGES = 2" in module.source
    func = parse_program(source).funcs[0]
    dims = {"M": 7, "N": 16, "K": 88}
    args = random_inputs(func, dims, seed=7)
    (want,) = run_tensor(func, args)
    ops, reduced = program_size(func, dims=dims)
    assert_close(module.two(*args), want, ops, "two", reduced)


@pytest.mark.parametrize("name", sorted(CASES))
def test_f16_contractions_on_tensor_cores_agree_with_the_interpreter(name):
    source, dims = CASES[name]
    module = mlfuse.compile_source(source, f"{name}.fuse", target="simulator")
    assert [(k["schedule"], k["variant"]) for k in module.kernels("f")] == [
        ("contraction", "mma-f16")]
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=5)
    (want,) = run_tensor(func, args)
    got = module.f(*args)
    assert got.dtype == np.float16
    ops, reduced = program_size(func, dims=dims)  # (its real K: the tolerance grows with it)
    assert_close(got, want, ops, name, reduced)
    # the copies the host chose: values per cp.async of A and B (0: gathered)
    copies = {"copied": (8, 8), "long_k": (8, 8), "grouped_tiles": (8, 8), "gathered": (0, 0), "narrow_copies": (4, 2), "batched": (8, 2),
              "transposed_with_tanh": (False, False)}
    (config,) = module.python_module.f_0.kernels
    assert config[2:4] == copies[name], config


def test_bf16_contractions_on_tensor_cores_agree_with_the_interpreter():
    """The same kernel on bf16 operands (mma .bf16; stages hold the bits as uint16):
    8-byte copies of A, 4-byte copies of B, partial tiles."""
    source = MATMUL.replace("f16", "bf16")
    module = mlfuse.compile_source(source, "bf16.fuse", target="simulator")
    assert [k["variant"] for k in module.kernels("f")] == ["mma-bf16"]
    func = parse_program(source).funcs[0]
    dims = {"M": 9, "N": 18, "K": 20}
    args = random_inputs(func, dims, seed=5)
    (want,) = run_tensor(func, args)
    got = module.f(*args)
    assert got.dtype == want.dtype
    ops, reduced = program_size(func, dims=dims)
    assert_close(got, want, ops, "bf16", reduced)
    (config,) = module.python_module.f_0.kernels
    assert config[2:4] == (4, 2), config


def test_f32_contractions_stay_on_the_simt_path():
    module = compile_text(MATMUL.replace("f16", "f32"), "t.fuse")
    (k,) = [op for op in module.funcs[0].body.ops if isinstance(op, KernelOp)]
    assert (k["schedule"], k["variant"]) == ("contraction", "simt")


def test_the_contraction_analysis_prints_parses_back_and_drives_codegen():
    module = compile_text(MATMUL, "t.fuse")
    text = print_ir(module)
    assert 'm_dims = [0], n_dims = [1]' in text and 'variant = "mma-f16"' in text
    reparsed = parse_ir(text)
    assert print_ir(reparsed) == text
    x = np.random.default_rng(1).standard_normal((18, 16)).astype(np.float16)
    w = np.random.default_rng(2).standard_normal((16, 8)).astype(np.float16)
    b = np.random.default_rng(3).standard_normal(8).astype(np.float16)
    want = np.maximum(x.astype(np.float32) @ w.astype(np.float32) + b, 0)
    got = compile_ir(reparsed, target="simulator").f(x, w, b)
    assert_close(got, want.astype(np.float16), 3, "reparsed", reduced=16)


def test_a_contraction_without_its_analysis_is_refused_with_the_reason():
    text = print_ir(compile_text(MATMUL, "t.fuse")).replace('m_dims = [0], ', '')
    with pytest.raises(MlfuseError, match="lacks its analysis"):
        compile_ir(parse_ir(text), target="simulator")
