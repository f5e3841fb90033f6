"""SIMT contraction tiles with every thread shape (mlfuse/codegen/contraction.py,
tile_model.py ``_simt_shape``): under the simulator, tiles whose threads compute 8 x 8,
4 x 4, 8 x 4 and 4 x 8 outputs (K steps of 8 and 16, with and without split-K, a thin
tile whose last threads load no operands) agree with the NumPy interpreter; and the
model gives mid-size tiles 256 threads and counts the warps an SM holds."""
import pytest
from helpers import assert_close

import mlfuse
from mlfuse.codegen.contraction import CUDA_TILES
from mlfuse.codegen.tile_model import _contraction_plan, _simt_shape
from mlfuse.interp import run_tensor
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import program_size, random_inputs

MATMUL = ("func f(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
          "    return relu(matmul(x, w) + b)\n}\n")
CONV = ("func f(x: f32[N, 4, 4, 5], w: f32[6, 4, 3, 3], b: f32[6]) -> f32[N, 6, 4, 5] {\n"
        "    y = conv2d(x, w, padding=1)\n"
        "    return relu(y + reshape(b, [1, 6, 1, 1]))\n}\n")


def _check(source, dims, shape, configs, simt_threads=None):
    """Run ``source`` with each (BM, BN, splits) of ``configs`` forced at the kernel's
    (m, n, k, batch) ``shape``; each result against the interpreter."""
    module = mlfuse.compile_source(source, "simt.fuse", target="simulator")
    python_module = module.python_module
    if simt_threads:  # the GPU's thread shapes (more threads: slower under the simulator)
        python_module.SIMT_THREADS = simt_threads
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=7)
    want = run_tensor(func, args)[0]
    ops, reduced = program_size(func)
    for config in configs:
        python_module.f_0.tuned[shape] = config
        assert_close(module.f(*args), want, ops, f"{config}", reduced)
        assert python_module.f_0.last_shape == shape


@pytest.mark.parametrize("tile, thread", [((16, 16), (8, 8)), ((8, 8), (4, 4)),
                                          ((16, 8), (8, 4)), ((8, 16), (4, 8))])
def test_every_thread_shape_agrees_with_the_interpreter(tile, thread):
    import mlfuse.codegen.tile_model as model
    from mlfuse.codegen.contraction import SIMULATOR_THREADS
    saved, model.SIMT_THREADS = model.SIMT_THREADS, SIMULATOR_THREADS
    try:
        assert _simt_shape(*tile)[:2] == thread
    finally:
        model.SIMT_THREADS = saved
    # K = 37: K steps of 8 and 16 both end in a partial step; split in 3 shares of 16
    _check(MATMUL, {"M": 19, "N": 13, "K": 37}, (19, 13, 37, 1), [(*tile, 1), (*tile, 3)])


def test_conv_gathers_into_small_thread_tiles():
    _check(CONV, {"N": 1}, (6, 20, 36, 1), [(8, 8, 1), (16, 8, 2)])


def test_a_thin_tile_leaves_its_last_threads_no_operand_groups():
    # the GPU's 16 x 128 tile: 128 threads of 4 x 4, a K step of 16 has 64 groups of A
    assert _simt_shape(16, 128)[:3] == (4, 4, 16)
    _check(MATMUL, {"M": 5, "N": 9, "K": 20}, (5, 9, 20, 1), [(16, 128, 1)], simt_threads=256)


def test_mid_size_tiles_take_256_threads():
    threads = {(bm, bn): (bm // tm) * (bn // tn)
               for bm, bn in CUDA_TILES for tm, tn, _, _ in [_simt_shape(bm, bn)]}
    assert threads[128, 128] == threads[64, 64] == threads[128, 64] == 256
    assert threads[16, 128] == 128  # 4 x 4 is the smallest thread tile
    for bm, bn in CUDA_TILES:  # the launch bounds leave 80 registers or more
        bk, blocks = _simt_shape(bm, bn)[2:]
        assert 65536 // (threads[bm, bn] * blocks) >= 80 and bk % 8 == 0


def test_the_model_counts_resident_warps():
    """resnet18's first convs (m, n, k) = (64, 25088, 576): 64 x 64 tiles of 64 threads
    left an SM 6 warps (measured 180-210 us); the model now sees that, and 256 threads."""
    def eight_by_eight(bm, bn):  # the old tiles: 8 x 8 a thread
        return 8, 8, 8, 32768 // (bm * bn)
    old = _contraction_plan([(64, 64)], 64, 25088, 576, 1, 132, shape=eight_by_eight)
    new = _contraction_plan([(64, 64)], 64, 25088, 576, 1, 132, shape=_simt_shape)
    assert "64 threads each" in old[2] and "256 threads each" in new[2]
    assert old[1] > 2 * new[1] and 150 < old[1] < 250, (old, new)
