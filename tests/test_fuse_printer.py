"""mlfuse.frontend.fuse_printer: tensor IR -> .fuse source that parses back to the same program."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlfuse.frontend import parse_source
from mlfuse.frontend.fuse_printer import print_fuse
from mlfuse.interp import run_tensor
from mlfuse.ir.printer import print_ir

from helpers import assert_close, random_inputs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.fuse"))


def _ops(module):
    return [op.name for op in module.funcs[0].body.ops]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_print_and_parse_back_to_the_same_ir(path):
    module = parse_source(path.read_text(), str(path))
    text = print_fuse(module)
    again = parse_source(text, "printed.fuse")
    # same ops and types; only value names may differ
    assert _ops(again) == _ops(module)
    assert [str(f.args[i].type) for f in again.funcs for i in range(len(f.args))] == \
           [str(f.args[i].type) for f in module.funcs for i in range(len(f.args))]
    assert print_fuse(again) == text  # a fixed point


SOURCE = """
func edge(x: f32[N, 4], c: bool[N, 4], k: i32[4]) -> (f32[N, 4], i32[4], f32[N], f32[N, 4]) {
    a = where(c, x * -0.5, x ** 2.0)
    b = where(c, 1.5, x)                 # the literal takes x's dtype
    s = sum(a + b, axis=1)
    m = maximum(k, cast(-3, dtype=i32))
    z = cast(2.0, dtype=f32) - softmax(x, axis=-1)
    u = where(c, cast(1.0, dtype=f32), cast(-2.0, dtype=f32))  # no tensor partner
    return z / 1e-3, m * 2, -s, u
}
"""


def test_literals_operators_and_constants_survive_the_round_trip():
    module = parse_source(SOURCE, "edge.fuse")
    text = print_fuse(module)
    assert "x * (-0.5)" in text and "where(c, 1.5, x)" in text
    assert "maximum(k, (-3))" in text
    assert "cast((-2.0), dtype=f32)" in text  # a constant with no tensor partner
    again = parse_source(text, "printed.fuse")
    func, func2 = module.funcs[0], again.funcs[0]
    args = random_inputs(func, {"N": 3})
    for want, got in zip(run_tensor(func, args), run_tensor(func2, args)):
        assert_close(got, want)


def test_an_imported_onnx_model_prints_as_equivalent_fuse_source():
    pytest.importorskip("onnx")
    from mlfuse.frontend.onnx_import import import_onnx
    imported = import_onnx(ROOT / "examples" / "onnx" / "encoder_block.onnx")
    text = print_fuse(imported.module, "from encoder_block.onnx")
    assert text.startswith("# from encoder_block.onnx\nfunc main_graph(x: f32[2, 8, 16], ")
    again = parse_source(text, "encoder_block.fuse")
    assert _ops(again) == _ops(imported.module)
    x = np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32)
    args = [x] + [a for _, a in imported.constants]
    (want,), (got,) = run_tensor(imported.func, args), run_tensor(again.funcs[0], args)
    np.testing.assert_array_equal(got, want)


def test_loop_level_ops_have_no_fuse_form():
    from mlfuse.pipeline import lower
    from mlfuse.errors import MlfuseError
    module = lower(parse_source(SOURCE, "edge.fuse"), "loops")
    with pytest.raises(MlfuseError, match="has no .fuse form"):
        print_fuse(module)
    assert print_ir(module)  # the IR printer is the way to show those
