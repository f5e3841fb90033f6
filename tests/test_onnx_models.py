"""Real exported models (examples/onnx/, made by examples/onnx/export.py from PyTorch)
compiled by mlfuse, run under the simulator and compared with ONNX Runtime; the fusion
report of the transformer block; the CLI on .onnx files; errors for what is unsupported."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from mlfuse import cli  # noqa: E402
from mlfuse.pipeline import lower  # noqa: E402
from mlfuse.errors import MlfuseError  # noqa: E402
from mlfuse.tools.explain import explain_module  # noqa: E402
from mlfuse.frontend.onnx_import import compile_onnx, import_onnx, require_onnx  # noqa: E402
from mlfuse.tools.checking import program_size  # noqa: E402
from helpers import assert_close  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "onnx"
MODELS = {"mlp": (4, 16), "encoder_block": (2, 8, 16)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_exported_model_matches_onnx_runtime(name):
    ort = pytest.importorskip("onnxruntime")
    path = EXAMPLES / f"{name}.onnx"
    x = np.random.default_rng(1).standard_normal(MODELS[name]).astype(np.float32)
    model = compile_onnx(path)
    assert model.input_names == ["x"] and model.output_names == ["y"]
    (y,) = model(x)
    (expected,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    ops, reduced = program_size(model.imported.func)
    assert_close(y, expected, ops, what=name, reduced=reduced)


def test_fusion_report_of_the_encoder_block():
    imported = import_onnx(EXAMPLES / "encoder_block.onnx")
    (report,) = explain_module(lower(imported.module, "loops"))
    # numbers quoted in docs/onnx.md
    assert (report.kernels_before, report.kernels_after) == (61, 9)
    assert report.bytes_after < report.bytes_before


def test_device_arrays_in_give_device_arrays_out_with_initializers_copied_once():
    from numba import cuda
    model = compile_onnx(EXAMPLES / "mlp.onnx")
    x = np.random.default_rng(2).standard_normal(MODELS["mlp"]).astype(np.float32)
    (on_host,) = model(x)
    (on_device,) = model(cuda.to_device(x))
    constants = model._device_constants
    (again,) = model(cuda.to_device(x))
    assert not isinstance(on_device, np.ndarray) and model._device_constants is constants
    np.testing.assert_array_equal(on_device.copy_to_host(), on_host)
    np.testing.assert_array_equal(again.copy_to_host(), on_host)


def test_compiled_model_launches_the_fused_kernels():
    model = compile_onnx(EXAMPLES / "mlp.onnx")
    unfused = compile_onnx(EXAMPLES / "mlp.onnx", fuse=False)
    assert len(model.kernels()) < len(unfused.kernels())


def test_cli_compiles_an_onnx_model(capsys):
    assert cli.main(["compile", str(EXAMPLES / "mlp.onnx"), "--emit", "fuse"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# Imported from mlp.onnx by mlfuse.")
    assert "func main_graph(x: f32[4, 16]" in text and "layernorm(" in text
    assert cli.main(["compile", str(EXAMPLES / "mlp.onnx"), "--emit", "fused"]) == 0
    assert "fused.kernel" in capsys.readouterr().out


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_an_unsupported_operator_is_an_error_naming_the_node(tmp_path, capsys):
    model = _model([helper.make_node("Relu", ["x"], ["r"], name="act"),
                    helper.make_node("Split", ["r"], ["a", "b"], name="halves", axis=0)],
                   [_info("x", [4])], [_info("a", [2]), _info("b", [2])])
    with pytest.raises(MlfuseError, match=r"ONNX node 'halves' \(Split\): unsupported operator"):
        import_onnx(model)
    path = tmp_path / "split.onnx"
    onnx.save(model, str(path))
    assert cli.main(["compile", str(path)]) == 1
    assert "'halves' (Split)" in capsys.readouterr().err


def test_an_unsupported_attribute_is_an_error_naming_the_node():
    w = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="depthwise", group=4)],
                   [_info("x", [1, 4, 8, 8])], [_info("y", [1, 4, 6, 6])], [w])
    with pytest.raises(MlfuseError, match=r"'depthwise' \(Conv\): group=4 is not supported"):
        import_onnx(model)


def test_an_unsupported_dtype_is_an_error_naming_the_input():
    model = _model([helper.make_node("Neg", ["x"], ["y"])], [_info("x", [3], TensorProto.UINT8)],
                   [_info("y", [3], TensorProto.UINT8)])
    with pytest.raises(MlfuseError, match="graph input 'x' has element type UINT8"):
        import_onnx(model)


def test_initializers_become_parameters_bound_at_call_and_splats_constants():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "layer/W")
    ones = numpy_helper.from_array(np.ones(3, np.float32), "ones")
    shape = numpy_helper.from_array(np.array([3, 2], np.int64), "shape")
    model = _model([helper.make_node("MatMul", ["x", "layer/W"], ["m"]),
                    helper.make_node("Add", ["m", "ones"], ["s"]),
                    helper.make_node("Reshape", ["s", "shape"], ["y"])],
                   [_info("x", [2, 2])], [_info("y", [3, 2])], [w, ones, shape])
    imported = import_onnx(model)
    assert [(n, a.shape) for n, a in imported.constants] == [("layer_W", (2, 3))]
    assert [a.name_hint for a in imported.func.args] == ["x", "layer_W"]
    x = np.array([[1, 2], [3, 4]], np.float32)
    (y,) = compile_onnx(model)(x)
    np.testing.assert_array_equal(y, (x @ numpy_helper.to_array(w) + 1).reshape(3, 2))


def test_symbolic_batch_dims_become_dims_of_the_function():
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                   [_info("x", ["batch", 5])], [_info("y", ["batch", 5])])
    assert str(import_onnx(model).func.args[0].type) == "f32[batch, 5]"
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    (y,) = compile_onnx(model)(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(y, e / e.sum(axis=1, keepdims=True), 4, reduced=5)


def test_missing_onnx_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(MlfuseError, match=r"pip install 'mlfuse\[onnx\]'"):
        require_onnx()


@pytest.mark.parametrize("call", ["mlfuse.compile_onnx(PATH)",
                                  "mlfuse.cli.main(['explain', PATH])"])
def test_without_onnx_every_entry_point_says_what_to_install(call):
    """In a fresh process where onnx cannot be imported (sys.modules blocks it)."""
    script = ("import sys; sys.modules['onnx'] = None\n"
              "import mlfuse, mlfuse.cli\n"
              f"PATH = {str(EXAMPLES / 'mlp.onnx')!r}\n"
              "try:\n"
              f"    code = {call}\n"
              "except mlfuse.errors.MlfuseError as e:\n"
              "    print('MlfuseError:', e)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "pip install 'mlfuse[onnx]'" in done.stdout + done.stderr


def test_run_and_explain_take_an_onnx_model(capsys):
    """The model's initializers are bound to their own values, the graph inputs random."""
    assert cli.main(["run", str(EXAMPLES / "mlp.onnx")]) == 0
    out = capsys.readouterr().out
    assert "func main_graph: 3 kernel(s)" in out and out.endswith("PASS\n")
    assert cli.main(["explain", str(EXAMPLES / "encoder_block.onnx"), "--json"]) == 0
    import json
    report = json.loads(capsys.readouterr().out)["main_graph"]
    assert (report["kernels_before"], report["kernels_after"]) == (61, 9)


def test_a_graph_without_outputs_is_an_error(tmp_path, capsys):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")  # parses as an empty ModelProto
    assert cli.main(["compile", str(path), "--emit", "fuse"]) == 1
    assert "the ONNX graph has no outputs" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # simulated 1 / 0
def test_an_initializer_of_mixed_signed_zeros_keeps_each_sign():
    zeros = numpy_helper.from_array(np.array([0.0, -0.0, 0.0], np.float32), "zeros")
    model = _model([helper.make_node("Add", ["x", "zeros"], ["s"]),
                    helper.make_node("Reciprocal", ["s"], ["y"])],
                   [_info("x", [3])], [_info("y", [3])], [zeros])
    (y,) = compile_onnx(model)(np.array([-0.0, -0.0, 0.0], np.float32))
    np.testing.assert_array_equal(y, [np.inf, -np.inf, np.inf])
