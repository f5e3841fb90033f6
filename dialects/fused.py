"""The fused dialect: kernels. A ``fused.kernel`` is one GPU launch: a parallel
iteration space whose body holds scalar ops in registers, loads from kernel
inputs, stores to kernel outputs, and explicit reductions (``loops.reduce``) and
inner loops (``loops.for``).

    fused.kernel {extents = [R], schedule = "row", sources = [...]} (%i: index) {
      %m = loops.reduce %ninf {combiner = "max", extent = C} : f32 (%k: index) {...}
      loops.for {extent = C} (%k: index) { ... loops.store ... }
    }

``schedule`` says how codegen maps the kernel:
- "pointwise": one thread per point of ``extents``; inner loops run sequentially in it.
- "row": one thread block per point of ``extents``; the reductions and loops at the
  top of the body are shared by the block's threads (block/warp reductions).
- "contraction": a sum of products (matmul, conv2d; see mlfuse/transforms/contraction.py):
  a block computes a tile of points, each thread a register block of them, from
  shared-memory tiles of the two operands; the rest of the body is the epilogue.
  The pass records its analysis beside it (``m_dims``, ``n_dims``, ``batch_dims``,
  ``a_operand``, ``variant``, ``split_k``: dialects/contraction.py), and codegen reads
  only that.
- "split-rows", "split-columns", "warp-rows": reductions split across blocks (few
  points, long reductions), over non-innermost axes, and over short rows; see
  mlfuse/transforms/fusion/schedules.py. A split-rows kernel whose reductions read a
  transpose of what they read otherwise walks ``split_tiles`` (two levels of its
  reduce nests) through shared-memory tiles (dialects/reductions.py ``nest_tiles``).
- "transpose-tiles": a loop-free kernel with loads whose fastest-varying index follows
  another axis than the kernel's innermost (a transpose): a block takes a tile of the
  two axes ``tile_axes`` (that axis, the innermost) and reads those loads through
  shared memory so both their reads and the stores are coalesced (dialects/permute.py).
  After coalesce-axes, neighbouring axes every access indexes together are one axis of
  their product (``coalesced``: the original extents of each axis; the old indices are
  its unravel, mlfuse/transforms/coalesce_axes.py).
- "strip-tiles": reductions that read some values along a reduced level K and the
  others along the innermost point axis P (``strip_tiles`` = [P, K]): a block per strip
  of neighbouring points walks squares of P and K, the former loads through shared
  tiles (dialects/reductions.py ``strip_tiles``).
- "strips": a block owns a strip of points (``strip``: "columns", neighbouring points;
  "rows", one point) and all of their reduced values, its threads also split the
  reduced axes: the reductions' results are on chip, so the loops after them (a
  broadcast-back epilogue over the reduced axes) run in the same kernel.
``sources`` names the tensor ops the kernel computes, for reports and comments.
"""
from __future__ import annotations

from mlfuse.ir.core import Attr, VerifyError
from mlfuse.ir.registry import Dialect

from mlfuse.dialects.loops import LoopOp

SCHEDULES = ("pointwise", "row", "contraction", "split-rows", "split-columns", "warp-rows",
             "transpose-tiles", "strips", "strip-tiles")

DIALECT = Dialect("fused", __doc__)


@DIALECT.op
class KernelOp(LoopOp):
    name = "fused.kernel"
    attrs = {"extents": Attr("dims"), "schedule": Attr("str", "pointwise"),
             "kernel_name": Attr("str", "kernel"), "sources": Attr("any", []),
             # a contraction's analysis, written by schedule-contractions (dialects/contraction.py)
             "m_dims": Attr("ints", []), "n_dims": Attr("ints", []), "batch_dims": Attr("ints", []),
             "a_operand": Attr("int", 0), "variant": Attr("str", ""),
             # transpose-tiles: the tiled axes (the permuted loads' axis, the innermost)
             "tile_axes": Attr("ints", []),
             # the original extents each axis stands for, where coalesce-axes merged
             # neighbouring ones (mlfuse/transforms/coalesce_axes.py)
             "coalesced": Attr("any", []),
             # the extents of the loop nests flatten-row-nests walks as one loop each
             # (mlfuse/transforms/flatten_row_nests.py): instance norm's [[H, W]]
             "flat_nests": Attr("any", []),
             "split_k": Attr("int", 1),
             # a strips kernel's points per block: "columns" (a strip of neighbouring
             # points) or "rows" (one point, its reduced values contiguous)
             "strip": Attr("str", ""),
             # a row kernel's twin for calls with few long rows: its rows split across
             # blocks in stages (codegen/split_stages.py), the host choosing per call
             "split_stages": Attr("int", 0),
             # a row kernel's twin for calls with short rows (a length known per call):
             # a group of lanes per row (codegen/short_rows.py), the host choosing per call
             "warp_rows": Attr("int", 0),
             # a warp-rows kernel whose stores along its points (a layernorm stored
             # transposed) go through a shared tile, a warp a row (codegen/staged_rows.py)
             "staged_rows": Attr("int", 0),
             # a split-rows kernel whose nests read values permuted along one reduced axis:
             # the first stage walks squares of that axis and the innermost reduced one
             # through shared-memory tiles (the levels' positions; codegen/split_tiles.py)
             "split_tiles": Attr("ints", []),
             # a strip-tiles kernel: its point axis P and the reduce nests' level K whose
             # squares it walks (codegen/schedule_strip_tiles.py)
             "strip_tiles": Attr("ints", [])}
    doc = "One GPU launch over a parallel iteration space."

    @classmethod
    def infer_types(cls, types, attributes):
        return []

    def verify_op(self):
        super().verify_op()
        if len(self.body.args) != len(self.extent_list):
            raise VerifyError("fused.kernel takes exactly one index per extent", self.loc)
        if self["schedule"] not in SCHEDULES:
            raise VerifyError(f"unknown schedule {self['schedule']!r}", self.loc)
        from mlfuse.dialects.loops import ParallelOp
        for op in self.walk():
            if op is not self and isinstance(op, (KernelOp, ParallelOp)):
                raise VerifyError(f"{op.name} cannot nest inside a kernel", op.loc)
