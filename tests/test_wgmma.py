"""f16 and bf16 contractions on Hopper's warpgroup MMA (mlfuse/codegen/emit_wgmma.py)
against the NumPy interpreter under the simulator, whose twins (ptx_wgmma.py) read each
thread's accumulator fragment from the shared stages through the descriptors' address
math and the 128-byte swizzle: partial tiles in M, N and K, several K tiles around a ring
of stages, split-K, batches, bf16. A stage layout that disagrees with the descriptors
fails (``test_a_stage_layout_the_descriptors_do_not_name_fails``). The simulator's
geometry here has one wgmma tile, 64 x 64 (a warpgroup); the GPU's are 128 x 256 and
128 x 128 (tests/test_ptx.py assembles them for sm_90a)."""
import pytest
from helpers import assert_close

import mlfuse
from mlfuse.codegen import emit_wgmma, helpers
from mlfuse.interp import run_tensor
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import program_size, random_inputs

MATMUL = ("func {name}(x: {t}[M, K], w: {t}[K, N], b: {t}[N]) -> {t}[M, N] {{\n"
          "    return relu(matmul(x, w) + b)\n}}\n")
BATCHED = ("func {name}(x: {t}[B, M, K], y: {t}[B, K, N]) -> {t}[B, M, N] {{\n"
           "    return matmul(x, y) * 0.5\n}}\n")


@pytest.fixture(autouse=True)
def _wgmma_geometry(tmp_path, monkeypatch):
    """One 64 x 64 wgmma tile (and no other: the tile model would pick smaller ones at
    these sizes), 3 stages of it."""
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(helpers.MMA_GEOMETRY, "simulator",
                        {**helpers.MMA_GEOMETRY["simulator"], "tiles": ((64, 64),),
                         "wgmma_tiles": ((64, 64),), "wgmma_stages": 3, "smem": 227 * 1024})


def run(template: str, name: str, dtype: str, dims: dict, tuned=None):
    """Compile, run under the simulator (``tuned``: the (BM, BN, splits) to launch),
    check against the interpreter; the kernel that ran."""
    source = template.format(name=name, t=dtype)
    module = mlfuse.compile_source(source, f"{name}.fuse", target="simulator")
    assert "_wgmma_tiles_" in module.source
    tiled = getattr(module.python_module, f"{name}_0")
    if tuned is not None:
        tiled.tuned[tuned[0]] = tuned[1]
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=11)
    (want,) = run_tensor(func, args)
    got = getattr(module, name)(*args)
    assert got.dtype == want.dtype
    ops, reduced = program_size(func, dims=dims)
    assert_close(got, want, ops, name, reduced)
    ((config, kernel),) = tiled.kernels.items()
    if tuned is not None:  # the tile and split asked for: (BM, BN, .., .., SPLIT)
        assert config[:2] == tuned[1][:2] and config[4] == (tuned[1][2] > 1), config
    return kernel


def test_f16_matmul_on_wgmma_agrees_with_the_interpreter():
    """Two row tiles (the second partial), a partial N tile, K of two stages (the second
    partial: zeros past K), copied 16 bytes at a time."""
    kernel = run(MATMUL, "mm", "f16", {"M": 70, "N": 56, "K": 72})
    assert "_wgmma_tiles_mm_0" in kernel.kernel.py_func.__qualname__  # the wgmma kernel ran


def test_bf16_matmul_on_wgmma_around_the_stage_ring_agrees():
    """bf16 (stages hold its bits), K of 5 stages through a ring of 3."""
    run(MATMUL, "mmb", "bf16", {"M": 33, "N": 64, "K": 320})


def test_split_k_and_batches_on_wgmma_agree():
    """K split into 2 shares (partial sums, then the second kernel); a batched product
    with gathered B (N of 18: copies under 16 bytes still run the tile they are given)."""
    run(MATMUL, "split", "f16", {"M": 20, "N": 64, "K": 192}, tuned=((20, 64, 192, 1), (64, 64, 2)))
    run(BATCHED, "bat", "f16", {"B": 2, "M": 9, "N": 18, "K": 24},
        tuned=((9, 18, 24, 2), (64, 64, 1)))


def test_a_stage_layout_the_descriptors_do_not_name_fails(monkeypatch):
    """B's stage unswizzled while its descriptors say 128-byte swizzle: the twins read
    what the tensor cores would, so the result is wrong."""
    unswizzled = emit_wgmma.WgmmaContractionEmitter.stage_offset

    def stage_offset(self, side, row, chunk):
        if side == "a":
            return unswizzled(self, side, row, chunk)
        return f"(({chunk}) >> 3) * B_BLOCK + {row} * 64 + ((({chunk}) & 7) << 3)"
    monkeypatch.setattr(emit_wgmma.WgmmaContractionEmitter, "stage_offset", stage_offset)
    with pytest.raises(AssertionError, match="max abs error"):
        run(MATMUL, "bad", "f16", {"M": 8, "N": 64, "K": 16})


def test_the_tile_model_prefers_wgmma_tiles_for_large_16_bit_products():
    """On the GPU's geometry a 4096^3 f16 product takes a wgmma tile (its own FMA rate),
    and explain names warpgroup MMA; decode's few rows take mma.sync's thin tiles."""
    from mlfuse.codegen.tile_model import FMA_PER_US, _contraction_plan, wgmma_tile_rates
    cuda = helpers.mma_geometry("cuda")
    wgmma = cuda["wgmma_tiles"]
    tiles = wgmma + tuple(t for t in cuda["tiles"] if t not in wgmma)
    (bm, bn, splits), _, _ = _contraction_plan(
        tiles, 4096, 4096, 4096, 1, 132, 64, cuda["bk"], FMA_PER_US["mma"], 2, 0.35,
        tile_rates=wgmma_tile_rates(wgmma))
    assert (bm, bn) in wgmma and splits == 1
    from mlfuse.hardware import get_target
    from mlfuse.pipeline import compile_text
    from mlfuse.tools.explain import contraction_reason
    module = compile_text(MATMUL.format(name="f", t="f16"), "f.fuse")
    (kernel,) = [op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]
    text = contraction_reason(kernel, {"M": 4096, "N": 4096, "K": 4096}, get_target())
    assert text.startswith("warpgroup MMA (wgmma) tiles of 128x256, K not split"), text
    # decode (M of 16): mma.sync's thin tiles, K split
    assert contraction_reason(kernel, {"M": 16, "N": 4096, "K": 4096},
                              get_target()).startswith("tensor cores tiles of 16x128"), text
