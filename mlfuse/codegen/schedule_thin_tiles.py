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
t once (its first point in either phase); a step adds THREADS' quotient and remainder
and carries. Offsets into flat views: the rectangle's corner once, plus a * stride_A +
b * stride_B a point.

Every rectangle puts a thread on the same points, so LLVM would hoist every step's
point, tile word and offsets out of the rectangle loop and keep them all in registers
(100 for 4 steps in NCHW -> NHWC, 84 without: 2 blocks of 256 an SM against 3). The
walk starts each rectangle at ``major + fresh``, ``fresh = cuda.activemask() == 0``:
never true (the block's threads all run the loop), but LLVM cannot know, so it walks
again instead (a few adds a step). (The simulator, which has no activemask, takes 0.)

The tile is a flat shared array of rows of ``short | 1`` values (long * rowlen + short
index): odd, so a warp walking the long side reads 32 banks, and a warp walking the short
side reads consecutive words where ``short`` is odd. span * rowlen <= P * 3 / 2.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.dialects.loops import LoadOp
from mlfuse.dialects.permute import tiled_loads
from mlfuse.ir.core import Operation

from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.scalar import COMPUTE_TYPE, SHARED_TYPE
from mlfuse.codegen.schedule_tiles import (OFFSET, SCALAR, TilesEmitter, _index_slice, _key,
                                           tile_shape)

THIN = "transpose-tiles-thin"
_DOC = ("Thin transpose tiles over [{space}]: the shorter of axes {a} and {b} whole, the "
        "other filling {points} points; loads along axis {a} go through shared memory, "
        "so loads and stores coalesce. {threads} threads, {steps} points each.")
SIMULATOR = (16, 4)  # (threads, steps) under the simulator: 64-point rectangles
_LOCALS = ("short_b", "short", "long", "rowlen", "span", "area", "squares", "corner", "ra",
           "rb", "n1", "n2", "major1", "minor1", "dmajor1", "dminor1", "major2", "minor2",
           "dmajor2", "dminor2", "major", "minor", "fresh")


def thin_shape(target: str, hw) -> tuple[int, int]:
    """(threads, steps) of the thin kernel: a rectangle holds threads x steps points."""
    if target != "cuda":
        return SIMULATOR
    return hw.transpose_thin_threads, hw.transpose_thin_steps


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
        self.flat_views, self.offsets, self.offset_steps = {}, {}, {}
        self.at = ("", "")  # the current point's (a, b) from the rectangle's corner

    def emit(self) -> str:
        w, loc = self.w, self.local
        args, extents = self.op.body.args, self.op.extent_list
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
            size_a, size_b = self.extent(extents[a]), self.extent(extents[b])
            self.rectangle(size_a, size_b)
            outer = [d for d in range(len(extents)) if d not in (a, b)]
            w.line(f"{loc['squares']} = ({loc['long']} + {loc['span']} - 1) // {loc['span']}")
            w.line(f"{loc['n_squares']} = {self.points([extents[d] for d in outer])} * "
                   f"{loc['squares']}")
            w.line(f"{loc['square']} = numba.int64(cuda.blockIdx.x)")
            with w.indented(f"while {loc['square']} < {loc['n_squares']}:"):
                self.helpers.add("_divmod_index")
                w.line(f"{loc['outer']}, {loc['corner']} = _divmod_index({loc['square']}, "
                       f"{loc['squares']})")
                self.unravel_into(loc["outer"], [args[d] for d in outer],
                                  [extents[d] for d in outer])
                w.line(f"{loc['corner']} = {loc['corner']} * {loc['span']}")
                if self.target == "cuda":
                    w.line(f"{loc['fresh']} = cuda.activemask() == 0  # never: the module doc")
                else:  # the simulator has no activemask (and no LLVM to hoist)
                    w.line(f"{loc['fresh']} = 0")
                w.line(f"{loc['a0']} = {loc['corner']} if {loc['short_b']} else 0")
                w.line(f"{loc['b0']} = 0 if {loc['short_b']} else {loc['corner']}")
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

    def rectangle(self, size_a: str, size_b: str) -> None:
        """The run-time shape of a rectangle (which side is short, its row length in the
        tile, the long side's values ``span``, its points ``area``) and each phase's
        walk: phase 1 takes rows of n1 values of A (A fastest), phase 2 rows of n2
        values of B; the thread's first point and what a step adds, as (major, minor)."""
        w, loc = self.w, self.local
        w.line(f"{loc['short_b']} = {size_b} <= {size_a}  # B the short side (else A)")
        w.line(f"{loc['short']} = {size_b} if {loc['short_b']} else {size_a}")
        w.line(f"{loc['long']} = {size_a} if {loc['short_b']} else {size_b}")
        w.line(f"{loc['rowlen']} = {loc['short']} | 1  # odd: a warp's accesses on 32 banks")
        w.line(f"{loc['span']} = min({self.points_} // {loc['short']}, {loc['long']})")
        w.line(f"{loc['area']} = {loc['span']} * {loc['short']}")
        w.line("# the tile word of (a, b): the long side's value * rowlen + the short side's")
        w.line(f"{loc['ra']}, {loc['rb']} = ({loc['rowlen']}, 1) if {loc['short_b']} else "
               f"(1, {loc['rowlen']})")
        w.line(f"{loc['t']} = cuda.threadIdx.x")
        for p, (fast, other) in ((1, ("span", "short")), (2, ("short", "span"))):
            n = loc[f"n{p}"]
            w.line(f"{n} = {loc[fast]} if {loc['short_b']} else {loc[other]}")
            w.line(f"{loc[f'major{p}']}, {loc[f'minor{p}']} = divmod({loc['t']}, {n})")
            w.line(f"{loc[f'dmajor{p}']}, {loc[f'dminor{p}']} = divmod({self.threads}, {n})")

    @contextmanager
    def each_point(self, phase: int):
        """The thread's steps of the rectangle, at points that exist: (a, b) from the
        corner walks the phase's rows (A fastest in phase 1, B in phase 2), THREADS
        points a step."""
        w, loc = self.w, self.local
        a, b = self.op["tile_axes"]
        args, extents = self.op.body.args, self.op.extent_list
        ia, ib = self.define(args[a], f"i{a}"), self.define(args[b], f"i{b}")
        major, minor, n = loc["major"], loc["minor"], loc[f"n{phase}"]
        pa, pb = (minor, major) if phase == 1 else (major, minor)
        self.at = (pa, pb)
        w.line(f"{major}, {minor} = {loc[f'major{phase}']} + {loc['fresh']}, {loc[f'minor{phase}']}")
        with w.indented(f"for {loc['step']} in range({self.steps}):"):
            w.line(f"{ia} = {loc['a0']} + {pa}")
            w.line(f"{ib} = {loc['b0']} + {pb}")
            with w.indented(f"if {loc['t']} + {loc['step']} * {self.threads} < {loc['area']} "
                            f"and {ia} < {self.extent(extents[a])} and "
                            f"{ib} < {self.extent(extents[b])}:"):
                yield
            w.line(f"{major} += {loc[f'dmajor{phase}']}")
            w.line(f"{minor} += {loc[f'dminor{phase}']}")
            with w.indented(f"if {minor} >= {n}:"):
                w.line(f"{minor} -= {n}")
                w.line(f"{major} += 1")

    def square_offsets(self, accesses: list[Operation]) -> None:
        """Each access's offset at the rectangle's corner; at a point, plus its (a, b)
        times the access's strides along A and B."""
        a, b = self.op["tile_axes"]
        corner = {a: self.local["a0"], b: self.local["b0"]}
        self.offsets = {}
        for o in accesses:
            buf, indices, _ = self.flat_access(o)
            key = _key(buf, indices)
            if key in self.offsets:
                continue
            name = self.namer.fresh(f"{self.namer(buf)}_at")
            self.w.line(f"{name} = {OFFSET}({self.flat_offset(o, corner)})")
            self.offsets[key] = (name, (self.axis_stride(o, a), self.axis_stride(o, b)))

    def subscript(self, buf, indices) -> str:
        found = self.offsets.get(_key(buf, indices))
        if found is None:
            return f"{self.namer(buf)}[{self.index(indices)}]"
        terms = [at if stride == "1" else f"{at} * {stride}"
                 for at, stride in zip(self.at, found[1]) if stride is not None]
        delta = f" + {OFFSET}({' + '.join(terms)})" if terms else ""
        return f"{self.flat_views[id(buf)]}[{found[0]}{delta}]"

    def tile_word(self) -> str:
        loc = self.local
        # unsigned: Numba wraps a signed index around (a test and an add per access)
        return f"numba.uint32({self.at[0]} * {loc['ra']} + {self.at[1]} * {loc['rb']})"

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


__all__ = ["THIN", "ThinTilesEmitter", "thin_least", "thin_shape"]
