"""The loop-free pointwise kernels with lean addressing (``addressing.py`` says why).

A mixin of ``emit_kernel.KernelEmitter`` for "pointwise-prefetch" and
"pointwise-vector": the same phases as before (a thread's loads first, then its
points' compute and stores), with every index unsigned (``index_type``: uint32 in
the vector variant, which the host launches only under 2**31 points; uint64 in the
scalar one) and every access that collapses addressed as an offset into its buffer's
flat view. Each phase of a point (or vector) first computes what its accesses need,
once: the flat index mod each broadcast suffix's size (a multiply-high each), and the
loop indices themselves only where an access does not collapse or the body computes
with them.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.codegen.addressing import (access_parts, index_divisor, lean_divisors,
                                       needs_unravel, suffix_of, uses_loop_indices)
from mlfuse.codegen.reuse import prefetchable_loads
from mlfuse.codegen.vector import pointwise_vector_accesses
from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, StoreOp

POINTS = "POINTS_PER_THREAD"


class LeanPointwise:
    """Needs from its host class: w, local, namer, op, sym, helpers, held, fills,
    staged, vector_loads, hold, local_array, plan_vectors, statement, fill_line,
    iface, extent, vector_lanes, vector_points."""

    lean = False
    index_type = "numba.uint64"

    # -- set-up -----------------------------------------------------------------------
    def lean_params(self) -> list[str]:
        """The kernel's magic-number parameters: (multiplier, shift) per run-time divisor."""
        self.divisors = {}
        params = []
        for dims in lean_divisors(self.op):
            base = "_".join(str(d) for d in dims)
            m, s = self.namer.fresh(f"{base}_magic"), self.namer.fresh(f"{base}_shift")
            self.divisors[dims] = (None, m, s)
            params += [m, s]
        return params

    def cast(self, text: str) -> str:
        return f"{self.index_type}({text})"

    def lean_setup(self) -> None:
        """Flat views of the buffers some access collapses into, and the divisors."""
        w, T = self.w, self.index_type
        args, extents = list(self.op.body.args), list(self.op.extent_list)
        self.flat_of = {}
        for o in self.op.body.ops:
            if isinstance(o, (LoadOp, MaskedLoadOp, StoreOp)):
                buf, indices = access_parts(o)
                if suffix_of(buf, indices, args, extents) is not None and id(buf) not in self.flat_of:
                    name = self.namer(buf)
                    if buf.type.rank > 1:
                        self.helpers.add("_flat")
                        flat = self.namer.fresh(f"{name}_flat")
                        w.line(f"{flat} = _flat({name})")
                        name = flat
                    self.flat_of[id(buf)] = name
        for dims, (_, m, s) in list(self.divisors.items()):
            value = self.namer.fresh("d_" + "_".join(str(d) for d in dims))
            w.line(f"{value} = {self.product(dims)}")
            w.line(f"{m}, {s} = {T}({m}), {T}({s})")
            self.divisors[dims] = (value, m, s)

    def product(self, dims) -> str:
        """The product of extents ``dims`` as an index_type value."""
        factors = [self.cast(self.extent(d)) for d in dims] or [self.cast("1")]
        text = factors[0]
        for f in factors[1:]:
            text = self.cast(f"{text} * {f}")
        return text

    def divide(self, n: str, dims) -> str:
        """The expression of (n // d, n % d) for the product ``d`` of ``dims``."""
        if all(isinstance(d, int) for d in dims):
            d = self.product(dims)
            return f"{self.cast(f'{n} // {d}')}, {self.cast(f'{n} % {d}')}"
        value, m, s = self.divisors[tuple(dims)]
        helper = "_divmod_magic" if self.index_type == "numba.uint32" else "_divmod_wide"
        self.helpers.add(helper)
        return f"{helper}({n}, {value}, {m}, {s})"

    def index_division(self, op, operands: list[str]) -> str | None:
        """A lean kernel's ``//`` or ``%`` of a loop index by a run-time extent: its
        unsigned index through the host's magic numbers (``addressing.index_divisor``);
        other kernels' as their mixins say."""
        sym = index_divisor(op, list(self.op.body.args)) if self.lean else None
        unsigned = getattr(self, "unsigned", {}).get(id(op.operands[0])) if sym is not None else None
        if unsigned is None or (sym,) not in self.divisors:
            return super().index_division(op, operands)
        part = int(op.name.endswith("mod"))
        return f"numba.int64({self.divide(unsigned, (sym,))}[{part}])"

    # -- a point's (or vector's) prelude ------------------------------------------------
    def prelude(self, first: str, ops, lane: bool) -> None:
        """What ``ops`` need of the point (vector) whose flat index is ``first``: the
        mod of each collapsed suffix, and the loop indices where needed (``lane``: a
        vector kernel's lanes read them, its last index is the first lane's)."""
        w = self.w
        args, extents = list(self.op.body.args), list(self.op.extent_list)
        self.offsets = {0: first}
        for o in ops:
            if isinstance(o, (LoadOp, MaskedLoadOp, StoreOp)):
                j = suffix_of(*access_parts(o), args, extents)
                if j and j not in self.offsets:
                    self.offsets[j] = self.namer.fresh(f"{first}_mod")
                    w.line(f"_, {self.offsets[j]} = {self.divide(first, tuple(extents[j:]))}")
        self.unsigned = {}
        if not needs_unravel(ops, args, extents):
            return
        names = [self.namer.fresh(f"u{d}") for d in range(len(args))]
        rest = first
        for d in range(len(args) - 1, 0, -1):
            quotient = names[0] if d == 1 else self.namer.fresh("rest")
            w.line(f"{quotient}, {names[d]} = {self.divide(rest, (extents[d],))}")
            rest = quotient
        if len(args) == 1:
            w.line(f"{names[0]} = {first}")
        self.unsigned = {id(a): n for a, n in zip(args, names)}
        if any(uses_loop_indices(o, args) for o in ops):  # computed with: int64, as before
            for d, a in enumerate(args):
                if not (lane and d == len(args) - 1):
                    w.line(f"{self.define(a, f'i{d}')} = numba.int64({names[d]})")

    def lane_indices(self, ops) -> None:
        """In a vector kernel's lane: its last loop index, where ``ops`` need it."""
        args = list(self.op.body.args)
        if not self.unsigned:
            return
        last, lane = args[-1], self.local["lane"]
        first_name = self.unsigned[id(last)]
        self.unsigned[id(last)] = self.namer.fresh(f"{first_name}_lane")
        self.w.line(f"{self.unsigned[id(last)]} = {self.cast(f'{first_name} + {lane}')}")
        if any(uses_loop_indices(o, args) for o in ops):
            self.w.line(f"{self.define(last, f'i{len(args) - 1}')} = "
                        f"numba.int64({self.unsigned[id(last)]})")

    # -- addresses ----------------------------------------------------------------------
    def lean_subscript(self, buf, indices, lane: str | None = None, vector: bool = False) -> str:
        """``array[index]`` (``vector``: ``array, (index,)``) of an access at ``indices``
        of the current point; ``lane``: the lane's position in the current vector."""
        args, extents = list(self.op.body.args), list(self.op.extent_list)
        j = suffix_of(buf, indices, args, extents) if indices else None
        if j is not None:
            offset = self.offsets[j]
            if lane:
                offset = self.cast(f"{offset} + {lane}")
            return f"{self.flat_of[id(buf)]}, ({offset},)" if vector else \
                f"{self.flat_of[id(buf)]}[{offset}]"
        names = [self.unsigned.get(id(v)) or self.namer(v) for v in indices]
        index = ", ".join(names) if names else "()"
        if vector:
            return f"{self.namer(buf)}, ({index},)"
        return f"{self.namer(buf)}[{index}]"

    # -- the body -------------------------------------------------------------------------
    def lean_prefetch_body(self) -> None:
        w, loc, T = self.w, self.local, self.index_type
        body = self.op.body
        loads, index_ops = prefetchable_loads(body)
        width = self.vector_lanes if self.vector else "1"
        slots = self.vector_points if self.vector else POINTS
        for o in loads:
            self.hold([o], slots)
        self.fills[id(self.op)] = (index_ops, loads)
        self.lean_setup()
        if self.vector:
            self.plan_vectors(pointwise_vector_accesses(body), slots)
        count = f"{slots} // {width}" if self.vector else POINTS
        w.line(f"{loc['n_points']} = {self.product(self.op.extent_list)}")
        end = loc["n_points"]
        if self.vector:
            end = loc["n_vectors"]
            w.line(f"{end} = {self.cast(loc['n_points'] + ' // ' + self.cast(width))}")
        step = loc["step"]
        w.line(f"{step} = {self.cast('cuda.blockDim.x')}")
        per = self.cast(count)
        w.line(f"{loc['start']} = "
               + self.cast(f"{T}(cuda.blockIdx.x) * {per} * {step} + {T}(cuda.threadIdx.x)"))
        w.line(f"{loc['stride']} = " + self.cast(f"{T}(cuda.gridDim.x) * {per} * {step}"))
        staged = [o for o in body.ops if id(o) in self.staged]
        fill_ops = index_ops + loads
        compute_ops = [o for o in body.ops if id(o) not in self.held and id(o) not in self.staged]
        # a while loop, not range(): range's trip count would be a division per thread
        w.line(f"{loc['base']} = {loc['start']}")
        with w.indented(f"while {loc['base']} < {end}:"):
            w.line("# the loads of every point first: no store between them, so all are "
                   "in flight at once")
            with self.each_lean_point(count, width):
                self.prelude(loc["first"], fill_ops, lane=self.vector)
                if self.vector:
                    self.lean_vector_fill(index_ops, loads)
                else:
                    self.fill(self.op)
            with self.each_lean_point(count, width):
                self.prelude(loc["first"], compute_ops + staged, lane=self.vector)
                if self.vector:
                    first_lane = dict(self.unsigned)  # the vector store's indices
                    with w.indented(f"for {loc['lane']} in range({width}):"):
                        w.line(f"{loc['slot']} = {loc['vec']} * {width} + {loc['lane']}")
                        self.lane = loc["lane"]
                        self.lane_indices(compute_ops)
                        self.block(body, top=False)
                        self.lane = None
                    self.unsigned = first_lane
                    for o in staged:
                        target = self.lean_subscript(o.operands[1], list(o.operands[2:]),
                                                     vector=True)
                        w.line(f"{self.vector_moves[1]}({target}, {self.staged[id(o)]}, "
                               f"{loc['vec']} * {width})")
                else:
                    self.block(body, top=False)
            w.line(f"{loc['base']} = {self.cast(loc['base'] + ' + ' + loc['stride'])}")

    @contextmanager
    def each_lean_point(self, count: str, width: str):
        """``vec`` (``slot``) over a thread's vectors (points), one block width apart,
        with ``first``: the flat index of each that exists."""
        w, loc = self.w, self.local
        index = loc["vec"] if self.vector else loc["slot"]
        with w.indented(f"for {index} in range({count}):"):
            scaled = self.cast(f"{loc['base']} + {self.cast(index)} * {loc['step']}")
            if self.vector:
                scaled = self.cast(f"{scaled} * {self.cast(width)}")
            w.line(f"{loc['first']} = {scaled}")
            with w.indented(f"if {loc['first']} < {loc['n_points']}:"):
                yield

    def lean_vector_fill(self, index_ops, loads) -> None:
        w, loc = self.w, self.local
        width = self.vector_lanes
        for o in loads:
            if id(o) in self.vector_loads:
                source = self.lean_subscript(o.operands[0], list(o.operands[1:]), vector=True)
                w.line(f"{self.vector_moves[0]}({source}, {self.held[id(o)]}, "
                       f"{loc['vec']} * {width})")
        single = [o for o in loads if id(o) not in self.vector_loads]
        if single:
            with w.indented(f"for {loc['lane']} in range({width}):"):
                w.line(f"{loc['slot']} = {loc['vec']} * {width} + {loc['lane']}")
                self.lane = loc["lane"]
                self.lane_indices(index_ops + single)
                for o in index_ops:
                    self.statement(o, shared=False)
                for o in single:
                    self.fill_line(o)
                self.lane = None
