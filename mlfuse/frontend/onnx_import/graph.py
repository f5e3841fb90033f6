"""Walking an ONNX graph into one tensor-dialect function.

The importer keeps two tables keyed by ONNX value name:

- ``values``: IR values already built (graph inputs, results of converted nodes);
- ``known``: NumPy arrays known at import time (initializers, Constant nodes,
  inputs the caller fixed with ``static_inputs``, and the outputs of nodes whose
  inputs are all known, folded with ONNX's own reference evaluator).

A known array becomes an IR value only when some node uses it as data: a splat
(every element equal, e.g. a scalar, ``[1]`` or all ones) becomes a rank-0
``tensor.constant`` broadcast to its shape, so it stays fusable; any other array
becomes an extra function parameter after the graph's inputs (the .fuse language
has no tensor literals). ``compile_onnx`` binds those parameters on every call.
Known arrays used only as shapes or axes (Reshape's shape, ReduceSum's axes)
never become values at all.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mlfuse.dialects import tensor as T
from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import FuncOp, ModuleOp, ReturnOp
from mlfuse.ir.core import OpResult, Value, VerifyError
from mlfuse.dtypes import ir_dtype as _numpy_to_ir, numpy_dtype
from mlfuse.ir.types import FLOAT_DTYPES, INT_DTYPES, TensorType, shape_problem
from mlfuse.ir.verifier import verify

# ONNX element types mlfuse has, and the IR dtype of each.
IR_DTYPE = {TensorProto.FLOAT: "f32", TensorProto.FLOAT16: "f16", TensorProto.DOUBLE: "f64",
            TensorProto.BFLOAT16: "bf16", TensorProto.INT32: "i32", TensorProto.INT64: "i64",
            TensorProto.BOOL: "bool"}
_RESERVED = {"func", "return", "true", "false"}  # .fuse keywords


def onnx_type_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type)


def ir_dtype(elem_type: int, what: str) -> str:
    """The IR dtype of an ONNX element type; a clear error for the ones mlfuse lacks."""
    try:
        return IR_DTYPE[elem_type]
    except KeyError:
        handled = ", ".join(onnx_type_name(t) for t in IR_DTYPE)
        raise MlfuseError(f"{what} has element type {onnx_type_name(elem_type)}; mlfuse handles "
                          f"{handled}") from None


def sanitize(name: str, fallback: str = "v") -> str:
    """An identifier for an ONNX name: '/layers.0/Add_output_0' -> 'layers_0_Add_output_0'."""
    ident = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", name)).strip("_")
    ident = re.sub(r"(.)_output_0$", r"\1", ident)  # torch's exporter names every value so
    if not ident:
        ident = fallback
    if ident[0].isdigit():
        ident = f"{fallback}{ident}"
    if ident in _RESERVED or keyword.iskeyword(ident):
        ident += "_"
    return ident


def load_model(model) -> onnx.ModelProto:
    """A ModelProto from itself, a path, or bytes."""
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, (bytes, bytearray)):
            return onnx.load_from_string(bytes(model))
        return onnx.load(str(model))
    except OSError as e:
        raise MlfuseError(f"cannot read ONNX model {model}: {e.strerror or e}") from None
    except Exception as e:  # protobuf's DecodeError and friends
        raise MlfuseError(f"{model} is not an ONNX model: {type(e).__name__}: {e}") from None


class StaticInputNeeded(MlfuseError):
    """A value the importer must know when compiling (a shape, axes, pads) is computed
    at run time; ``value_name`` names it (a graph input can be fixed with
    ``static_inputs``)."""

    def __init__(self, message: str, value_name: str):
        super().__init__(message)
        self.value_name = value_name


@dataclass
class ImportedGraph:
    """An ONNX graph as a tensor-dialect module with one function."""

    module: ModuleOp
    func_name: str
    input_names: list[str]        # ONNX names of the graph inputs, the first parameters
    output_names: list[str]       # ONNX names of the graph outputs, the results in order
    constants: list[tuple[str, np.ndarray]] = field(default_factory=list)
    # (parameter name, array) of the known arrays that became parameters, after the inputs

    @property
    def func(self) -> FuncOp:
        return self.module.func(self.func_name)


class GraphImporter:
    """Converts one ModelProto; the converters in ops.py call back into it."""

    def __init__(self, model: onnx.ModelProto, static_inputs: dict | None = None):
        self.model = model
        self.graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.known: dict[str, np.ndarray] = {}
        self.values: dict[str, Value] = {}
        self._materialized: dict[tuple[str, str | None], Value] = {}
        self.constants: list[tuple[str, np.ndarray]] = []
        self.node: onnx.NodeProto | None = None
        self.node_index = 0
        for init in self.graph.initializer:
            self.known[init.name] = _initializer_array(init)
        static_inputs = dict(static_inputs or {})
        graph_inputs = [i.name for i in self.graph.input]
        for name, array in static_inputs.items():
            if name not in graph_inputs:
                raise MlfuseError(f"static input '{name}' is not an input of the graph "
                                  f"(inputs: {', '.join(graph_inputs)})")
            self.known[name] = np.asarray(array)
        # an input that is also an initializer is a constant with a default (ONNX IR < 4)
        self.inputs = [i for i in self.graph.input if i.name not in self.known]
        for index, value_info in enumerate(self.graph.input):
            if not value_info.name:  # "" means an absent optional input in ONNX
                raise MlfuseError(f"graph input #{index} has an empty name")

    # -- the whole graph ------------------------------------------------------------
    def run(self) -> ImportedGraph:
        from mlfuse.frontend.onnx_import.ops import CONVERTERS
        if not self.graph.output:  # e.g. an empty ModelProto: nothing to compute or print
            raise MlfuseError("the ONNX graph has no outputs")
        func_name = sanitize(self.graph.name or "main", "graph")
        types = [self._input_type(i) for i in self.inputs]
        self.func = FuncOp.build(func_name, types, [sanitize(i.name) for i in self.inputs], [])
        for value_info, arg in zip(self.inputs, self.func.args):
            self.values[value_info.name] = arg
        for self.node_index, self.node in enumerate(self.graph.node):
            self._convert(self.node, CONVERTERS)
        self.node = None
        results = [self._output(o) for o in self.graph.output]
        self.func.attributes["result_types"] = [v.type for v in results]
        self.func.body.append(ReturnOp(results))
        module = ModuleOp(result_types=[])
        module.body.append(self.func)
        verify(module)
        return ImportedGraph(module, func_name, [i.name for i in self.inputs],
                             [o.name for o in self.graph.output], self.constants)

    def _input_type(self, value_info) -> TensorType:
        what = f"graph input '{value_info.name}'"
        t = value_info.type
        if not t.HasField("tensor_type"):
            raise MlfuseError(f"{what} is not a tensor (sequences, maps and optionals are not "
                              "supported)")
        dtype = ir_dtype(t.tensor_type.elem_type, what)
        dims = []
        for axis, d in enumerate(t.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                if d.dim_value < 1:
                    raise MlfuseError(f"{what} has a dim of size {d.dim_value}; mlfuse needs "
                                      "positive sizes")
                dims.append(int(d.dim_value))
            else:  # dim_param, or unknown: a size fixed at call time
                dims.append(sanitize(d.dim_param or f"{value_info.name}_{axis}", "d"))
        if not t.tensor_type.HasField("shape"):
            raise MlfuseError(f"{what} has no shape; mlfuse needs every input's rank")
        problem = shape_problem(dims)  # as the .fuse frontend checks a signature
        if problem:
            raise MlfuseError(f"{what} of shape {dims}: {problem}")
        return TensorType(dtype, tuple(dims))

    def _output(self, value_info) -> Value:
        value = self.value(value_info.name)
        declared = value_info.type.tensor_type.elem_type if value_info.type.HasField(
            "tensor_type") else 0
        if declared and IR_DTYPE.get(declared) != value.type.dtype:
            raise MlfuseError(f"graph output '{value_info.name}' is declared "
                              f"{onnx_type_name(declared)} but computes {value.type.dtype}")
        if value.name_hint is None:
            value.name_hint = sanitize(value_info.name)
        return value

    def _convert(self, node, converters) -> None:
        if node.domain not in ("", "ai.onnx"):
            raise self.error(f"operators of domain '{node.domain}' are not supported")
        self._check_names(node)
        inputs = [i for i in node.input if i]
        if inputs and all(i in self.known for i in inputs):
            self._fold(node)
            return
        convert = converters.get(node.op_type)
        if convert is None:
            raise self.error("unsupported operator (docs/onnx.md lists the supported ones)")
        outputs = convert(self, node, attributes(node))
        for name, out in zip(node.output, outputs):
            if not name or out is None:
                continue
            if isinstance(out, np.ndarray):
                self.known[name] = out
            else:
                if isinstance(out, OpResult) and out.name_hint is None:
                    out.name_hint = sanitize(name)  # reports and printed IR read like the model
                self.values[name] = out
        missing = [n for n in node.output[len(outputs):] if n]
        if missing:
            raise self.error(f"output '{missing[0]}' is not supported")

    def _check_names(self, node) -> None:
        """Each value is assigned once (SSA, as the ONNX spec requires: a second writer
        would otherwise silently win), and an empty input name stands only for an
        optional input the operator's schema allows to be absent."""
        for i, name in enumerate(node.output):
            if name and (name in self.values or name in self.known or name in node.output[:i]):
                raise self.error(f"output '{name}' is already a graph input, an initializer "
                                 "or another node's output; ONNX values are assigned once")
        try:
            formals = onnx.defs.get_schema(node.op_type, self.opset, node.domain).inputs
        except Exception:  # an operator ONNX does not know: the converter lookup says so
            return
        optional = onnx.defs.OpSchema.FormalParameterOption.Optional
        for i, name in enumerate(node.input):
            if not name and i < len(formals) and formals[i].option != optional:
                raise self.error(f"input {i} is required but empty ('')")

    def _fold(self, node) -> None:
        """Compute a node whose inputs are all known with ONNX's reference evaluator."""
        from onnx.reference import ReferenceEvaluator
        feeds = {i: self.known[i] for i in node.input if i}
        try:
            evaluator = ReferenceEvaluator(node, opsets={"": self.opset})
            results = evaluator.run(None, feeds)
        except Exception as e:
            raise self.error(f"folding constant inputs failed: {type(e).__name__}: {e}") from None
        for name, array in zip(node.output, results):
            if name:
                self.known[name] = np.asarray(array)

    # -- what converters use ----------------------------------------------------------
    def error(self, message: str) -> MlfuseError:
        node = self.node
        if node is None:
            return MlfuseError(message)
        label = f"'{node.name}'" if node.name else f"#{self.node_index}"
        return MlfuseError(f"ONNX node {label} ({node.op_type}): {message}")

    def has_input(self, node, index: int) -> bool:
        return len(node.input) > index and bool(node.input[index])

    def value(self, name: str, dtype: str | None = None) -> Value:
        """The IR value of ONNX value ``name`` (converted to ``dtype`` if given)."""
        if name in self.values:
            v = self.values[name]
            if dtype is not None and v.type.dtype != dtype:
                v = self.emit(T.CastOp, [v], {"dtype": dtype})
            return v
        if name in self.known:
            key = (name, dtype)
            if key not in self._materialized:
                self._materialized[key] = self._materialize(name, self.known[name], dtype)
            return self._materialized[key]
        raise self.error(f"input '{name}' is not defined before this node")

    def input(self, node, index: int, dtype: str | None = None) -> Value | None:
        """Input ``index`` of ``node`` as an IR value; None when it is absent (optional)."""
        return self.value(node.input[index], dtype) if self.has_input(node, index) else None

    def input_shape(self, node, index: int) -> tuple:
        """The shape of input ``index``, without making a known array a value."""
        name = node.input[index]
        if name in self.known:
            return tuple(self.known[name].shape)
        return tuple(self.value(name).type.shape)

    def array_value(self, array: np.ndarray, name: str) -> Value:
        """An array a converter computed at import time (e.g. folded parameters) as a
        value: a splat constant, or a parameter bound on every call (named ``name``)."""
        return self._materialize(name, np.asarray(array), None)

    def static(self, node, index: int, what: str) -> np.ndarray | None:
        """Input ``index`` as an array known at import time (None when absent)."""
        if not self.has_input(node, index):
            return None
        name = node.input[index]
        if name not in self.known:
            raise StaticInputNeeded(self.error(
                f"{what} (input '{name}') must be known when compiling: an initializer, a "
                "Constant, or a static input").message, name)
        return self.known[name]

    def emit(self, cls, operands, attributes=None) -> Value:
        try:
            op = cls(operands, attributes=attributes or {})
        except VerifyError as e:
            raise self.error(e.message) from None
        self.func.body.append(op)
        return op.result

    def scalar(self, value, dtype: str) -> Value:
        """A rank-0 constant of ``dtype``."""
        if dtype not in FLOAT_DTYPES + INT_DTYPES:
            raise self.error(f"a constant of dtype {dtype} is not supported")
        value = int(value) if dtype in INT_DTYPES else float(value)
        op = T.ConstantOp(attributes={"value": value}, result_types=[TensorType(dtype, ())])
        self.func.body.append(op)
        return op.result

    def _materialize(self, name: str, array: np.ndarray, dtype: str | None) -> Value:
        if dtype is not None:
            array = array.astype(numpy_dtype(dtype))
        ir = _numpy_to_ir(array.dtype)
        if ir is None:
            raise self.error(f"constant '{name}' has dtype {array.dtype}, which mlfuse lacks "
                             "as a tensor dtype")
        if array.size == 0:
            raise self.error(f"constant '{name}' is empty; mlfuse needs positive sizes")
        first = array.reshape(-1)[0]
        # a splat: equal elements, signs of zeros included (1 / x tells -0 from +0)
        splat = np.all(array == first) and np.all(np.signbit(array) == np.signbit(first))
        if ir != "bool" and splat:
            value = self.scalar(first, ir)
            if array.ndim:
                value = self.emit(T.BroadcastToOp, [value], {"shape": list(array.shape)})
            value.name_hint = sanitize(name, "c")
            return value
        param = self.func.body.add_arg(TensorType(ir, array.shape), sanitize(name, "c"))
        self.constants.append((param.name_hint, np.ascontiguousarray(array)))
        return param


def _initializer_array(init) -> np.ndarray:
    """An initializer's array; data that does not match its dims is an error (NumPy's
    message names neither the initializer nor the sizes)."""
    dims = [int(d) for d in init.dims]
    if init.raw_data:
        try:
            itemsize = helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
        except Exception:
            itemsize = None  # an element type mlfuse lacks: reported where it is used
        need = int(np.prod(dims, dtype=object)) * itemsize if itemsize else None
        if need is not None and len(init.raw_data) != need:
            raise MlfuseError(f"initializer '{init.name}' holds {len(init.raw_data)} bytes of "
                              f"data; its dims {dims} of {onnx_type_name(init.data_type)} need "
                              f"{need}")
    try:
        return numpy_helper.to_array(init)
    except Exception as e:  # e.g. typed data (float_data) of the wrong length
        raise MlfuseError(f"initializer '{init.name}' with dims {dims} cannot be read: "
                          f"{type(e).__name__}: {e}") from None


def attributes(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def import_model(model, static_inputs: dict | None = None) -> ImportedGraph:
    return GraphImporter(load_model(model), static_inputs).run()
