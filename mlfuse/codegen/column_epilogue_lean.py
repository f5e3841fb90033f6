"""The column stages' lean epilogue (``hw.column_lanes_rows``: "one", or "auto", the
default, where ``lean_epilogue_pays``): a thread per (row, vector of neighbouring
points), in a pointwise kernel's order.

The vector epilogue (column_epilogue_vector.py) gives a thread a chunk of rows and walks
it a tile at a time. Column centring's took 70 registers (ptxas, sm_90), so only a
quarter of the warps were resident. It ran 0.293 ms at 16384 x 4096, where the unfused
plan's kernels take 0.281 (H100, kernels alone). The same kernel written by hand in a
pointwise kernel's order took 35 registers and 0.288 ms: a thread takes a vector of one
row, offsets are 32-bit, and its loads come first. That was 1.5-4% faster at each of
five shapes (docs/perf-notes.md). This module generates that kernel:

- the items are (row k, vector of points), the vectors fastest, so a warp's threads
  move neighbouring vectors of one row;
- a thread's loads come first: its points' combined partials (a vector per reduce), each
  stepped load's vector at ``row_base + k * stride``, each shared load once;
- then one loop over the lanes runs the ops after the reductions (a statistic also
  returned is stored by row 0's thread), the lane loads, and the loop bodies' ops for
  row k. The stores' vectors follow it;
- indices and offsets are 32-bit. The host runs this kernel where the points times the
  rows, and each stepped buffer's values, are under 2**31 (``lean_call_test``); the
  scalar epilogue runs elsewhere.

The plan (which accesses are stepped, shared or a lane's) is the vector epilogue's,
``epilogue_vector_plan``.
"""
from __future__ import annotations

from mlfuse.codegen.column_epilogue_vector import ColumnVectorEpilogue
from mlfuse.codegen.scalar import COMPUTE_TYPE
from mlfuse.codegen.split_host import vector_call_test
from mlfuse.dialects.arith import SCALAR_OPS, CastOp
from mlfuse.dialects.loops import ForOp, LoadOp, ReduceOp, StoreOp, YieldOp

_DOC = ("Strips over [{space}] split in stages, last stage, lean: a thread per (row, vector "
        "of neighbouring points) loads its points' combined partials and its row's "
        "vectors, then computes each lane.")

U32 = "numba.uint32"


class ColumnLeanEpilogue(ColumnVectorEpilogue):
    """The lean epilogue of a column-stages plan (see the module doc)."""

    offset_type = U32  # row bases and strides (the host checked 2**31)

    def emit(self) -> str:
        w, loc, plan = self.w, self.local, self.plan
        lanes = plan.lanes
        with self.kernel_def(self.partials + [loc["n_split"]], _DOC):
            self.helpers.update({"_vector_access", "_divmod_index32"})
            reduces = [o for o in self.op.body.ops if isinstance(o, ReduceOp)]
            accs = [self.local_array(f"{o.result.name_hint or 'acc'}_lanes",
                                     COMPUTE_TYPE[o.result.type.dtype], lanes) for o in reduces]
            for o in plan.stepped:  # a vector each: a load's values, a store's waiting
                value = o.result if isinstance(o, LoadOp) else o.operands[0]
                place = self.held if isinstance(o, LoadOp) else self.staged
                place[id(o)] = self.local_array(f"{self.namer(o.operands[isinstance(o, StoreOp)])}"
                                                "_vals", COMPUTE_TYPE[value.type.dtype], lanes)
            n_items = self.namer.fresh("n_items")
            w.line(f"{loc['n_points']} = {U32}({self.points(self.op.extent_list)})")
            w.line(f"{loc['n_vectors']} = {U32}({loc['n_points']} // {U32}({lanes}))")
            w.line(f"{n_items} = {U32}({loc['n_vectors']} * "
                   f"{U32}({self.points(self.loops[0].extent_list)}))")
            self.plan_flat_rows([(o, o.body.args[:1], o.extent_list) for o in self.loops],
                                point_reads=False)
            w.line(f"{loc['flat']} = {U32}({U32}(cuda.blockIdx.x) * {U32}(cuda.blockDim.x) + "
                   f"{U32}(cuda.threadIdx.x))")
            w.line(f"{loc['stride']} = {U32}({U32}(cuda.gridDim.x) * {U32}(cuda.blockDim.x))")
            # a while loop, not range(): range's trip count would be a division per thread
            with w.indented(f"while {loc['flat']} < {n_items}:"):
                k = self.define(self.loops[0].body.args[0], "k")
                for loop in self.loops[1:]:  # (every loop walks the same rows)
                    self.namer.bind(loop.body.args[0], k)
                w.line(f"{k}, {loc['point']} = _divmod_index32({loc['flat']}, "
                       f"{loc['n_vectors']})")
                w.line(f"{loc['point']} *= {lanes}  # the vector's first point")
                self.unravel(loc["point"], narrow=True)
                self.row_base_lines()
                self._loads(k, accs)
                self._lanes(k, reduces, accs)
                for o in plan.stepped:
                    if isinstance(o, StoreOp):
                        w.line(f"{plan.store}({self.flat_views[id(o.operands[1])]}, "
                               f"({self._cursor(o)},), {self.staged[id(o)]}, 0)")
                w.line(f"{loc['flat']} = {U32}({loc['flat']} + {loc['stride']})")
        return self.w.text()

    def _body(self) -> list:
        """The loops' ops after the reductions, in order (their yields left out)."""
        return [o for loop in self.loops for o in loop.body.ops if not isinstance(o, YieldOp)]

    def _loads(self, k: str, accs: list[str]) -> None:
        """What the lanes share at the top, then the item's loads (no use between them, so
        all are in flight): the combined partials, the stepped vectors, the shared loads;
        then what the lanes share of row k."""
        w, plan = self.w, self.plan
        for o in self.op.body.ops:
            if self._shared(o):
                self.statement(o, shared=False)
        w.line("# the item's loads first: no use between them, so all are in flight")
        for acc, partials in zip(accs, self.partials):  # (reduce_nests' order)
            self._combined(acc, partials)
        self.start_cursors(k, plan.stepped + plan.shared)
        for o in plan.stepped:
            if isinstance(o, LoadOp):
                w.line(f"{plan.load}({self.flat_views[id(o.operands[0])]}, "
                       f"({self._cursor(o)},), {self.held[id(o)]}, 0)")
        for o in self._body():
            if self._shared(o):
                self.statement(o, shared=False)

    def _lanes(self, k: str, reduces, accs: list[str]) -> None:
        """Each lane: the ops after the reductions (a point's own stores by row 0's
        thread), then each loop body's ops for row k, the stores' values into their
        vectors."""
        w, loc = self.w, self.local
        with self.lane_loop(reduces, accs, f"{k} == 0"):
            for o in self._body():
                if id(o) in self.held:
                    name = self.define(o.result, self.namer(o.operands[0]) + "_v")
                    w.line(f"{name} = {self.held[id(o)]}[{loc['lane']}]")
                elif id(o) in self.staged:
                    w.line(f"{self.staged[id(o)]}[{loc['lane']}] = {self.namer(o.operands[0])}")
                elif not self._shared(o):
                    self.statement(o, shared=False)


_SCALINGS = (SCALAR_OPS["mul"], SCALAR_OPS["div"], CastOp)


def lean_epilogue_pays(op) -> bool:
    """Whether kernel ``op``'s column stages take the lean epilogue where
    ``hw.column_lanes_rows`` is "auto": where its point's values are its reductions'
    results scaled or converted (a mean: sum / n), each op reading one of them. Every
    item recomputes those (its lanes' loop), while the bands epilogue computes them once
    for a chunk of rows. Measured (H100, docs/perf-notes.md "Twenty-third session"):
    lean 0.97-1.01x torch.compile on f32 column centring at five shapes, where bands
    is 1.02-1.05x; on standardisation, ``(x - m) * rsqrt(q - m * m + eps)``, lean is 3%
    slower, and ncu (H200, "Twenty-fourth session") counts 133M warp instructions
    against bands' 17M, its SMs 71% busy."""
    made = set()
    for o in op.body.ops:
        if isinstance(o, ReduceOp):
            made.add(id(o.result))
        elif not isinstance(o, (ForOp, StoreOp)):
            reads = [v for v in o.operands if id(v) in made]
            if reads and (len(reads) > 1 or not isinstance(o, _SCALINGS)):
                return False
            if reads:
                made.update(id(r) for r in o.results)
    return True


def lean_call_test(host, op, lanes: dict, points: str, n_k: str) -> str:
    """The host's test that a call may run the lean epilogue: whole aligned vectors
    (``vector_call_test``), and every index and offset under 2**31."""
    sizes = " and ".join(f"{host.namer(b)}.size < 2**31" for b in lanes["buffers"])
    return (f"{vector_call_test(host, op, lanes['lanes'], lanes['buffers'])} and "
            f"{points} * ({n_k}) < 2**31 and {sizes}")


__all__ = ["ColumnLeanEpilogue", "lean_call_test", "lean_epilogue_pays"]
