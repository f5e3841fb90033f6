"""The ``lower-tensor-to-loops`` pass: each tensor op becomes one loop nest.

    %h = loops.alloc : buf<f32[N, 4]>
    loops.parallel {extents = [N, 4], source = "tensor.add"} (%i0: index, %i1: index) {
      ...loads of operands at index expressions, arith ops...
      loops.store %r, %h, %i0, %i1
    }

Each op kind has one conversion pattern (``LOWERINGS``), applied in program order
by the shared walker. Every nest is one ``loops.parallel`` over its op's result shape whose body stores
only to the op's own fresh buffer, at the identity index (the parallel's block
arguments in order): the fusion pass relies on that shape. Broadcasting, reshape
and transpose are index arithmetic on loads, never copies. ``tensor.constant``
makes no buffer: every nest reading it materializes an ``arith.constant``.
"""
from __future__ import annotations

import math
from typing import Callable

from mlfuse.dialects import tensor
from mlfuse.dialects.loops import AllocOp, ParallelOp, combiner_identity
from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import FuncOp, ModuleOp, ReturnOp
from mlfuse.ir.core import Block, Operation, Region, Value
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.rewrite import PatternRewriteWalker, Rewriter, RewritePattern
from mlfuse.ir.types import HALF_FLOAT_DTYPES, INDEX, BufferType, TensorType

from mlfuse.transforms.loop_emitter import Emitter, Source
from mlfuse.transforms.lower_indexing import INDEXING_LOWERINGS
from mlfuse.transforms.lower_windows import WINDOW_LOWERINGS
from mlfuse.ir.traits import COMPOSITE

# An op lowering: (the tensor op, the nest body's emitter, the nest's output index)
# -> the scalar value the nest stores at that index.
Lowering = Callable[[Operation, Emitter, list[Value]], Value]

class LowerTensorToLoops(Pass):
    name = "lower-tensor-to-loops"
    doc = "Rewrite tensor ops into loops.parallel nests over buffers, one nest per op."

    def run(self, module: ModuleOp) -> None:
        for func in module.funcs:
            signature = [a.type for a in func.args] + list(func["result_types"])
            if not any(isinstance(t, BufferType) for t in signature):  # not lowered yet
                lowered = lower_function(func)
                module.body.insert_before(func, lowered)
                func.erase()


class Conversion:
    """The function being built, and where each tensor value of the source went."""

    def __init__(self, body: Block, sources: dict[int, Source]):
        self.body = body
        self.sources = sources


class LowerToNest(RewritePattern):
    """A conversion pattern: one kind of tensor op becomes the loop nest computing it,
    appended to the function being built (the tensor function is read, not changed;
    returning True says the op was taken, so no later pattern is offered it)."""

    def __init__(self, op_types: tuple, compute: Lowering, conversion: Conversion):
        self.op_types = op_types
        self.compute = compute
        self.conversion = conversion

    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        c = self.conversion
        hint = op.result.name_hint or op.name.split(".")[1]  # %0 = tensor.add -> %add
        c.sources[id(op.result)] = _emit_nest(c.body, c.sources, op.result, hint, op.name, op.loc,
                                              lambda em, idx: self.compute(op, em, idx))
        return True


class ConstantSource(RewritePattern):
    """``tensor.constant`` makes no buffer: each nest reading it materializes it."""

    op_types = (tensor.ConstantOp,)

    def __init__(self, conversion: Conversion):
        self.conversion = conversion

    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        self.conversion.sources[id(op.result)] = op
        return True


class Unconvertible(RewritePattern):
    """Whatever no conversion took (the walker offers patterns in order) but the
    return, which ``lower_function`` converts last."""

    def matches(self, op: Operation) -> bool:
        return not isinstance(op, ReturnOp)

    def rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if op.has_trait(COMPOSITE):
            raise MlfuseError(f"{op.name} is a composite op: run decompose first", op.loc)
        raise MlfuseError(f"lower-tensor-to-loops does not know op '{op.name}'", op.loc)


def lower_function(func: FuncOp) -> FuncOp:
    """A new function over buffers computing what ``func`` computes on tensors."""
    ret = func.return_op
    lowered = FuncOp.build(func.sym_name, [_buffer(a.type) for a in func.args],
                           [a.name_hint for a in func.args],
                           [_buffer(v.type) for v in ret.operands], loc=func.loc)
    body = lowered.body
    sources: dict[int, Source] = {id(a): b for a, b in zip(func.args, body.args)}
    conversion = Conversion(body, sources)
    patterns = [ConstantSource(conversion)]
    patterns += [LowerToNest(op_types, rule, conversion) for op_types, rule in LOWERINGS]
    patterns.append(Unconvertible())
    PatternRewriteWalker(patterns).rewrite_block(func.body)
    results, owned = [], set()
    for v in ret.operands:
        buf = sources[id(v)]
        if not _is_fresh_buffer(buf) or id(buf) in owned:
            # a parameter, a constant or a value returned twice: each result gets its own buffer
            hint = f"{v.name_hint}_copy" if v.name_hint else "copy"
            buf = _emit_nest(body, sources, v, hint, "copy", ret.loc,
                             lambda em, idx, v=v: em.read(v, idx))
        owned.add(id(buf))
        results.append(buf)
    body.append(ReturnOp(results, loc=ret.loc))
    return lowered


def _buffer(t: TensorType) -> BufferType:
    return BufferType(t.dtype, t.shape)


def _is_fresh_buffer(source: Source) -> bool:
    return isinstance(source, Value) and isinstance(source.owner, AllocOp)


def _emit_nest(body: Block, sources, result: Value, hint: str, source_name: str, loc,
               compute: Callable[[Emitter, list[Value]], Value]) -> Value:
    """Append ``%buf = loops.alloc`` and the ``loops.parallel`` over the result's shape
    that stores ``compute(emitter, index)`` at each index; returns the buffer."""
    t: TensorType = result.type
    alloc = AllocOp(result_types=[_buffer(t)], result_names=[hint], loc=loc)
    body.append(alloc)
    block = Block([INDEX] * t.rank, [f"i{k}" for k in range(t.rank)])
    em = Emitter(block, sources)
    em.store(compute(em, list(block.args)), alloc.result, list(block.args))
    body.append(ParallelOp(attributes={"extents": list(t.shape), "source": source_name},
                           regions=[Region([block])], loc=loc))
    return alloc.result


# -- one lowering per tensor op kind ---------------------------------------------------
def lower_elementwise(op: tensor.ElementwiseOp, em: Emitter, idx: list[Value]) -> Value:
    shape = op.result.type.shape
    args = [em.read_broadcast(v, shape, idx) for v in op.operands]
    return em.arith(op.spec.name, *args)


def lower_cast(op: tensor.CastOp, em: Emitter, idx: list[Value]) -> Value:
    return em.arith("cast", em.read(op.operand("x"), idx), dtype=op["dtype"])


def lower_reduction(op: tensor.ReduceOp, em: Emitter, idx: list[Value]) -> Value:
    """Nested loops.reduce, one per reduced axis (the first outermost), around a load
    at the full input index: kept axes take output indices, reduced axes reduce indices."""
    x, axes, keepdims = op.operand("x"), op["axis"], op["keepdims"]
    dtype = op.result.type.dtype
    # a 16-bit float's mean adds up and divides in f32, rounded once (as NumPy's mean
    # of f16): its count in f16 is inf from 65520 on (65536.0 : f16 made a layernorm
    # over 65536 values divide by inf) and in bf16 inexact from 257
    acc = "f32" if op.name == "tensor.mean" and dtype in HALF_FLOAT_DTYPES else dtype
    in_shape = x.type.shape
    # output index position of each kept input axis (keepdims keeps size-1 slots for reduced ones)
    kept = [a for a in range(len(in_shape)) if a not in axes]
    out_pos = {a: (a if keepdims else n) for n, a in enumerate(kept)}
    init = em.constant(combiner_identity(op.combiner, acc), acc)

    def level(inner: Emitter, depth: int, reduce_idx: list[Value]) -> Value:
        if depth == len(axes):
            full = [reduce_idx[axes.index(a)] if a in axes else idx[out_pos[a]]
                    for a in range(len(in_shape))]
            value = inner.read(x, full)
            return value if acc == dtype else inner.arith("cast", value, dtype=acc)
        return inner.reduce(init, in_shape[axes[depth]], op.combiner, f"k{depth}",
                            lambda e, k: level(e, depth + 1, reduce_idx + [k]))

    total = level(em, 0, [])
    if op.name != "tensor.mean":
        return total
    counted = [in_shape[a] for a in axes]
    if all(isinstance(d, int) for d in counted):
        count = em.constant(math.prod(counted), acc)
    else:
        count = em.arith("cast", em.size_product(counted), dtype=acc)
    mean = em.arith("div", total, count)  # sum / count, as NumPy's mean
    return mean if acc == dtype else em.arith("cast", mean, dtype=dtype)


def lower_reshape(op: tensor.ReshapeOp, em: Emitter, idx: list[Value]) -> Value:
    """Row-major order: the input index of the output's element (Emitter.reshape_index,
    also used by fusion to store a kernel's output at a reshaped index)."""
    x = op.operand("x")
    return em.read(x, em.reshape_index(idx, list(op.result.type.shape), list(x.type.shape)))


def lower_transpose(op: tensor.TransposeOp, em: Emitter, idx: list[Value]) -> Value:
    perm, x = op["perm"], op.operand("x")
    shape = list(x.type.shape)
    if [a for a in perm if shape[a] != 1] == [a for a in range(len(perm)) if shape[a] != 1]:
        # only axes of one value move: the same elements in the same order, a reshape
        # (x[i, k, 0] for [N, K, 1] -> [N, 1, K], where x[i, k, j] read along j of one value)
        return em.read(x, em.reshape_index(idx, list(op.result.type.shape), shape))
    in_idx = [idx[perm.index(a)] for a in range(len(perm))]  # output dim i is input dim perm[i]
    return em.read(x, in_idx)


def lower_broadcast_to(op: tensor.BroadcastToOp, em: Emitter, idx: list[Value]) -> Value:
    return em.read_broadcast(op.operand("x"), op.result.type.shape, idx)


def lower_matmul(op: tensor.MatmulOp, em: Emitter, idx: list[Value]) -> Value:
    a, b = op.operand("a"), op.operand("b")
    *batch, i, j = idx
    dtype = op.result.type.dtype

    def product(inner: Emitter, k: Value) -> Value:
        b_batch = batch if b.type.rank == 3 else []
        return inner.arith("mul", inner.read(a, [*batch, i, k]), inner.read(b, [*b_batch, k, j]))

    return em.reduce(em.constant(0, dtype), a.type.shape[-1], "add", "k0", product)


# (op classes, lowering): the conversion patterns, by op class
LOWERINGS: list[tuple[tuple, Lowering]] = [
    ((tensor.ElementwiseOp,), lower_elementwise),
    ((tensor.CastOp,), lower_cast),
    ((tensor.ReduceOp,), lower_reduction),
    ((tensor.ReshapeOp,), lower_reshape),
    ((tensor.TransposeOp,), lower_transpose),
    ((tensor.BroadcastToOp,), lower_broadcast_to),
    ((tensor.MatmulOp,), lower_matmul),
    *WINDOW_LOWERINGS,  # conv2d, pooling, argmax/argmin, cumsum, dim_size
] + INDEXING_LOWERINGS
