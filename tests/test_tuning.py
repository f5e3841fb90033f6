"""Tile tuning of contraction kernels (mlfuse.tools.tuning) on the CPU: the search times
each tile shape and K split at the call's sizes and keeps the fastest, calls then launch
that choice and still compute the right result, and the choice survives in the cache
file for a later compile of the same source on the same device."""
import json

import numpy as np
import pytest

import mlfuse
from mlfuse.tools.tuning import apply_cached, remember, tiled_kernels, tune

from helpers import assert_close

MATMUL = ("func mm(x: f32[M, K], w: f32[K, N]) -> f32[M, N] {\n"
          "    return matmul(x, w) + 1.0\n}\n")
TILES = ((16, 16), (32, 16))  # both run on the simulator (4 and 8 threads a block)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


def compiled():
    module = mlfuse.compile_source(MATMUL, "mm.fuse", target="simulator")
    module.python_module.CONTRACTION_TILES = TILES
    return module


def args(m=33, k=10, n=18):
    rng = np.random.default_rng(0)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def test_the_search_keeps_the_fastest_tile_and_calls_use_it():
    module = compiled()
    x, w = args()
    launched = []

    def timer(call):  # a stand-in clock: the 32 x 16 tile with K in 2 shares is "fastest"
        call()
        (kernel,) = tiled_kernels(module.python_module).values()
        plan = kernel.tuned[kernel.last_shape]
        launched.append(plan)
        return {(16, 16): 2.0, (32, 16): 1.5}[plan[:2]] - (plan[2] == 2)

    (choice,) = tune(module.mm, module.python_module, [x, w], timer)
    assert choice.kernel == "mm_0" and choice.shape == (33, 18, 10, 1)
    # every tile, unsplit and split (K = 10: shares of 8 K steps, so 2 at most)
    assert sorted(launched) == [(16, 16, 1), (16, 16, 2), (32, 16, 1), (32, 16, 2)]
    assert choice.best == (32, 16, 2)
    kernel = module.python_module.mm_0
    assert module.python_module._contraction_geometry(kernel, 33, 18, 10, 1)[0] == (32, 16, 2)
    assert_close(module.mm(x, w), x @ w + 1.0, 2, "tuned", reduced=10)
    assert (32, 16, False, False, True) in kernel.kernels  # the tuned choice really ran


def test_a_remembered_choice_reaches_a_later_compile_of_the_same_source():
    module = compiled()
    x, w = args()
    (choice,) = tune(module.mm, module.python_module, [x, w],
                     lambda call: {(16, 16): 1.0, (32, 16): 3.0}[
                         module.python_module.mm_0.tuned[(33, 18, 10, 1)][:2]])
    remember(module.source, "Some GPU", [choice])
    later = compiled()
    assert apply_cached(later.python_module, later.source, "Other GPU") == 0
    assert apply_cached(later.python_module, later.source, "Some GPU") == 1
    assert later.python_module.mm_0.tuned == {(33, 18, 10, 1): (16, 16, 1)}


def test_without_tuning_the_model_picks_the_tile():
    module = compiled()
    geometry = module.python_module._contraction_geometry
    tiles, grid, threads = geometry(module.python_module.mm_0, 33, 18, 10, 1)
    assert tiles[:2] in TILES
    assert grid[0] == -(-33 // tiles[0]) * -(-18 // tiles[1]) and threads == tiles[0] * tiles[1] // 64
    assert grid[1] == tiles[2]  # the K shares


def test_a_cached_choice_from_before_split_k_means_no_split(tmp_path):
    module = compiled()
    x, w = args()
    (choice,) = tune(module.mm, module.python_module, [x, w], lambda call: 1.0)
    remember(module.source, "Some GPU", [choice])
    path = tmp_path / "cache" / "tuning.json"
    data = json.loads(path.read_text())
    (entries,) = data["Some GPU"].values()
    assert entries["mm_0"] == {"33,18,10,1": [16, 16, 1]}
    entries["mm_0"] = {"33,18,10,1": [16, 16]}  # as a cache written before split-K holds it
    path.write_text(json.dumps(data))
    later = compiled()
    assert apply_cached(later.python_module, later.source, "Some GPU") == 1
    assert later.python_module.mm_0.tuned == {(33, 18, 10, 1): (16, 16, 1)}
