"""Centred sums of squares in the same pass as the mean: shifted sums.

Variance is written ``m = sum(y) / n; v = sum((y - m)^2) / n``: the second reduction
reads the first's result, so a kernel that streams its rows (they do not fit in
registers) or splits them across blocks (``codegen/split_stages.py``) walks y twice
before its epilogue walks it a third time. Here every top-level add-reduce of a kernel
body that yields ``(y - c) * (y - c)``, where ``c`` is computed outside the loop from
another reduce of the same extent and y inside it from the loop index (or that square of
16-bit floats cast to f32, as a 16-bit float's mean adds up: y and c are then cast to
f32 and S1, S2 and the rest computed there), becomes

    s  = y(0)                      (the row's first value: a sample of the data)
    S1 = sum(y - s),  S2 = sum((y - s)^2)                   (independent of c)
    sum((y - c)^2) = S2 - (c - s) * (2 * S1 - n * (c - s))   (exact for any c)

S1 and S2 read no other reduce, so they are at the mean's level and walk y in the same
pass as it (``dialects/reductions.sibling_passes``, which codegen's streaming and
split-stage kernels walk as one loop). The mean itself is left as it was (the same bits,
the same inf and NaN), and c may be any value (the mean, a rounded mean, a running
estimate): the identity holds for each.

Error behaviour: with d = c - s, the three terms are of size n * var, 2 * n * d^2 and
n * d^2; the result, n * var, loses about log2(1 + 3 d^2 / var) bits to cancellation. A
sample of the data lies about a standard deviation from its mean (d^2 ~ var): a bit or
two, whatever the mean's size (x = 1e4 + N(0, 1) in f32: the textbook sum(y^2) - n m^2
loses everything there, this does not). Only a shift that is an outlier by k standard
deviations costs 2 log2(k) bits. Two-pass (what the IR says) is at most as accurate, and
kernels holding their rows in registers do not need this: a kernel whose row extents
are all constants that registers hold is left alone.
"""
from __future__ import annotations

from mlfuse.dialects.arith import SCALAR_OPS, CastOp, ConstantOp
from mlfuse.dialects.loops import ForOp, ReduceOp
from mlfuse.ir.clone import clone_op
from mlfuse.ir.core import Block, Operation, Value
from mlfuse.ir.traits import PURE
from mlfuse.ir.types import HALF_FLOAT_DTYPES
from mlfuse.transforms.cse import cse_block
from mlfuse.transforms.loop_emitter import Emitter

_FLOATS = ("f32", "f64")
MulOp, SubOp = SCALAR_OPS["mul"], SCALAR_OPS["sub"]


def _top_of(value: Value, block: Block) -> Operation | None:
    """The op of ``block`` that computes ``value`` (None: an argument or from outside)."""
    op = getattr(value, "op", None)
    return op if op is not None and op.parent is block else None


def _top_deps(values, block: Block) -> list[Operation]:
    """The ops of ``block`` that ``values`` depend on, transitively (in no order)."""
    seen, stack = {}, [op for v in values if (op := _top_of(v, block)) is not None]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen[id(op)] = op
        operands = [v for inner in op.walk() for v in inner.operands]
        stack.extend(o for v in operands if (o := _top_of(v, block)) is not None)
    return list(seen.values())


def _chain(value: Value, body: Block) -> list[Operation] | None:
    """The ops of ``body`` that compute ``value`` (body order); None if one has a region."""
    needed, ops = {id(value)}, []
    for op in reversed(body.ops):
        if any(id(r) in needed for r in op.results):
            if op.regions or not op.has_trait(PURE):
                return None
            ops.append(op)
            needed.update(id(v) for v in op.operands)
    return ops[::-1]


def _match(reduce: ReduceOp, block: Block):
    """(y's ops, c, the earliest reduce of the same extent that c reads, the ops y reads
    outside, whether the square is widened) of a centred sum of squares, else None."""
    if reduce["combiner"] != "add" or reduce.result.type.dtype not in _FLOATS:
        return None
    body = reduce.body
    if any(o.regions for o in body.ops):
        return None
    square = getattr(body.ops[-1].operands[0], "op", None)
    widened = isinstance(square, CastOp) and square.operands[0].type.dtype in HALF_FLOAT_DTYPES
    if widened:  # a 16-bit float's square added up in f32 (lower_to_loops: a mean's)
        square = getattr(square.operands[0], "op", None)
    if not isinstance(square, MulOp) or square.operands[0] is not square.operands[1]:
        return None
    centred = getattr(square.operands[0], "op", None)
    if not isinstance(centred, SubOp) or centred.parent is not body:
        return None
    y, c = centred.operands
    ops = _chain(y, body)
    if not ops or _top_of(c, block) is None:
        return None
    reduces = [o for o in _top_deps([c], block) if isinstance(o, ReduceOp)]
    heads = [o for o in block.ops if o in reduces and repr(o["extent"]) == repr(reduce["extent"])]
    outside = [v for o in ops for v in o.operands if getattr(v, "op", None) not in ops
               and v is not body.args[0]]
    deps = _top_deps(outside, block)
    if not heads or any(isinstance(o, (ReduceOp, ForOp)) or not o.has_trait(PURE) for o in deps):
        return None  # y reads a reduce (or a loop's result): no pass to save
    return ops, c, heads[0], deps, widened


def _clone_chain(ops: list[Operation], k_old: Value, k_new: Value, into: Emitter) -> Value:
    mapping = {id(k_old): k_new}
    for op in ops:
        clone_op(op, mapping, into=into.block)
    return mapping[id(ops[-1].results[0])]


def _shift(reduce: ReduceOp, block: Block) -> bool:
    found = _match(reduce, block)
    if found is None:
        return False
    ops, c, head, deps, widened = found
    dtype, extent = reduce.result.type.dtype, reduce["extent"]
    order = {id(o): n for n, o in enumerate(block.ops)}
    for dep in sorted((d for d in deps if order[id(d)] > order[id(head)]),
                      key=lambda d: order[id(d)]):  # computed after the mean: before it now
        block.detach(dep)
        block.insert_before(head, dep)

    early = Emitter(Block(), {})  # s, S1 and S2: right before the mean's reduce
    # the row's first value: every row has one (mlfuse has no empty arrays: the runtime
    # refuses a zero size), so the load is in range
    s = _clone_chain(ops, reduce.body.args[0], early.index(0), early)
    zero = early.constant(0.0, dtype)

    if widened:  # 16-bit values: shifted and squared in the sums' dtype (f32), as the
        s = early.arith("cast", s, dtype=dtype)  # kernels compute them anyway

    def shifted(squared: bool):
        def body(inner: Emitter, k: Value) -> Value:
            y = _clone_chain(ops, reduce.body.args[0], k, inner)
            d = inner.arith("sub", inner.arith("cast", y, dtype=dtype) if widened else y, s)
            return inner.arith("mul", d, d) if squared else d
        return early.reduce(zero, extent, "add", "k", body)
    s1, s2 = shifted(False), shifted(True)
    late = Emitter(Block(), {})  # the centred sum from them: where the reduce was
    delta = late.arith("sub", late.arith("cast", c, dtype=dtype) if widened else c, s)
    n = late.arith("cast", late.size(extent), dtype=dtype)
    total = late.arith("sub", s2, late.arith("mul", delta, late.arith(
        "sub", late.arith("add", s1, s1), late.arith("mul", n, delta))))
    init = reduce.operands[0]
    if not (isinstance(getattr(init, "op", None), ConstantOp) and init.op["value"] == 0):
        total = late.arith("add", init, total)
    for src, anchor in ((early.block, head), (late.block, reduce)):
        for op in list(src.ops):
            src.detach(op)
            block.insert_before(anchor, op)
    reduce.result.replace_all_uses_with(total)
    reduce.erase()
    return True


def _may_stream(block: Block, held: int, size) -> bool:
    """Whether a row kernel with this body runs rows that registers do not hold, at the
    sizes ``size`` gives its loops' extents."""
    loops = [o for o in block.ops if isinstance(o, (ReduceOp, ForOp))]
    return any(size(o["extent"]) > held for o in loops)


def shift_centred_squares(block: Block, held: int = 0, size=None) -> int:
    """Rewrite every centred sum of squares among ``block``'s top-level reduces (see
    the module doc); ``held``: the longest row extent registers hold; ``size``: an
    extent's size as the planner prices it (a symbol unbound at compile time at the
    target's default size, as every other schedule choice takes it; None: a symbol
    counts as too long). A body whose rows registers hold at those sizes is left alone:
    the registers variant gains nothing from the shift and pays its extra sums and
    block reductions (layernorm 16384 x 4096 with C unbound: 0.214 ms against 0.181 on
    the H100 with it). Returns how many."""
    size = size or (lambda e: e if isinstance(e, int) else held + 1)
    if not _may_stream(block, held, size):
        return 0
    count = sum(_shift(op, block) for op in list(block.ops) if isinstance(op, ReduceOp))
    if count:
        cse_block(block)  # the dims and constants the rewrite made again
    return count


__all__ = ["shift_centred_squares"]
