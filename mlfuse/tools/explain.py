"""Fusion reports: what was fused, what was not and why, and what it saves.

Runs ``no-fuse`` and ``fuse`` on copies of one loops-level module and compares
kernels, bytes moved and intermediate buffers (sizes from ``--dim``; unbound
symbolic dims count as the target's default size).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from mlfuse.codegen.abi import is_tiled_kernel
from mlfuse.dialects import parse_ir
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import AllocOp, ForOp, ReduceOp
from mlfuse.hardware import Target, get_target
from mlfuse.ir.builtin import FuncOp, ModuleOp
from mlfuse.ir.printer import print_ir
from mlfuse.ir.types import product_dim
from mlfuse.matmul_precision import MEANING, check_matmul_precision
from mlfuse.runtime.kernel_cache import cache_stats
from mlfuse.transforms.coalesce_axes import CoalesceAxes
from mlfuse.transforms.contraction import ScheduleContractionsPass
from mlfuse.transforms.flatten_column_nests import FlattenColumnNests, over_columns
from mlfuse.transforms.flatten_row_nests import FlattenRowNests
from mlfuse.transforms.fusion.cost import buffer_bytes, kernel_cost, resolve
from mlfuse.transforms.fusion.fuse import FusePass, NoFusePass
from mlfuse.transforms.fusion.schedules import choose_schedule


@dataclass
class KernelReport:
    name: str
    schedule: str
    extents: list
    sources: list
    bytes: int
    flops: int
    registers_estimate: int
    estimated_us: float
    registers: int | None = None       # from the real compile, when there was one
    local_memory_bytes: int | None = None
    shared_memory_bytes: int | None = None
    schedule_reason: str = ""          # why this schedule (mlfuse/transforms/fusion/schedules.py)
    disk_cache: str | None = None      # "hit" or "miss": the kernel came from the disk cache
    variant: str = ""                  # a contraction's: how it multiplies (simt, mma-tf32x3, ...)


@dataclass
class FunctionReport:
    func: str
    kernels_before: int
    kernels_after: int
    bytes_before: int
    bytes_after: int
    intermediates_before: int
    intermediates_after: int
    intermediate_bytes_before: int
    intermediate_bytes_after: int
    estimated_us_before: float
    estimated_us_after: float
    kernels: list[KernelReport] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    dims: dict = field(default_factory=dict)  # the symbolic sizes the numbers assume
    rewrites: list[str] = field(default_factory=list)  # the tensor passes' (split-reductions)
    groups: dict[str, str] = field(default_factory=dict)  # op name -> kernel (for --dot)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["kernels"] = [dict(k.__dict__) for k in self.kernels]
        d.pop("groups")
        d.pop("edges")
        return d


def _intermediates(func: FuncOp, dims, target) -> tuple[int, int]:
    returned = {id(v) for v in func.return_op.operands}
    bufs = [op.result for op in func.body.ops if isinstance(op, AllocOp) and id(op.result) not in returned]
    return len(bufs), sum(buffer_bytes(b.type, dims, target) for b in bufs)


def _kernels(func: FuncOp) -> list[KernelOp]:
    return [op for op in func.body.ops if isinstance(op, KernelOp)]


def _schedule_reason(kernel: KernelOp, dims, target) -> str:
    """Why a kernel with reductions, transpose tiles or a contraction runs as it does
    ("" for the others: nothing to choose)."""
    if kernel["schedule"] == "contraction":
        return contraction_reason(kernel, dims, target)
    if kernel["schedule"] == "pointwise" and not any(
            isinstance(o, (ReduceOp, ForOp)) for o in kernel.body.ops):
        return ""
    reason = choose_schedule(kernel, dims, target).reason
    nests = kernel.attributes.get("flat_nests") or []
    if nests:  # flatten-row-nests or flatten-column-nests walked them as one loop each
        walked = "; ".join(f"{', '.join(map(str, e))} walked as one loop of {product_dim(e)}"
                           for e in nests)
        by = "flatten-column-nests" if over_columns(kernel) else "flatten-row-nests"
        reason = f"{walked} ({by}); {reason}"
    return reason


def contraction_reason(kernel: KernelOp, dims, target) -> str:
    """The tile and K split the host's model picks for a contraction at these sizes
    (mlfuse/codegen/tile_model.py), with the numbers behind it."""
    from mlfuse.codegen.contraction import tile_model_inputs
    from mlfuse.codegen.tile_model import _contraction_plan
    from mlfuse.dialects.contraction import contraction_of
    c = contraction_of(kernel)
    extents = kernel.extent_list

    def size(ds):
        return math.prod(resolve(d, dims, target) for d in ds)
    m, n = size(extents[d] for d in c.m_dims), size(extents[d] for d in c.n_dims)
    k, batch = size(c.k_extents), size(extents[d] for d in c.batch_dims)
    model = tile_model_inputs(kernel)
    (bm, bn, splits), us, why = _contraction_plan(
        model["tiles"], m, n, k, batch, target.sm_count, model["max_split"], model["k_step"],
        model["fma_per_us"], model["value_bytes"], model["step_us"], shape=model["shape"],
        gather=model["gather"], tile_rates=model["tile_rates"])
    split = (f"K split into {splits} shares (a second kernel adds them and runs the "
             "epilogue)" if splits > 1 else "K not split")
    variant = ("warpgroup MMA (wgmma)" if (bm, bn) in model["tile_rates"] else
               "tensor cores" if c.variant.startswith("mma") else "SIMT")
    return (f"{variant} tiles of {bm}x{bn}, {split}, for (m, n, k, batch) = "
            f"({m}, {n}, {k}, {batch}): about {us:.1f} us; {why}")


def _kernel_reports(func, dims, target) -> list[KernelReport]:
    out = []
    for k in _kernels(func):
        c = kernel_cost(k, dims, target)
        out.append(KernelReport(k["kernel_name"], k["schedule"], list(k["extents"]), list(k["sources"]),
                                c.bytes, c.flops, c.registers, round(c.seconds(target) * 1e6, 3),
                                schedule_reason=_schedule_reason(k, dims, target),
                                variant=k["variant"] if k["schedule"] == "contraction" else ""))
    return out


def explain_module(loops_module: ModuleOp, dims: dict | None = None, limit: int | None = None,
                   target: Target | None = None, matmul_precision: str | None = None,
                   rewrites: list[str] = ()) -> list[FunctionReport]:
    """``matmul_precision``: how f32 contractions multiply (mlfuse/matmul_precision.py).
    ``rewrites``: the tensor passes' remarks from lowering ``loops_module`` ("pass:
    @func: what"), each reported with its function."""
    from mlfuse.transforms.fusion.options import check_fuse_options
    check_fuse_options({"limit": limit})
    dims, target = dims or {}, target or get_target()
    text = print_ir(loops_module)
    base, fused = parse_ir(text), parse_ir(text)
    NoFusePass(dims=dims).run(base)
    fuse_pass = FusePass(limit=limit, dims=dims)
    fuse_pass.run(fused)
    for module in (base, fused):  # as the pipeline does: matmul and conv kernels are tiled,
        ScheduleContractionsPass(check_matmul_precision(matmul_precision)).run(module)
        CoalesceAxes(dims=dims).run(module)  # transpose tiles' axes merged where accesses allow
        FlattenRowNests(dims=dims).run(module)  # rows over several axes: warp-rows where short
        FlattenColumnNests(dims=dims).run(module)  # columns over several axes: column plans
    reports = []
    for bf, ff, plan in zip(base.funcs, fused.funcs, fuse_pass.plans):
        kb, kf = _kernel_reports(bf, dims, target), _kernel_reports(ff, dims, target)
        ib, ibb = _intermediates(bf, dims, target)
        ia, iab = _intermediates(ff, dims, target)
        report = FunctionReport(
            bf.sym_name, len(kb), len(kf), sum(k.bytes for k in kb), sum(k.bytes for k in kf),
            ib, ia, ibb, iab, round(sum(k.estimated_us for k in kb), 3),
            round(sum(k.estimated_us for k in kf), 3), kf,
            [d.as_dict() for d in plan.decisions],
            {d: dims.get(d, target.default_dim) for a in bf.args for d in a.type.shape
             if isinstance(d, str)})
        report.rewrites = [r.replace(f"@{bf.sym_name}: ", "", 1) for r in rewrites
                           if f": @{bf.sym_name}: " in r]
        for kernel_name, g in zip((k.name for k in kf), plan.groups):
            for n in g.members:
                report.groups.setdefault(n.name, kernel_name)
            for n in g.members:
                for p in n.reads:
                    if p.name_hint:
                        report.edges.append((p.name_hint, n.name))
        reports.append(report)
    return reports


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def format_text(reports: list[FunctionReport]) -> str:
    lines = []
    for r in reports:
        lines.append(f"func {r.func}" + (f"  (dims: {', '.join(f'{k}={v}' for k, v in r.dims.items())})"
                                          if r.dims else ""))
        lines.append(f"  kernels:       {r.kernels_before} -> {r.kernels_after}")
        lines.append(f"  bytes moved:   {_fmt_bytes(r.bytes_before)} -> {_fmt_bytes(r.bytes_after)}")
        lines.append(f"  intermediates: {r.intermediates_before} ({_fmt_bytes(r.intermediate_bytes_before)})"
                     f" -> {r.intermediates_after} ({_fmt_bytes(r.intermediate_bytes_after)})")
        lines.append(f"  estimated time: {r.estimated_us_before:.2f} us -> {r.estimated_us_after:.2f} us")
        for rewrite in r.rewrites:
            lines.append(f"  rewritten: {rewrite}")
        for k in r.kernels:
            regs = f"~{k.registers_estimate} live values"
            if k.registers is not None:
                regs += f"; compiled: {k.registers} registers, {k.local_memory_bytes} B local, " \
                        f"{k.shared_memory_bytes} B shared"
            if k.disk_cache is not None:
                regs += f"; disk cache {k.disk_cache}"
            lines.append(f"  kernel {k.name} [{k.schedule} over {k.extents}] ({regs}):")
            if k.schedule_reason:
                lines.append(f"    schedule: {k.schedule_reason}")
            if k.variant:
                lines.append(f"    multiplies: {k.variant} ({MEANING.get(k.variant, '')})")
            for s in k.sources:
                lines.append(f"    {s}")
        if r.decisions:
            lines.append("  decisions (producer -> consumers):")
        for d in r.decisions:
            lines.append(f"    {d['producer']} -> {', '.join(d['consumers'])}: {d['action']}: {d['reason']}")
        lines.append("")
    return "\n".join(lines)


def format_json(reports: list[FunctionReport]) -> str:
    return json.dumps({r.func: r.as_dict() for r in reports}, indent=2)


_COLORS = ["lightblue", "lightgoldenrod", "palegreen", "lightpink", "lightsalmon", "plum",
           "lightcyan", "khaki", "thistle", "wheat"]


def format_dot(reports: list[FunctionReport]) -> str:
    lines = ["digraph mlfuse {", "  node [shape=box, style=filled];"]
    for r in reports:
        kernels = list(dict.fromkeys(r.groups.values()))
        lines.append(f'  subgraph "cluster_{r.func}" {{')
        lines.append(f'    label="{r.func}: {r.kernels_before} -> {r.kernels_after} kernels";')
        for op, kernel in r.groups.items():
            color = _COLORS[kernels.index(kernel) % len(_COLORS)]
            lines.append(f'    "{r.func}.{op}" [label="{op}\\n{kernel}", fillcolor={color}];')
        for a, b in dict.fromkeys(r.edges):
            if a in r.groups:
                lines.append(f'    "{r.func}.{a}" -> "{r.func}.{b}";')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _one(value):
    """Numba answers per signature (a dict) or for the only one (a number)."""
    if isinstance(value, dict):
        return max(value.values()) if value else None
    return value


def _compiled_kernel(python_module, name: str):
    """The compiled kernel that ran for the kernel op ``name``: one of its variants
    (``name``, ``name_vector``, ``name_streaming``) or of a contraction's tile shapes,
    the last compiled; None if none ran."""
    ran = []
    for attr, value in vars(python_module).items():
        if attr != name and not attr.startswith(name + "_"):
            continue
        if is_tiled_kernel(value):  # a contraction: its tile configurations, in order
            ran += list(value.kernels.values())
        elif getattr(value, "overloads", None):
            ran.append(value)
    ran = [k for k in ran if getattr(k, "overloads", None)]
    return ran[-1] if ran else None


def attach_compiled_resources(reports: list[FunctionReport], python_module) -> None:
    """Fill each kernel's real registers, local memory (spills) and shared memory from
    the dispatchers of a module compiled and run on the GPU."""
    for r in reports:
        for k in r.kernels:
            dispatcher = _compiled_kernel(python_module, k.name)
            if dispatcher is None:
                continue
            k.registers = _one(dispatcher.get_regs_per_thread())
            k.local_memory_bytes = _one(dispatcher.get_local_mem_per_thread())
            k.shared_memory_bytes = _one(dispatcher.get_shared_mem_per_block())
            stats = cache_stats(dispatcher)
            if stats is not None and any(stats):
                k.disk_cache = "hit" if stats[0] and not stats[1] else "miss"
