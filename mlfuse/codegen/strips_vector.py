"""Strips over columns in 16-byte vectors ("strips-vector"): each thread owns VEC
neighbouring points of its block's strip (4 f32 / 8 f16 values: one 16-byte vector a
reduced index) instead of one.

A warp then reads 32 x 16 bytes a reduced index with one ``ld.global.v4`` a thread
where the scalar kernels issue four loads from four threads: the threads a row segment
take a quarter (f16: an eighth) as many, and the addresses, bounds checks and cursor
steps are paid once a vector. The values of a vector are computed lane by lane (the
body is written VEC times, each lane under its own names), each lane with its own
accumulator, combined through shared memory lane by lane.

Which kernels qualify (:func:`vector_strip_accesses`): strips over columns whose top
level holds only scalar computations and one-axis reduces and fors, every load and
store in those loops a stepped access (``thread_base + slot * per * stride``:
schedule_strips.plan_thread_steps) whose last index is the points' last index (the
VEC points of a thread are neighbours in the buffer), of f32 or f16 values all of one
size, and whose computations never read a point's indices. A load whose indices hold
no point's last index (only outer point indices, the step and constants: a middle
softmax's mask ``m[b, k, 0]`` over points [B, D]) is one value for a thread's VEC
points (``strip_plan.uniform_loads``): a scalar load a slot, every lane reading it. The
host launches it where VEC divides the points and ``_vector_ready`` finds every vector
buffer's rows aligned (so VEC divides the points' last extent too: a vector's lanes
share their outer indices), the scalar kernels elsewhere. The loops stream a tile at a
time (the streaming variant's walk; later loops read the inputs again, mostly from L2).
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.loops import DimOp, ForOp, LoadOp, ReduceOp, StoreOp, YieldOp
from mlfuse.dialects.reductions import loop_levels

from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.flat_rows import _key as flat_key
from mlfuse.codegen.scalar import COMPUTE_TYPE, combine, identity
from mlfuse.ir.traits import SCALAR_COMPUTE
from mlfuse.ir.types import itemsize
from mlfuse.strip_plan import uniform_loads

# values per 16-byte vector, by the size of the kernel's values
_LANES = {4: ("VECTOR_WIDTH", 4, ("_load_vector", "_store_vector")),
          2: ("VECTOR_WIDTH_16", 8, ("_load_halves", "_store_halves"))}


def vector_strip_accesses(op, tops) -> list | None:
    """The loads and stores of a strips-over-columns kernel ``op`` (top-level loops
    ``tops``) that its vector variant moves a vector at a time, or None where it has
    none (see the module doc)."""
    if op["strip"] != "columns" or not tops:
        return None
    points = list(op.body.args)
    point_ids = {id(a) for a in points}
    for o in op.body.ops:
        if isinstance(o, (ReduceOp, ForOp)):
            if len(loop_levels(o)) != 1:
                return None
        elif not (o.has_trait(SCALAR_COMPUTE) or isinstance(o, (DimOp, YieldOp))):
            return None
        elif any(id(v) in point_ids for v in o.operands):
            return None  # written once a lane, with lane 0's point indices
    accesses, sizes = [], set()
    uniform = {id(o) for o in uniform_loads(tops)}
    for top in tops:
        k = top.body.args[0]
        for o in top.body.ops:
            if id(o) in uniform:
                continue
            if isinstance(o, (LoadOp, StoreOp)):
                buf, indices = access_parts(o)
                # (k once, not last: schedule_strips' stepped access, at a cursor)
                if buf.type.dtype not in ("f32", "f16") or not indices or \
                        indices[-1] is not points[-1] or \
                        sum(v is k for v in indices) != 1 or \
                        any(id(v) not in point_ids and v is not k for v in indices):
                    return None
                sizes.add(itemsize(buf.type.dtype))
                accesses.append(o)
            elif not (o.has_trait(SCALAR_COMPUTE) or isinstance(o, YieldOp)):
                return None
            elif any(id(v) in point_ids for v in o.operands):
                return None  # a lane's point indices are not named
    return accesses if accesses and len(sizes) == 1 else None


def vector_lanes(accesses) -> tuple[str, int, tuple[str, str]]:
    """(the module constant, its value, the load and store intrinsics) of a kernel's
    vectors."""
    return _LANES[itemsize(access_parts(accesses[0])[0].type.dtype)]


class VectorStrips:
    """A mixin of schedule_strips.StripsEmitter for its "strips-vector" variant. Needs
    from its host: w, local, namer, flat, flat_views, flat_strides, row_bases, cursors,
    slot_strides, start_cursors, stream_order, block, statement, helpers, scratch."""

    def setup_vectors(self, accesses) -> None:
        self.vec_name, self.vec, moves = vector_lanes(accesses)
        self.load_move, self.store_move = moves
        self.helpers.add("_vector_access")
        self.vec_accesses = {id(o) for o in accesses}
        self.vec_uniform = {id(o) for o in uniform_loads(self.tops)}
        self.lane_names: list[dict] = [{} for _ in range(self.vec)]
        self.vlane: int | None = None
        # a tile's vectors: STRIP_VECTOR_VALUES lanes in all (f16: half the vectors of
        # f32, whose lanes are as many f32 registers once widened)
        self.tile = f"STRIP_VECTOR_VALUES // {self.vec_name}"

    @contextmanager
    def in_lane(self, v: int):
        """Emit under lane ``v``'s names: values defined here are lane ``v``'s own."""
        shared = dict(self.namer.names)
        self.namer.names.update(self.lane_names[v])
        self.vlane = v
        try:
            yield
        finally:
            self.lane_names[v].update({k: n for k, n in self.namer.names.items()
                                       if shared.get(k) != n})
            self.namer.names.clear()
            self.namer.names.update(shared)
            self.vlane = None

    def vector_place(self, o) -> tuple[str, str]:
        """(flat view, cursor) of the stepped access ``o``."""
        buf, indices = access_parts(o)
        access = self.flat[flat_key(buf, indices)]
        stride = self.flat_strides[(id(buf), access.axis)]
        return self.flat_views[id(buf)], self.cursors[(self.row_bases[self._base_code(access)], stride)]

    def vector_arrays(self, accesses) -> None:
        """A local array for each of ``accesses`` that has none yet: a load's tile of
        vectors (STRIP_VECTOR_VALUES), a store's one vector."""
        for o in accesses:
            if id(o) not in self.vec_held:
                buf = access_parts(o)[0]
                self.vec_held[id(o)] = self.local_array(
                    f"{self.namer(buf)}_vecs", COMPUTE_TYPE[buf.type.dtype],
                    "STRIP_VECTOR_VALUES" if isinstance(o, LoadOp) else self.vec_name)

    @contextmanager
    def tile_slots(self, top, after=()):
        """This thread's slots of the current tile of ``top``'s loop: r for each, the
        body (yielded) where r is in range, then each cursor stepped and the lines
        ``after`` (the shared variant's plane cursors)."""
        w, loc = self.w, self.local
        self.start_cursors(top)
        with w.indented(f"for {loc['slot']} in range({self.tile}):"):
            w.line(f"{loc['r']} = {loc['tile']} + {loc['nthreads']} + {loc['slot']} * {loc['per']}")
            with w.indented(f"if {loc['r']} < {loc['n_red']}:"):
                yield
            for key, cursor in self.cursors.items():
                w.line(f"{cursor} += {self.slot_strides[key[1]]}")
            for line in after:
                w.line(line)

    def vector_loop(self, top):
        """The loop of top-level ``top`` over this thread's reduced values, a tile at a
        time: the tile's vectors loaded first, then each value's lanes (yielded once
        a value, inside; the caller writes the lanes)."""
        w, loc = self.w, self.local
        k = self.define(top.body.args[0], "k")
        loads = [o for o in top.body.ops if isinstance(o, LoadOp)]
        stores = [o for o in top.body.ops if isinstance(o, StoreOp)]
        self.vector_arrays(loads + stores)
        order = self.stream_order(loc["n_red"], f"{loc['per']} * {self.tile}")

        def slots():
            return self.tile_slots(top)

        @contextmanager
        def loop():
            with w.indented(f"for {loc['tile']} in {order}:"):
                if loads:
                    w.line("# this thread's vectors first: loads with no use between them "
                           "are in flight at once")
                    with slots():
                        for o in loads:
                            w.line(self.tile_load(o))
                with slots():
                    w.line(f"{k} = {loc['r']}")
                    yield
                    for o in stores:
                        view, cursor = self.vector_place(o)
                        w.line(f"{self.store_move}({view}, (numba.uint64({cursor}),), "
                               f"{self.vec_held[id(o)]}, 0)")
        return loop()

    def tile_load(self, o) -> str:
        """The line that loads this slot's values of ``o`` into its tile: a vector, a
        value (the scalar shared kernel, VEC 1), or the one value of a uniform load."""
        view, cursor = self.vector_place(o)
        slot = self.local["slot"]
        if self.vec == 1 or id(o) in self.vec_uniform:
            return f"{self.vec_held[id(o)]}[{slot}] = {view}[numba.uint64({cursor})]"
        return (f"{self.load_move}({view}, (numba.uint64({cursor}),), "
                f"{self.vec_held[id(o)]}, {slot} * {self.vec_name})")

    def vector_statement(self, op) -> bool:
        """Lane ``vlane``'s line of a load or store of a vector loop (True), else False."""
        if self.vlane is None:
            return False
        if id(op) in self.vec_uniform:  # one value for every lane
            name = self.define(op.result, self.namer(op.operands[0]) + "_v")
            self.w.line(f"{name} = {self.vec_held[id(op)]}[{self.local['slot']}]")
            return True
        if id(op) not in self.vec_accesses:
            return False
        v = self.vlane
        if isinstance(op, LoadOp):
            name = self.define(op.result, self.namer(op.operands[0]) + "_v")
            self.w.line(f"{name} = {self.vec_held[id(op)]}[{self.local['slot']} * "
                        f"{self.vec_name} + {v}]")
        else:
            self.w.line(f"{self.vec_held[id(op)]}[{v}] = {self.namer(op.operands[0])}")
        return True

    def combine_lanes(self, op, parts: list[str]) -> None:
        """Each lane's result of reduce ``op`` from its thread's partials ``parts``,
        combined over the block's threads of the point (a lane at a time)."""
        dtype, combiner = op.result.type.dtype, op["combiner"]
        for v in range(self.vec):
            with self.in_lane(v):
                total = self.shared_combine(combiner, parts[v], dtype)
                self.w.line(f"{self.namer(op.result)} = "
                            f"{combine(combiner, self.namer(op.operands[0]), total, self.helpers, dtype)}")

    def vector_top(self, op) -> None:
        """One top-level op of the vector kernel, for every lane."""
        w = self.w
        if isinstance(op, ReduceOp):
            dtype, combiner = op.result.type.dtype, op["combiner"]
            parts = []
            for v in range(self.vec):
                with self.in_lane(v):
                    parts.append(self.namer.fresh(f"{self.define(op.result, 'acc')}_part"))
                    w.line(f"{parts[-1]} = {identity(combiner, dtype)}")
            mine = f"its {self.vec} points'" if self.vec > 1 else "its point's"
            w.line(f"# {combiner} over {op['extent']}: each thread takes a strided part of "
                   f"{mine} values, then the block combines each point's parts")
            with self.vector_loop(op):
                for v in range(self.vec):
                    with self.in_lane(v):
                        self.block(op.body, top=False)
                        yielded = self.namer(op.body.ops[-1].operands[0])
                        w.line(f"{parts[v]} = "
                               f"{combine(combiner, parts[v], yielded, self.helpers, dtype)}")
            self.combine_lanes(op, parts)
        elif isinstance(op, ForOp):
            with w.indented(f"if {self.local['valid']}:"):
                with self.vector_loop(op):
                    for v in range(self.vec):
                        with self.in_lane(v):
                            self.block(op.body, top=False)
        elif isinstance(op, DimOp):
            self.statement(op, shared=False)
        else:
            for v in range(self.vec):
                with self.in_lane(v):
                    self.statement(op, shared=False)


__all__ = ["VectorStrips", "vector_strip_accesses", "vector_lanes"]
