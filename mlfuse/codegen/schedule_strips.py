"""Strips ("strips"): a block owns a strip of points and all of their reduced values.

Thread ``t`` of a block works on point ``t % strip`` of the block's strip and on the
reduced values ``t // strip``, ``+ per``, ``+ 2 per``, ... of it (``per`` = threads per
point), each top-level reduce or for nest walked as one flat loop over the product of
its extents. A reduction's partials are combined through shared memory, every thread
of a point combining them itself in the same order (the same bits in each): after it,
the result is known on chip, and the loops that follow (the broadcast-back epilogue:
``x - mean(x, axis=0)``, softmax over a middle axis) run in the same kernel.

- ``strip`` "columns": STRIP_POINTS neighbouring points per block, so a warp reads
  STRIP_POINTS neighbouring values of one reduced index (coalesced) when the reduced
  axes are leading or middle ones.
- ``strip`` "rows": one point per block, the block's threads on neighbouring reduced
  values (contiguous over several trailing axes: instance norm over [H, W]); its
  reductions are the block reductions of the row schedule.

Two variants, picked by the host from the reduced extent of the call:
"strips-registers" (each thread's values fit in VALUES_PER_THREAD slots: the first
loop loads them into local arrays, registers once unrolled, and later loops read them
there, so the inputs are read from memory once) and "strips-streaming" (any extent:
each loop walks the values in tiles of VALUES_PER_THREAD // 2 per thread, the tile's loads
issued first so they are in flight together; later loops read the inputs again,
mostly from L2).

A strip past the last point works on the last point again, its loads in bounds, and
stores nothing (``valid``): every thread takes part in every barrier.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import DimOp, ForOp, LoadOp, MaskedLoadOp, ReduceOp, StoreOp, YieldOp
from mlfuse.dialects.reductions import level_ops, loop_levels

from mlfuse.codegen.emit_kernel import STREAM_TILE, VALUES_PER_THREAD, KernelEmitter
from mlfuse.codegen.kernel_code import KernelCode, extent_factors, kernel_interface
from mlfuse.codegen.addressing import access_parts
from mlfuse.codegen.flat_rows import _key as flat_key
from mlfuse.codegen.helpers import strip_reduce_name
from mlfuse.codegen.reuse import prefetchable_loads
from mlfuse.dialects.reductions import defined_inside
from mlfuse.codegen.scalar import COMPUTE_TYPE, combine
from mlfuse.codegen.vector import vector_buffers
from mlfuse.codegen.strips_vector import VectorStrips, vector_lanes, vector_strip_accesses
from mlfuse.codegen.strips_staged import StagedStores
from mlfuse.codegen.strips_shared import (SharedStrips, held_bytes, held_planes, shared_launch,
                                          shared_widths)
from mlfuse.ir.types import itemsize
from mlfuse.strip_plan import held_rereads, line_points, most_slots, narrowest_points

_DOC = {
    "strips-registers": "Strips schedule over [{space}] ({strip}): a block per strip of points, "
                        "its threads also split the reduced values and hold them in registers.",
    "strips-streaming": "Strips schedule over [{space}] ({strip}): a block per strip of points, "
                        "its threads also split the reduced values, a tile at a time.",
    "strips-vector": "Strips schedule over [{space}] ({strip}): a block per strip of points, "
                     "a thread's points a 16-byte vector, its threads also split the reduced "
                     "values, a tile at a time.",
    "strips-shared": "Strips schedule over [{space}] ({strip}): a block per strip of points, "
                     "a thread's points a 16-byte vector, its threads also split the reduced "
                     "values and hold those read again in shared memory.",
    "strips-shared-scalar": "Strips schedule over [{space}] ({strip}): a block per strip of "
                            "points, its threads also split the reduced values and hold those "
                            "read again in shared memory.",
}


def top_loops(op) -> list:
    return [o for o in op.body.ops if isinstance(o, (ReduceOp, ForOp))]


def _clean(levels) -> bool:
    """Whether the outer levels of a nest compute only constants (then the innermost
    body's loads may be issued ahead for a whole tile)."""
    return all(isinstance(o, (ConstantOp, DimOp)) for d in range(len(levels) - 1)
               for o in level_ops(levels, d))


# the simulator's strips are small (4 points at most, 16 threads at least, 64 at most
# over columns, 128 streaming; the code is the same)
SIMULATOR_STRIP = (4, 16, 64, 128)


def strip_geometry(target: str, hw) -> tuple[int, int, int, int]:
    """(STRIP_POINTS, STRIP_THREADS, STRIP_BLOCK_THREADS, STRIP_STREAM_THREADS) of a
    module for ``target``."""
    return (hw.strip_points, hw.strip_threads, hw.strip_block_threads,
            hw.strip_stream_threads) if target == "cuda" else SIMULATOR_STRIP


def narrowest_strip(op, target: str, hw) -> int:
    """The narrowest strip over columns a call of ``op`` may take: a 32-byte sector a row
    of its smallest values (the simulator: half its widest, so tests run narrowed strips)."""
    widest = strip_geometry(target, hw)[0]
    if target != "cuda":
        return max(1, widest // 2)
    return narrowest_points(_smallest(op), widest)


def _smallest(op) -> int:
    """The itemsize of ``op``'s smallest values (its rows' bytes count in them)."""
    return min((itemsize(b.type.dtype) for b in kernel_interface(op).buffers), default=4)


def line_strip(op, target: str, hw) -> int:
    """The narrowest strip over columns of a streaming call of ``op``: a 128-byte line a
    row of its smallest values (the simulator: its narrowest, so tests run narrowed
    strips)."""
    widest = strip_geometry(target, hw)[0]
    if target != "cuda":
        return narrowest_strip(op, target, hw)
    return line_points(_smallest(op), widest, hw.strip_line_bytes)


def _constant_slots(op, target: str, hw) -> int | None:
    """Slots a thread of the registers variant needs where the reduced extent is a
    constant: the host's ``_strip_threads`` is then known here too (each slot is a
    register per held load: a short row must not pay for VALUES_PER_THREAD)."""
    extents = [lvl["extent"] for lvl in loop_levels(top_loops(op)[0])]
    if not all(isinstance(e, int) for e in extents):
        return None
    reduced = 1
    for e in extents:
        reduced *= e
    widest, least, most, _ = strip_geometry(target, hw)
    if op["strip"] == "columns":
        return most_slots(reduced, widest, narrowest_strip(op, target, hw), least, most,
                          hw.row_values_per_thread)
    width = 1
    per = max(1, least // width)
    while per < 512 // width and per * hw.row_values_per_thread < reduced:
        per *= 2
    return max(1, -(-reduced // per))


def strip_variants(op, hw=None) -> list[str]:
    """Both variants (the host picks one from the reduced extent of the call), and the
    vector one where the kernel qualifies and ``hw.strip_vectors`` (strips_vector.py)."""
    kinds = ["strips-registers", "strips-streaming"]
    accesses = hw is not None and vector_strip_accesses(op, top_loops(op))
    if accesses and hw.strip_vectors:
        kinds.append("strips-vector")
    if accesses and hw.strip_shared_bytes > 0 and held_planes(top_loops(op))[2] and \
            held_rereads(top_loops(op)) >= hw.strip_shared_min_rereads:
        # (strips_shared.py: later loops read values again, enough of them to pay for the
        # narrow strips; a vector a thread, or a point where the vectors do not fit the call)
        kinds += (["strips-shared"] if hw.strip_vectors else []) + ["strips-shared-scalar"]
    return kinds


class StripsEmitter(StagedStores, SharedStrips, VectorStrips, KernelEmitter):
    def __init__(self, op, name, variant, target, helpers, hw, taken=()):
        super().__init__(op, name, variant, target, helpers, hw, taken)
        self.schedule = "strips"
        self.columns = op["strip"] == "columns"
        self.registers = variant == "strips-registers"
        self.tops = top_loops(op)
        self.levels = {id(o): loop_levels(o) for o in self.tops}
        for n in ("lane", "per", "n_red", "strip", "valid", "r", "tile", "width"):
            self.local[n] = self.namer.fresh(n)
        # over columns a block is (width, per) threads, its strip's width picked per call
        self.width = self.local["width"] if self.columns else "1"
        if self.columns:  # streaming blocks may be deeper (a line a row, more rows)
            self.launch_bound = "(STRIP_BLOCK_THREADS, STRIP_MIN_BLOCKS)" if \
                variant == "strips-registers" else "(STRIP_STREAM_THREADS, 1)"
        # values per thread a loop has in flight: all of them (registers), or a tile of
        # half as many (streaming: a 64-bit address each while in flight; 16 spill)
        self.tile = VALUES_PER_THREAD if self.registers else STREAM_TILE
        slots = _constant_slots(op, target, hw) if self.registers else None
        if slots is not None and slots < hw.row_values_per_thread:
            self.tile = str(slots)  # the host's threads for this constant extent need no more
        self.vectors = variant in ("strips-vector", "strips-shared", "strips-shared-scalar")
        self.held_shared = variant.startswith("strips-shared")
        self.vec, self.vec_held, self.vlane = 1, {}, None
        self.stage_tiles, self.unguarded, self.after_tile = {}, False, None  # (strips_staged.py)
        if self.vectors:
            self.setup_vectors(vector_strip_accesses(op, self.tops))
        if variant == "strips-shared-scalar":
            self.setup_scalar()
        if self.held_shared:  # 8-lane vectors (f16) hold twice the values a thread
            blocks = "STRIP_SHARED_WIDE_MIN_BLOCKS" if self.vec > 4 else "STRIP_SHARED_MIN_BLOCKS"
            self.launch_bound = f"(STRIP_SHARED_THREADS, {blocks})"
            self.setup_shared(self.tops, vector_strip_accesses(op, self.tops))

    def emit(self) -> str:
        w, loc = self.w, self.local
        doc = _DOC[self.variant].replace("{strip}", self.op["strip"])
        with self.kernel_def([], doc):
            if self.columns:
                w.line(f"{loc['lane']} = cuda.threadIdx.x  # the point in the strip")
                w.line(f"{loc['nthreads']} = cuda.threadIdx.y  # its thread among the point's")
                w.line(f"{self.width} = cuda.blockDim.x  # the strip's points (the host's pick)")
                w.line(f"{loc['per']} = cuda.blockDim.y")
            else:
                w.line(f"{loc['tid']} = cuda.threadIdx.x")
                w.line(f"{loc['lane']} = 0")
                w.line(f"{loc['nthreads']} = {loc['tid']}")
                w.line(f"{loc['per']} = cuda.blockDim.x")
            self.declare_scratch(self.tops, "STRIP_SHARED_THREADS" if self.held_shared else
                                 "1024" if self.columns else None)
            if not self.vectors:  # (the vector loops hold their own vectors)
                self.plan()
            # a point's values contiguous in a buffer: one range from a row base
            # (flat_rows.py); over columns, a 1-D operand of the reduced axis (gamma[c])
            # stepped by a cursor too (a signed index's wraparound test and a 64-bit
            # multiply a value: 20 instructions a slot for gamma and beta, ptxas)
            self.plan_flat_rows([(o, [lvl.body.args[0] for lvl in self.levels[id(o)]],
                                  [lvl["extent"] for lvl in self.levels[id(o)]])
                                 for o in self.tops], one_axis=self.columns)
            self.plan_thread_steps()
            self.plan_staged_stores(self.tops, strip_geometry(self.target, self.hw))
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            extents = [lvl["extent"] for lvl in self.levels[id(self.tops[0])]]
            w.line(f"{loc['n_red']} = {self.points(extents)}")
            self.stage_constants()
            # a thread's step in the nest's digits (where some nest still counts them)
            self.steps = self.digits_of(loc["per"], extents) if any(self.flat_digits.values()) else []
            vectors = self.vectors and self.vec > 1  # (the scalar shared kernel: a point a thread)
            span = self.width if not vectors else f"{self.width} * {self.vec_name}"
            if self.held_shared:
                self.shared_preamble()
            self.mine = ""
            if self.registers and self.columns:
                # this thread's values of a point (the same for every point): its slots
                # below it are real. (Comparing r = nthreads + slot * per per slot, LLVM
                # hoisted the 16 64-bit r out of the loop over strips: 32 registers.)
                # (in 32 bits: the host launches this kernel where every thread holds
                # at most VALUES_PER_THREAD values; a 64-bit bound cost two compares a slot)
                self.mine = self.namer.fresh("n_mine")
                # (unsigned, so that LLVM divides in 32 bits with no floor fix-ups: the
                # dividend is at least n_red, the divisor a block dimension)
                w.line(f"{self.mine} = numba.int32(numba.uint32({loc['n_red']} - "
                       f"{loc['nthreads']} + {loc['per']} - 1) // numba.uint32({loc['per']}))")
            # one strip a block (the host launches a block for each, _strip_grid): in a
            # loop over strips LLVM hoisted every slot's 64-bit offsets out of it, 96-128
            # registers where one strip takes 64-72 (H100: L1 norm over 64 channels 0.085
            # -> 0.047 ms, a channel layernorm over 96 channels 0.077 -> 0.065)
            w.line(f"{loc['strip']} = numba.int64(cuda.blockIdx.y) * cuda.gridDim.x + "
                   "numba.int64(cuda.blockIdx.x)")
            # (a strip exists where it starts before the last point: no division for
            # the count of strips)
            with w.indented(f"if {loc['strip']} * {span} < {loc['n_points']}:"):
                if vectors:  # this thread's first point (the host: VEC divides them)
                    w.line(f"{loc['point']} = ({loc['strip']} * {self.width} + {loc['lane']}) "
                           f"* {self.vec_name}")
                else:
                    w.line(f"{loc['point']} = {loc['strip']} * {self.width} + {loc['lane']}")
                w.line(f"{loc['valid']} = {loc['point']} < {loc['n_points']}")
                last = f"{loc['n_points']} - {self.vec_name if vectors else 1}"
                w.line(f"{loc['point']} = min({loc['point']}, {last})  "
                       "# past the end: the last point again, not stored")
                self.unravel(loc["point"])
                self.row_base_lines()
                self.thread_base_lines()
                self.block(self.op.body, top=True)
        return w.text()

    def plan_thread_steps(self) -> None:
        """Over columns, an access along a single reduced axis (a column: values
        ``stride`` apart) at this thread's value ``slot`` is ``thread_base + slot *
        per * stride`` (and ``+ tile * stride`` streaming): the thread's first value's
        offset once per point and a constant step a slot, where ``row_base + k * stride``
        was a 64-bit multiply and its carries per value (ptxas kept each address live
        until its load: 94-100 registers)."""
        self.slot_strides, self.thread_bases, self.cursors = {}, {}, {}
        self.stepped = {id(lvls[0].body.args[0]) for lvls in self.levels.values()
                        if len(lvls) == 1} if self.columns else set()
        for stride in dict.fromkeys(self.flat_strides.values()):
            self.slot_strides[stride] = self.namer.fresh(f"slot_{stride}")
            self.w.line(f"{self.slot_strides[stride]} = {self.local['per']} * {stride}")

    def _stepped(self, access) -> bool:
        return access.axis is not None and access.step != "flat" and \
            id(access.step) in self.stepped

    def thread_base_lines(self) -> None:
        """Each stepped access's offset at this thread's first value of the point."""
        self.thread_bases = {}
        for access in self.flat.values():
            if not self._stepped(access):
                continue
            key = (self.row_bases[self._base_code(access)],
                   self.flat_strides[(id(access.buf), access.axis)])
            if key not in self.thread_bases:
                self.thread_bases[key] = self.namer.fresh("thread_base")
                self.w.line(f"{self.thread_bases[key]} = {key[0]} + {self.local['nthreads']} "
                            f"* {key[1]}")

    def start_cursors(self, top) -> None:
        """A loop's cursors: each stepped access's offset at the thread's first value of
        the loop, advanced by a slot's stride after each slot. (``thread_base + slot *
        stride`` with a constant slot was invariant in the loop over strips: LLVM hoisted
        the 16 64-bit products, 32 registers.)"""
        self.cursors = {}
        used = set()
        for o in top.walk():
            if id(o) in getattr(self, "hold_reads", ()):
                continue  # read from shared memory (strips_shared.py): no cursor
            if isinstance(o, (LoadOp, MaskedLoadOp, StoreOp)):
                access = self.flat.get(flat_key(*access_parts(o)))
                if access is not None and self._stepped(access):
                    used.add((self.row_bases[self._base_code(access)],
                              self.flat_strides[(id(access.buf), access.axis)]))
        for key, base in self.thread_bases.items():
            if key not in used:
                continue
            self.cursors[key] = self.namer.fresh("cursor")
            tile = "" if self.registers else f" + {self.local['tile']} * {key[1]}"
            self.w.line(f"{self.cursors[key]} = {base}{tile}")

    def flat_subscript(self, buf, indices, flat_index: str) -> str | None:
        access = self.flat.get(flat_key(buf, indices))
        if access is None or not self._stepped(access):
            return super().flat_subscript(buf, indices, flat_index)
        stride = self.flat_strides[(id(buf), access.axis)]
        cursor = self.cursors[(self.row_bases[self._base_code(access)], stride)]
        return f"{self.flat_views[id(buf)]}[numba.uint64({cursor})]"

    def plan(self) -> None:
        """Local arrays for the loads each loop issues ahead: per loop (streaming: a tile
        of each loop's own), or shared by the loops that load the same value
        (registers: filled by the first, read by the later ones)."""
        inside = defined_inside(self.tops)
        groups: dict[object, list] = {}
        index_ops = {}
        for top in self.tops:
            levels = self.levels[id(top)]
            if not _clean(levels):
                continue
            steps = {id(lvl.body.args[0]): f"k{d}" for d, lvl in enumerate(levels)}
            loads, index_ops[id(top)] = prefetchable_loads(levels[-1].body)
            extents = repr([lvl["extent"] for lvl in levels])
            for j, o in enumerate(loads):
                # streaming: the j-th load of every loop shares a tile (each fills its own)
                key: object = ("tile", j, o.result.type.dtype)
                if self.registers:
                    key = id(o)
                    if isinstance(o, LoadOp) and \
                            all(id(v) in steps or id(v) not in inside for v in o.operands[1:]):
                        key = (id(o.operands[0]), extents,
                               tuple(steps.get(id(v), id(v)) for v in o.operands[1:]))
                groups.setdefault(key, []).append((top, o))
        filled: dict[int, list] = {}
        for members in groups.values():
            # (a local array's size must be a constant, not an expression of one)
            self.hold([o for _, o in members], self.tile if self.registers else VALUES_PER_THREAD)
            for top, o in members if not self.registers else members[:1]:
                filled.setdefault(id(top), []).append(o)
        for top in self.tops:
            loads = filled.get(id(top), [])
            self.fills[id(top)] = (index_ops.get(id(top), []) if loads else [], loads)

    def leader(self) -> str:
        return f"{self.local['nthreads']} == 0 and {self.local['valid']}"

    def shared_combine(self, combiner: str, part: str, dtype: str) -> str:
        if not self.columns:  # one point per block: the block reduction
            return super().shared_combine(combiner, part, dtype)
        helper = strip_reduce_name(combiner)
        self.helpers.add(helper)
        return f"{helper}({part}, {self.scratch[COMPUTE_TYPE[dtype]]})"

    def digits_of(self, flat: str, extents, names=None) -> list[str]:
        """``flat``'s digits in the mixed radix of ``extents`` (last fastest) into
        ``names`` (default: fresh ``step`` names; none for one reduced axis, whose index
        is the flat one). A zero extent counts as 1: then there are no reduced values, and
        the digits are never used."""
        if len(extents) < 2:
            return []
        names = names or [self.namer.fresh(f"step{d}") for d in range(len(extents))]
        rest = flat
        for d in range(len(extents) - 1, 0, -1):
            quotient = names[0] if d == 1 else self.namer.fresh("digits_rest")
            size = extents[d] if isinstance(extents[d], int) else f"max({self.extent(extents[d])}, 1)"
            self.w.line(f"{quotient}, {names[d]} = divmod({rest}, {size})")
            rest = quotient
        return names

    def count_on(self, indices: list[str], extents) -> None:
        """Advance a thread's reduced indices (mixed radix, last fastest) to its next value:
        a few adds and compares where a divmod per value would cost tens of instructions."""
        w = self.w
        for name, step in zip(indices, self.steps):
            w.line(f"{name} += {step}")
        for d in range(len(indices) - 1, 0, -1):
            with w.indented(f"if {indices[d]} >= {self.extent(extents[d])}:  # carry"):
                w.line(f"{indices[d]} -= {self.extent(extents[d])}")
                w.line(f"{indices[d - 1]} += 1")

    @contextmanager
    def each_value(self, top):
        """This thread's values of the flat reduced index, a tile of VALUES_PER_THREAD at
        a time (registers: one tile covers them all), with the nest's indices."""
        w, loc = self.w, self.local
        levels = self.levels[id(top)]
        args = [lvl.body.args[0] for lvl in levels]
        for d, a in enumerate(args):
            self.define(a, f"k{d}")
        extents = [lvl["extent"] for lvl in levels]

        @contextmanager
        def slots():
            base = "" if self.registers else f"{loc['tile']} + "
            # several reduced axes: unravel once, then count on (unless only flat
            # accesses read the nest's indices: they take the flat index itself)
            counted = len(levels) > 1 and self.flat_digits[id(top)]
            if counted:  # the thread's first value's indices
                self.digits_of(f"{base}{loc['nthreads']}", extents,
                               [self.namer(a) for a in args])
            self.start_cursors(top)
            with w.indented(f"for {loc['slot']} in range(numba.int32({self.tile})):"):
                if self.mine:  # the slot's own bound: no 64-bit r per slot live across points
                    guard = f"if {loc['slot']} < {self.mine}:"
                else:
                    w.line(f"{loc['r']} = {base}{loc['nthreads']} + {loc['slot']} * {loc['per']}")
                    guard = f"if {loc['r']} < {loc['n_red']}:"
                with w.indented(guard):
                    if self.mine:
                        w.line(f"{loc['r']} = {loc['nthreads']} + {loc['slot']} * {loc['per']}")
                    if len(levels) == 1:
                        self.unravel_into(loc["r"], args, extents)
                    for d in range(len(levels) - 1):  # constants only where loads go ahead
                        for o in level_ops(levels, d):
                            self.statement(o, shared=False)
                    yield
                if counted:
                    self.count_on([self.namer(a) for a in args], extents)
                for key, cursor in self.cursors.items():
                    w.line(f"{cursor} += {self.slot_strides[key[1]]}")

        def phases():
            if self.fills[id(top)][1]:
                w.line("# this thread's values first: loads with no use between them are "
                       "in flight at once")
                with slots():
                    self.fill(top)
            return slots()

        if self.registers:
            with phases():
                yield
        else:
            order = self.stream_order(loc["n_red"], f"{loc['per']} * {self.tile}")
            with w.indented(f"for {loc['tile']} in {order}:"):
                with phases():
                    yield
                if self.after_tile is not None:  # (a staged epilogue's copy-out)
                    self.after_tile()

    def block(self, block, top: bool) -> None:
        for op in block.ops:  # the top-level loops are shared by the block's threads
            if isinstance(op, YieldOp):
                continue
            if top and self.vectors:
                self.vector_top(op)
            else:
                self.statement(op, top)

    def load_statement(self, op) -> None:
        if not self.vector_statement(op):
            super().load_statement(op)

    def statement(self, op, shared: bool) -> None:
        if isinstance(op, StoreOp) and self.vector_statement(op):
            return
        if self.staged_statement(op, shared, lambda: super(StripsEmitter, self).statement(op, shared)):
            return
        if shared and isinstance(op, ForOp):  # the epilogue: stores where the point is real
            with self.w.indented(f"if {self.local['valid']}:"):
                with self.each_value(op):
                    self.block(self.levels[id(op)][-1].body, top=False)
            return
        super().statement(op, shared)

    def accumulate(self, op: ReduceOp, acc: str, shared: bool) -> None:
        if not shared:
            super().accumulate(op, acc, shared)
            return
        inner = self.levels[id(op)][-1]
        with self.each_value(op):
            self.block(inner.body, top=False)
            yielded = self.namer(inner.body.ops[-1].operands[0])
            step = combine(op["combiner"], acc, yielded, self.helpers, op.result.type.dtype)
            self.w.line(f"{acc} = {step}")


def emit_strips(op, name: str, target: str, helpers: set[str], names, hw) -> KernelCode:
    kinds = strip_variants(op, hw)
    variants = {kind: name if n == 0 else names.fresh(
        f"{name}_{kind.removeprefix('strips-').replace('-', '_')}") for n, kind in enumerate(kinds)}
    texts = [StripsEmitter(op, kname, kind, target, helpers, hw, names.taken).emit()
             for kind, kname in variants.items()]
    extents = [lvl["extent"] for lvl in loop_levels(top_loops(op)[0])]
    launch = {"narrowest": narrowest_strip(op, target, hw), "line": line_strip(op, target, hw)} \
        if op["strip"] == "columns" else {}
    code = KernelCode(op, "strips", kernel_interface(op), extents, variants, "\n\n".join(texts),
                      launch=launch)
    if "strips-vector" in kinds:
        accesses = vector_strip_accesses(op, top_loops(op))
        code.vector_lanes = vector_lanes(accesses)[0]
        code.vector_buffers = vector_buffers(accesses)
        # a vector strip's narrowest: a 128-byte line a row of 16-byte vectors, f16 too
        # (the simulator: a thread)
        launch["vector_line"] = max(1, hw.strip_line_bytes // 16) if target == "cuda" else 1
    if "strips-shared-scalar" in kinds:
        accesses = vector_strip_accesses(op, top_loops(op))
        dtype = access_parts(accesses[0])[0].type.dtype
        code.vector_lanes = vector_lanes(accesses)[0]
        code.vector_buffers = vector_buffers(accesses)
        launch["shared_widths"] = shared_widths(target, hw)
        launch["scalar_widths"] = shared_widths(target, hw, itemsize(dtype))
        launch["planes"] = held_planes(top_loops(op))[2]
        launch["held_bytes"] = held_bytes(dtype)
    if op["strip"] == "columns" and op.attributes.get("split_stages"):
        from mlfuse.codegen.column_stages import emit_column_stages  # (it imports this module's
        stages, text = emit_column_stages(op, name, target, helpers, names, hw)  # peers)
        launch.update(stages)
        code.text += "\n\n" + text
    return code


def strips_launch(host, kernel, points: str, args: list[str]) -> None:
    """Threads per block from the reduced extent of the call (over columns also the
    strip's width, from the points: mlfuse/strip_plan.py); the registers variant where
    each thread's values fit in it."""
    op = kernel.op
    n_red = " * ".join(extent_factors(kernel.row_extents, lambda s: host.dim(s, op)))
    threads, blocks = host.namer.fresh("threads"), host.namer.fresh("blocks")
    host.helpers.add("_strip_grid")
    first, second = list(kernel.variants.values())[:2]
    grid = f"{blocks}, {threads}"
    unit = host.w.unit
    if op["strip"] == "columns":
        width, per = host.namer.fresh("width"), host.namer.fresh("per")
        host.helpers.add("_strip_columns")
        lines = [f"{width}, {per} = _strip_columns({points}, {n_red}, STRIP_POINTS, "
                 f"{kernel.launch['narrowest']}, {kernel.launch['line']}, STRIP_THREADS, "
                 "STRIP_BLOCK_THREADS, STRIP_STREAM_THREADS, VALUES_PER_THREAD, "
                 "SM_COUNT, STRIP_BLOCKS_PER_SM)",
                 f"{threads} = ({width}, {per})",
                 f"{blocks} = _strip_grid(({points} + {width} - 1) // {width})"]
        shared = "strips-shared-scalar" in kernel.variants
        if shared:  # first choice where a strip's values fit shared memory
            lines += shared_launch(host, kernel, points, n_red, args)
        lines += [f"{'elif' if shared else 'if'} {n_red} <= {per} * VALUES_PER_THREAD and "
                  f"{width} * {per} <= min(STRIP_HELD_THREADS, STRIP_BLOCK_THREADS):  "
                  "# values fit in registers"]
    else:
        host.helpers.add("_strip_threads")
        lines = [f"{threads} = _strip_threads(1, {n_red})",
                 f"{blocks} = _strip_grid({points})",
                 f"if {n_red} <= {threads} * VALUES_PER_THREAD and "
                 f"{threads} <= STRIP_HELD_THREADS:  # each thread's values fit in registers"]
    lines += [unit + host.call(first, grid, args)]
    if "column_stages" in kernel.launch:  # fit on chip nowhere: the columns in stages
        from mlfuse.codegen.column_stages import column_stages_lines
        lines += ["elif COLUMN_STAGES:"] + [unit + line for line in
                                            column_stages_lines(host, kernel, points, n_red, args)]
    if "strips-vector" in kernel.variants:
        # the vector kernel has only a streaming form: it stands in for the scalar
        # streaming kernel where VEC divides the points and the buffers are aligned; a
        # strip whose values registers hold keeps the held kernel (one read of x, where
        # the streaming one reads it once per loop, mostly from L2)
        condition, body = _vector_launch(host, kernel, points, n_red, args)
        lines += [f"elif {condition}:"] + [unit + line for line in body]
    lines += ["else:", unit + host.call(second, grid, args)]
    host.guarded(op, points, lines)


def _vector_launch(host, kernel, points: str, n_red: str, args: list[str]) -> tuple[str, list[str]]:
    """When the vector kernel may run (whole vectors, aligned buffers) and its launch
    lines: its strip's threads from the points in vectors
    (each thread VEC of them, 16 bytes: the widest strip STRIP_POINTS // VECTOR_WIDTH
    threads, 128 bytes a row for f32 as for f16; at least a 128-byte line)."""
    vec = kernel.vector_lanes
    width, per = host.namer.fresh("width"), host.namer.fresh("per")
    host.helpers.add("_vector_ready")
    buffers = ", ".join(host.namer(b) for b in kernel.vector_buffers)
    lanes = "" if vec == "VECTOR_WIDTH" else f", width={vec}"
    vector = kernel.variants["strips-vector"]
    condition = f"{points} % {vec} == 0 and _vector_ready({buffers}{lanes})"
    return condition, [
        f"{width}, {per} = _strip_columns({points} // {vec}, {n_red}, "
        f"max(1, STRIP_POINTS // VECTOR_WIDTH), {kernel.launch['vector_line']}, "
        f"{kernel.launch['vector_line']}, STRIP_THREADS, STRIP_BLOCK_THREADS, "
        "STRIP_STREAM_THREADS, VALUES_PER_THREAD, SM_COUNT, STRIP_BLOCKS_PER_SM)",
        host.call(vector, f"_strip_grid(({points} // {vec} + {width} - 1) // {width}), "
                  f"({width}, {per})", args)]


__all__ = ["emit_strips", "strips_launch"]
