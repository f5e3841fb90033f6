"""Group norm from ONNX: GroupNormalization (opset 18: scale and bias per group; opset
21: per channel) and the pattern PyTorch's exporter writes for nn.GroupNorm at opset 17
(Reshape [0, G, -1] -> InstanceNormalization with ones and zeros -> Reshape to the
input's Shape -> Mul and Add of the unsqueezed weight and bias). Each imports, is one
kernel after fusion, and matches a NumPy group norm (tiny sizes, the simulator)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from mlfuse.dialects.fused import KernelOp  # noqa: E402
from mlfuse.errors import MlfuseError  # noqa: E402
from mlfuse.frontend.onnx_import import compile_onnx, import_onnx  # noqa: E402
from mlfuse.pipeline import lower  # noqa: E402
from mlfuse.tools.checking import program_size  # noqa: E402
from helpers import assert_close  # noqa: E402

SHAPE = [1, 8, 3, 2]  # N, C, H, W: 48 elements
GROUPS = 4


def _group_norm(x, groups, scale, bias, eps, per_group):
    n, c = x.shape[:2]
    rows = x.reshape(n, groups, -1).astype(np.float64)
    normalized = (rows - rows.mean(axis=2, keepdims=True)) / np.sqrt(
        rows.var(axis=2, keepdims=True) + eps)
    if per_group:
        normalized = normalized * scale.reshape(1, groups, 1) + bias.reshape(1, groups, 1)
        return normalized.reshape(x.shape).astype(x.dtype)
    extra = (1,) * (x.ndim - 2)
    return (normalized.reshape(x.shape) * scale.reshape(c, *extra)
            + bias.reshape(c, *extra)).astype(x.dtype)


def _model(nodes, inits, opset, shape=SHAPE):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, name) for name, a in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _params(count, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(count).astype(np.float32),
            rng.standard_normal(count).astype(np.float32))


def _torch_pattern():
    """What torch.onnx.export(dynamo=False) writes for nn.GroupNorm(4, 8) at opset 17."""
    weight, bias = _params(SHAPE[1], 1)
    inits = {"shape": np.array([0, GROUPS, -1], np.int64),
             "ones": np.ones(GROUPS, np.float32), "zeros": np.zeros(GROUPS, np.float32),
             "weight": weight, "bias": bias, "axes": np.array([1, 2], np.int64)}
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["rows"]),
        helper.make_node("InstanceNormalization", ["rows", "ones", "zeros"], ["norm"],
                         epsilon=1e-5),
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Reshape", ["norm", "x_shape"], ["back"]),
        helper.make_node("Unsqueeze", ["weight", "axes"], ["w"]),
        helper.make_node("Unsqueeze", ["bias", "axes"], ["b"]),
        helper.make_node("Mul", ["back", "w"], ["scaled"]),
        helper.make_node("Add", ["scaled", "b"], ["y"]),
    ]
    return _model(nodes, inits, 17), (weight, bias, False)


def _group_normalization(opset):
    count = GROUPS if opset < 21 else SHAPE[1]
    scale, bias = _params(count, 2)
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"],
                            num_groups=GROUPS, epsilon=1e-3)
    return _model([node], {"scale": scale, "bias": bias}, opset), (scale, bias, opset < 21)


@pytest.mark.parametrize("build, eps", [(_torch_pattern, 1e-5),
                                        (lambda: _group_normalization(18), 1e-3),
                                        (lambda: _group_normalization(21), 1e-3)],
                         ids=["torch_opset17", "opset18", "opset21"])
def test_group_norm_imports_as_one_kernel_and_matches_numpy(build, eps):
    model, (scale, bias, per_group) = build()
    imported = import_onnx(model)
    fused = lower(imported.module, "fused").func(imported.func_name)
    assert sum(isinstance(op, KernelOp) for op in fused.body.ops) == 1
    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    (y,) = compile_onnx(model)(x)
    ops, reduced = program_size(imported.func)
    assert_close(y, _group_norm(x, GROUPS, scale, bias, eps, per_group), ops, reduced=reduced)


def test_a_symbolic_batch_and_image_size_take_a_quotient_dim():
    scale, bias = _params(SHAPE[1], 4)
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=2)
    model = _model([node], {"scale": scale, "bias": bias}, 21, shape=["N", 8, "H", "W"])
    imported = import_onnx(model)
    shapes = [list(op.result.type.shape) for op in imported.func.body.ops if op.results]
    assert ["N", 2, "4*H*W"] in shapes  # 8 channels in 2 groups: rows of 4*H*W
    fused = lower(imported.module, "fused").func(imported.func_name)
    assert sum(isinstance(op, KernelOp) for op in fused.body.ops) == 1


def test_channels_that_num_groups_does_not_divide_are_an_error_naming_the_node():
    scale, bias = _params(SHAPE[1], 5)
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=3,
                            name="gn")
    with pytest.raises(MlfuseError, match=r"GroupNormalization.*num_groups = 3 must divide "
                       r"the 8 channels"):
        import_onnx(_model([node], {"scale": scale, "bias": bias}, 21))
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=4)
    with pytest.raises(MlfuseError, match=r"scale has shape \[8\]; it must be \[4\] \(one per "
                       r"group in opset 18\)"):
        import_onnx(_model([node], {"scale": scale, "bias": bias}, 18))
