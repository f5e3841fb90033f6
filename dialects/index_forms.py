"""Forms of index arithmetic on the loops dialect, recognised where they are read.

A read through a reshape indexes its buffer with the unravel of one flat value
(``x[n, X // (H*W), X // W % H, X % W]``); a row of a reshaped view steps that value
by a loop index (``X = q * S + k``). The fusion planner reads these forms to see such
a read as a row (mlfuse/transforms/fusion/schedules.py, index_algebra.py) and codegen
reads them to address the row as one contiguous range (mlfuse/codegen/flat_rows.py),
so they live with the dialect rather than in either.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.dialects.arith import SCALAR_OPS, ConstantOp, FloorDivOp, ModOp
from mlfuse.dialects.loops import DimOp
from mlfuse.ir.core import Value
from mlfuse.ir.types import INDEX, Dim, IndivisibleDim, dim_monomial, product_dim, quotient_dim

ADD, MUL = SCALAR_OPS["add"], SCALAR_OPS["mul"]


def op_of(v: Value):
    return getattr(v, "op", None)


def size_of(v: Value) -> Dim | None:
    """The dim an index value is the size of (a constant, a dim, their products)."""
    op = op_of(v)
    if isinstance(op, ConstantOp) and v.type == INDEX:
        return op["value"]
    if isinstance(op, DimOp):
        return op["sym"]
    if isinstance(op, MUL):
        a, b = (size_of(x) for x in op.operands)
        if a is not None and b is not None:
            return product_dim([a, b])
    return None


def same_size(a: Value, b: Value) -> bool:
    return a is b or (size_of(a) is not None and size_of(a) == size_of(b))


@dataclass
class UnravelRun:
    """The trailing indices ``idx[start:]`` of an access as the remainders of one value
    X's row-major unravel (``X // W % H, X % W``): X, the Value each is taken modulo
    (None for the constant 0 of a dim of 1), outer first, and what is left of X, whose
    quotient ``base // divisor`` an outer index may be (``is_quotient``)."""

    start: int
    flat: Value
    divisors: list
    base: Value
    divisor: Value

    @property
    def radix(self) -> list:
        return [None if d is None else size_of(d) for d in self.divisors]

    def is_quotient(self, v: Value) -> bool:
        op = op_of(v)
        return isinstance(op, FloorDivOp) and op.operands[0] is self.base and \
            same_size(op.operands[1], self.divisor)


def unravel_run(idx: list[Value]) -> UnravelRun | None:
    """The longest run of remainders ending ``idx`` (``UnravelRun``), None where the
    last index is no ``X % size``."""
    if not idx or not isinstance(op_of(idx[-1]), ModOp):
        return None
    flat, size = op_of(idx[-1]).operands
    divisors: list = [size]
    base, divisor = flat, size  # the next index to the left is base // divisor (% ...)
    start = len(idx) - 1
    for j in range(len(idx) - 2, -1, -1):
        if size_of(idx[j]) == 0:  # a dim of 1 among the unraveled ones
            divisors.insert(0, None)
            start = j
            continue
        op = op_of(idx[j])
        inner = op_of(op.operands[0]) if isinstance(op, ModOp) else None
        if not (isinstance(inner, FloorDivOp) and inner.operands[0] is base and
                same_size(inner.operands[1], divisor)):
            break
        base, divisor = op.operands[0], op.operands[1]
        divisors.insert(0, divisor)
        start = j
    return UnravelRun(start, flat, divisors, base, divisor)


def unravel_form(idx: list[Value]) -> tuple[int, Value, list] | None:
    """Where the trailing indices ``idx[j:]`` of an access are the row-major unravel of
    one value X (a read through a reshape: ``x[n, X // (H*W), X // W % H, X % W]``):
    (j, X, the radix of each of ``idx[j+1:]``, None for an index that is the constant 0
    of a dim of 1). The outermost, ``idx[j]``, is a plain quotient (no ``%``), so
    ``idx[j:]`` over axes of exactly those radixes address element X of them. None where
    the indices are not of that form."""
    run = unravel_run(idx)
    if run is None or run.start == 0 or not run.is_quotient(idx[run.start - 1]):
        return None
    return run.start - 1, run.flat, run.radix


def unraveled(idx: list[Value]) -> tuple[list[Value], Value] | None:
    """The indices before an unravel of one value X (``unravel_form``) and X: the access
    reads the merged trailing axes at X, row-major. None where there is no such form."""
    form = unravel_form(idx)
    return (idx[:form[0]], form[1]) if form else None


def merged_view(idx: list[Value], shape: list[Dim]) -> tuple[list[Value], list[Dim]]:
    """An access's indices and its buffer's dims with every unravel of one value X over
    consecutive indices (``unravel_form``, anywhere among them, not only trailing) whose
    radixes are exactly the buffer's dims there, as the one index X over their product:
    ``y[n, X // W, X % W, c]`` of ``buf<[N, H, W, C]>`` is ``[n, X, c]`` over ``[N, H*W, C]``
    (mlfuse/transforms/coalesce_axes.py writes such indices; codegen addresses the merged
    axes as one). Indices of any other form stay as they are."""
    indices, dims = list(idx), list(shape)
    end = len(indices) - 1
    while end > 0:
        form = unravel_form(indices[:end + 1]) if isinstance(op_of(indices[end]), ModOp) else None
        if form is not None and all(r is not None for r in form[2]) and \
                list(form[2]) == list(dims[form[0] + 1:end + 1]):
            j = form[0]
            indices[j:end + 1] = [form[1]]
            dims[j:end + 1] = [product_dim(dims[j:end + 1])]
            end = j - 1
        else:
            end -= 1
    return indices, dims


def unit_tail_dropped(idx: list[Value], shape: list[Dim]) -> list[Value]:
    """An access's indices less its trailing constant indices into axes of one value:
    ``x[n, k, 0]`` of ``buf<[N, K, 1]>`` reads along k as ``x[n, k]`` would (a keepdims
    result turned round by a transpose). Indices not one a buffer axis stay as they are."""
    indices, dims = list(idx), list(shape)
    while indices and len(indices) == len(dims) and dims[-1] == 1 and \
            isinstance(op_of(indices[-1]), ConstantOp):
        indices, dims = indices[:-1], dims[:-1]
    return indices


def row_step(flat: Value, extents: dict[int, Dim]) -> Value | None:
    """The loop index k where ``flat`` is ``q * S + k`` and S is k's loop extent
    (``extents``: id(loop index) -> extent): consecutive k are consecutive elements, and
    the values of different q never overlap (rows, not sliding windows)."""
    op = op_of(flat)
    if isinstance(op, ADD):
        for a, k in (op.operands, op.operands[::-1]):
            times = op_of(a)
            if id(k) in extents and isinstance(times, MUL) and \
                    extents[id(k)] in (size_of(times.operands[0]), size_of(times.operands[1])):
                return k
    return None


def linear_terms(v: Value, steps: set[int]) -> list[tuple[Value | None, Dim]] | None:
    """``v`` as a sum of terms, each a variable times a size: (the variable, None for a
    term of sizes alone; its coefficient, a dim). A loop index in ``steps`` (ids) is a
    variable of its own; any other value that reads none of them and is no sum or
    product with a size is a variable too (a point index). None where ``v`` is not of
    that form (a step times a step, a divmod of a step)."""
    if id(v) in steps:
        return [(v, 1)]
    if size_of(v) is not None:
        return [(None, size_of(v))]
    op = op_of(v)
    if isinstance(op, ADD):
        parts = [linear_terms(x, steps) for x in op.operands]
        return None if None in parts else parts[0] + parts[1]
    if isinstance(op, MUL):
        for x, s in (op.operands, op.operands[::-1]):
            if size_of(s) is not None:
                inner = linear_terms(x, steps)
                return None if inner is None else \
                    [(t, product_dim([c, size_of(s)])) for t, c in inner]
    return None if reads_any(v, steps) else [(v, 1)]


def multiple_of(d: Dim, of: Dim) -> bool:
    """Whether ``d`` is a whole multiple of ``of`` for every size of the symbols."""
    try:
        coefficient, exponents = dim_monomial(quotient_dim(d, of))
    except IndivisibleDim:
        return False
    return coefficient.denominator == 1 and all(e > 0 for e in exponents.values())


def _row_major(terms: list, indices: list[Value], extents: list[Dim]) -> tuple[int, list] | None:
    """(m, the other terms) where ``terms`` (``linear_terms``) are ``B + ravel(indices[m:])``,
    the row-major index of a loop nest's trailing indices over their extents, each once,
    and B's terms each a multiple of the walk's size ``product(extents[m:])``: the nest
    then walks consecutive elements, and the walks of different B never overlap (rows,
    not sliding windows). None elsewhere."""
    ids = {id(k): d for d, k in enumerate(indices)}
    stepped = sorted((ids[id(t)], c) for t, c in terms if t is not None and id(t) in ids)
    levels = [d for d, _ in stepped]
    if not stepped or levels != list(range(levels[0], len(indices))):
        return None
    if any(c != product_dim(extents[d + 1:]) for d, c in stepped):
        return None
    size = product_dim(extents[levels[0]:])
    rest = [(t, c) for t, c in terms if t is None or id(t) not in ids]
    if not all(multiple_of(c, size) for _, c in rest):
        return None
    return levels[0], rest


def row_walk(flat: Value, indices: list[Value], extents: list[Dim]) -> tuple[int, list] | None:
    """Where ``flat`` is ``B + ravel(indices[m:])`` (``_row_major``: group norm's
    ``(g * C/8 + k0) * (H*W) + k1``, statistics over axes [2, 3] of ``reshape(x, [N, 8,
    C/8, H*W])``): (m, B's terms); None elsewhere."""
    terms = linear_terms(flat, {id(k) for k in indices})
    return None if terms is None else _row_major(terms, indices, extents)


@dataclass
class Walk:
    """An access whose indices from ``at`` on address its buffer's trailing axes at
    ``B + ravel(the nest's indices from level start on)``: B's ``terms`` as
    ``linear_terms`` gives them (B is a multiple of the walk's size)."""

    at: int
    start: int
    terms: list


def access_walk(idx: list[Value], shape: list[Dim], indices: list[Value],
                extents: list[Dim]) -> Walk | None:
    """How an access with indices ``idx`` into a buffer of ``shape`` walks a loop nest
    (its ``indices`` and ``extents``, outer first): where the indices that read the
    nest, from the first on, are a row-major walk of its trailing levels over the
    buffer's trailing axes (``_row_major``), also through a reshape's unravel
    (``merged_view``): group norm over axes [2, 3, 4] of ``reshape(x, [N, G, C/G, H,
    W])`` reads ``x[n, g * C/G + k0, k1, k2]``, whose element is ``B + ravel(k0, k1,
    k2)`` of the axes [C, H, W]. None elsewhere (a column walk, a window)."""
    steps = {id(k) for k in indices}
    at = next((j for j, v in enumerate(idx) if reads_any(v, steps)), None)
    if at is None or len(shape) != len(idx):
        return None
    merged, dims = merged_view(idx[at:], list(shape[at:]))
    terms: list = []
    for j, v in enumerate(merged):
        part = linear_terms(v, steps)
        if part is None:
            return None
        stride = product_dim(dims[j + 1:])
        terms += [(t, product_dim([c, stride])) for t, c in part]
    walk = _row_major(terms, indices, extents)
    return None if walk is None else Walk(at, walk[0], walk[1])


def reads_any(value: Value, targets: set[int]) -> bool:
    """Whether ``value`` is one of ``targets`` (ids) or computed from one (through any
    ops): a nest's loop indices, for ``linear_terms`` and ``access_walk``."""
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        if id(v) in targets:
            return True
        if id(v) in seen:
            continue
        seen.add(id(v))
        producer = op_of(v)
        if producer is not None:
            todo += list(producer.operands)
    return False


def reads_value(value: Value, target: Value) -> bool:
    """Whether ``value`` is ``target`` or computed from it (through any ops)."""
    return reads_any(value, {id(target)})


__all__ = ["size_of", "same_size", "UnravelRun", "unravel_run", "unravel_form", "unraveled",
           "merged_view", "row_step", "linear_terms", "multiple_of", "row_walk", "Walk", "access_walk", "op_of",
           "reads_any", "reads_value"]
