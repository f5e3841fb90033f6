"""Kernels whose code is the same but for names are emitted once and aliased
(mlfuse/codegen/shared_code.py): a model's repeated layers compile once. The forms are
exact: any difference in what the code does (a constant, an attribute, a global, the
order of a keyword-called function's parameters) keeps two texts apart."""
import mlfuse
from mlfuse.codegen import generate
from mlfuse.codegen.shared_code import canonical_form, share_identical
from mlfuse.interp.tensor_interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import assert_results_close, random_inputs

# two layers over the same shapes, then a third over others: the first two share code
LAYERS = """func layers(x: f32[8, 16], w1: f32[16, 16], b1: f32[16], w2: f32[16, 16],
                    b2: f32[16], w3: f32[16, 8]) -> f32[8, 8] {
    h1 = relu(matmul(x, w1) + b1)
    h2 = relu(matmul(h1, w2) + b2)
    return matmul(h2, w3)
}
"""

KERNEL = '''\
# sources: {y} = tensor.add
@cuda.jit
def {k}({x}, {y}):
    """Adds a constant."""
    i = cuda.grid(1)
    {v} = {x}[i] + np.float32({c})
    {y}[i] = {v}.{attr}
'''


def _kernel(k="k0", x="a", y="b", v="t", c="1.0", attr="real"):
    return KERNEL.format(k=k, x=x, y=y, v=v, c=c, attr=attr)


def test_texts_the_same_but_for_names_share_one_form():
    form, names = canonical_form(_kernel())
    other, other_names = canonical_form(_kernel("k7", "p", "q", "u"))
    assert form == other and names == ["k0"] and other_names == ["k7"]


def test_a_constant_an_attribute_or_a_global_keeps_texts_apart():
    form = canonical_form(_kernel())[0]
    assert canonical_form(_kernel(c="2.0"))[0] != form
    assert canonical_form(_kernel(c="-0.0"))[0] != canonical_form(_kernel(c="0.0"))[0]
    assert canonical_form(_kernel(attr="imag"))[0] != form
    assert canonical_form(_kernel().replace("np.float32", "np.float64"))[0] != form


def test_a_module_name_read_as_an_attribute_or_a_keyword_parameter_stays_apart():
    # renaming k0 would also rename the attribute x.k0: such a text keeps its own form
    text = _kernel().replace("cuda.grid(1)", "cuda.grid(1) + b.k0")
    assert canonical_form(text)[0] != canonical_form(text.replace("k0", "k1"))[0]
    call = "def f({p}, {q}):\n    return {p} - {q}\n\nr = f(a=1, b=2)\n"
    assert (canonical_form(call.format(p="a", q="b"))[0]
            != canonical_form(call.format(p="b", q="a"))[0])


def test_a_repeated_text_becomes_aliases_of_the_first():
    texts = share_identical([_kernel(), _kernel("k1", "p", "q"), _kernel("k2", c="3.0")])
    assert texts[0] == _kernel() and texts[2] == _kernel("k2", c="3.0")
    assert texts[1].splitlines() == [
        "# sources: q = tensor.add",
        "# the code of k0 but for names: one compile serves both", "k1 = k0"]


def test_repeated_layers_compile_once_and_run_as_before():
    module = compile_text(LAYERS, "layers.fuse")
    source = generate(module, "cuda")
    # three contractions, two distinct codes: the second layer's names are aliases
    assert source.count("def _tiles_") == 2
    assert "layers_1 = layers_0" in source and "_tiles_layers_1 = _tiles_layers_0" in source
    compiled = mlfuse.compile_source(LAYERS, "layers.fuse", target="simulator")
    assert "layers_1 = layers_0" in compiled.source
    func = parse_program(LAYERS, "layers.fuse").funcs[0]
    inputs = random_inputs(func, {}, seed=3)
    assert_results_close(func, run_tensor(func, inputs), compiled.layers(*inputs))


def test_split_k_second_kernels_share_their_code_apart_from_the_tiles():
    """Two contractions over different K: their tile kernels differ, their split-K
    second kernels (the same outputs and epilogue) are one code."""
    source = generate(compile_text(
        "func two(x: f32[8, 512], w1: f32[512, 16], y: f32[8, 1024], w2: f32[1024, 16],\n"
        "         b: f32[16]) -> (f32[8, 16], f32[8, 16]) {\n"
        "    return relu(matmul(x, w1) + b), relu(matmul(y, w2) + b)\n}\n", "two.fuse"), "cuda")
    assert source.count("def _tiles_") == 2
    assert "two_1_finish = two_0_finish" in source and "def two_1_finish" not in source


def _kernel_definitions(source: str) -> int:
    """The kernels (and contraction factories) a generated module defines: what a first
    call may compile, aliases left out."""
    return source.count("\n@cuda.jit(") - source.count("\n@cuda.jit(device=True") + \
        source.count("\ndef _tiles_")


def test_a_deeper_encoder_compiles_no_more_kernel_codes():
    """A BERT encoder (benchmarks/compile_time.py's ONNX graph, small): the first and
    last layers differ from the rest (the graph's input, its output), every middle layer
    is the same code as the one before, so a fourth layer adds aliases, no compiles."""
    pytest.importorskip("onnx")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from compile_time import bert_model

    from mlfuse.frontend.onnx_import import import_onnx
    from mlfuse.pipeline import lower
    sources = [generate(lower(import_onnx(bert_model(layers, hidden=32, heads=2, ffn=64,
                                                     seq=8).SerializeToString()).module,
                              "fused"), "cuda") for layers in (3, 4)]
    assert _kernel_definitions(sources[0]) == _kernel_definitions(sources[1])
    shared = [s.count("but for names") for s in sources]
    assert shared[1] > shared[0] >= 5


STATIC_LAYERS = """func layers(x: f32[64, 32], w1: f32[32, 32], b1: f32[32], w2: f32[32, 32],
                    b2: f32[32], w3: f32[32, 32], b3: f32[32]) -> f32[64, 32] {
    h1 = x + relu(matmul(x, w1) + b1)
    h2 = h1 + relu(matmul(h1, w2) + b2)
    return h2 + relu(matmul(h2, w3) + b3)
}
"""


def test_a_first_call_of_three_identical_layers_compiles_one_kernel(tmp_path):
    """mlfuse.tools.compile_profile --dry runs the "cuda" host function dry (no GPU, no
    toolkit: nothing is compiled) and lists the kernels a first call compiles: the
    three layers' contractions are one tile kernel in one configuration."""
    path = tmp_path / "layers.fuse"
    path.write_text(STATIC_LAYERS)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["MLFUSE_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-W", "ignore", "-m", "mlfuse.tools.compile_profile",
                           "--dry", str(path)], capture_output=True, text=True, env=env,
                          check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["kernels"] == report["tile_kernels"] == 1
    assert report["labels"][0].startswith("layers_0[")
