"""The SIMT contraction tile's epilogue (a mixin of contraction.py's
``ContractionEmitter``; the tensor-core emitters inherit it and say where their
accumulators are staged): the accumulators staged through shared memory half a tile at
a time, then read back with consecutive threads on consecutive N, so the ops after the
reduction (bias, activation, residual) run once per output and the stores coalesce.
Under SPLIT a block writes its share's partial sums instead, and split_k.py's second
kernel runs this same epilogue (``finish_point``) on their total.
"""
from __future__ import annotations

from contextlib import nullcontext

from mlfuse.dialects.loops import StoreOp


class TileEpilogue:
    """What a contraction kernel does with its accumulators (needs the emitter's
    ``w``, ``loc``, ``c``, ``op``, ``may_split``, ``copy4`` and ``statement``)."""

    def epilogue(self) -> None:
        """A_SPAN rows of the tile at a time (each thread's rows 4h..4h+3: all of them
        for TM = 4, half for TM = 8) into shared memory (a copy with constant register
        indices), then the block's threads walk them with consecutive threads on
        consecutive N (coalesced), run the ops after the reduction and store. The two
        passes are written out: a loop over them would keep all the accumulators live
        through the first pass's stores."""
        w, L = self.w, self.loc
        for h in (0, 1):
            w.line(f"# epilogue, {('first', 'second')[h]} A_SPAN rows of the tile: the fused "
                   "ops after the reduction")
            with w.indented("if TM == 8:  # a second pass: the other half of the rows") if h \
                    else nullcontext():
                w.line("cuda.syncthreads()  # the block is done with what the tiles held")
                with w.indented(f"for {L['i']} in range(4):"):
                    with w.indented(f"for {L['j']} in range(0, TN, 4):"):
                        at = (f"({L['row']} * 4 + {L['i']}) * BN + {L['col']} * 4 + "
                              f"({L['j']} // 4) * B_SPAN")
                        self.copy4(at, L["acc"], f"({L['i']} + {4 * h}) * TN + {L['j']}")
                w.line("cuda.syncthreads()")
                self.epilogue_half(h, "A_SPAN")
        w.line("cuda.syncthreads()  # all stores read the tiles before they are refilled")

    def staged_accumulator(self) -> str:
        """Where the epilogue reads the accumulator of element (i, j) of the staged half
        tile (``e`` = i * BN + j): the SIMT kernel stages it densely."""
        return f"{self.loc['tiles']}[{self.loc['e']}]"

    def epilogue_half(self, half: int, rows: str = "BM // 2") -> None:
        """Each thread takes elements of the staged ``rows`` rows of the tile in turn
        (coalesced; ``half``: the first or the next ``rows``), runs the epilogue on the
        accumulator and stores."""
        w, L = self.w, self.loc
        stores = [o for o in self.op.body.ops if isinstance(o, StoreOp)]
        with w.indented(f"for {L['e']} in range({L['tid']}, {rows} * BN, THREADS):"):
            w.line(f"{L['i']}, {L['j']} = divmod({L['e']}, BN)")
            offset = f" + {rows}" if half else ""
            w.line(f"{L['m']} = {L['m0']}{offset} + {L['i']}")
            w.line(f"{L['n']} = {L['n0']} + {L['j']}")
            with w.indented(f"if {L['m']} < {L['m_size']} and {L['n']} < {L['n_size']}:"):
                self.finish_or_partial(stores)

    def finish_or_partial(self, stores: list) -> None:
        """The output at (m, n) (inside the sizes): with SPLIT its partial sum, for the
        second kernel; else the epilogue and the stores (``finish_point``)."""
        w, L, c = self.w, self.loc, self.c
        if not self.may_split:
            self.finish_point(stores)
            return
        with w.indented("if SPLIT:  # a share of K: its partial sum, for the second kernel"):
            row = f"({L['batch']} * {L['m_size']} + {L['m']})" if c.batch_dims else L["m"]
            w.line(f"{L['partials']}[cuda.blockIdx.y, {row} * {L['n_size']} + "
                   f"{L['n']}] = {self.staged_accumulator()}")
        with w.indented("else:"):
            self.finish_point(stores)

    def finish_point(self, stores: list) -> None:
        """The epilogue of the output at (m, n) (and the batch index): the indices, the
        accumulator from where the tile staged it, the ops after the reduction, stores."""
        w, L, c = self.w, self.loc, self.c
        self.unravel_into(L["m"], *self.dims(c.m_dims))
        self.unravel_into(L["n"], *self.dims(c.n_dims))
        acc = self.define(c.acc, "acc_value")
        w.line(f"{acc} = {self.staged_accumulator()}")
        self.slice_of([v for s in stores for v in s.operands], stop=c.acc)
        for store in stores:
            self.statement(store, shared=False)


__all__ = ["TileEpilogue"]
