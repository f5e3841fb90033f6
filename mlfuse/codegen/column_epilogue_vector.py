"""The column stages' vector epilogue ("columns-epilogue-lanes"): a thread per (chunk, a
vector of neighbouring points).

The scalar epilogue (column_stages.py) gives a thread one point of a chunk: 4 bytes a
load and a store, where the unfused pointwise kernel moves 16-byte vectors. Column
centring ``x - mean(x, axis=0)`` at 16384 x 4096 ran no faster for it than the streaming
strips kernel (0.305 ms against torch.compile's 0.283, H100). Here a thread takes the
VEC neighbouring points of one 16-byte vector along the points' last axis (4 f32, 8 f16):

- each lane reads its point's results, which the column stages' combine left in the
  first chunk's partials (those of neighbouring points are neighbours: a vector);
- the ops after the reductions run per lane where they read a reduction's result or the
  point's last index (a statistic also returned is stored by the first chunk's thread,
  each lane at its own point), once where they read neither;
- the loops after the reductions walk the thread's chunk a tile at a time: a *stepped*
  access (its last index the points' last, the loop index once: ``x[k, c]``) moves one
  vector a value; a *shared* load (no index reads the points' last: a per-row scale
  ``s[k]``) is one scalar load for the VEC points; a load that reads the points' last
  index but not the loop's (a per-column ``gamma[c]``) is each lane's, loaded once
  before the walk.

The chunks are the epilogue's own (``_split_columns`` of the vectors, a launch
argument): the first stage's are sized for a thread a point. The host runs it where
VEC divides the points' last extent and the stepped buffers' rows are aligned
(``split_host.vector_call_test``), the scalar epilogue elsewhere.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.flat_rows import flat_access
from mlfuse.dialects.index_forms import reads_value
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.codegen.schedule_split import SplitEmitter
from mlfuse.dialects.loops import ForOp, LoadOp, ReduceOp, StoreOp, YieldOp
from mlfuse.dialects.reductions import loop_levels
from mlfuse.ir.core import Operation
from mlfuse.ir.types import itemsize

# the module constant of a vector's values, and its load and store intrinsics, by size
_LANES = {4: ("VECTOR_WIDTH", "_load_vector", "_store_vector"),
          2: ("VECTOR_WIDTH_16", "_load_halves", "_store_halves")}

_DOC = ("Strips over [{space}] split in stages, last stage, in vectors: a thread per "
        "(chunk, vector of neighbouring points) reads its points' combined partials, then "
        "walks its chunk of the loops after them a vector a value.")


@dataclass
class EpilogueVectors:
    """The vector epilogue's plan: its loops' stepped accesses (a vector a value), shared
    loads (one value for the vector's lanes) and lane loads (each lane's, once), the
    constant naming its lanes and the intrinsics moving them."""

    stepped: list[Operation]
    shared: list[Operation]
    lane_loads: list[Operation]
    lanes: str
    load: str
    store: str


def epilogue_vector_plan(op, hw) -> EpilogueVectors | None:
    """The vector epilogue's plan of a column-stages strips kernel ``op``, or None where
    it has none (see the module doc)."""
    if hw.vector_width == 1 or not hw.column_lanes_epilogue or not op.body.args:
        return None
    points = list(op.body.args)
    last, point_ids = points[-1], {id(a) for a in points}
    top_values = {id(r) for o in op.body.ops for r in o.results}
    loops = [o for o in op.body.ops if isinstance(o, ForOp)]
    if not loops or any(len(loop_levels(o)) != 1 for o in loops):
        return None
    if any(COMPUTE_TYPE.get(getattr(r.type, "dtype", None)) not in SHARED_TYPE
           for o in op.body.ops for r in o.results):
        return None  # (a value before the loops may be kept a lane each in a local array)
    stepped, shared, lane_loads, sizes = [], [], [], set()
    for loop in loops:
        k = loop.body.args[0]
        for o in loop.body.ops:
            if o.regions or (not isinstance(o, (LoadOp, StoreOp)) and
                             any(v is last for v in o.operands)):
                return None  # (a lane's own index is named at the top level only)
            if not isinstance(o, (LoadOp, StoreOp)):
                continue
            buf, idx = access_parts(o)
            if type(o) is LoadOp and not any(reads_value(v, last) for v in idx):
                shared.append(o)
                continue
            if type(o) is LoadOp and not any(reads_value(v, k) for v in idx):
                if not all(id(v) in point_ids or id(v) in top_values for v in idx):
                    return None
                lane_loads.append(o)  # its indices are named before the walk
                continue
            access = flat_access(o, [k], loop.extent_list, point_ids)
            if access is None or access.step is not k or access.axis is None or \
                    idx[-1] is not last or sum(v is last for v in idx) != 1 or \
                    buf.type.dtype not in ("f32", "f16"):
                return None
            stepped.append(o)
            sizes.add(itemsize(buf.type.dtype))
    if not any(isinstance(o, StoreOp) for o in stepped) or len(sizes) != 1:
        return None
    return EpilogueVectors(stepped, shared, lane_loads, *_LANES[sizes.pop()])


class ColumnVectorEpilogue(SplitEmitter):
    """The vector epilogue of a column-stages plan (see the module doc)."""

    def __init__(self, op, name, target, helpers, hw, taken, plan: EpilogueVectors):
        super().__init__(op, name, "columns-epilogue-lanes", target, helpers, hw, taken,
                         (None, None))
        self.plan = plan
        self.launch_bound = f"(THREADS_PER_BLOCK, {hw.column_lanes_min_blocks})"
        self.loops = [o for o in op.body.ops if isinstance(o, ForOp)]
        self.local["n_chunks"] = self.namer.fresh("n_chunks")
        self.stepped = {id(o) for o in plan.stepped}
        self.lane_loads = {id(o) for o in plan.lane_loads}
        self.lane_values = self._lane_values()
        # a chunk's values n_chunks apart (hw.column_lanes_rows), else consecutive
        self.apart = self.local["n_chunks"] if hw.column_lanes_rows == "interleaved" else None

    def _lane_values(self) -> set[int]:
        """Ids of the values that differ between a vector's lanes: the reductions'
        results, the stepped and lane loads', and what reads them or the points' last
        index."""
        last = self.op.body.args[-1]
        values = {id(last)}
        reduces = {id(o) for o in self.op.body.ops if isinstance(o, ReduceOp)}
        for o in self.op.walk():
            if id(o) in reduces:
                values.add(id(o.result))
            elif id(o) in self.stepped or id(o) in self.lane_loads or \
                    any(id(v) in values for v in o.operands):
                values.update(id(r) for r in o.results)
        return values

    def emit(self) -> str:
        w, loc, plan = self.w, self.local, self.plan
        lanes = plan.lanes
        with self.kernel_def(self.partials + [loc["n_split"], loc["n_chunks"]], _DOC):
            self.threads()
            self.helpers.add("_vector_access")
            reduces = [o for o in self.op.body.ops if isinstance(o, ReduceOp)]
            accs = [self.local_array(f"{o.result.name_hint or 'acc'}_lanes",
                                     COMPUTE_TYPE[o.result.type.dtype], lanes) for o in reduces]
            kept = self._kept_arrays()
            for o in plan.stepped + plan.shared:
                if isinstance(o, LoadOp):
                    self.held[id(o)] = self.local_array(f"{self.namer(o.operands[0])}_vals",
                                                        COMPUTE_TYPE[o.result.type.dtype],
                                                        "STRIP_VECTOR_VALUES")
                else:  # a store's vector waits here for its lanes
                    self.staged[id(o)] = self.local_array(
                        f"{self.namer(o.operands[1])}_vals",
                        COMPUTE_TYPE[o.operands[1].type.dtype], lanes)
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            w.line(f"{loc['n_vectors']} = {loc['n_points']} // {lanes}")
            w.line(f"{loc['n_k']} = {self.points(self.loops[0].extent_list)}")
            w.line(f"{loc['chunk']} = ({loc['n_k']} + {loc['n_chunks']} - 1) // {loc['n_chunks']}")
            self.plan_flat_rows([(o, o.body.args[:1], o.extent_list) for o in self.loops],
                                point_reads=False)
            with self.each_item(f"{loc['n_vectors']} * {loc['n_chunks']}"):
                w.line(f"{loc['part']}, {loc['point']} = divmod({loc['flat']}, {loc['n_vectors']})")
                w.line(f"{loc['point']} *= {lanes}  # the vector's first point")
                self.unravel(loc["point"])
                self.row_base_lines()
                for o in self.op.body.ops:  # what the lanes share, once
                    if self._shared(o):
                        self.statement(o, shared=False)
                for acc, partials in zip(accs, self.partials):  # (reduce_nests' order)
                    self._combined(acc, partials)
                self._lanes_before_walk(reduces, accs, kept)
                if self.apart:  # the chunk's values n_chunks apart: the GPU's threads
                    # walk neighbouring rows together
                    w.line(f"{loc['lo']}, {loc['hi']} = {loc['part']}, {loc['n_k']}")
                else:
                    w.line(f"{loc['lo']} = {loc['part']} * {loc['chunk']}")
                    w.line(f"{loc['hi']} = min({loc['lo']} + {loc['chunk']}, {loc['n_k']})")
                for loop in self.loops:
                    self._walk(loop, kept)
        return self.w.text()

    def _kept_arrays(self) -> dict[int, tuple]:
        """A local array of VEC values for each lane value that the loops read and that
        is computed before them (a reduction's result, what follows from it, a lane
        load): id(value) -> (the value, its array)."""
        inside = {id(o) for loop in self.loops for o in loop.walk()}
        before = {id(r): r for o in self.op.walk() if id(o) not in inside
                  for r in o.results if id(r) in self.lane_values}
        before.update({id(o.result): o.result for loop in self.loops for o in loop.walk()
                       if id(o) in self.lane_loads})
        read = [v for loop in self.loops for o in loop.walk() if id(o) not in self.lane_loads
                for v in o.operands if id(v) in before]
        kept = {}
        for v in read:
            if id(v) not in kept:
                kept[id(v)] = (v, self.local_array(f"{v.name_hint or 'value'}_lanes",
                                                   COMPUTE_TYPE[v.type.dtype], self.plan.lanes))
        return kept

    def _combined(self, acc: str, partials: str) -> None:
        """Each lane's ``acc[lane]``: its point's result of a reduce, combined in place in
        ``partials`` by the column stages' combine (neighbouring points' are neighbours:
        f32, VECTOR_WIDTH a vector)."""
        w, loc, lanes = self.w, self.local, self.plan.lanes
        with w.indented(f"for {loc['vec']} in range(0, {lanes}, VECTOR_WIDTH):"):
            w.line(f"_load_vector({partials}, (numba.uint64({loc['point']} + {loc['vec']}),), "
                   f"{acc}, {loc['vec']})")

    def _shared(self, o) -> bool:
        """Whether ``o`` computes what the vector's lanes share (emitted once): no loop,
        store or lane load, no value that differs between the lanes."""
        return not isinstance(o, (ReduceOp, ForOp, StoreOp)) and id(o) not in self.lane_loads \
            and not any(id(r) in self.lane_values for r in o.results)

    @contextmanager
    def lane_loop(self, reduces, accs: list[str], first: str):
        """A loop over the vector's lanes, the points' last index named for each: the
        reductions' results from ``accs``, the ops after them that differ between lanes,
        a point's own stores by the thread where ``first`` holds; then the caller's
        lines for the lane."""
        w, loc = self.w, self.local
        last = self.op.body.args[-1]
        point_last = self.namer(last)
        mine = self.namer.fresh(f"{point_last}_lane")
        with w.indented(f"for {loc['lane']} in range({self.plan.lanes}):"):
            w.line(f"{mine} = {point_last} + {loc['lane']}")
            self.namer.bind(last, mine)
            for o, acc in zip(reduces, accs):
                w.line(f"{self.define(o.result, 'acc')} = {acc}[{loc['lane']}]")
            for o in self.op.body.ops:
                if isinstance(o, StoreOp):  # a point's own value: one thread's
                    with w.indented(f"if {first}:"):
                        self.statement(o, shared=False)
                elif not isinstance(o, (ReduceOp, ForOp)) and not self._shared(o):
                    self.statement(o, shared=False)
            yield
            self.namer.bind(last, point_last)

    def _lanes_before_walk(self, reduces, accs, kept) -> None:
        """Each lane's ops after the reductions and lane loads, their values the loops
        read kept in arrays; stores of a point's own values by the first chunk's
        thread."""
        w, loc = self.w, self.local
        with self.lane_loop(reduces, accs, f"{loc['part']} == 0"):
            for loop in self.loops:
                for o in loop.walk():
                    if id(o) in self.lane_loads:
                        self.statement(o, shared=False)
            for value, array in kept.values():
                w.line(f"{array}[{loc['lane']}] = {self.namer(value)}")

    def _walk(self, loop: Operation, kept: dict[int, tuple]) -> None:
        """This thread's chunk [lo, hi) of ``loop``, a tile at a time: the tile's loads
        first (a vector a value for the stepped ones), then each value: what the lanes
        share once, each lane's ops, the stores' vectors."""
        w, loc, plan = self.w, self.local, self.plan
        lanes, tile = plan.lanes, f"(STRIP_VECTOR_VALUES // {plan.lanes})"
        k = self.define(loop.body.args[0], "k")
        body = [o for o in loop.body.ops if not isinstance(o, YieldOp)]
        loads = [o for o in body if id(o) in self.held]
        stores = [o for o in body if id(o) in self.staged]
        read = {id(v): kept[id(v)] for o in body for v in o.operands if id(v) in kept}

        def load_tile():
            for o in loads:
                if id(o) in self.stepped:
                    w.line(f"{plan.load}({self.flat_views[id(o.operands[0])]}, "
                           f"({self._cursor(o)},), {self.held[id(o)]}, {loc['slot']} * {lanes})")
                else:
                    w.line(f"{self.held[id(o)]}[{loc['slot']}] = {self.load_expression(o)}")

        def compute():
            for o in body:  # what the lanes share (shared loads from the tile)
                if self._shared(o):
                    self.statement(o, shared=False)
            with w.indented(f"for {loc['lane']} in range({lanes}):"):
                for v, array in read.values():
                    w.line(f"{self.namer(v)} = {array}[{loc['lane']}]")
                for o in body:
                    if id(o) in self.stepped and isinstance(o, LoadOp):
                        name = self.define(o.result, self.namer(o.operands[0]) + "_v")
                        w.line(f"{name} = {self.held[id(o)]}[{loc['slot']} * {lanes} + "
                               f"{loc['lane']}]")
                    elif isinstance(o, StoreOp):
                        w.line(f"{self.staged[id(o)]}[{loc['lane']}] = {self.namer(o.operands[0])}")
                    elif id(o) not in self.lane_loads and \
                            any(id(r) in self.lane_values for r in o.results):
                        self.statement(o, shared=False)
            for o in stores:
                w.line(f"{plan.store}({self.flat_views[id(o.operands[1])]}, "
                       f"({self._cursor(o)},), {self.staged[id(o)]}, 0)")

        with self.chunk_tiles(tile, self.apart) as here:
            if loads:
                w.line("# the tile's loads first: no use between them, so all are in flight")
                self.tile_pass(tile, here, k, loads, load_tile, self.apart)
            self.tile_pass(tile, here, k, stores, compute, self.apart)


__all__ = ["ColumnVectorEpilogue", "EpilogueVectors", "epilogue_vector_plan"]
