"""Split-columns' vector twin ("split-columns-vector"): a thread per (chunk, a vector of
neighbouring points).

The scalar first stage (schedule_split.py) gives a thread one point and walks its chunk
of the reduced axis a value at a time. Here a thread takes the VEC neighbouring points
of one 16-byte vector along the points' last axis (4 f32, 8 f16): a reduced index's
values of those points are one ``ld.global.v4`` where the scalar kernel issues VEC loads
from VEC threads. And whatever does not depend on the points' last axis is loaded and
computed once a vector, not once a point: the masked mean pool's ``sigmoid(m[b, s])``
(m is [B, S, 1]) is the same for the D points of a row, so a thread computes it once for
its VEC points, and ``sum(w)`` over the chunk is accumulated once and written to each of
their partials.

Which kernels qualify (:func:`column_vector_plan`): split-columns kernels over one
reduced axis walked by cursors (the flat rows of ``flat_rows.py``), whose loads are all
either *stepped* (last index the points' last index and nowhere else, f32 or f16, all one
size: one vector a value) or *shared* (no index reads the points' last index: one scalar
load a value for the VEC points), and whose other ops never read the points' last index
(a lane's own index is not named). What the nests read of the point itself may differ
between lanes only as a *sample*: a load at the point's own element (last index the
points' last index, nowhere else; moments.py's shift, a column's first value), loaded
for each lane before the walk into a small array its lanes read. Each lane then
computes its values in order, as the scalar kernel's thread does, into a partial of its
own at the same place: the combining kernel is the scalar plan's. The host launches the twin where VEC divides the points'
last extent and ``_vector_ready`` finds the stepped buffers' rows aligned, with the chunk
count of its own threads (``_split_columns`` of the vectors).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.flat_rows import _key as flat_key
from mlfuse.codegen.flat_rows import flat_access
from mlfuse.dialects.index_forms import reads_value
from mlfuse.codegen.scalar import COMPUTE_TYPE, combine, identity
from mlfuse.dialects.loops import LoadOp, ReduceOp, YieldOp
from mlfuse.dialects.reductions import reduce_levels, reduce_nests
from mlfuse.ir.core import Operation
from mlfuse.ir.types import itemsize

# the module constant of a vector's values and its load intrinsic, by value size
_LANES = {4: ("VECTOR_WIDTH", "_load_vector"), 2: ("VECTOR_WIDTH_16", "_load_halves")}


@dataclass
class ColumnVectors:
    """The plan of a split-columns vector twin: its stepped loads (a vector a value),
    the constant naming its lanes and the intrinsic loading them."""

    stepped: list[Operation]
    lanes: str
    move: str
    samples: list[Operation]  # the point's own loads the nests read, a lane each


def column_vector_plan(op, hw) -> ColumnVectors | None:
    """The vector twin's plan of split-columns kernel ``op``, or None where it has none
    (see the module doc)."""
    # (a strips kernel over columns: its column stages' first stage, column_stages.py)
    if op["schedule"] not in ("split-columns", "strips") or hw.vector_width == 1 or \
            not op.body.args:
        return None
    points = list(op.body.args)
    last, point_ids = points[-1], {id(a) for a in points}
    nests = reduce_nests(op)
    if not nests or any(len(n.levels) != 1 for n in nests):
        return None
    # what the first stage computes of the point (no reduction's result in it) is its
    # first lane's: the nests must not read any of it that is a lane's own
    _, need = reduce_levels(op)  # (a need of -1: no reduction's result read)
    lane_own: set[int] = set()
    for o in op.body.ops:
        used = [v for inner in o.walk() for v in inner.operands]
        if not isinstance(o, ReduceOp) and need[id(o)] < 0 and \
                any(reads_value(v, last) for v in used):
            lane_own.update(id(r) for r in o.results)
    read = {id(v) for n in nests for inner in n.top.walk() for v in inner.operands}
    samples = [o for o in op.body.ops
               if o.results and id(o.results[0]) in lane_own and id(o.result) in read]
    if any(not _sample(o, last) for o in samples):
        return None
    stepped, sizes = [], set()
    for n in nests:
        k = n.top.body.args[0]
        for o in n.top.body.ops:
            if isinstance(o, YieldOp):
                continue
            if not isinstance(o, LoadOp):
                if o.regions or any(v is last for v in o.operands):
                    return None
                continue
            buf, idx = access_parts(o)
            access = flat_access(o, [k], n.extents, point_ids)
            if access is None:
                return None
            if any(reads_value(v, last) for v in idx):
                if idx[-1] is not last or sum(v is last for v in idx) != 1 or \
                        buf.type.dtype not in ("f32", "f16") or \
                        access.step is not k or access.axis is None:
                    return None
                stepped.append(o)
                sizes.add(itemsize(buf.type.dtype))
    if not stepped or len(sizes) != 1:
        return None
    lanes, move = _LANES[sizes.pop()]
    return ColumnVectors(stepped, lanes, move, samples)


def _sample(o: Operation, last) -> bool:
    """Whether ``o`` loads the point's own element along the points' last axis (its
    last index that one, read by no other index): a lane's is at its own index."""
    if not isinstance(o, LoadOp):
        return False
    _, idx = access_parts(o)
    return bool(idx) and idx[-1] is last and not any(reads_value(v, last) for v in idx[:-1])


class ColumnVectorStage:
    """A mixin of the split emitter (schedule_split.SplitEmitter): the first stage of
    the vector twin. Needs the split emitter's pieces (threads, each_item, cursors,
    point_values, the flat rows plan)."""

    def column_vector_stage(self, plan: ColumnVectors) -> None:
        w, loc = self.w, self.local
        lanes, tile = plan.lanes, f"(STRIP_VECTOR_VALUES // {plan.lanes})"
        stepped = {id(o) for o in plan.stepped}
        self.threads()
        loads = [o for n in self.nests for o in n.top.body.ops
                 if isinstance(o, LoadOp) and id(o) not in self.merged]
        for o in loads:  # a tile's values: a vector's lanes a stepped load, else one (a
            # local array's size is a plain constant: the shared loads' take what they use)
            self.held[id(o)] = self.local_array(f"{self.namer(o.operands[0])}_vals",
                                                COMPUTE_TYPE[o.result.type.dtype],
                                                "STRIP_VECTOR_VALUES")
        lane_values = self._lane_values(stepped, {id(o.result) for o in plan.samples})
        accs = {}
        for n in self.nests:  # a lane's own accumulator, or one the lanes share
            if id(n.top.body.ops[-1].operands[0]) in lane_values:
                accs[id(n.top)] = self.local_array(f"{n.top.result.name_hint or 'acc'}_part",
                                                   COMPUTE_TYPE[n.top.result.type.dtype], lanes)
        n_vectors = loc["n_vectors"]
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        w.line(f"{n_vectors} = {loc['n_points']} // {lanes}")
        w.line(f"{loc['n_k']} = {self.points(self.nests[0].extents)}")
        w.line(f"{loc['chunk']} = ({loc['n_k']} + {loc['n_split']} - 1) // {loc['n_split']}")
        # (the point's own reads by plain subscripts: a sample's lanes at their indices)
        self.plan_flat_rows([(n.top, n.indices, n.extents) for n in self.nests],
                            point_reads=not plan.samples)
        sampled = {id(o): self.local_array(f"{self.namer(o.operands[0])}_lanes",
                                           COMPUTE_TYPE[o.result.type.dtype], lanes)
                   for o in plan.samples}
        with self.each_item(f"{n_vectors} * {loc['n_split']}"):
            w.line(f"{loc['part']}, {loc['point']} = divmod({loc['flat']}, {n_vectors})")
            w.line(f"{loc['point']} *= {lanes}  # the vector's first point")
            self.unravel(loc["point"])
            self.row_base_lines()
            self.point_values()
            self._sample_lanes(plan, sampled)
            w.line(f"{loc['lo']} = {loc['part']} * {loc['chunk']}")
            w.line(f"{loc['hi']} = min({loc['lo']} + {loc['chunk']}, {loc['n_k']})")
            shared_parts = {}
            for n in self.nests:
                init = identity(n.top["combiner"], n.top.result.type.dtype)
                if id(n.top) in accs:
                    with w.indented(f"for {loc['lane']} in range({lanes}):"):
                        w.line(f"{accs[id(n.top)]}[{loc['lane']}] = {init}")
                else:
                    shared_parts[id(n.top)] = self.namer.fresh(
                        f"{n.top.result.name_hint or 'acc'}_part")
                    w.line(f"{shared_parts[id(n.top)]} = {init}")
            self._walk_vectors(plan, tile, loads, lane_values, accs, shared_parts, sampled)
            with w.indented(f"for {loc['lane']} in range({lanes}):"):
                at = f"{loc['part']} * {loc['n_points']} + {loc['point']} + {loc['lane']}"
                for n in self.nests:
                    value = f"{accs[id(n.top)]}[{loc['lane']}]" if id(n.top) in accs \
                        else shared_parts[id(n.top)]
                    w.line(f"{self.partial_of[id(n.top)]}[{at}] = {value}")

    def _sample_lanes(self, plan: ColumnVectors, sampled: dict) -> None:
        """Each sample's value for every lane of the vector, at the lane's own index."""
        if not plan.samples:
            return
        w, loc = self.w, self.local
        last = self.op.body.args[-1]
        first = self.namer(last)
        with w.indented(f"for {loc['lane']} in range({plan.lanes}):"):
            own = self.namer.fresh(f"{first}_lane")
            w.line(f"{own} = {first} + {loc['lane']}")
            self.namer.bind(last, own)
            for o in plan.samples:
                w.line(f"{sampled[id(o)]}[{loc['lane']}] = {self.load_expression(o)}")
            self.namer.bind(last, first)

    def _lane_values(self, stepped: set[int], samples: set[int]) -> set[int]:
        """Ids of the nests' values that differ between a vector's lanes: the stepped
        loads', the samples' and what is computed from them."""
        values: set[int] = set(samples)
        for n in self.nests:
            for o in n.top.body.ops:
                if id(o) in stepped or any(id(v) in values for v in o.operands):
                    values.update(id(r) for r in o.results)
                if id(o) in self.merged:  # the same value as the first nest's op
                    same = self.merged[id(o)]
                    if any(id(r) in values for r in same.results):
                        values.update(id(r) for r in o.results)
        return values

    def _walk_vectors(self, plan, tile, loads, lane_values, accs, shared_parts,
                      sampled: dict) -> None:
        """The chunk [lo, hi) a tile of ``tile`` values at a time: the tile's loads first
        (a vector a value for the stepped ones), then each value in order, its shared ops
        once and its lanes' ops for each lane."""
        w, loc = self.w, self.local
        lanes, stepped = plan.lanes, {id(o) for o in plan.stepped}
        k = self.define(self.nests[0].indices[0], "k0")
        for n in self.nests[1:]:  # every nest walks the same extent: one index name
            self.namer.bind(n.indices[0], k)
        self.helpers.add("_vector_access")

        def load_tile():  # (a shared load along contiguous memory reads at the nest's index)
            for o in loads:
                if id(o) in stepped:
                    w.line(f"{plan.move}({self.flat_views[id(o.operands[0])]}, "
                           f"({self._cursor(o)},), {self.held[id(o)]}, {loc['slot']} * {lanes})")
                else:
                    w.line(f"{self.held[id(o)]}[{loc['slot']}] = {self.load_expression(o)}")

        with self.chunk_tiles(tile) as here:
            w.line("# the tile's loads first: no use between them, so all are in flight")
            self.tile_pass(tile, here, k, loads, load_tile)
            with w.indented(f"for {loc['slot']} in range({tile}):"):
                with w.indented(f"if {loc['slot']} < {here}:"):
                    # the value's index again (the body may read it: a cumsum's mask
                    # k >= i0 read the load pass's last index, its every value wrong)
                    w.line(f"{k} = {loc['tile']} + {loc['slot']}")
                    self._step(lane_values, stepped, shared=True)
                    for n in self.nests:
                        if id(n.top) in shared_parts:
                            part = shared_parts[id(n.top)]
                            yielded = self.namer(n.top.body.ops[-1].operands[0])
                            w.line(f"{part} = {combine(n.top['combiner'], part, yielded, self.helpers, n.top.result.type.dtype)}")
                    with w.indented(f"for {loc['lane']} in range({lanes}):"):
                        for o in plan.samples:  # the lane's own sample
                            w.line(f"{self.namer(o.result)} = {sampled[id(o)]}[{loc['lane']}]")
                        self._step(lane_values, stepped, shared=False, lanes=lanes)
                        for n in self.nests:
                            if id(n.top) in accs:
                                acc = f"{accs[id(n.top)]}[{loc['lane']}]"
                                yielded = self.namer(n.top.body.ops[-1].operands[0])
                                w.line(f"{acc} = {combine(n.top['combiner'], acc, yielded, self.helpers, n.top.result.type.dtype)}")

    def _step(self, lane_values: set[int], stepped: set[int], shared: bool,
              lanes: str = "") -> None:
        """One value's ops of every nest: those the lanes share (``shared``) or a lane's."""
        loc = self.local
        for n in self.nests:
            for o in n.top.body.ops:
                if isinstance(o, YieldOp) or (any(id(r) in lane_values for r in o.results)
                                              == shared):
                    continue
                if isinstance(o, LoadOp) and id(o) not in self.merged:
                    name = self.define(o.result, self.namer(o.operands[0]) + "_v")
                    slot = f"{loc['slot']} * {lanes} + {loc['lane']}" if id(o) in stepped \
                        else loc["slot"]
                    self.w.line(f"{name} = {self.held[id(o)]}[{slot}]")
                else:
                    self.statement(o, shared=False)

    def _cursor(self, load: Operation) -> str:
        """The cursor a stepped load reads its vector at (the first lane's value)."""
        access = self.flat[flat_key(*access_parts(load))]
        base = self.row_bases[self._base_code(access)]
        return self.cursors[(base, self.flat_strides[(id(access.buf), access.axis)])]


__all__ = ["ColumnVectors", "ColumnVectorStage", "column_vector_plan"]
