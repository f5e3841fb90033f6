"""Thin transpose tiles ("transpose-tiles-thin"): a transpose whose one side is short.

The square kernels (schedule_tiles.py) take TILE x TILE points of the tiled axes A (the
permuted loads' axis) and B (the innermost). Where one of the two is only a few values
long at run time (an NCHW batch of C = 3 channels going to NHWC: B = C = 3) a square
holds 3 of its 32 columns: a tenth of the threads work, and each warp stores 12 bytes
(H100: 1.43 ms, 7% of copy bandwidth, for [256, 3, 224, 224]).

The thin kernel takes the short side whole and as much of the long side as fills
P = THREADS x STEPS points (``transpose_thin_threads`` x ``transpose_thin_steps``): a
rectangle of ``span`` x ``short`` values, ``span = min(P // short, long)``. Which side is
short is known only at run time (the host launches this kernel where a tiled extent is
shorter than TILE / 2), so the kernel works it out. Its threads walk the rectangle's
points flat, f = t + THREADS * step, in rows of the phase's contiguous axis:

- phase 1 (the permuted loads, contiguous along A): a = f % n1, b = f // n1, with n1 the
  rectangle's extent along A (``span`` where A is long, ``short`` where A is short);
- phase 2 (the stores and the other loads, contiguous along B): b = f % n2, a = f // n2.

Where the short side is the phase's contiguous one, a run of f is a run of addresses
(the side is whole: an NHWC pixel's 3 channels, then the next pixel's). A thread divides
t once (its first point in either phase); a step adds THREADS' quotients and remainder
and carries. Offsets into flat views: the rectangle's corner once, plus a * stride_A +
b * stride_B a point.

Where the long side is whole (span == long), rectangles stack along the stack axis (the
innermost of the other axes: H of NCHW -> NHWC), ``stack`` of them filling P, and the
walks have a third coordinate, r (slowest); offsets add r * stride_R.

Every rectangle puts a thread on the same points, so LLVM would hoist every step's
point, tile word and offsets out of the rectangle loop, and merge a phase's two walks,
keeping them all in registers (100 for 4 steps in NCHW -> NHWC). Each walk starts at
``start + fresh`` with ``fresh = cuda.activemask() == 0`` read anew: never true (the
block's threads all run it), but LLVM cannot know, so it walks again (a few adds a
step). The walks run in 32 bits (``numba.int32``: Numba's integer sums are 64-bit), and
a point is tested against the rectangle's limits from its corner (lim_a, lim_b, lim_r),
not the axes' ends. The simulator, which has no activemask, takes 0.

The tile is a flat shared array of rows of ``short | 1`` values (long * rowlen + short
index): odd, so a warp walking the long side reads 32 banks, and a warp walking the short
side reads consecutive words where ``short`` is odd. stack * span * rowlen <= P * 3 / 2.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.loops import LoadOp
from mlfuse.dialects.permute import tiled_loads
from mlfuse.ir.core import Operation

from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.codegen.schedule_tiles import (OFFSET, SCALAR, TilesEmitter, _index_slice, _key,
                                           _one_group, tile_shape)

THIN = "transpose-tiles-thin"
_DOC = ("Thin transpose tiles over [{space}]: the shorter of axes {a} and {b} whole, the "
        "other filling {points} points; loads along axis {a} go through shared memory, "
        "so loads and stores coalesce. {threads} threads, {steps} points each.")
SIMULATOR = (16, 4)  # (threads, steps) under the simulator: 64-point rectangles
_LOCALS = ("short_b", "short", "long", "rowlen", "span", "stack", "stacks", "area", "squares",
           "corner", "r0", "ra", "rb", "rr", "ea", "eb", "major", "middle", "minor", "fresh",
           "lim_a", "lim_b", "lim_r") + \
    tuple(f"{d}{k}{p}" for d in ("", "d") for k in ("major", "middle", "minor") for p in (1, 2))


def thin_shape(target: str, hw) -> tuple[int, int]:
    """(threads, steps) of the thin kernel: a rectangle holds threads x steps points."""
    if target != "cuda":
        return SIMULATOR
    return hw.transpose_thin_threads, hw.transpose_thin_steps


def stack_axis(op) -> int | None:
    """The axis along which rectangles whose long side is whole stack (several to a
    block): the innermost of the axes other than the tiled ones; None at rank 2."""
    a, b = op["tile_axes"]
    outer = [d for d in range(len(op.extent_list)) if d not in (a, b)]
    return outer[-1] if outer else None


def thin_least(target: str, hw) -> int:
    """The host launches the thin kernel where a tiled extent is shorter than this: half
    a square's side (a square would leave more than half its threads idle)."""
    return tile_shape(target, hw, SCALAR)[0] // 2


class ThinTilesEmitter(TilesEmitter):
    def __init__(self, op, name, target, helpers, hw, taken=()):
        KernelEmitter.__init__(self, op, name, THIN, target, helpers, hw, taken)
        self.schedule = "pointwise"  # every statement is the thread's own
        self.threads, self.steps = thin_shape(target, hw)
        self.points_ = self.threads * self.steps
        self.width, self.moved, self.rows = 1, set(), 0
        self.launch_bound = str(self.threads)
        self.tiled = tiled_loads(op)
        self.tiles, self.early, self.once = {}, {}, set()
        for n in _LOCALS + ("t", "square", "n_squares", "outer", "a0", "b0"):
            self.local[n] = self.namer.fresh(n)
        self.flat_views, self.offsets, self.offset_steps, self._addressed = {}, {}, {}, {}
        a, b = op["tile_axes"]
        self.outer = [d for d in range(len(op.extent_list)) if d not in (a, b)]
        self.stack_axis = stack_axis(op)
        self.at: dict[int, str] = {}  # axis -> the current point's index from the corner

    def emit(self) -> str:
        w, loc = self.w, self.local
        extents = self.op.extent_list
        a, b = self.op["tile_axes"]
        doc = _DOC.format(space="{space}", a=a, b=b, points=self.points_,
                          threads=self.threads, steps=self.steps)
        body = [o for o in self.op.body.ops if id(o) not in {id(t) for t in self.tiled}]
        with self.kernel_def(doc=doc):
            for load in self.tiled:
                dtype = COMPUTE_TYPE[load.result.type.dtype]
                self.tiles[id(load)] = self.namer.fresh(f"{self.namer(load.operands[0])}_tile")
                w.line(f"{self.tiles[id(load)]} = cuda.shared.array({self.points_ * 3 // 2}, "
                       f"{SHARED_TYPE[dtype]})  # rows of short | 1 values")
                self.early[id(load)] = self.local_array(
                    f"{self.namer(load.operands[0])}_in", dtype, str(self.steps))
            loads_in, accesses = self.plan_offsets(self.tiled), self.plan_offsets(body)
            early = [o for o in accesses if isinstance(o, LoadOp)
                     and COMPUTE_TYPE[o.result.type.dtype] in SHARED_TYPE]
            for o in early:
                self.early[id(o)] = self.local_array(f"{self.namer(o.operands[0])}_vals",
                                                     COMPUTE_TYPE[o.result.type.dtype],
                                                     str(self.steps))
            self.rectangle()
            r = self.stack_axis
            rest = [d for d in self.outer if d != r]
            w.line(f"{loc['squares']} = ({loc['long']} + {loc['span']} - 1) // {loc['span']}")
            stacks = f" * {loc['stacks']}" if r is not None else ""
            if r is not None:
                w.line(f"{loc['stacks']} = ({self.extent(extents[r])} + {loc['stack']} - 1) // "
                       f"{loc['stack']}")
            w.line(f"{loc['n_squares']} = {self.points([extents[d] for d in rest])}{stacks} * "
                   f"{loc['squares']}")
            self.name_strides(loads_in + accesses)
            w.line(f"{loc['square']} = numba.int64(cuda.blockIdx.x)")
            with w.indented(f"while {loc['square']} < {loc['n_squares']}:"):
                self.corner(rest)
                w.line("# phase 1: the permuted loads into registers, then into the tile")
                self.square_offsets(loads_in)
                with self.each_point(1):
                    plain = [o for o in self.tiled if o not in loads_in]
                    for o in _index_slice(self.op.body, plain):
                        self.statement(o, shared=False)
                    for o in self.tiled:
                        self.early_load(o)
                with self.each_point(1):
                    for o in self.tiled:
                        w.line(f"{self.tiles[id(o)]}[{self.tile_word()}] = "
                               f"{self.early[id(o)]}[{loc['step']}]")
                w.line("cuda.syncthreads()")
                w.line("# phase 2: every point's other loads, then compute and store")
                self.square_offsets(accesses)
                if early:
                    with self.each_point(2):
                        for o in early:
                            self.early_load(o)
                with self.each_point(2):
                    self.block(self.op.body, top=False)
                w.line(f"{loc['square']} += cuda.gridDim.x")
                with w.indented(f"if {loc['square']} < {loc['n_squares']}:"):
                    w.line("cuda.syncthreads()  # the next rectangle refills the tile")
        return w.text()

    def rectangle(self) -> None:
        """The run-time shape of a rectangle (which side is short, its row length in the
        tile, the long side's values ``span``, the rectangles ``stack``ed along the stack
        axis, its points ``area``) and each phase's walk: phase 1 takes rows of A (A
        fastest, then B, then the stack axis), phase 2 rows of B; the thread's first
        point and what a step adds, as (major, middle, minor)."""
        w, loc = self.w, self.local
        extents = self.op.extent_list
        size_a, size_b = (self.extent(extents[d]) for d in self.op["tile_axes"])
        w.line(f"{loc['short_b']} = {size_b} <= {size_a}  # B the short side (else A)")
        w.line(f"{loc['short']} = {size_b} if {loc['short_b']} else {size_a}")
        w.line(f"{loc['long']} = {size_a} if {loc['short_b']} else {size_b}")
        w.line(f"{loc['rowlen']} = {loc['short']} | 1  # odd: a warp's accesses on 32 banks")
        w.line(f"{loc['span']} = min({self.points_} // {loc['short']}, {loc['long']})")
        if self.stack_axis is None:
            w.line(f"{loc['stack']} = 1")
        else:
            w.line(f"{loc['stack']} = max(1, min({self.points_} // ({loc['span']} * "
                   f"{loc['short']}), {self.extent(extents[self.stack_axis])}))"
                   f"  # whole long sides: several")
        w.line(f"{loc['area']} = {loc['stack']} * {loc['span']} * {loc['short']}")
        w.line("# the tile word of (a, b, r): (r * span + the long side's index) * rowlen + "
               "the short side's")
        w.line(f"{loc['ra']}, {loc['rb']} = ({loc['rowlen']}, 1) if {loc['short_b']} else "
               f"(1, {loc['rowlen']})")
        w.line(f"{loc['rr']} = {loc['span']} * {loc['rowlen']}")
        w.line("# the walks in 32 bits (values under a rectangle's points): fewer registers")
        w.line(f"{loc['ea']} = numba.int32({loc['span']} if {loc['short_b']} else {loc['short']})"
               "  # a rectangle's extent along A")
        w.line(f"{loc['eb']} = numba.int32({loc['short']} if {loc['short_b']} else {loc['span']})"
               "  # and along B")
        w.line(f"{loc['t']} = cuda.threadIdx.x")
        for p, (fast, other) in ((1, ("ea", "eb")), (2, ("eb", "ea"))):
            plane = f"{loc[fast]} * {loc[other]}"
            for start, total in (("", loc["t"]), ("d", str(self.threads))):
                major, middle, minor = (loc[f"{start}{k}{p}"] for k in ("major", "middle", "minor"))
                w.line(f"{major}, {middle} = divmod({total}, {plane})")
                w.line(f"{middle}, {minor} = divmod({middle}, {loc[fast]})")
                w.line(f"{major}, {middle}, {minor} = numba.int32({major}), "
                       f"numba.int32({middle}), numba.int32({minor})")

    def corner(self, rest: list[int]) -> None:
        """The rectangle's corner: the other axes' indices, a0, b0 and the stack's r0."""
        w, loc = self.w, self.local
        args, extents = self.op.body.args, self.op.extent_list
        self.helpers.add("_divmod_index")
        w.line(f"{loc['outer']}, {loc['corner']} = _divmod_index({loc['square']}, "
               f"{loc['squares']})")
        if self.stack_axis is not None:
            w.line(f"{loc['outer']}, {loc['r0']} = _divmod_index({loc['outer']}, {loc['stacks']})")
            w.line(f"{loc['r0']} = {loc['r0']} * {loc['stack']}")
        self.unravel_into(loc["outer"], [args[d] for d in rest], [extents[d] for d in rest])
        w.line(f"{loc['corner']} = {loc['corner']} * {loc['span']}")
        w.line(f"{loc['a0']} = {loc['corner']} if {loc['short_b']} else 0")
        w.line(f"{loc['b0']} = 0 if {loc['short_b']} else {loc['corner']}")
        size_a, size_b = (self.extent(extents[d]) for d in self.op["tile_axes"])
        w.line(f"{loc['lim_a']} = numba.int32(min({loc['ea']}, {size_a} - {loc['a0']}))"
               "  # points from the corner that exist")
        w.line(f"{loc['lim_b']} = numba.int32(min({loc['eb']}, {size_b} - {loc['b0']}))")
        if self.stack_axis is not None:
            w.line(f"{loc['lim_r']} = numba.int32(min({loc['stack']}, "
                   f"{self.extent(extents[self.stack_axis])} - {loc['r0']}))")

    @contextmanager
    def each_point(self, phase: int):
        """The thread's steps of the rectangle, at points that exist: (a, b, r) from the
        corner walks the phase's rows (A fastest in phase 1, B in phase 2), THREADS
        points a step."""
        w, loc = self.w, self.local
        a, b = self.op["tile_axes"]
        args = self.op.body.args
        major, middle, minor = loc["major"], loc["middle"], loc["minor"]
        self.at = {a: minor, b: middle} if phase == 1 else {a: middle, b: minor}
        corners = {a: loc["a0"], b: loc["b0"]}
        if self.stack_axis is not None:
            self.at[self.stack_axis], corners[self.stack_axis] = major, loc["r0"]
        start = [loc[f"{k}{phase}"] for k in ("major", "middle", "minor")]
        fresh = loc["fresh"]
        if self.target == "cuda":  # each walk its own: the module doc
            w.line(f"{fresh} = numba.int32(cuda.activemask() == 0)  # never")
        else:  # the simulator has no activemask (and no LLVM to hoist)
            w.line(f"{fresh} = numba.int32(0)")
        w.line(f"{major}, {middle}, {minor} = " +
               ", ".join(f"numba.int32({v} + {fresh})" for v in start))
        fast, other = (loc["ea"], loc["eb"]) if phase == 1 else (loc["eb"], loc["ea"])
        with w.indented(f"for {loc['step']} in range({self.steps}):"):
            tests = [f"{loc['t']} + {loc['step']} * {self.threads} < {loc['area']}"]
            limits = {a: loc["lim_a"], b: loc["lim_b"], self.stack_axis: loc["lim_r"]}
            for axis, at in self.at.items():
                index = self.define(args[axis], f"i{axis}")
                w.line(f"{index} = {corners[axis]} + {at}")
                tests.append(f"{at} < {limits[axis]}")
            with w.indented(f"if {' and '.join(tests)}:"):
                yield
            for name, step, limit, carry in ((minor, "dminor", fast, middle),
                                             (middle, "dmiddle", other, major)):
                w.line(f"{name} = numba.int32({name} + {loc[f'{step}{phase}']})")
                with w.indented(f"if {name} >= {limit}:"):
                    w.line(f"{name} = numba.int32({name} - {limit})")
                    w.line(f"{carry} = numba.int32({carry} + 1)")
            if self.stack_axis is not None:
                w.line(f"{major} = numba.int32({major} + {loc[f'dmajor{phase}']})")

    def name_strides(self, accesses: list[Operation]) -> None:
        """Before the rectangles: a name for each stride along the walked axes that is a
        product (H*W of a merged axis, C*H*W), computed once; inline in each point's
        offset, ptxas spilled a register of the f16 NCHW -> NHWC kernel (64 registers,
        8 bytes of stack), where the named strides need none."""
        self.strides: dict[str, str] = {}
        axes = [*self.op["tile_axes"]] + ([self.stack_axis] if self.stack_axis is not None else [])
        for o in accesses:
            for axis in axes:
                stride = self.axis_stride(o, axis)
                if stride is not None and not stride.isidentifier() and not stride.isdigit() \
                        and stride not in self.strides:
                    self.strides[stride] = self.namer.fresh(f"stride{len(self.strides)}")
                    self.w.line(f"{self.strides[stride]} = "
                                f"{stride[1:-1] if _one_group(stride) else stride}")

    def square_offsets(self, accesses: list[Operation]) -> None:
        """Each access's offset at the rectangle's corner; at a point, plus its (a, b, r)
        times the access's strides along those axes."""
        a, b = self.op["tile_axes"]
        corner = {a: self.local["a0"], b: self.local["b0"]}
        if self.stack_axis is not None:
            corner[self.stack_axis] = self.local["r0"]
        self.offsets = {}
        for o in accesses:
            buf, indices, _ = self.flat_access(o)
            key = _key(buf, indices)
            if key in self.offsets:
                continue
            name = self.namer.fresh(f"{self.namer(buf)}_at")
            self.w.line(f"{name} = {OFFSET}({self.flat_offset(o, corner)})")
            strides = {axis: self.axis_stride(o, axis) for axis in corner}
            self.offsets[key] = (name, {axis: self.strides.get(v, v) for axis, v in strides.items()})

    def subscript(self, buf, indices) -> str:
        found = self.offsets.get(_key(buf, indices))
        if found is None:
            return f"{self.namer(buf)}[{self.index(indices)}]"
        terms = [self.at[axis] if stride == "1" else f"{self.at[axis]} * {stride}"
                 for axis, stride in found[1].items() if stride is not None]
        delta = f" + {OFFSET}({' + '.join(terms)})" if terms else ""
        return f"{self.flat_views[id(buf)]}[{found[0]}{delta}]"

    def tile_word(self) -> str:
        loc = self.local
        a, b = self.op["tile_axes"]
        word = f"{self.at[a]} * {loc['ra']} + {self.at[b]} * {loc['rb']}"
        if self.stack_axis is not None:
            word = f"{self.at[self.stack_axis]} * {loc['rr']} + {word}"
        # unsigned: Numba wraps a signed index around (a test and an add per access)
        return f"numba.uint32({word})"

    def load_statement(self, op: Operation) -> None:
        if id(op) not in self.early:
            KernelEmitter.load_statement(self, op)
            return
        name = self.define(op.result, self.namer(op.operands[0]) + "_v")
        step = self.local["step"]
        if id(op) in self.tiles:
            self.w.line(f"{name} = {self.tiles[id(op)]}[{self.tile_word()}]")
        else:
            self.w.line(f"{name} = {self.early[id(op)]}[{step}]")


__all__ = ["THIN", "ThinTilesEmitter", "stack_axis", "thin_least", "thin_shape"]
