"""How a tensor-core contraction's operands get into its shared-memory stages (emit_mma.py's
``MmaContractionEmitter``, and through it emit_tf32.py's): ``cp.async`` copies of 16, 8
or 4 bytes for an operand that is one plain load contiguous along the tile's fast axis,
else a gather value by value (see emit_mma's module doc).

The pipelined K loop (emit_mma's ``tile``) plans its copies once a tile (``copy_plan``):
where a thread's copy slots are evenly spaced (S_EVEN: THREADS a multiple of a row's
copies, so its slots share one column, S_ROWS rows apart, with one swizzle) a copy's
source is the first slot's flat offset + slot * a step + tile * a stage's step, its
stage offset an immediate, its bounds two compares; else each slot's offsets are held
in registers. Either way a stage's copy is an add, a compare and the cp.async
(``_cp_async_at``, a flat source offset), where the index tuple of ``copy_side`` costs
a multiply per dimension and the positions' 64-bit arithmetic each stage. This needs
the source offset linear in K (A: always, its flattened K is its trailing dims; B: one
K dim indexed by the K index itself) and, for evenly spaced slots of A, in M
(``k_stride``, ``m_stride``); else the stage is copied by ``copy_side``.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlfuse.codegen.simt_fetch import k_axis
from mlfuse.dialects.contraction import arg_deps


class StageCopies:
    """The operand copies of a tensor-core contraction emitter (a mixin of
    MmaContractionEmitter: it uses its writer, names and constants)."""

    def fetch_stage(self, k_tile: str, stage: str) -> None:
        """Tile ``k_tile`` of K into the stage at ``stage``: every copy checked against K
        (a tile past K fills zeros; no branch: in one basic block with the mma around
        them, which ptxas can then interleave with them)."""
        w, L = self.w, self.loc
        w.line(f"{L['stage']} = {stage}")
        w.line(f"{L['k0']} = {L['k_lo']} + ({k_tile}) * STAGE_K")
        for side in ("a", "b"):
            if self.vector_side(side) is None:
                self.gather_side(side)
                continue
            with w.indented(f"if VECTOR_{side.upper()}:  # rows of whole, aligned copies"):
                if self.k_stride(side) is not None:
                    self.copy_planned(side, k_tile)
                else:
                    self.copy_side(side)
            with w.indented("else:"):
                self.gather_side(side)

    def vector_side(self, side: str):
        """The operand's plain load of its own dtype (16-bit), which cp.async can copy 16
        bytes at a time (both targets: the simulator's twin checks the alignment the
        host promised)."""
        load = self.c.direct_load(side)
        return load if load is not None and load.operands[0].type.dtype == self.operand else None

    @contextmanager
    def thread_share(self, count: str, per_thread: str, first: str = ""):
        """A loop over this thread's items ``e`` = tid + slot * THREADS of the block's
        ``count``, at most ``per_thread`` of them: a constant trip count, so the loop
        unrolls and what does not depend on K is computed once; items past ``count`` (a
        thin tile has fewer than threads) are skipped. ``first``: the slots start there
        (``slot`` counts from 0 all the same)."""
        w, L = self.w, self.loc
        at = f"({first} + {L['slot']})" if first else L["slot"]
        with w.indented(f"for {L['slot']} in range({per_thread}):"), \
                w.indented(f"if {count} % THREADS == 0 or "
                           f"{L['tid']} + {at} * THREADS < {count}:"):
            w.line(f"{L['e']} = {L['tid']} + {at} * THREADS")
            yield

    def copy_side(self, side: str) -> None:
        """The side's tile as cp.async copies of S_VALUES values (S_BYTES bytes: 16, or 8
        or 4 where the rows allow no more); a copy past the sizes fills zeros (and
        _cp_async points it at the buffer's start: nothing is read). For a B whose
        source is not linear in K (no copy plan): each copy's index tuple a stage."""
        w, L, c, g = self.w, self.loc, self.c, self.group
        load = self.vector_side(side)
        s = side.upper()
        v = f"{s}_VALUES"
        if side == "a":  # BM rows of STAGE_K: groups along K
            per_row, own, own_size = f"STAGE_K // {v}", "m", L["m_size"]
        else:  # STAGE_K rows of BN: groups along N
            per_row, own, own_size = f"BN // {v}", "n", L["n_size"]
        with self.thread_share(f"{s}_CHUNKS", f"{s}_COPIES"):
            w.line(f"{L['i']}, {L['j']} = {L['e']} // ({per_row}), {L['e']} % ({per_row})")
            # the copy's first value along the row, in its 16-byte chunk of the stage
            chunk = f"{L['j']} * {v} // {g}"
            at = f"{self.stage_offset(side, L['i'], chunk)} + {L['j']} * {v} % {g}"
            if side == "a":
                w.line(f"{L['m']}, {L['k']} = {L['m0']} + {L['i']}, {L['k0']} + {L['j']} * {v}")
                at = f"{L['stage']} + {at}"
                w.line(f"{L['valid']} = {L['m']} < {own_size} and {L['k']} < {L['k_size']}")

            else:
                w.line(f"{L['k']}, {L['n']} = {L['k0']} + {L['i']}, {L['n0']} + {L['j']} * {v}")
                at = f"{L['stage']} + A_STAGE + {at}"
                w.line(f"{L['valid']} = {L['n']} < {own_size} and {L['k']} < {L['k_size']}")

            self.unravel_into(L[own], *self.dims(c.m_dims if side == "a" else c.n_dims))
            self.unravel_into(L["k"], self.k_vals, c.k_extents)
            self.slice_of(list(load.operands[1:]))
            index = ", ".join(self.namer(v) for v in load.operands[1:])
            w.line(f"_cp_async({L['tiles']}, {at}, {self.namer(load.operands[0])}, "
                   f"({index},), {L['valid']}, {s}_BYTES)")

    def copy_constants(self, swizzled: bool) -> None:
        """Whether a thread's copy slots are evenly spaced (S_EVEN, see ``copy_plan``):
        THREADS a multiple of a row's copies, and (``swizzled`` stages) S_ROWS a
        multiple of the rows one swizzle pattern spans."""
        w = self.w
        w.line("# a thread's copy slots, where THREADS is a multiple of a row's copies: one "
               "column, rows S_ROWS apart" + (", one swizzle" if swizzled else ""))
        w.line("A_ROW_COPIES, B_ROW_COPIES = STAGE_K // A_VALUES, BN // B_VALUES")
        w.line("A_ROWS, B_ROWS = THREADS // A_ROW_COPIES, THREADS // B_ROW_COPIES")
        for side in ("a", "b"):
            s = side.upper()
            if side == "a" and self.vector_side(side) is not None and self.m_stride() is None:
                w.line(f"{s}_EVEN = False  # A's rows are not evenly spaced in memory")
                continue
            swizzle = f" and {s}_ROWS % ({s}_LINE * ({s}_MASK + 1)) == 0" if swizzled else ""
            w.line(f"{s}_EVEN = THREADS % {s}_ROW_COPIES == 0{swizzle}")

    def copy_plans(self) -> None:
        """The copy plan of each side copied by ``_cp_async_at`` (``copy_plan``)."""
        for side in ("a", "b"):
            if self.vector_side(side) is not None and self.k_stride(side) is not None:
                with self.w.indented(f"if VECTOR_{side.upper()}:"):
                    self.copy_plan(side)

    def k_stride(self, side: str) -> str | None:
        """How far apart (in values) the operand's consecutive K positions lie, when its
        source offset is linear in K: A's flattened K is its trailing dims (always); B's
        K one dim indexed by the K index itself (B[.., k, .., n]), no other index
        depending on it. None: B's K is not (several K dims, or a computed index)."""
        load = self.vector_side(side)
        if side == "a":
            return "1"
        pos = k_axis(load, [r.body.args[0] for r in self.c.reduces])
        if pos is None:
            return None
        array, rank = self.namer(load.operands[0]), len(load.operands) - 1
        return " * ".join(f"{array}.shape[{d}]" for d in range(pos + 1, rank))

    def m_stride(self) -> str | None:
        """How far apart A's consecutive rows (M positions) lie, when one M dim indexes it
        directly (A[.., m, .., k]) and no other index depends on it; else None."""
        load = self.vector_side("a")
        if len(self.c.m_dims) != 1:
            return None
        m = self.dims(self.c.m_dims)[0][0]
        lead = list(load.operands[1:len(load.operands) - len(self.c.reduces)])
        if sum(v is m for v in lead) != 1 or any(
                m in arg_deps(v) for v in lead if v is not m):
            return None
        array, rank = self.namer(load.operands[0]), len(load.operands) - 1
        pos = next(d for d, v in enumerate(lead) if v is m)
        return " * ".join(f"{array}.shape[{d}]" for d in range(pos + 1, rank))

    def copy_plan(self, side: str) -> None:
        """Once a tile (not a stage), where this thread's copies of the side start. With
        evenly spaced slots (S_EVEN: one column, rows S_ROWS apart, one swizzle) the
        first slot's source offset, stage offset and limits, and the source's step from
        a slot to the next: a stage's copy is then an add, a compare and the cp.async,
        its stage offset an immediate. Else each slot's (``copy_plan_slots``)."""
        w, L = self.w, self.loc
        s = side.upper()
        name = {n: L[f"{side}_{n}"] for n in ("step", "src0", "dst0", "lim0", "jump", "own")}.get
        w.line(f"# {s}'s copies: where they start, once a tile")
        w.line(f"{name('step')} = STAGE_K * {self.k_stride(side)}  # the source's step a stage")
        with w.indented(f"if {s}_EVEN:"):
            w.line(f"{L['slot']} = 0")
            self.plan_slot(side, L["slot"], f"{name('src0')}, {name('dst0')}, {name('lim0')}",
                           even=True)
            jump = self.m_stride() if side == "a" else self.k_stride(side)
            w.line(f"{name('jump')} = {s}_ROWS * {jump}  # the source's step a slot")
            if side == "a":  # the slots' rows: inside M while slot * A_ROWS < this
                w.line(f"{name('own')} = {L['m_size']} - {L['m']}")
        with w.indented("else:"):
            self.copy_plan_slots(side)

    def plan_slot(self, side: str, slot: str, into: str, even: bool = False) -> None:
        """Copy slot ``slot``'s source offset (the flat index of its first value at this
        block's first K), stage offset and K limit (a stage's K from the block's first
        keeps the copy inside K while below it; -1 where its row or column is past the
        sizes; A_EVEN: K only) into the three names ``into``."""
        w, L, c, g = self.w, self.loc, self.c, self.group
        load = self.vector_side(side)
        s = side.upper()
        v = f"{s}_VALUES"
        w.line(f"{L['e']} = {L['tid']} + {slot} * THREADS")
        w.line(f"{L['i']}, {L['j']} = {L['e']} // {s}_ROW_COPIES, {L['e']} % {s}_ROW_COPIES")
        chunk = f"{L['j']} * {v} // {g}"
        at = f"{self.stage_offset(side, L['i'], chunk)} + {L['j']} * {v} % {g}"
        if side == "a":
            w.line(f"{L['m']}, {L['k']} = {L['m0']} + {L['i']}, {L['k_lo']} + {L['j']} * {v}")
            own, own_size, dims = "m", L["m_size"], c.m_dims
            inside = "True" if even else f"{L['m']} < {own_size}"
        else:
            w.line(f"{L['k']}, {L['n']} = {L['k_lo']} + {L['i']}, {L['n0']} + {L['j']} * {v}")
            own, own_size, dims = "n", L["n_size"], c.n_dims
            inside = f"{L['n']} < {own_size}"
            at = f"A_STAGE + {at}"
        self.unravel_into(L[own], *self.dims(dims))
        self.unravel_into(L["k"], self.k_vals, c.k_extents)
        self.slice_of(list(load.operands[1:]))
        array = self.namer(load.operands[0])
        flat = self.namer(load.operands[1])
        for d, index in enumerate(load.operands[2:], start=1):
            flat = f"({flat}) * {array}.shape[{d}] + {self.namer(index)}"
        limit = f"{L['k_size']} - {L['k']}" + ("" if inside == "True" else f" if {inside} else -1")
        w.line(f"{into} = ({flat}, {at}, {limit})")

    def copy_plan_slots(self, side: str) -> None:
        """Each copy slot's source offset, stage offset and K limit (``plan_slot``), in
        local arrays (registers: their indices are constants once the loops unroll)."""
        w, L = self.w, self.loc
        s = side.upper()
        src, dst, lim = (L[f"{side}_{n}"] for n in ("src", "dst", "lim"))
        w.line(f"{src} = cuda.local.array({s}_COPIES, numba.int64)")
        w.line(f"{dst} = cuda.local.array({s}_COPIES, numba.int32)  # (32 bits: fewer registers)")
        w.line(f"{lim} = cuda.local.array({s}_COPIES, numba.int32)")
        with w.indented(f"for {L['slot']} in range({s}_COPIES):"):
            self.plan_slot(side, L["slot"], ", ".join(f"{a}[{L['slot']}]" for a in (src, dst, lim)))

    def copy_planned(self, side: str, k_tile: str) -> None:
        """The side's copies of tile ``k_tile`` by its plan (``copy_plan``)."""
        w, L = self.w, self.loc
        s = side.upper()
        load = self.vector_side(side)
        src, dst, lim = (L[f"{side}_{n}"] for n in ("src", "dst", "lim"))
        array, slot = self.namer(load.operands[0]), L["slot"]
        w.line(f"{L['kk']} = ({k_tile}) * STAGE_K  # the tile's K, from this block's first")
        moved = f"({k_tile}) * {L[side + '_step']}"
        for even in (True, False):
            with w.indented("if " + ("" if even else "not ") + f"{s}_EVEN:"), \
                    w.indented(f"for {slot} in range({s}_COPIES):"), \
                    w.indented(f"if {s}_CHUNKS % THREADS == 0 or "
                               f"{L['tid']} + {slot} * THREADS < {s}_CHUNKS:"):
                if not even:
                    w.line(f"_cp_async_at({L['tiles']}, {L['stage']} + {dst}[{slot}], {array}, "
                           f"{src}[{slot}] + {moved}, {L['kk']} < {lim}[{slot}], {s}_BYTES)")
                    continue
                src0, dst0, lim0 = (L[f"{side}_{n}0"] for n in ("src", "dst", "lim"))
                valid = (f"{L['kk']} < {lim0} and {slot} * A_ROWS < {L['a_own']}" if side == "a"
                         else f"{L['kk']} + {slot} * B_ROWS < {lim0}")
                w.line(f"_cp_async_at({L['tiles']}, {L['stage']} + {dst0} + {slot} * ({s}_ROWS * "
                       f"{s}_STRIDE), {array}, {src0} + {slot} * {L[side + '_jump']} + {moved}, "
                       f"{valid}, {s}_BYTES)")

    def gather_side(self, side: str) -> None:
        """The side's tile value by value (consecutive threads on the tile's fast axis),
        rounded to the operand dtype by the store into the stage; zeros past the sizes."""
        w, L, c = self.w, self.loc, self.c
        value = c.a if side == "a" else c.b
        if side == "a":
            count, fast = "BM * STAGE_K", "STAGE_K"
        else:
            count, fast = "STAGE_K * BN", "BN"
        g = self.group
        base = f"{L['stage']}" if side == "a" else f"{L['stage']} + A_STAGE"
        at = (f"{base} + {self.stage_offset(side, L['i'], L['j'] + ' // ' + str(g))}"
              f" + {L['j']} % {g}")
        own = "m" if side == "a" else "n"
        per = f"-(-{count} // THREADS)"
        held = [self.namer.fresh(f"held{q}") for q in range(self.GATHER)]
        w.line("# GATHER values at a time, in registers: their loads all in flight before "
               "the first store")
        with w.indented(f"for {L['g0']} in range(0, {per}, GATHER):"):
            for phase in ("load", "store"):
                for q, h in enumerate(held):
                    slot = f"{L['g0']} + {q}"
                    if phase == "load":
                        w.line(f"{h} = {self.zero}")
                    with w.indented(f"if {slot} < {per} and ({count} % THREADS == 0 or "
                                    f"{L['tid']} + ({slot}) * THREADS < {count}):"):
                        w.line(f"{L['e']} = {L['tid']} + ({slot}) * THREADS")
                        w.line(f"{L['i']}, {L['j']} = {L['e']} // {fast}, {L['e']} % {fast}")
                        if phase == "store":
                            w.line(f"{L['tiles']}[{at}] = {self.stored(h, self.operand)}")
                            continue
                        if side == "a":
                            w.line(f"{L['m']}, {L['k']} = {L['m0']} + {L['i']}, "
                                   f"{L['k0']} + {L['j']}")
                        else:
                            w.line(f"{L['k']}, {L['n']} = {L['k0']} + {L['i']}, "
                                   f"{L['n0']} + {L['j']}")
                        with w.indented(f"if {L[own]} < {L[own + '_size']} and "
                                        f"{L['k']} < {L['k_size']}:"):
                            self.unravel_into(L[own], *self.dims(c.m_dims if side == "a"
                                                                 else c.n_dims))
                            self.unravel_into(L["k"], self.k_vals, c.k_extents)
                            self.slice_of([value])
                            w.line(f"{h} = {self.namer(value)}")


__all__ = ["StageCopies"]
