"""The IR core shared by every dialect."""
from mlfuse.ir.builtin import FuncOp, ModuleOp, ReturnOp
from mlfuse.ir.core import (BROADCAST, ELEMENTWISE, FUSION_KINDS, INJECTIVE, OPAQUE, OUT_ELEMENTWISE_FUSABLE,
                   REDUCTION, Attr, Block, BlockArgument, Operation, OpResult, Region, Value,
                   VerifyError)
from mlfuse.ir.types import BOOL, INDEX, BufferType, Dim, ScalarType, TensorType, Type
from mlfuse.ir.printer import print_ir
from mlfuse.ir.registry import Dialect, OpRegistry
from mlfuse.ir.verifier import verify

__all__ = [n for n in dir() if not n.startswith("_")]
