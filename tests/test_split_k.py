"""Split-K (mlfuse/codegen/split_k.py, tile_model.py) under the simulator: a contraction
whose K is split into shares across blocks, the shares' partial sums added in order by a
second kernel that also runs the fused epilogue, agrees with the NumPy interpreter at
small M (1 to 5 rows: decode), K not a multiple of the split, odd N, batched, conv and
f16; gives the same bits on every run; and the model splits K exactly where few blocks
would leave the GPU idle."""
import pytest

import mlfuse
from mlfuse.codegen.contraction import CUDA_TILES
from mlfuse.codegen.tile_model import _contraction_plan, _simt_shape
from mlfuse.interp import run_tensor
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close

MATMUL = ("func f(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
          "    return relu(matmul(x, w) + b)\n}\n")
CASES = {  # source, sizes, the kernel's (m, n, k, batch), the splits to force
    "decode": (MATMUL, {"M": 1, "K": 45, "N": 19}, (1, 19, 45, 1), (2, 3, 6)),
    "five_rows": (MATMUL, {"M": 5, "K": 70, "N": 33}, (5, 33, 70, 1), (4,)),
    "batched": ("func f(x: f32[B, M, K], y: f32[B, K, N]) -> f32[B, M, N] {\n"
                "    return tanh(matmul(x, y)) * 2.0\n}\n", {"B": 2, "M": 3, "K": 29, "N": 17},
                (3, 17, 29, 2), (3,)),
    "conv": ("func f(x: f32[N, 16, 5, 5], w: f32[3, 16, 3, 3], b: f32[3]) -> f32[N, 3, 5, 5] {\n"
             "    y = conv2d(x, w, padding=1)\n"
             "    return relu(y + reshape(b, [1, 3, 1, 1]))\n}\n", {"N": 1}, (3, 25, 144, 1),
             (2,)),
    "f16": ("func f(x: f16[M, K], w: f16[K, N], b: f16[N]) -> f16[M, N] {\n"
            "    return relu(matmul(x, w) + b)\n}\n", {"M": 2, "K": 40, "N": 9}, (2, 9, 40, 1),
            (2,)),
}


def _run(name, splits):
    source, dims, shape, _ = CASES[name]
    module = mlfuse.compile_source(source, f"{name}.fuse", target="simulator")
    (kernel,) = [v for k, v in vars(module.python_module).items() if k == "f_0"]
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=5)
    results = []
    for split in splits:
        kernel.tuned[shape] = (16, 16, split)
        results.append(module.f(*args))
        assert kernel.last_shape == shape
    return func, args, results, kernel


@pytest.mark.parametrize("name", sorted(CASES))
def test_split_k_agrees_with_the_interpreter(name):
    func, args, results, kernel = _run(name, CASES[name][3])
    want = run_tensor(func, args)[0]
    ops, reduced = program_size(func, dims=CASES[name][1])  # its real K (the tolerance)
    for got in results:
        assert_close(got, want, ops, name, reduced)
    assert any(config[-1] for config in kernel.kernels)  # the split kernels really ran


def test_split_k_gives_the_same_bits_every_run():
    _, _, (first, second), _ = _run("five_rows", (3, 3))
    assert first.tobytes() == second.tobytes()


def test_a_short_k_has_no_second_kernel():
    source = ("func f(q: f32[B, S, 64], k: f32[B, S, 64]) -> f32[B, S, S] {\n"
              "    return matmul(q, transpose(k, perm=[0, 2, 1]))\n}\n")
    module = mlfuse.compile_source(source, "attn.fuse", target="simulator")
    assert "_finish" not in module.source and "SPLIT" in module.source
    assert module.python_module.f_0.max_split == 1


@pytest.mark.parametrize("m, n, k, want", [
    (32, 4096, 4096, (32, 128, 8)),      # decode: 32 tiles alone would take 32 of 132 SMs
    (1, 4096, 4096, (16, 128, 16)),      # one row: the thinnest tile
    (4096, 4096, 4096, (128, 128, 1)),   # the GPU is full: no split, the largest tile
    (8192, 768, 768, (128, 128, 1)),
])
def test_the_model_splits_k_where_few_blocks_would_idle_the_gpu(m, n, k, want):
    plan, us, why = _contraction_plan(CUDA_TILES, m, n, k, 1, 132, max_split=64,
                                      shape=_simt_shape)
    assert plan == want, why
    assert ("K shares" in why) and us > 0
