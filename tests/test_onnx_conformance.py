"""ONNX's own node test cases, compiled by mlfuse and run under the CUDA simulator.

Every case of ``onnx.backend.test.case.node.collect_testcases()`` whose nodes are
all operators mlfuse imports is collected: the single-operator cases and the
"expanded" ones (a function-op spelled out in supported operators). INT64 graph
inputs (the shapes and axes some cases feed as inputs) are fixed at compile time
as static inputs, since mlfuse needs shapes and axes when compiling.

A case either passes, comparing with the case's own expected outputs and its
rtol/atol, or is listed in ``SKIPS`` with the reason; a skipped case must still
fail cleanly with an MlfuseError naming the problem (never a crash), and a listed
case that starts to compile fails here so that the list stays true.
Cases whose tensors exceed ``SIMULATOR_LIMIT`` elements are checked with the
fused-level NumPy interpreter instead of the (slow) simulator.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from mlfuse.errors import MlfuseError  # noqa: E402
from mlfuse.interp import run_loops  # noqa: E402
from mlfuse.frontend.onnx_import import compile_onnx, import_onnx  # noqa: E402
from mlfuse.frontend.onnx_import.graph import StaticInputNeeded  # noqa: E402
from mlfuse.frontend.onnx_import.ops import CONVERTERS  # noqa: E402

SIMULATOR_LIMIT = 1024  # elements of the largest input or output (test_erf has 3072)

_TYPES = r"int8|int16|uint8|uint16|uint32|uint64|INT4|INT2|FLOAT8|FLOAT4|string"
SKIPS = [  # (pattern on the case name, why mlfuse does not run it)
    (rf"({_TYPES})", "an element type mlfuse lacks (it has f16, bf16, f32, f64, i32, i64, bool)"),
    (r"^test_div_int32_trunc$", "integer division (mlfuse's div is float-only)"),
    # (INT64 inputs are static: int64 ** int64 folds at import time and runs)
    (r"^test_pow_types_int(?!64_int64)", "integer Pow (mlfuse's pow is float-only)"),
    (r"^test_identity_(sequence|opt)$", "sequence and optional types"),
    (r"^test_reduce_\w+_bool_inputs$", "reducing bool tensors"),
    ((r"empty_set|non_reduced_axis_zero|allowzero|^test_castlike_\w+_expanded$"
      r"|^test_shape_start_greater_than_end$|_shape_zero$|zero_size|^test_slice_start_out_of"),
     "zero-size tensors (mlfuse needs positive dims)"),
    (r"_training_mode$", "BatchNormalization training_mode=1 (mlfuse imports inference graphs)"),
    (r"window(_symmetric)?_expanded$",
     "Range with a limit computed at run time: the result's size depends on values"),
    (r"^test_(edge|reflect|wrap)_pad$", "Pad modes other than constant"),
    (r"^test_(average|max)pool_3d", "3-D windows (mlfuse pools and convolves in 1-D and 2-D)"),
    (r"^test_averagepool_2d_dilations$", "AveragePool with dilations (opset 19)"),
    (r"^test_maxpool_with_argmax", "MaxPool's Indices output"),
]


def _skip_reason(name: str) -> str | None:
    return next((why for pattern, why in SKIPS if re.search(pattern, name)), None)


def _cases():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [c for c in cases if {n.op_type for n in c.model.graph.node} <= set(CONVERTERS)]


CASES = _cases()


def _array(value) -> np.ndarray:
    """Data sets hold arrays, or TensorProtos for types NumPy lacks."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def _static_inputs(case, inputs):
    """INT64 inputs (shapes, axes) become compile-time constants."""
    int64 = onnx.TensorProto.INT64
    return {info.name: np.asarray(value) for info, value in zip(case.model.graph.input, inputs)
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type == int64}


def _run(case, inputs):
    """Compile and run; a graph input the importer needs when compiling (e.g. CumSum's
    INT32 axis) is fixed as a static input and the case compiled again."""
    static = _static_inputs(case, inputs)
    values = dict(zip((i.name for i in case.model.graph.input), inputs))
    while True:
        try:
            return _run_with(case, inputs, static)
        except StaticInputNeeded as e:
            if e.value_name not in values or e.value_name in static:
                raise
            static[e.value_name] = np.asarray(values[e.value_name])


def _run_with(case, inputs, static):
    names = [i.name for i in case.model.graph.input]
    dynamic = [np.require(v, requirements="C") for n, v in zip(names, inputs) if n not in static]
    largest = max((_array(a).size for a in list(inputs) + list(case.data_sets[0][1])),
                  default=0)
    if largest <= SIMULATOR_LIMIT:
        return list(compile_onnx(case.model, static_inputs=static)(*dynamic))
    from mlfuse.pipeline import lower
    imported = import_onnx(case.model, static_inputs=static)
    fused = lower(imported.module, "fused")
    return run_loops(fused.func(imported.func_name),
                     dynamic + [a for _, a in imported.constants])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    reason = _skip_reason(case.name)
    inputs, expected = ([_array(v) for v in part] for part in case.data_sets[0])
    if reason is not None:
        with pytest.raises(MlfuseError):
            _run(case, inputs)
        pytest.skip(reason)
    results = _run(case, inputs)
    assert len(results) == len(expected)
    for got, want, info in zip(results, expected, case.model.graph.output):
        assert got.dtype == want.dtype and got.shape == want.shape, info.name
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol, err_msg=info.name)


def test_the_collection_covers_every_supported_operator():
    tested = {n.op_type for c in CASES for n in c.model.graph.node}
    assert tested >= {"Add", "Conv", "Gemm", "LayerNormalization", "MatMul", "Softmax",
                      "ReduceMean", "Reshape", "Gelu", "Where", "Cast"}
    assert len(CASES) > 300
