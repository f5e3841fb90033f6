"""The IR core shared by every dialect."""
from .builtin import FuncOp, ModuleOp, ReturnOp
from .core import (BROADCAST, ELEMENTWISE, FUSION_KINDS, INJECTIVE, OPAQUE, OUT_ELEMENTWISE_FUSABLE,
                   REDUCTION, Attr, Block, BlockArgument, Operation, OpResult, OP_REGISTRY, Region,
                   Value, VerifyError, register_op)
from .types import BOOL, INDEX, BufferType, Dim, ScalarType, TensorType, Type
from .printer import print_ir
from .parser import parse_ir
from .verifier import verify

__all__ = [n for n in dir() if not n.startswith("_")]
