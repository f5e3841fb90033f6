"""The transpose-tiles schedule's kernels and launch: which variants a kernel gets and
which one the host launches.

- the thin kernel (schedule_thin_tiles.py) where a tiled extent is short at run time
  (under half a square's side), unless both extents are known and long;
- else the vector kernel (schedule_tiles.py) where its vectors are whole and aligned
  (16-byte vectors: 4 f32 values, 8 f16 where every moved buffer is 16-bit);
- else the scalar square kernel.
"""
from __future__ import annotations

from mlfuse.codegen.kernel_code import KernelCode, kernel_interface
from mlfuse.codegen.schedule_thin_tiles import (THIN, ThinTilesEmitter, stack_axis, thin_least,
                                                thin_shape)
from mlfuse.codegen.schedule_tiles import SCALAR, VECTOR, TilesEmitter, tile_shape, vector_accesses
from mlfuse.codegen.vector import half_vectors, vector_buffers


def _vector_extents(op, width: int) -> list[str] | None:
    """The tiled extents the host must find ``width`` dividing (symbols); None where one
    is known not to (or is a product: no vector kernel)."""
    found = []
    for d in op["tile_axes"]:
        e = op.extent_list[d]
        if isinstance(e, int):
            if e % width:
                return None
        elif isinstance(e, str):
            found.append(e)
        else:
            return None
    return list(dict.fromkeys(found))


def _may_be_thin(op, least: int) -> bool:
    """Whether a tiled extent may be shorter than ``least`` (not both known and long)."""
    extents = [op.extent_list[d] for d in op["tile_axes"]]
    return not all(isinstance(e, int) and e >= least for e in extents)


def emit_tiles(op, name: str, target: str, helpers: set[str], names, hw) -> KernelCode:
    """The scalar kernel (named ``name``) and, where its loads allow, the vector one;
    the thin one where a tiled extent may be short."""
    moved = vector_accesses(op) if hw.vector_width > 1 else None
    halves = moved is not None and half_vectors(moved)
    lanes = 2 * hw.vector_width if halves else hw.vector_width
    extents = _vector_extents(op, lanes) if moved is not None else None
    variants = {SCALAR: name}
    if extents is not None:
        variants[VECTOR] = names.fresh(f"{name}_vector")
        helpers.add("_vector_access")
    if _may_be_thin(op, thin_least(target, hw)):
        variants[THIN] = names.fresh(f"{name}_thin")
    emitters = [ThinTilesEmitter(op, kname, target, helpers, hw, names.taken) if kind == THIN
                else TilesEmitter(op, kname, kind, target, helpers, hw, names.taken)
                for kind, kname in variants.items()]
    text = "\n\n".join(e.emit() for e in emitters)
    launch = {kind: tile_shape(target, hw, kind, halves)[:2] for kind in variants if kind != THIN}
    if THIN in variants:
        threads, steps = thin_shape(target, hw)
        launch[THIN] = (threads * steps, threads, thin_least(target, hw))
    return KernelCode(op, "transpose-tiles", kernel_interface(op), [], variants, text,
                      vector_buffers(moved) if extents is not None else [], extents or [],
                      launch=launch, vector_lanes="VECTOR_WIDTH_16" if halves else "VECTOR_WIDTH")


def tiles_launch(host, kernel, points: str, args: list[str]) -> None:
    """One block per square (or thin rectangle) of the tiled axes, up to MAX_BLOCKS
    (blocks stride over the rest)."""
    op = kernel.op
    a, b = op["tile_axes"]
    extents = op.extent_list
    outer = [host.dim(extents[d], op) for d in range(len(extents)) if d not in (a, b)]
    size_a, size_b = (host.dim(extents[d], op) for d in (a, b))
    calls = {}
    for kind, kname in kernel.variants.items():
        if kind != THIN:
            tile, threads = kernel.launch[kind]
            squares = [f"(({size} + {tile - 1}) // {tile})" for size in (size_a, size_b)]
            grid = f"min({' * '.join(outer + squares)}, MAX_BLOCKS), {threads}"
            calls[kind] = host.call(kname, grid, args)
    lines = host.vector_choice(kernel, calls, VECTOR)
    if THIN in kernel.variants:
        lines = _thin_launch(host, kernel, args, size_a, size_b) + (
            [f"el{lines[0]}"] + lines[1:] if lines[0].startswith("if ") else
            ["else:"] + [host.w.unit + line for line in lines])
    host.guarded(op, points, lines)


def _thin_launch(host, kernel, args: list[str], size_a: str, size_b: str) -> list[str]:
    """The thin kernel's launch where a tiled extent is short: as many blocks as it has
    rectangles (computed as the kernel does)."""
    op = kernel.op
    extents = op.extent_list
    points_, threads, least = kernel.launch[THIN]
    short, long_, span, stack = (host.namer.fresh(n) for n in ("short", "long", "span", "stack"))
    unit = host.w.unit
    lines = [f"{short}, {long_} = min({size_a}, {size_b}), max({size_a}, {size_b})",
             f"if {short} < {least}:  # a short side: thin rectangles, the short side whole",
             f"{unit}{span} = min({points_} // {short}, {long_})"]
    rectangles = [f"(({long_} + {span} - 1) // {span})"]
    r = stack_axis(op)
    if r is not None:  # whole long sides stacked along r (as the kernel works out)
        size_r = host.dim(extents[r], op)
        lines.append(f"{unit}{stack} = max(1, min({points_} // ({span} * {short}), {size_r}))")
        rectangles.insert(0, f"(({size_r} + {stack} - 1) // {stack})")
    others = [host.dim(extents[d], op) for d in range(len(extents))
              if d not in (*op["tile_axes"], r)]
    grid = f"min({' * '.join(others + rectangles)}, MAX_BLOCKS), {threads}"
    return lines + [unit + host.call(kernel.variants[THIN], grid, args)]


__all__ = ["emit_tiles", "tiles_launch"]
