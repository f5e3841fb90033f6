"""Runs a loops-level or fused-level function on NumPy arrays, vectorized.

A ``loops.parallel`` (or ``fused.kernel``, whatever its schedule) runs its body
once, with each index argument bound to an int64 array holding that index at
every point of the iteration space; so every scalar op acts on a whole array of
points at once. Iterations of a parallel are independent by definition, so
running them in lock step is exact. ``loops.reduce`` and ``loops.for`` iterate
sequentially over their extent, on all points at once.

Buffers are NumPy arrays; fresh ones start as NaN (0 for ints, False for bools)
so that an element no nest wrote stands out. Every load and store checks its
indices: NumPy would wrap a negative index around instead of failing.

bf16 values compute in f32, as kernels compute them (mlfuse/codegen/scalar.py): a
load widens, constants and casts to bf16 round to bf16 and stay f32, and only a
store rounds what it writes. A bf16 reduction therefore adds up in f32, like the
kernels and the tensor interpreter (bf16 steps would stall: 1000 ones make 256).
"""
from __future__ import annotations

import numpy as np

from mlfuse.dialects.arith import SCALAR_OPS
from mlfuse.dialects.loops import COMBINERS
from mlfuse.dtypes import convert, is_float
from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import FuncOp, ReturnOp
from mlfuse.ir.core import Block, Operation

from mlfuse.interp.common import (apply_elementwise, bind_arguments, numpy_dtype, resolve_shape,
                     scalar)

# How loops.reduce combines partial results; maximum/minimum propagate NaN, as NumPy.
COMBINE = {"add": np.add, "max": np.maximum, "min": np.minimum}
assert set(COMBINE) == set(COMBINERS)

# Scalar values of these dtypes are held (and computed) in a wider dtype.
COMPUTED_IN = {"bf16": "f32"}


def _computed(value: np.ndarray, dtype: str) -> np.ndarray:
    """``value`` (of IR dtype ``dtype``) as the loops interpreter holds it."""
    if dtype not in COMPUTED_IN:
        return value
    return np.asarray(value).astype(numpy_dtype(COMPUTED_IN[dtype]))


# Scalar ops that are not in the elementwise table.
INDEX_AND_BOOL_OPS = {"arith.floordiv": np.floor_divide, "arith.mod": np.mod,
                      "arith.and": np.logical_and, "arith.or": np.logical_or}

ARITH_ELEMENTWISE = {cls.name: cls.spec for cls in SCALAR_OPS.values()}


def run_loops(func: FuncOp, args: list) -> list[np.ndarray]:
    """Run ``func`` (loops or fused dialect: buffer parameters and results) on ``args``;
    returns a copy of each result buffer."""
    buffers, dims = bind_arguments(func, args)
    machine = _Machine(dims)
    machine.env.update((id(p), b) for p, b in zip(func.args, buffers))
    return machine.run_function(func)


class _Machine:
    def __init__(self, dims: dict[str, int]):
        self.dims = dims
        self.env: dict[int, np.ndarray] = {}  # id(Value) -> buffer or array of per-point values

    def run_function(self, func: FuncOp) -> list[np.ndarray]:
        body = func.body
        self.run_block(body.ops[:-1])
        ret = body.ops[-1]
        if not isinstance(ret, ReturnOp):
            raise MlfuseError(f"function '{func.sym_name}' does not end in return", func.loc)
        return [np.array(self.env[id(v)]) for v in ret.operands]

    def run_block(self, ops: list[Operation]) -> None:
        for op in ops:
            handler = _HANDLERS.get(op.name)
            if handler is None:
                if op.name in ARITH_ELEMENTWISE:
                    handler = _Machine.elementwise
                elif op.name in INDEX_AND_BOOL_OPS:
                    handler = _Machine.index_or_bool
                else:
                    raise MlfuseError(f"the loops interpreter does not know op '{op.name}'",
                                      op.loc)
            handler(self, op)

    def get(self, op: Operation) -> list[np.ndarray]:
        return [self.env[id(v)] for v in op.operands]

    def set(self, op: Operation, value) -> None:
        self.env[id(op.result)] = value

    def extent(self, op: Operation, dim) -> int:
        return resolve_shape((dim,), self.dims, op)[0]

    # -- memory ----------------------------------------------------------------
    def alloc(self, op):
        t = op.result.type
        dtype = numpy_dtype(t.dtype)
        fill = np.nan if is_float(dtype) else 0
        self.set(op, np.full(resolve_shape(t.shape, self.dims, op), fill, dtype=dtype))

    def checked_indices(self, op, buf: np.ndarray, indices: list[np.ndarray], mask=None):
        for axis, (idx, size) in enumerate(zip(indices, buf.shape)):
            bad = (idx < 0) | (idx >= size)
            if mask is not None:
                bad = bad & mask
            if np.any(bad):
                first = np.broadcast_to(idx, bad.shape)[bad].flat[0]
                raise MlfuseError(f"{op.name}: index {first} out of range [0, {size}) on axis "
                                  f"{axis} of {op.operands[0].name_hint or 'a buffer'}", op.loc)
        return tuple(indices)

    def load(self, op):
        buf, *indices = self.get(op)
        self.set(op, _computed(buf[self.checked_indices(op, buf, indices)], op.result.type.dtype))

    def masked_load(self, op):
        buf, mask, *indices = self.get(op)
        other = _computed(scalar(op["other"], op.result.type.dtype), op.result.type.dtype)
        if buf.size == 0:
            self.set(op, np.broadcast_to(other, np.broadcast(mask, *indices).shape))
            return
        self.checked_indices(op, buf, indices, mask)
        # where the mask is off an index may be anything: clip it into range to gather
        safe = [np.clip(i, 0, n - 1) for i, n in zip(indices, buf.shape)]
        self.set(op, np.where(mask, _computed(buf[tuple(safe)], op.result.type.dtype), other))

    def store(self, op):
        value, buf, *indices = self.get(op)
        place = self.checked_indices(op, buf, indices)
        if np.ndim(value) and not any(np.ndim(i) for i in place):
            # one place for every point (a kernel over extents of 1 storing a scalar
            # result): the last point's value, as a repeated index's store keeps
            value = np.asarray(value).flat[-1]
        buf[place] = value

    def dim(self, op):
        self.set(op, scalar(self.extent(op, op["sym"]), "index"))

    # -- scalar ops ---------------------------------------------------------------
    def constant(self, op):
        self.set(op, _computed(scalar(op["value"], op.result.type.dtype), op.result.type.dtype))

    def elementwise(self, op):
        spec = ARITH_ELEMENTWISE[op.name]
        dtype = op.result.type.dtype
        self.set(op, apply_elementwise(spec, self.get(op), COMPUTED_IN.get(dtype, dtype), op))

    def index_or_bool(self, op):
        self.set(op, np.asarray(INDEX_AND_BOOL_OPS[op.name](*self.get(op))))

    def cast(self, op):
        # nan to int is as NumPy's astype makes it; overflow (f64 to f32) gives inf
        with np.errstate(invalid="ignore", over="ignore"):
            (x,) = self.get(op)
            self.set(op, _computed(convert(x, numpy_dtype(op["dtype"])), op["dtype"]))

    # -- loops -----------------------------------------------------------------------
    def parallel(self, op):
        extents = [self.extent(op, e) for e in op.extent_list]
        if 0 in extents:
            return
        if not extents:  # rank 0: one point, no index arguments
            self.run_block(op.body.ops)
            return
        points = np.indices(extents).reshape(len(extents), -1)
        for arg, column in zip(op.body.args, points):
            self.env[id(arg)] = column
        self.run_block(op.body.ops)

    def sequential(self, op, body: Block):
        """Run ``body`` for k = 0 .. extent-1 (on all points at once), yielding each k."""
        (k,) = body.args
        for i in range(self.extent(op, op["extent"])):
            self.env[id(k)] = scalar(i, "index")
            yield

    def for_loop(self, op):
        for _ in self.sequential(op, op.body):
            self.run_block(op.body.ops)

    def reduce(self, op):
        (acc,) = self.get(op)
        combine = COMBINE[op["combiner"]]
        *ops, yield_op = op.body.ops
        for _ in self.sequential(op, op.body):
            self.run_block(ops)
            with np.errstate(all="ignore"):  # inf - inf = nan is a result, not an error
                acc = combine(acc, self.env[id(yield_op.operands[0])])
        self.set(op, np.asarray(acc))


_HANDLERS = {
    "loops.alloc": _Machine.alloc,
    "loops.dim": _Machine.dim,
    "loops.load": _Machine.load,
    "loops.masked_load": _Machine.masked_load,
    "loops.store": _Machine.store,
    "loops.parallel": _Machine.parallel,
    "fused.kernel": _Machine.parallel,  # same semantics, whatever the schedule
    "loops.for": _Machine.for_loop,
    "loops.reduce": _Machine.reduce,
    "arith.constant": _Machine.constant,
    "arith.cast": _Machine.cast,
}
