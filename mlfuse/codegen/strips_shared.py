"""Strips over columns held in shared memory ("strips-shared"): the vector strips kernel
(strips_vector.py: a thread's points a 16-byte vector) whose values read again by a
later loop are kept on chip, so the inputs are read from DRAM once and the output
written once, whatever the reduced extent, up to the shared-memory budget.

Why shared memory and not registers: the registers variant (schedule_strips.py) holds a
thread's values in local arrays; softmax over a middle axis of 256 needed 100 registers a
thread for 16 values (one block an SM: its load, reduce and store phases never overlap,
49% of copy bandwidth on the H100), and a vector thread holds 4-8 times as many. Here
the first loop that loads a value also stores it into the block's dynamic shared array;
the later loops (the other reductions, the broadcast-back epilogue) read it there.

Layout: one plane per held load (a buffer at its indices, read in several loops), each
``n_slots x VEC x STRIP_SHARED_THREADS`` values (f32, or f16 in 16 bits): a thread's ``s``-th
vector's lane ``v`` at ``(s * VEC + v) * STRIP_SHARED_THREADS + tid`` (a block of fewer
threads, a short extent's, leaves part of each row unused). A warp's accesses to
one lane are 32 neighbouring words (no bank conflicts, any VEC), and a thread reads
back only what it wrote itself, so no barrier guards the planes: the block's threads
meet only in the reductions' combine, which takes a thread's lanes at once (helpers'
_strip_lanes_reduce: two barriers a reduce, not two a lane).

Only programs whose held values at least two later loops read again have the variant
(hardware.strip_shared_min_rereads: with one, as column centring, reading x twice at full
line width ran faster than a narrow strip held on chip). A costly value two loops compute
(softmax's exp(x - max)) is stored by the first into the plane of the value it comes
from, where no later loop reads that value itself (``plan_kept``): the same slot of the
same thread, so the planes still need no barrier.

"strips-shared-scalar" is the same kernel a point a thread (VEC 1, plain loads and
stores): where whole vectors do not cover the points or the buffers are not aligned.
The host launches the vector kernel where it may run (VEC divides the points, aligned
buffers) and a strip's planes fit ``STRIP_SHARED_BYTES``, else the scalar one where its
planes fit (mlfuse/strip_plan.py picks the strip's width and threads, and the bytes the
launch gives), else the register, vector and streaming kernels.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.helpers import strip_lanes_reduce_name
from mlfuse.codegen.reuse import row_reused_values
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE, combine
from mlfuse.dialects.loops import LoadOp, StoreOp
from mlfuse.strip_plan import held_planes, narrowest_points

# values held in their own 16 bits (exact: each came from such a buffer), half the bytes
# of their compute type: twice the strip in the same shared memory
_HELD_VIEW = {"f16": "np.float16"}

# the simulator's shared blocks: 16 threads, strips up to 2 vectors wide
SIMULATOR_SHARED = (16, 2)


def shared_threads(target: str, hw) -> int:
    """STRIP_SHARED_THREADS of a module for ``target``."""
    return hw.strip_shared_threads if target == "cuda" else SIMULATOR_SHARED[0]


def shared_widths(target: str, hw, size: int | None = None) -> tuple[int, int]:
    """(widest, narrowest) strip of the shared kernel in threads of a vector each: a
    128-byte line a row down to a 32-byte sector (the simulator: 2 down to 1); with
    ``size``, the scalar kernel's, a value of ``size`` bytes a thread (up to STRIP_POINTS
    values a row)."""
    if target != "cuda":
        return SIMULATOR_SHARED[1], 1
    if size is not None:
        return hw.strip_points, narrowest_points(size, hw.strip_points)
    return max(1, hw.strip_line_bytes // 16), max(1, 32 // 16)


class SharedStrips:
    """A mixin of schedule_strips.StripsEmitter (before VectorStrips) for its
    "strips-shared" variant; the other variants pass through to VectorStrips."""

    def setup_scalar(self) -> None:
        """The scalar shared kernel: the same loops, a point a thread (lane 0 only), its
        loads and stores a value at a time (any alignment, any count of points)."""
        self.vec, self.vec_name = 1, "1"
        self.lane_names = [{}]
        self.tile = "STRIP_VECTOR_VALUES"

    def setup_shared(self, tops, accesses) -> None:
        self.vec_dtype = access_parts(accesses[0])[0].type.dtype
        self.hold_writes, self.hold_reads, self.planes = held_planes(tops)
        self.hold_cursor: dict[int, str] = {}
        if self.hw.strip_shared_reuse and COMPUTE_TYPE[self.vec_dtype] == "float32" and \
                self.vec_dtype not in _HELD_VIEW:
            self.plan_kept(tops)

    def plan_kept(self, tops) -> None:
        """Costly values two loops compute (middle softmax's exp(x - max): its sum and
        its epilogue) computed once: the first loop stores each into the plane of a held
        value its chain reads, which no later loop reads itself any more (x: the
        epilogue reads the exp instead), so the planes' bytes stay as they were. All or
        nothing: where some value has no such plane, every loop computes its own."""
        plan = row_reused_values(tops, free_loads=False)
        loop_of = {id(o): n for n, top in enumerate(tops) for o in top.walk()}
        held = {**self.hold_writes, **self.hold_reads}
        readers: dict[int, list] = {}  # plane -> (loop, op) of every op reading it
        for n, top in enumerate(tops):
            for o in top.body.ops:
                if id(o) in held:
                    readers.setdefault(held[id(o)], []).append((n, o))
        places: dict[int, int] = {}
        for kept in plan.kept.values():
            n, chain, stack = loop_of[id(kept)], set(), [kept]
            while stack:  # the held loads of its loop that its value comes from
                for v in stack.pop().operands:
                    producer = getattr(v, "op", None)
                    if producer is not None and loop_of.get(id(producer)) == n and \
                            id(producer) not in chain:
                        chain.add(id(producer))
                        stack.append(producer)
            # (the loops reading it again: each keeps the plane's cursor, a reader of it)
            later = {loop_of[i] for i, o in plan.again.items() if o is kept}
            free = [held[i] for i in chain if i in held and held[i] not in places.values()
                    and all(id(o) in plan.dead for m, o in readers[held[i]] if m > n)
                    and sum(m == n for m, _ in readers[held[i]]) == 1
                    and later <= {m for m, _ in readers[held[i]]}]
            if not free or COMPUTE_TYPE[kept.result.type.dtype] != "float32":
                return
            places[id(kept)] = min(free)
        self.reuse, self.kept = plan, places

    def kept_place(self, op) -> str:
        if not self.held_shared:
            return super().kept_place(op)
        return self._plane_at(self.kept[id(op)])

    def shared_preamble(self) -> None:
        """The dynamic shared array and this thread's place in its planes. Indices are
        unsigned 32-bit (no wraparound check, 32-bit adds), and a lane's offset in a
        plane is a constant (STRIP_SHARED_THREADS apart, whatever the block's threads):
        folded into the shared load's address."""
        w, loc = self.w, self.local
        names = {n: self.namer.fresh(n) for n in ("held", "me", "plane", "vector_step",
                                                 "lanes", "lanes_scratch")}
        self.hold_names = names
        ctype = SHARED_TYPE[COMPUTE_TYPE[self.vec_dtype]]
        view = _HELD_VIEW.get(self.vec_dtype)
        w.line(f"{names['held']} = cuda.shared.array(0, {ctype})"
               + (f".view({view})" if view else "") + "  # dynamic: "
               f"{self.planes} plane(s) of held values, the host gives their bytes")
        w.line(f"{names['me']} = numba.uint32({loc['nthreads']} * {self.width} + {loc['lane']})")
        # a plane: ceil(n_red / per) vectors of STRIP_SHARED_THREADS threads' lanes
        lanes = f"{self.vec_name} * " if self.vec > 1 else ""
        w.line(f"{names['plane']} = numba.uint32(({loc['n_red']} + {loc['per']} - 1) // "
               f"{loc['per']} * {lanes}STRIP_SHARED_THREADS)")
        w.line(f"{names['vector_step']} = numba.uint32({lanes}STRIP_SHARED_THREADS)")
        # the reductions' lanes, combined at once: per lane (per + 1) x width partials
        # and width totals, (threads + 2 x width) values, where a strip is at most half
        # the block's threads wide (strip_plan.py): static shared memory counts against
        # the blocks an SM holds (middle softmax: 32 KB held + 4 KB of scratch, 6)
        threads = shared_threads(self.target, self.hw)
        w.line(f"{names['lanes']} = cuda.local.array({self.vec_name}, numba.float32)")
        w.line(f"{names['lanes_scratch']} = cuda.shared.array("
               f"{self.vec * 2 * threads}, numba.float32)")

    def combine_lanes(self, op, parts: list[str]) -> None:
        """All lanes' partials of reduce ``op`` combined at once (helpers'
        _strip_lanes_reduce: two barriers, where a lane at a time takes two a lane)."""
        dtype, combiner = op.result.type.dtype, op["combiner"]
        if not (self.held_shared and self.hw.strip_lanes_combine) or \
                COMPUTE_TYPE[dtype] != "float32":
            return super().combine_lanes(op, parts)
        w, names = self.w, self.hold_names
        for v, part in enumerate(parts):
            w.line(f"{names['lanes']}[{v}] = {part}")
        helper = strip_lanes_reduce_name(combiner)
        self.helpers.add(helper)
        w.line(f"{helper}({names['lanes']}, {self.vec_name}, {names['lanes_scratch']})")
        for v in range(self.vec):
            with self.in_lane(v):
                w.line(f"{self.namer(op.result)} = " + combine(
                    combiner, self.namer(op.operands[0]), f"{names['lanes']}[{v}]",
                    self.helpers, dtype))

    def vector_loop(self, top):
        if not self.held_shared:
            return super().vector_loop(top)
        return self._shared_loop(top)

    @contextmanager
    def _shared_loop(self, top):
        """As VectorStrips.vector_loop, the held loads read from (or also written to)
        their planes: a tile's vectors from global memory first, then each value."""
        w, loc, names = self.w, self.local, self.hold_names
        k = self.define(top.body.args[0], "k")
        loads = [o for o in top.body.ops if isinstance(o, LoadOp) and id(o) not in self.hold_reads
                 and id(o) not in self.reuse.dead]
        stores = [o for o in top.body.ops if isinstance(o, StoreOp)]
        self.vector_arrays(loads + stores)  # (VectorStrips')
        planes = sorted({p for o in top.body.ops for p in
                         (self.hold_writes.get(id(o)), self.hold_reads.get(id(o))) if p is not None})
        self.hold_cursor = {}
        for p in planes:  # this thread's first vector of plane p
            self.hold_cursor[p] = self.namer.fresh(f"hold{p}")
            offset = f"numba.uint32({names['me']} + numba.uint32({p}) * {names['plane']})" \
                if p else names["me"]
            w.line(f"{self.hold_cursor[p]} = {offset}")

        def slots(advance: bool):  # (VectorStrips'), the plane cursors stepped too
            return self.tile_slots(top, [
                f"{cursor} = numba.uint32({cursor} + {names['vector_step']})"
                for cursor in self.hold_cursor.values()] if advance else ())

        # (forward: the values come from DRAM once, no L2 re-read to line up)
        with w.indented(f"for {loc['tile']} in range(0, {loc['n_red']}, {loc['per']} * {self.tile}):"):
            if loads:
                w.line("# this thread's vectors first: loads with no use between them "
                       "are in flight at once")
                with slots(advance=False):
                    for o in loads:
                        w.line(self.tile_load(o))
            with slots(advance=True):
                w.line(f"{k} = {loc['r']}")
                yield
                for o in stores:
                    view, cursor = self.vector_place(o)
                    if self.vec == 1:
                        w.line(f"{view}[numba.uint64({cursor})] = {self.vec_held[id(o)]}[0]")
                    else:
                        w.line(f"{self.store_move}({view}, (numba.uint64({cursor}),), "
                               f"{self.vec_held[id(o)]}, 0)")

    def _held_at(self, op) -> str:
        return self._plane_at(self.hold_writes.get(id(op), self.hold_reads.get(id(op))))

    def _plane_at(self, plane: int) -> str:
        """This slot's value of the current lane in ``plane``."""
        lane = f" + numba.uint32({self.vlane} * STRIP_SHARED_THREADS)" if self.vlane else ""
        return f"{self.hold_names['held']}[{self.hold_cursor[plane]}{lane}]"

    def vector_statement(self, op) -> bool:
        if not self.held_shared or self.vlane is None or id(op) not in self.vec_accesses:
            return super().vector_statement(op)  # (a uniform load: from its tile)
        if isinstance(op, StoreOp):
            if self.vec > 1:
                return super().vector_statement(op)
            self.w.line(f"{self.vec_held[id(op)]}[0] = {self.namer(op.operands[0])}")
            return True
        view = _HELD_VIEW.get(self.vec_dtype)
        if id(op) in self.hold_reads:  # a value an earlier loop kept
            name = self.define(op.result, self.namer(op.operands[0]) + "_v")
            held = self._held_at(op)
            self.w.line(f"{name} = " + (f"np.float32({held})" if view else held))
            return True
        if self.vec > 1:
            super().vector_statement(op)
        else:
            name = self.define(op.result, self.namer(op.operands[0]) + "_v")
            self.w.line(f"{name} = {self.vec_held[id(op)]}[{self.local['slot']}]")
        if id(op) in self.hold_writes:  # kept for the later loops
            value = self.namer(op.result)
            self.w.line(f"{self._held_at(op)} = " + (f"{view}({value})" if view else value))
        return True


def shared_launch(host, kernel, points: str, n_red: str, args: list[str]) -> list[str]:
    """The host's lines that launch a shared kernel where one may run, opening an if
    chain: the vector one (whole vectors, aligned buffers) whose planes fit
    STRIP_SHARED_BYTES, else the scalar one where its planes fit (the geometry of
    mlfuse/strip_plan.py, whose bytes the launch gives)."""
    vec, unit = kernel.vector_lanes, host.w.unit
    planes, size = kernel.launch["planes"], kernel.launch["held_bytes"]
    vector = kernel.variants.get("strips-shared")
    lines, plan, held = [], host.namer.fresh("shared"), host.namer.fresh("held")
    width, per, nbytes = (host.namer.fresh(n) for n in ("width", "per", "held_bytes"))
    host.helpers.add("_strip_shared")

    def geometry(count: str, lanes: str, widths) -> str:
        return (f"_strip_shared({count}, {n_red}, {widths[0]}, {widths[1]}, STRIP_SHARED_THREADS, "
                f"{lanes}, {planes}, {size}, STRIP_SHARED_BYTES, SM_COUNT, STRIP_BLOCKS_PER_SM)")

    def launch(name: str, count: str) -> str:
        return unit + host.call(name, f"_strip_grid(({count} + {width} - 1) // {width}), "
                                f"({width}, {per}), 0, {nbytes}", args)

    lines = [f"{plan}, {held} = None, None"]
    if vector is not None:
        host.helpers.add("_vector_ready")
        buffers = ", ".join(host.namer(b) for b in kernel.vector_buffers)
        lanes = "" if vec == "VECTOR_WIDTH" else f", width={vec}"
        lines += [f"if {points} % {vec} == 0 and _vector_ready({buffers}{lanes}):",
                  f"{unit}{plan} = {geometry(f'{points} // {vec}', vec, kernel.launch['shared_widths'])}",
                  f"if {plan} is None:  # no whole vectors, or they do not fit: a point a thread"]
    lines += [(unit if vector is not None else "") +
              f"{held} = {geometry(points, '1', kernel.launch['scalar_widths'])}"]
    if vector is not None:
        lines += [f"if {plan} is not None:  # a strip's values fit in shared memory: inputs read once",
                  f"{unit}{width}, {per}, {nbytes} = {plan}",
                  launch(vector, f"{points} // {vec}")]
    lines += [f"{'elif' if vector is not None else 'if'} {held} is not None:  # a point a thread",
              f"{unit}{width}, {per}, {nbytes} = {held}",
              launch(kernel.variants["strips-shared-scalar"], points)]
    return lines


def held_bytes(dtype: str) -> int:
    """Bytes of shared memory a held value of ``dtype`` takes."""
    return 2 if dtype in _HELD_VIEW else 4
