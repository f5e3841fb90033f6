"""A compiled ONNX model: the graph's calling convention over a compiled function.

The function's parameters are the graph inputs followed by the initializers that
became parameters (see graph.py); :class:`OnnxModel` takes only the inputs and
binds the rest itself, as NumPy arrays for NumPy calls and as device arrays
(copied once, then reused) for device calls.
"""
from __future__ import annotations

from mlfuse.api import CompiledModule, compile_ir
from mlfuse.dtypes import device_dtype, ir_dtype
from mlfuse.pipeline import lower
from mlfuse.errors import ArgumentError
from mlfuse.dialects import parse_ir
from mlfuse.ir.printer import print_ir
from mlfuse.runtime.arguments import HOST, kind_of

from mlfuse.frontend.onnx_import.graph import ImportedGraph


class OnnxModel:
    """Call with the graph inputs in order; returns a tuple of the graph outputs."""

    def __init__(self, imported: ImportedGraph, compiled: CompiledModule):
        self.imported = imported
        self.compiled = compiled
        self.function = compiled[imported.func_name]
        self._device_constants = None

    @property
    def input_names(self) -> list[str]:
        return self.imported.input_names

    @property
    def output_names(self) -> list[str]:
        return self.imported.output_names

    def kernels(self) -> list:
        """The kernels one call launches, in order."""
        return self.compiled.kernels(self.imported.func_name)

    def _constants(self, inputs) -> list:
        if all(kind_of(v) in (HOST, "scalar") for v in inputs):
            return [array for _, array in self.imported.constants]
        if self._device_constants is None:
            from numba import cuda
            # as kernels take them: bf16 as its bits (mlfuse.dtypes.device_dtype)
            self._device_constants = [cuda.to_device(a.view(device_dtype(ir_dtype(a.dtype))))
                                      for _, a in self.imported.constants]
        return self._device_constants

    def __call__(self, *inputs) -> tuple:
        if len(inputs) != len(self.input_names):
            raise ArgumentError(f"the model takes {len(self.input_names)} input(s) "
                                f"({', '.join(self.input_names)}), got {len(inputs)}")
        results = self.function(*inputs, *self._constants(inputs))
        return results if isinstance(results, tuple) else (results,)

    def __repr__(self) -> str:
        return (f"<mlfuse ONNX model ({', '.join(self.input_names)}) -> "
                f"({', '.join(self.output_names)}), {len(self.kernels())} kernels>")


def compile_imported(imported: ImportedGraph, fuse: bool = True, target: str | None = None,
                     fuse_options: dict | None = None,
                     matmul_precision: str | None = None) -> OnnxModel:
    # lower a copy: the imported tensor-level module stays as it was, for printing
    fused = lower(parse_ir(print_ir(imported.module)), "fused", fuse, fuse_options,
                  matmul_precision=matmul_precision)
    return OnnxModel(imported, compile_ir(fused, target, name=imported.func_name))
