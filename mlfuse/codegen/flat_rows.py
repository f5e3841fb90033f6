"""Rows walked as one contiguous range: an access at ``row_base + step``, no divmod per value.

The row-family schedules ("row": a block per point; "strips" over "rows": a block per
point whose reduced values lie over several trailing axes) walk each of a point's
reduced values with a loop index ``k`` (or, for a nest over several axes, the flat
index ``r`` over their product). Where an access of such a loop lies at consecutive
elements of its buffer as the loop steps, its element offset is ``row_base + step``,
with ``row_base`` the same for every value of the point:

- **a read through a reshape** (group norm's rows of ``reshape(x, [N, G, C/G*H*W])``):
  the access's trailing indices are the row-major unravel of ``X = B + k``
  (``x[n, X // (H*W), X // W % H, X % W]``, ``dialects/index_forms.unravel_form``) over
  axes of exactly the unravel's radixes, and its leading indices and B depend on the
  point alone: offset = (leading indices . strides) + B + k. The divmods by W and H
  per value (64-bit, with floor semantics: tens of instructions each) go, and so do the
  index ops only they fed.
- **a nest over several trailing axes** (instance norm over [H, W]): the access's
  trailing indices are the nest's indices in order over axes of the nest's extents:
  offset = (leading indices . strides) + r, so the nest's indices need not be counted
  at all where nothing else reads them.

- **a flattened nest over axes that are not all trailing** (batch norm's statistics over
  [N, H, W] of NCHW, flatten-row-nests: ``x[X // (H*W), c, X // W % H, X % W]``): the
  trailing indices are the unravel of X over the trailing axes of its radixes, and one
  earlier index is the quotient left, the others the point's: offset = row_base +
  q * stride + r with q, r = divmod(X, H*W), one division a value where the indices
  took three (``SegmentedAccess``: X walks segments of H*W contiguous values).

The access reads the buffer's flat view (``_flat``: every kernel buffer is
C-contiguous, ``runtime.arguments`` refuses others) at an unsigned offset (Numba skips
its wraparound check). ``row_base`` is computed once per point, from the point's
indices, the dims and the buffer's shape (its strides; a shape's symbols need not be
kernel parameters). Accesses of any other form keep their indices.

This is codegen's, not an IR pass's: the rewrite is of how the generated code names an
element, which the IR does not model (the same reasoning as ``addressing.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.codegen.addressing import ACCESSES, access_parts
from mlfuse.codegen.segment_cursors import SegmentCursors
from mlfuse.codegen.segment_cursors import access_key as _key
from mlfuse.dialects.arith import ConstantOp, FloorDivOp, ModOp
from mlfuse.dialects.index_forms import (ADD, MUL, op_of, reads_value, size_of, unravel_form,
                                         unravel_run)
from mlfuse.dialects.loops import DimOp
from mlfuse.ir.core import Operation, Value
from mlfuse.ir.traits import SCALAR_COMPUTE
from mlfuse.ir.types import INDEX


@dataclass
class FlatAccess:
    """An access at ``row_base + step * stride``: its buffer, the indices that are not
    the step's with their axes, the part of the unravelled value that is not the step
    (None: 0), the step ("flat": the nest's flat index; None: none, a value of the point
    itself; else the loop index Value), and
    the axis the step indexes directly (its stride: the axes after it), None for a step
    along contiguous memory."""

    buf: Value
    lead: list[tuple[int, Value]]
    offset: Value | None
    step: object
    axis: int | None = None


@dataclass
class SegmentedAccess:
    """An access at ``row_base + q * stride(axis) + r``, (q, r) = divmod(step, the product
    of ``divisors``): its buffer, the point's indices with their axes, the quotient's
    axis, the radixes of the trailing unravel (Values, outer first) and the step (the
    loop index). ``offset`` is None (for ``_base_code``, as FlatAccess's)."""

    buf: Value
    lead: list[tuple[int, Value]]
    axis: int
    divisors: list[Value]
    step: Value
    offset: None = None


def segmented_access(op: Operation, k: Value, points: set[int]) -> SegmentedAccess | None:
    """The segmented form of access ``op`` in a loop over ``k`` (see the module doc): its
    trailing indices the unravel of ``k`` over axes of exactly its radixes, the quotient
    left at one earlier axis that is not the run's neighbour (that is the plain unravel,
    ``flat_access``), every other index and radix the point's or a size. None elsewhere."""
    buf, idx = access_parts(op)
    shape = list(buf.type.shape)
    run = unravel_run(idx)
    if len(idx) < 3 or len(shape) != len(idx) or run is None or run.flat is not k or \
            None in run.divisors or run.radix != shape[run.start:]:
        return None
    at = [j for j in range(run.start) if run.is_quotient(idx[j])]
    if len(at) != 1 or at[0] == run.start - 1:
        return None
    lead = [(j, idx[j]) for j in range(run.start) if j != at[0]]
    if not all(_invariant(v, points) for _, v in lead) or \
            not all(_invariant(d, points) for d in run.divisors):
        return None
    return SegmentedAccess(buf, lead, at[0], run.divisors, k)


def _invariant(v: Value, points: set[int]) -> bool:
    """Whether ``v`` is index arithmetic of the kernel's point indices, dims and
    constants only (the same for every value of a point's loops)."""
    if id(v) in points:
        return True
    op = op_of(v)
    if isinstance(op, DimOp) or (isinstance(op, ConstantOp) and v.type == INDEX):
        return True
    return isinstance(op, (ADD, MUL)) and all(_invariant(x, points) for x in op.operands)


def _step_split(x: Value, k: Value, points: set[int]) -> tuple[bool, Value | None]:
    """Whether ``x`` is ``B + k`` (or k) with B invariant, and B (None for k alone)."""
    if x is k:
        return True, None
    op = op_of(x)
    if isinstance(op, ADD):
        for a, b in (op.operands, op.operands[::-1]):
            if b is k and _invariant(a, points):
                return True, a
    return False, None


def flat_access(op: Operation, args: list[Value], extents: list, points: set[int],
                one_axis: bool = False) -> FlatAccess | None:
    """The flat form of access ``op`` inside a loop nest with indices ``args`` (outer
    first) over ``extents``, if it has one (see the module doc). ``one_axis``: also a
    1-D buffer indexed by a one-level nest's index (on axis 0), for an emitter that
    steps such accesses by a cursor (strips over columns: layernorm's gamma)."""
    buf, idx = access_parts(op)
    shape = list(buf.type.shape)
    if one_axis and len(idx) == 1 and len(args) == 1 and idx[0] is args[0]:
        return FlatAccess(buf, [], None, args[0], 0)
    if len(idx) < 2 or len(shape) != len(idx):
        return None  # (a 1-D buffer is indexed at one offset already)
    if not args:  # one value of the point (a row's shift sample): at its row base alone
        form = unravel_form(idx)
        if form is None:
            return None
        j, x, radix = form
        if any(r != d if r is not None else d != 1 for r, d in zip(radix, shape[j + 1:])) or \
                not _invariant(x, points):
            return None
        offset, step = x, None
    elif len(args) > 1:  # a nest: its indices trail, in order, over axes of its extents
        j = len(idx) - len(args)
        if j < 0 or any(v is not a for v, a in zip(idx[j:], args)) or shape[j:] != list(extents):
            return None
        offset, step = None, "flat"
    else:
        at = [d for d, v in enumerate(idx) if v is args[0]]
        rest = [(d, v) for d, v in enumerate(idx) if v is not args[0]]
        if len(at) == 1 and all(_invariant(v, points) for _, v in rest):
            # the loop index itself on one axis (a row's last, a column strip's middle)
            return FlatAccess(buf, rest, None, args[0], None if at[0] == len(idx) - 1 else at[0])
        run = _merged_step(idx, shape, args[0])
        if run is not None:  # the loop index over neighbouring axes (flatten-column-nests)
            first, last = run
            rest = [(d, v) for d, v in enumerate(idx) if not first <= d <= last]
            if all(_invariant(v, points) for _, v in rest):
                return FlatAccess(buf, rest, None, args[0], last)
        form = unravel_form(idx)
        if form is None:
            return None
        j, x, radix = form
        if any(r != d if r is not None else d != 1 for r, d in zip(radix, shape[j + 1:])):
            return None  # the unravel's radixes are not the buffer's axes
        ok, offset = _step_split(x, args[0], points)
        if not ok:
            return None
        step = args[0]
    if not all(_invariant(v, points) for v in idx[:j]):
        return None
    return FlatAccess(buf, list(enumerate(idx[:j])), offset, step)


def _merged_step(idx: list[Value], shape: list, k: Value) -> tuple[int, int] | None:
    """(first, last): the axes, not the trailing ones, whose indices are the row-major
    unravel of the loop index ``k`` over exactly their dims (batch norm's statistics
    over [N, H, W] of NHWC, flattened: ``x[X // W // H, X // W % H, X % W, c]``), so the
    access lies at ``row_base + k * stride(last)``; None where there are none."""
    for end in range(len(idx) - 2, 0, -1):
        if not isinstance(op_of(idx[end]), ModOp):
            continue
        form = unravel_form(idx[:end + 1])
        if form is not None and form[1] is k and \
                list(form[2]) == list(shape[form[0] + 1:end + 1]):
            return form[0], end
    return None


def _monomials(v: Value) -> list[list]:
    """An invariant index value (``_invariant``) as a sum of monomials, each the list of
    its dim and constant factors (its point indices left out: any value)."""
    op = op_of(v)
    if isinstance(op, DimOp):
        return [[op["sym"]]]
    if isinstance(op, ConstantOp):
        return [[op["value"]]]
    if isinstance(op, ADD):
        return [m for x in op.operands for m in _monomials(x)]
    if isinstance(op, MUL):
        a, b = (_monomials(x) for x in op.operands)
        return [p + q for p in a for q in b]
    return [[]]  # a point index


def _nest_ops(top: Operation) -> list[Operation]:
    return [o for o in top.walk() if o is not top]


def unneeded_index_ops(top: Operation, flat: dict) -> set[int]:
    """Ids of the ops in nest ``top`` whose values only flat accesses' indices (or other
    such ops) use: not emitted."""
    ops = _nest_ops(top)
    users: dict[int, list[tuple[int, bool]]] = {}
    for o in ops:
        index_ids = set()
        if isinstance(o, ACCESSES):
            buf, idx = access_parts(o)
            if _key(buf, idx) in flat:
                index_ids = {id(v) for v in idx}
        for v in o.operands:
            users.setdefault(id(v), []).append((id(o), id(v) in index_ids))
    dead: set[int] = set()
    for o in reversed(ops):
        if not o.results or not (o.has_trait(SCALAR_COMPUTE) or isinstance(o, (DimOp, ConstantOp))):
            continue
        if all(user in dead or as_index for r in o.results for user, as_index in users.get(id(r), [])):
            dead.add(id(o))
    return dead


def uses_besides(values: list[Value], top: Operation, dead: set[int], flat: dict) -> bool:
    """Whether an op of nest ``top`` that is emitted uses one of ``values`` other than as
    a flat access's index (then a nest's indices must still be counted)."""
    ids = {id(v) for v in values}
    for o in _nest_ops(top):
        if id(o) in dead:
            continue
        skip = set()
        if isinstance(o, ACCESSES):
            buf, idx = access_parts(o)
            if _key(buf, idx) in flat:
                skip = {id(v) for v in idx}
        if any(id(v) in ids and id(v) not in skip for v in o.operands):
            return True
    return False


def base_multiples(access: FlatAccess | SegmentedAccess) -> list[list]:
    """What makes ``access``'s row base a multiple of a vector's width at every point:
    the base is a sum of monomials of the point's indices, and each monomial's other
    factors (dims, constants: a list) must multiply to one (the host checks). A
    segmented access's segment too (a vector of values then lies in one segment)."""
    terms = []
    if isinstance(access, SegmentedAccess):
        terms.append([size_of(d) for d in access.divisors])
    for d, v in access.lead:
        strides = list(access.buf.type.shape[d + 1:])
        terms += [m + strides for m in _monomials(v)]
    if access.offset is not None:
        terms += _monomials(access.offset)
    return terms


def row_flat_vectors(op: Operation, row_loops: list[Operation]) -> tuple[list, list[list]]:
    """The early loads and stores of a row kernel's loops that step along contiguous
    memory through an unravel (a reshape's read, a flattened nest: flatten-row-nests;
    or segments of it, ``SegmentedAccess``) and that vectors of neighbouring row values may move, and what the host must check
    of their row bases (``base_multiples``). Plain ``x[..., k]`` accesses are not
    among them (``vector.row_vector_accesses`` finds those)."""
    from mlfuse.codegen.reuse import prefetchable_loads
    from mlfuse.codegen.vector import VECTOR_DTYPES
    points = {id(a) for a in op.body.args}
    accesses, multiples = [], []
    for loop in row_loops:
        k = loop.body.args[0]
        for o in (o for o in loop.walk() if isinstance(o, ACCESSES)):
            access = flat_access(o, [k], loop.extent_list, points)
            segmented = segmented_access(o, k, points) if access is None else None
            if segmented is not None:  # a vector within a segment (the host checks it)
                if segmented.buf.type.dtype in VECTOR_DTYPES:
                    accesses.append(o)
                    multiples += base_multiples(segmented)
                continue
            if access is None or access.step is not k or access.axis is not None:
                if access is None and _reads_step(o, k):
                    # another read at a division of the step (group norm's gamma[c]):
                    # each lane divides alone, which spilled the 8-value tile (ptxas)
                    return [], []
                continue
            if access_parts(o)[1][-1] is not k and access.buf.type.dtype in VECTOR_DTYPES:
                accesses.append(o)
                multiples += base_multiples(access)
    early = {id(o) for loop in row_loops for o in prefetchable_loads(loop.body)[0]}
    accesses = [o for o in accesses if not o.results or id(o) in early]
    return accesses, list({repr(m): m for m in multiples}.values())


def _reads_step(op: Operation, k: Value) -> bool:
    """Whether an access's indices depend on the loop index ``k``."""
    return any(reads_value(v, k) for v in access_parts(op)[1])


def split_vector_buffers(plain: list[Operation], flat: list[Operation]) -> tuple[list, list]:
    """The buffers a vector kernel moves whole, in two lists: those some plain access
    moves (every row of the buffer must start on a vector: ``_vector_ready``) and those
    only flat rows move (their row bases are checked as products, ``base_multiples``:
    only the buffer's start must be aligned; W = 14 leaves its rows 56 bytes apart)."""
    from mlfuse.codegen.vector import vector_buffers
    rows = vector_buffers(plain)
    only_flat = [b for b in vector_buffers(flat) if not any(b is r for r in rows)]
    return rows, only_flat


def aligned_start_tests(host, buffers) -> list[str]:
    """The host's test that each of ``buffers`` starts on a vector (flat rows' buffers)."""
    host.helpers.add("_vector_ready")  # (brings _address)
    return [f"_address({host.namer(b)}) % (VECTOR_WIDTH * {host.namer(b)}.dtype.itemsize) == 0"
            for b in buffers]


class FlatRows(SegmentCursors):
    """A mixin of the kernel emitter for the row-family schedules. Needs from its host
    class: w, op, namer, sym, helpers, reuse."""

    flat: dict = {}  # _key(buf, indices) -> FlatAccess; empty: no flat rows planned
    segments: dict = {}  # _key(buf, indices) -> SegmentedAccess
    flat_dead: set = set()  # ids of the index ops only planned accesses used (not emitted)
    rows_planned = False  # a row-family kernel: its index divisions go 32-bit where they fit
    # ... and only 32-bit: the host runs the kernel only where every index fits 31 bits
    narrow_divisions = False
    # the type of row bases and strides: uint32 where the host runs the kernel only for
    # buffers of fewer than 2**31 values (column_epilogue_lean.py), so that the offsets
    # computed from them are 32-bit multiplies and adds
    offset_type = "numba.int64"

    def keeps_indices(self, access: Operation) -> bool:
        """Whether ``access`` keeps its indices, whatever its form (staged_rows.py: a
        store the copy-out addresses itself)."""
        return False

    def plan_flat_rows(self, nests: list[tuple[Operation, list[Value], list]],
                       point_reads: bool = True, one_axis: bool = False) -> None:
        """Find the flat accesses of each nest (top loop, its indices, its extents), mark
        the index ops only they used as not emitted, and define the flat views.
        ``point_reads``: the point's own accesses too (not where lanes of a vector of
        points each access theirs: column_epilogue_vector.py). ``one_axis``: 1-D
        buffers indexed by a one-level nest's index too (``flat_access``)."""
        points = {id(a) for a in self.op.body.args}
        self.flat, self.flat_digits, self.row_bases = {}, {}, {}
        self.segments = {}  # _key(buf, indices) -> SegmentedAccess
        self.segment_origins = {}
        self.flat_dead = set()
        self.rows_planned = True
        for top, args, extents in nests:
            found, segments = {}, {}
            for o in _nest_ops(top):
                if isinstance(o, ACCESSES) and not self.keeps_indices(o):
                    access = flat_access(o, args, extents, points, one_axis)
                    if access is not None:
                        found[_key(*access_parts(o))] = access
                    elif len(args) == 1:
                        segmented = segmented_access(o, args[0], points)
                        if segmented is not None:
                            segments[_key(*access_parts(o))] = segmented
            self.flat.update(found)
            self.segments.update(segments)
            found = {**found, **segments}  # (their index ops are not emitted either)
            dead = unneeded_index_ops(top, found)
            self.flat_dead |= dead
            self.reuse.dead |= dead  # (the set of ops the emitter skips)
            self.flat_digits[id(top)] = len(args) < 2 or uses_besides(args, top, dead, found)
        # the point's own reads through a reshape (a row's shift sample, moments.py): at
        # their row base, their unravel's divmods gone with the index ops only they used
        found = {}
        for o in self.op.body.ops if point_reads else ():
            if isinstance(o, ACCESSES):
                access = flat_access(o, [], [], points)
                if access is not None:
                    found[_key(*access_parts(o))] = access
        self.flat.update(found)
        self.flat_dead |= unneeded_index_ops(self.op, found)
        self.reuse.dead |= self.flat_dead
        views = {}
        for access in self.planned_accesses():
            if id(access.buf) not in views:
                self.helpers.add("_flat")
                views[id(access.buf)] = self.namer.fresh(f"{self.namer(access.buf)}_flat")
                self.w.line(f"{views[id(access.buf)]} = _flat({self.namer(access.buf)})")
        self.flat_views = views
        self.flat_strides = {}  # (id(buf), axis) -> the name of its stride
        names: dict[str, str] = {}  # one name per stride text
        for access in self.planned_accesses():
            key = (id(access.buf), access.axis)
            if access.axis is not None and key not in self.flat_strides:
                text = " * ".join(self._strides(access.buf, access.axis)) or "1"
                if text not in names:
                    names[text] = self.namer.fresh(f"stride{access.axis}")
                    self.w.line(f"{names[text]} = {self.offset_type}({text})")
                self.flat_strides[key] = names[text]

    def stream_order(self, extent: str, span: str, start: str = "0") -> str:
        """The range of tile starts of a streaming kernel's next pass over its rows (or
        over ``[start, extent)``, a chunk of one): the passes alternate direction, so each
        re-read starts where the previous pass ended, on the values it read last (those
        still in L2 where a pass's rows in flight pass it: group norm's 132 rows of 512 KB
        at once on an H100, 50 MB of L2). Only the order of a thread's partials changes
        (still the same in every run)."""
        if not self.backward_pass():
            return f"range({start}, {extent}, {span})"
        if not span.isidentifier():  # (named once: the range's three places read it)
            name = self.namer.fresh("span")
            self.w.line(f"{name} = {span}")
            span = name
        if start == "0":
            return f"range(({extent} - 1) // {span} * {span}, -1, -{span})"
        return f"range({start} + ({extent} - {start} - 1) // {span} * {span}, {start} - 1, -{span})"

    def backward_pass(self) -> bool:
        """Whether the next pass walks backwards: every second pass of the kernel."""
        self.stream_passes = getattr(self, "stream_passes", 0) + 1
        return self.stream_passes % 2 == 0

    def planned_accesses(self) -> list:
        """Every access planned at a row base: flat ones, then segmented ones."""
        return [*self.flat.values(), *self.segments.values()]

    def row_base_lines(self) -> None:
        """Each distinct row base of the current point, once (after its indices)."""
        self.row_bases = {}
        for access in self.planned_accesses():
            text = self._base_code(access)
            if text not in self.row_bases:
                self.row_bases[text] = self.namer.fresh("row_base")
                self.w.line(f"{self.row_bases[text]} = {self.offset_type}({text})")

    def flat_subscript(self, buf: Value, indices, flat_index: str) -> str | None:
        """``view[row_base + step]`` of a flat access (``flat_index``: a nest's flat
        index), or None where the access is not flat."""
        segmented = self.segments.get(_key(buf, indices))
        if segmented is not None:
            return self.segment_subscript(segmented)
        access = self.flat.get(_key(buf, indices))
        if access is None:
            return None
        base = self.row_bases[self._base_code(access)]
        if access.step is None:  # the point's own value
            return f"{self.flat_views[id(buf)]}[numba.uint64({base})]"
        step = flat_index if access.step == "flat" else self.namer(access.step)
        if access.axis is not None:
            step = f"{step} * {self.flat_strides[(id(buf), access.axis)]}"
        return f"{self.flat_views[id(buf)]}[numba.uint64({base} + {step})]"

    def _divide(self) -> str:
        divide = "_divmod_index32" if self.narrow_divisions else "_divmod_index"
        self.helpers.add(divide)
        return divide

    def index_division(self, op: Operation, operands: list[str]) -> str | None:
        """A row-family kernel's ``//`` or ``%`` of index values by a size known only at
        run time (a per-channel parameter's index along group norm's rows: ``(B + k) //
        W // H``) by ``_divmod_index``: in unsigned 32 bits where both fit (a dozen
        instructions), where Numba's int64 floor division calls a 64-bit division
        routine (ptxas: ~30 such calls in group norm's streaming kernel, its registers
        spilled around them). Index operands are never negative. None elsewhere."""
        if not self.rows_planned or not isinstance(op, (FloorDivOp, ModOp)) or \
                op.result.type != INDEX or isinstance(op_of(op.operands[1]), ConstantOp):
            return None
        divide = self._divide()
        inner = op_of(op.operands[0])
        if isinstance(op, FloorDivOp) and isinstance(inner, FloorDivOp) and \
                not isinstance(op_of(inner.operands[1]), ConstantOp):
            # (x // a) // b == x // (a * b) for x >= 0: one division where the unravel of a
            # reshape nests two (group norm's channel ``(B + k) // W // H``, once a vector
            # of its epilogue); the inner one stays only where something else reads it
            x, a = (self.namer(v) for v in inner.operands)
            return f"{divide}({x}, {a} * {operands[1]})[0]"
        return f"{divide}({operands[0]}, {operands[1]})[{int(isinstance(op, ModOp))}]"

    def base_multiples(self, access: FlatAccess) -> list[list]:
        return base_multiples(access)

    def _dim_code(self, buf: Value, axis: int) -> str:
        """The size of ``buf``'s axis as code: a constant, else its shape (a dim's
        symbols need not be kernel parameters). One row base per buffer: sharing one
        among buffers of the same dims measured worse (ptxas kept more 64-bit addresses
        live in the streaming variant: 12 -> 108 B spilled in test_ptx's bf16 kernel)."""
        dim = buf.type.shape[axis]
        if isinstance(dim, int):
            return str(dim)
        return f"{self.namer(buf)}.shape[{axis}]"

    def _strides(self, buf: Value, axis: int) -> list[str]:
        return [self._dim_code(buf, e) for e in range(axis + 1, buf.type.rank)]

    def _base_code(self, access: FlatAccess) -> str:
        terms = []
        for d, v in access.lead:
            strides = self._strides(access.buf, d)
            terms.append(" * ".join([self._index_code(v)] + strides))
        if access.offset is not None:
            terms.append(self._index_code(access.offset))
        return " + ".join(terms) or "0"

    def _index_code(self, v: Value) -> str:
        """Code of an invariant index value (``_invariant``), from the point's names."""
        op = op_of(v)
        if isinstance(op, DimOp):
            return self.sym[op["sym"]]
        if isinstance(op, ConstantOp):
            return str(op["value"])
        if isinstance(op, (ADD, MUL)):
            a, b = (self._index_code(x) for x in op.operands)
            if isinstance(op, ADD) and "0" in (a, b):  # (a shift sample at the row's start:
                return b if a == "0" else a           # the same base as the row's loops)
            return f"({a} + {b})" if isinstance(op, ADD) else f"{a} * {b}"
        return self.namer(v)


__all__ = ["FlatRows", "FlatAccess", "SegmentedAccess", "flat_access", "segmented_access",
           "unneeded_index_ops"]
