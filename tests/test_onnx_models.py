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
    # the Q, K and V projections, at these sizes ([2, 8, 16], K = 16), are one kernel
    # whose threads walk all three sums (a thread a point; the weights' loads, which
    # do not read the innermost point index, shared by a warp's runs of lanes) and
    # store the heads layout (the attention matmuls then read plain operands): 9 kernels
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
                    helper.make_node("NonZero", ["r"], ["a"], name="where_set")],
                   [_info("x", [4])], [_info("a", [1, 4], TensorProto.INT64)])
    with pytest.raises(MlfuseError, match=r"ONNX node 'where_set' \(NonZero\): unsupported "
                       "operator"):
        import_onnx(model)
    path = tmp_path / "nonzero.onnx"
    onnx.save(model, str(path))
    assert cli.main(["compile", str(path)]) == 1
    assert "'where_set' (NonZero)" in capsys.readouterr().err


def test_an_unsupported_attribute_is_an_error_naming_the_node():
    pads = numpy_helper.from_array(np.array([1, 1], np.int64), "pads")
    model = _model([helper.make_node("Pad", ["x", "pads"], ["y"], name="mirror", mode="reflect")],
                   [_info("x", [4])], [_info("y", [6])], [pads])
    with pytest.raises(MlfuseError, match=r"'mirror' \(Pad\): mode='reflect' is not supported"):
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


# -- small synthetic graphs, one per operator family, against ONNX Runtime ------------------
def _weights(name, shape, seed):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def _ints(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype), name)


def _matches_onnx_runtime(model, feeds, simulate=True):
    """The graph's outputs from mlfuse (NumPy tensor interpreter, and the compiled
    kernels under the simulator) equal ONNX Runtime's within the checking tolerance."""
    ort = pytest.importorskip("onnxruntime")
    from mlfuse.interp.tensor_interp import run_tensor
    onnx.checker.check_model(model, full_check=True)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
    imported = import_onnx(model)
    args = [feeds[n] for n in imported.input_names]
    ops, reduced = program_size(imported.func)
    for got, want in zip(run_tensor(imported.func, args + [a for _, a in imported.constants]),
                         expected):
        assert_close(got, want, ops, what="tensor interpreter", reduced=reduced)
    if simulate:
        for got, want in zip(compile_onnx(model)(*args), expected):
            assert_close(got, want, ops, what="kernels", reduced=reduced)
    return imported


def test_conv_batchnorm_relu_maxpool_global_pool_gemm():
    """A ResNet stem in miniature: Conv, BatchNormalization, Relu, MaxPool (ceil_mode),
    GlobalAveragePool, Flatten, Gemm."""
    c = 4
    inits = [_weights("w", [c, 3, 3, 3], 1), _weights("scale", [c], 2), _weights("bias", [c], 3),
             _weights("mean", [c], 4),
             numpy_helper.from_array(np.linspace(0.5, 2, c).astype(np.float32), "var"),
             _weights("fc", [c, 5], 5), _weights("fc_b", [5], 6)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("BatchNormalization", ["conv", "scale", "bias", "mean", "var"],
                              ["bn"], epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["act"]),
             helper.make_node("MaxPool", ["act"], ["pool"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1),
             helper.make_node("GlobalAveragePool", ["pool"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc", "fc_b"], ["y"])]
    model = _model(nodes, [_info("x", [2, 3, 7, 7])], [_info("y", [2, 5])], inits)
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 7)).astype(np.float32)
    _matches_onnx_runtime(model, {"x": x})


def test_depthwise_conv_squeeze_excite_hard_activations_and_asymmetric_pooling():
    """MobileNet's pieces: depthwise Conv (group = channels, SAME_UPPER padding with an
    odd total), Clip (ReLU6), HardSwish, a squeeze-excite gate (GlobalAveragePool, 1x1
    Convs, HardSigmoid, Mul), AveragePool with one-sided pads, a 1-D Conv."""
    c = 4
    inits = [_weights("dw", [c, 1, 3, 3], 1), _weights("se1", [2, c, 1, 1], 2),
             _weights("se2", [c, 2, 1, 1], 3), _weights("w1d", [3, c, 3], 4),
             numpy_helper.from_array(np.float32(0.0), "lo"),
             numpy_helper.from_array(np.float32(6.0), "hi"),
             _ints("shape3", [2, c, 16])]
    nodes = [helper.make_node("Conv", ["x", "dw"], ["dwc"], group=c, strides=[2, 2],
                              auto_pad="SAME_UPPER"),
             helper.make_node("Clip", ["dwc", "lo", "hi"], ["relu6"]),
             helper.make_node("HardSwish", ["relu6"], ["hs"]),
             helper.make_node("GlobalAveragePool", ["hs"], ["sq"]),
             helper.make_node("Conv", ["sq", "se1"], ["ex1"]),
             helper.make_node("Relu", ["ex1"], ["ex1r"]),
             helper.make_node("Conv", ["ex1r", "se2"], ["ex2"]),
             helper.make_node("HardSigmoid", ["ex2"], ["gate"], alpha=0.25, beta=0.4),
             helper.make_node("Mul", ["hs", "gate"], ["se"]),
             helper.make_node("AveragePool", ["se"], ["avg"], kernel_shape=[2, 2],
                              pads=[0, 0, 1, 1]),
             helper.make_node("Reshape", ["avg", "shape3"], ["seq"]),
             helper.make_node("Conv", ["seq", "w1d"], ["y"], pads=[2, 0])]
    model = _model(nodes, [_info("x", [2, c, 7, 7])], [_info("y", [2, 3, 16])], inits)
    x = np.random.default_rng(1).standard_normal((2, c, 7, 7)).astype(np.float32) * 3
    _matches_onnx_runtime(model, {"x": x})


def test_attention_with_split_slice_concat_gather_where_expand():
    """A tiny decoder attention: token embeddings by Gather of run-time INT64 ids, a
    fused QKV projection Split in three (opset 18 num_outputs), rotate-half RoPE on q
    (Slice, Neg, Concat), a causal mask (Where over a known lower-triangular mask),
    Softmax, and a padded, tiled output."""
    s, d = 4, 8
    causal = np.tril(np.ones((s, s), bool))
    inits = [_weights("table", [10, d], 1), _weights("wqkv", [d, 3 * d], 2),
             numpy_helper.from_array(causal, "causal"),
             numpy_helper.from_array(np.float32(-1e9), "neg"),
             numpy_helper.from_array(np.float32(d ** -0.5), "scale"),
             _ints("half_start", [0]), _ints("half_end", [d // 2]), _ints("end", [2 ** 62]),
             _ints("last", [-1]), _ints("pads", [0, 1, 0, 0, 0, 1]), _ints("reps", [1, 1, 2]),
             _ints("pos_shape", [2, s, d])]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"]),
             helper.make_node("MatMul", ["emb", "wqkv"], ["qkv"]),
             helper.make_node("Split", ["qkv"], ["q", "k", "v"], axis=-1, num_outputs=3),
             helper.make_node("Slice", ["q", "half_start", "half_end", "last"], ["q1"]),
             helper.make_node("Slice", ["q", "half_end", "end", "last"], ["q2"]),
             helper.make_node("Neg", ["q2"], ["q2n"]),
             helper.make_node("Concat", ["q2n", "q1"], ["q_rot"], axis=-1),
             helper.make_node("Add", ["q", "q_rot"], ["q_rope"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q_rope", "kt"], ["qk"]),
             helper.make_node("Mul", ["qk", "scale"], ["scores"]),
             helper.make_node("Where", ["causal", "scores", "neg"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
             helper.make_node("MatMul", ["probs", "v"], ["ctx"]),
             helper.make_node("Expand", ["ctx", "pos_shape"], ["wide"]),
             helper.make_node("Pad", ["wide", "pads"], ["padded"]),
             helper.make_node("Tile", ["padded", "reps"], ["y"])]
    model = _model(nodes, [_info("ids", [2, s], TensorProto.INT64)],
                   [_info("y", [2, s + 1, 2 * (d + 1)])], inits, opset=18)
    ids = np.array([[1, 4, 9, 0], [3, 3, -1, 7]], np.int64)  # -1: the last row, as NumPy
    _matches_onnx_runtime(model, {"ids": ids})


def test_argmax_cumsum_and_int64_results():
    """ArgMax (keepdims, select_last_index) and ArgMin give INT64; CumSum exclusive and
    reversed; Cast to INT64 and back."""
    inits = [_ints("axis", 1)]
    nodes = [helper.make_node("ArgMax", ["x"], ["first"], axis=1, keepdims=0),
             helper.make_node("ArgMax", ["x"], ["last"], axis=1, select_last_index=1),
             helper.make_node("ArgMin", ["x"], ["low"], axis=-1, keepdims=0),
             helper.make_node("CumSum", ["x", "axis"], ["running"], exclusive=1, reverse=1),
             helper.make_node("Floor", ["running"], ["whole"]),
             helper.make_node("Cast", ["whole"], ["as_int"], to=TensorProto.INT64),
             helper.make_node("Cast", ["as_int"], ["y"], to=TensorProto.FLOAT)]
    model = _model(nodes, [_info("x", [3, 6])],
                   [_info("first", [3], TensorProto.INT64), _info("last", [3, 1], TensorProto.INT64),
                    _info("low", [3], TensorProto.INT64), _info("y", [3, 6])], inits)
    x = np.array([[1, 5, 5, 0, 2, 5], [3, 3, 3, 3, 3, 3], [-1, 7, 2, 7, -4, 0]], np.float32)
    _matches_onnx_runtime(model, {"x": x})


def test_normalizations_and_activations_of_other_families():
    """InstanceNormalization, PRelu, Elu, Selu, Celu, Softsign, Softplus, Mish,
    ThresholdedRelu, Sum, Mean, GlobalMaxPool: interpreter and kernels vs ONNX Runtime."""
    c = 3
    inits = [_weights("scale", [c], 1), _weights("bias", [c], 2),
             numpy_helper.from_array(np.full((c, 1, 1), 0.2, np.float32), "slope")]
    nodes = [helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["inorm"]),
             helper.make_node("PRelu", ["inorm", "slope"], ["a"]),
             helper.make_node("Elu", ["x"], ["b"], alpha=0.7),
             helper.make_node("Selu", ["x"], ["c"]),
             helper.make_node("Celu", ["x"], ["d"], alpha=2.0),
             helper.make_node("Softsign", ["x"], ["e"]),
             helper.make_node("Softplus", ["x"], ["f"]),
             helper.make_node("Mish", ["x"], ["h"]),
             helper.make_node("ThresholdedRelu", ["x"], ["i"], alpha=0.5),
             helper.make_node("Sum", ["a", "b", "c", "d"], ["sum"]),
             helper.make_node("Mean", ["e", "f", "h", "i"], ["mean"]),
             helper.make_node("Add", ["sum", "mean"], ["y"]),
             helper.make_node("GlobalMaxPool", ["y"], ["peak"])]
    model = _model(nodes, [_info("x", [2, c, 4, 5])],
                   [_info("y", [2, c, 4, 5]), _info("peak", [2, c, 1, 1])], inits, opset=18)
    x = np.random.default_rng(3).standard_normal((2, c, 4, 5)).astype(np.float32) * 3
    _matches_onnx_runtime(model, {"x": x})


def test_empty_split_parts_and_slices_drop_out_of_concat():
    """A Split part of size 0 and an empty Slice (as exported graphs make for a rotary
    dimension equal to the head size) are known empty arrays that Concat leaves out."""
    inits = [_ints("sizes", [6, 0]), _ints("zero", [0]), _ints("one", [1])]
    nodes = [helper.make_node("Split", ["x", "sizes"], ["whole", "none"], axis=1),
             helper.make_node("Slice", ["x", "one", "one", "one"], ["nothing"]),  # x[:, 1:1]
             helper.make_node("Concat", ["none", "whole", "nothing"], ["y"], axis=1)]
    model = _model(nodes, [_info("x", [2, 6])], [_info("y", [2, 6])], inits, opset=13)
    imported = _matches_onnx_runtime(model, {"x": np.arange(12, dtype=np.float32).reshape(2, 6)},
                                     simulate=False)
    assert "tensor.concat" not in str(imported.module)


@pytest.mark.parametrize("node, inputs, message", [
    (helper.make_node("BatchNormalization", ["x", "c", "c", "c", "c"], ["y"], training_mode=1),
     [], r"\(BatchNormalization\): training_mode=1 is not supported"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], storage_order=1),
     [], r"\(MaxPool\): storage_order=1 is not supported"),
    (helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[3, 4]),
     [], r"\(Split\): split \[3, 4\] sums to 7, not the axis size 4"),
    (helper.make_node("Slice", ["x", "s", "e"], ["y"]), ["s"],
     r"\(Slice\): starts \(input 's'\) must be known when compiling"),
    (helper.make_node("Gather", ["x", "i"], ["y"], axis=1), [],
     r"\(Gather\): index 4 is out of range for an axis of size 4"),
    (helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2]), [],
     r"\(AveragePool\): dilations \[2, 2\] are not supported"),
])
def test_unsupported_forms_are_errors_naming_the_node_and_attribute(node, inputs, message):
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "c"), _ints("e", [2]),
             _ints("i", [0, 4])]
    graph_inputs = [_info("x", [1, 4, 4, 4])] + [_info(n, [1], TensorProto.INT64) for n in inputs]
    model = _model([node], graph_inputs, [_info(o, None) for o in node.output], inits)
    with pytest.raises(MlfuseError, match=message):
        import_onnx(model)


def test_known_gather_indices_become_slices_when_evenly_spaced():
    """Known position ids 0..S-1 (and any evenly spaced known indices, negatives counted
    from the end) into run-time data are a strided slice; other known INT64 indices an
    INT32 parameter."""
    inits = [_ints("positions", [[0, 1, 2, 3]]), _ints("odd", [-1, 3, 1]),
             _ints("scattered", [[2, 0], [5, 5]])]
    nodes = [helper.make_node("Gather", ["x", "positions"], ["a"], axis=1),
             helper.make_node("Gather", ["x", "odd"], ["b"], axis=1),
             helper.make_node("Gather", ["x", "scattered"], ["c"], axis=1)]
    model = _model(nodes, [_info("x", [2, 6])],
                   [_info("a", [2, 1, 4]), _info("b", [2, 3]), _info("c", [2, 2, 2])], inits)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    imported = _matches_onnx_runtime(model, {"x": x})
    gathers = [op for op in imported.func.body.ops if op.name == "tensor.gather"]
    assert len(gathers) == 1 and gathers[0].operands[1].type.dtype == "i32"
    assert [n for n, _ in imported.constants] == ["scattered"]
