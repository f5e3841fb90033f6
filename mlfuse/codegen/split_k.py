"""Split-K's second kernel: a contraction whose K the host split across blocks
(contraction.py, emit_mma.py: each block of a tile sums a share of K into
``partials[share, point]``) is finished by ``<kernel>_finish``: a thread per output
point adds the point's shares in share order (the same bits on every run of the same
sizes and split: no atomics), then runs the epilogue (bias, activation, residual: the
ops after the reduction) and the single store, as the tiled kernel does when it does
not split. The host launches both (host.py ``contraction_launch``).

The workspace holds the accumulator's dtype: f32 (f16/bf16 contractions accumulate in
f32 too), or f64.
"""
from __future__ import annotations

from mlfuse.dialects.contraction import reduce_chain
from mlfuse.dialects.loops import StoreOp

from mlfuse.codegen.contraction import ContractionEmitter


def partial_dtype(op) -> str:
    """NumPy dtype name of a contraction's partial sums."""
    return "float64" if reduce_chain(op)[0].result.type.dtype == "f64" else "float32"


def finish_name(kernel_name: str) -> str:
    return f"{kernel_name}_finish"


class FinishEmitter(ContractionEmitter):
    """The second kernel of a split contraction (see the module doc)."""

    def emit(self) -> str:
        w, L, c = self.w, self.loc, self.c
        self.split = self.namer.fresh("splits")
        flat, total, part, start, stride = (self.namer.fresh(n) for n in (
            "flat", "total", "share", "start", "stride"))
        doc = ("Split-K, second stage: a thread per output point adds its partial sums\n"
               "    in share order, then runs the ops after the reduction and stores.")
        with self.kernel_def([L["partials"], self.split], doc=doc):
            m_ext, n_ext = self.dims(c.m_dims)[1], self.dims(c.n_dims)[1]
            w.line(f"{L['m_size']} = {self.points(m_ext)}")
            w.line(f"{L['n_size']} = {self.points(n_ext)}")
            w.line(f"{total} = {self.points(self.op.extent_list)}")
            w.line(f"{start} = numba.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x")
            w.line(f"{stride} = numba.int64(cuda.gridDim.x) * cuda.blockDim.x")
            with w.indented(f"for {flat} in range({start}, {total}, {stride}):"):
                b_vals, b_ext = self.dims(c.batch_dims)
                if b_vals:
                    w.line(f"{L['batch']}, {L['i']} = divmod({flat}, {L['m_size']} * "
                           f"{L['n_size']})")
                    self.unravel_into(L["batch"], b_vals, b_ext)
                else:
                    w.line(f"{L['i']} = {flat}")
                w.line(f"{L['m']}, {L['n']} = divmod({L['i']}, {L['n_size']})")
                w.line(f"{L['value']} = {L['partials']}[0, {flat}]")
                with w.indented(f"for {part} in range(1, {self.split}):"):
                    w.line(f"{L['value']} += {L['partials']}[{part}, {flat}]")
                self.finish_point([o for o in self.op.body.ops if isinstance(o, StoreOp)])
        return self.w.text()

    def staged_accumulator(self) -> str:
        return self.loc["value"]


def emit_finish(op, name: str, target: str, helpers: set[str], hw, taken) -> str:
    """The source of the second kernel ``name`` of the split contraction ``op``."""
    return FinishEmitter(op, name, target, helpers, hw, taken).emit()


__all__ = ["emit_finish", "finish_name", "partial_dtype"]
