"""Contractions: kernels that are a sum of products over a reduction space, such as
matmul and conv2d with whatever fused before and after them.

A ``fused.kernel`` is a contraction when its body is

    <ops computing from the kernel indices>            (e.g. conv's window origin)
    %acc = loops.reduce %zero {combiner = "add"} (%k0) {   (possibly nested: k0, k1, k2)
        <ops>  ...  loops.yield (arith.mul %a, %b)
    }
    <epilogue ops and stores using %acc>

where ``%a`` depends on some kernel indices and ``%b`` on others. Then the output
points split into an "M" side (indices only ``a`` reads), an "N" side (only ``b``)
and batch indices (both, or neither), and the reduction indices flatten into one K
axis: C[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n], where A and B are
whatever expressions ``a`` and ``b`` are (plain loads for matmul, a masked im2col
gather for conv, a prologue such as relu(x) fused into the operand). Codegen tiles
such a kernel (shared-memory tiles, a register block of outputs per thread) and
runs the epilogue on the accumulators before the single store.

The pass ``schedule-contractions`` marks such kernels ``schedule = "contraction"`` and
writes the parts into the kernel's attributes (dialects/contraction.py), which codegen
reads. f32/f64 sums are tiled on the SIMT cores ("simt"); f16 and bf16 ones on tensor
cores with f32 accumulation ("mma-f16", "mma-bf16"). The pass's ``precision`` option
(mlfuse/matmul_precision.py) moves f32 sums onto tensor cores: "high" as 3xTF32
("mma-tf32x3"), "medium" as TF32 ("mma-tf32"). Sums are reassociated (blocked over
K), as every tiled matmul does.
"""
from __future__ import annotations

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.contraction import MMA_VARIANTS, Contraction, write_contraction
from mlfuse.dialects.contraction import arg_deps as _arg_deps
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import ReduceOp, StoreOp, YieldOp
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.core import BlockArgument, Operation, Value
from mlfuse.ir.pass_manager import Pass
from mlfuse.ir.traits import PURE
from mlfuse.matmul_precision import DEFAULT, F32_VARIANT, check_matmul_precision


def _is_zero(value: Value) -> bool:
    op = getattr(value, "op", None)
    return isinstance(op, ConstantOp) and op["value"] == 0


def _pure(op: Operation) -> bool:
    return op.has_trait(PURE) and not op.regions


def _reduce_chain(top: ReduceOp) -> tuple[list[ReduceOp], Operation] | None:
    """The nested add-reduces from ``top`` inward, and the product the innermost
    yields; None unless each level holds pure ops and at most the next reduce,
    whose result it yields."""
    chain, r = [], top
    while True:
        if r["combiner"] != "add" or not _is_zero(r.operands[0]):
            return None
        chain.append(r)
        ops = r.body.ops
        inner = [o for o in ops[:-1] if isinstance(o, ReduceOp)]
        if any(not _pure(o) for o in ops[:-1] if not isinstance(o, ReduceOp)):
            return None
        yielded = ops[-1].operands[0]
        if not inner:
            product = getattr(yielded, "op", None)
            if product is None or product.name != "arith.mul" or product.parent is not r.body:
                return None
            return chain, product
        if len(inner) != 1 or yielded is not inner[0].result:
            return None
        r = inner[0]


def match_contraction(kernel: KernelOp, precision: str = DEFAULT) -> Contraction | None:
    """The contraction structure of ``kernel`` (see the module doc), or None; an f32
    sum's variant follows the matmul ``precision``."""
    if not isinstance(kernel, KernelOp) or kernel["schedule"] not in ("pointwise", "contraction"):
        return None
    body = kernel.body.ops
    reduces = [o for o in body if isinstance(o, ReduceOp)]
    if len(reduces) != 1:
        return None
    if any(not (_pure(o) or isinstance(o, (StoreOp, YieldOp, ReduceOp))) for o in body):
        return None
    found = _reduce_chain(reduces[0])
    if found is None:
        return None
    chain, product = found
    dtype = chain[0].result.type.dtype
    if dtype not in ("f32", "f64") and dtype not in MMA_VARIANTS:
        return None
    sides = _own_dims(kernel, product, {})
    if sides is None:
        return None
    (x, dx), (y, dy) = sides
    c = Contraction(kernel, chain, x, y, sorted(dx - dy), sorted(dy - dx),
                    sorted(set(range(len(kernel.body.args))) - (dx ^ dy)),
                    _variant(dtype, precision))
    return _orient(c)


def _own_dims(kernel: KernelOp, product: Operation, memo: dict):
    """((x, dims x reads), (y, dims y reads)) of the product's two factors, as positions in
    the kernel's extents; None unless each factor reads a dim the other does not (else
    one side is a row of values broadcast along the other's dims: a row reduction)."""
    kernel_args = list(kernel.body.args)
    x, y = product.operands
    dx = {kernel_args.index(a) for a in _arg_deps(x, memo) if a in kernel_args}
    dy = {kernel_args.index(a) for a in _arg_deps(y, memo) if a in kernel_args}
    if not (dx - dy) or not (dy - dx):
        return None
    return (x, dx), (y, dy)


def sums_of_products(kernel: KernelOp) -> list[ReduceOp]:
    """The kernel's top-level reductions that are contraction-like: an add-reduce (nest)
    of a product whose factors each read point dims of their own (a matmul's, a
    conv2d's). A kernel holding one of them, and nothing else that loops, is what
    ``match_contraction`` tiles; with two, no contraction kernel can take it and one
    thread per point walks both (the cost model prices that: fusion/reduction_cost.py)."""
    found, memo = [], {}
    for op in kernel.body.ops:
        chain = _reduce_chain(op) if isinstance(op, ReduceOp) else None
        if chain is not None and _own_dims(kernel, chain[1], memo) is not None:
            found.append(op)
    return found


def _variant(dtype: str, precision: str) -> str:
    """How a sum of ``dtype`` products is multiplied: 16-bit floats on tensor cores, f32
    as the matmul precision says, f64 on the SIMT cores."""
    if dtype in MMA_VARIANTS:
        return MMA_VARIANTS[dtype]
    return F32_VARIANT[precision] if dtype == "f32" else "simt"


def _orient(c: Contraction) -> Contraction:
    """Put the output's fastest-varying index on the N side: codegen's threads run
    fastest along N, so the stores (and the N-side tile reads) coalesce. For NCHW
    conv2d that makes the weights the M side and the im2col gather the N side."""
    stores = [o for o in c.kernel.body.ops if isinstance(o, StoreOp)]
    args = list(c.kernel.body.args)
    for store in stores:
        last = store.operands[-1] if len(store.operands) > 2 else None
        if isinstance(last, BlockArgument) and last in args and args.index(last) in c.m_dims:
            return Contraction(c.kernel, c.reduces, c.b, c.a, c.n_dims, c.m_dims, c.batch_dims,
                               c.variant)
    return c


class ScheduleContractionsPass(Pass):
    name = "schedule-contractions"
    doc = ("Mark kernels that are a sum of products (matmul, conv2d, with their fused "
           "prologues and epilogues) schedule = \"contraction\", for tiled codegen, and "
           "record the analysis (m_dims, n_dims, batch_dims, a_operand, variant: simt, or "
           "mma-f16 / mma-bf16 for tensor cores; f32 sums at precision=high: mma-tf32x3 "
           "(3xTF32), medium: mma-tf32) as the kernel's attributes.")

    def __init__(self, precision: str = DEFAULT):
        self.precision = check_matmul_precision(precision, "schedule-contractions precision")
        self._remarks: list[str] = []

    def run(self, module: ModuleOp) -> None:
        for func in module.funcs:
            for op in func.body.ops:
                if isinstance(op, KernelOp) and op["schedule"] == "pointwise":
                    c = match_contraction(op, self.precision)
                    if c is not None:
                        write_contraction(c)
                        dtype = c.acc.type.dtype
                        why = f" (matmul precision {self.precision})" if dtype == "f32" else ""
                        self._remarks.append(f"{op['kernel_name']}: {dtype} contraction, "
                                             f"variant {c.variant}{why}")

    def remarks(self) -> list[str]:
        return list(self._remarks)


__all__ = ["Contraction", "match_contraction", "sums_of_products", "ScheduleContractionsPass"]
