"""What an emitted kernel takes from its function and what the host needs to launch it:
a kernel op's interface (buffers, dim symbols, outer constants) and its KernelCode (the
kernels' text, their variants and the launch facts every schedule module fills in), with
the helpers that write a dim or an extent's factors as code."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.loops import DimOp, LoadOp, LoopOp, MaskedLoadOp, StoreOp
from mlfuse.errors import MlfuseError
from mlfuse.ir.core import Value
from mlfuse.ir.types import BufferType, dim_factors, is_quotient, symbols_of


@dataclass
class KernelInterface:
    """What a kernel takes from its function: buffers, dim symbols, outer constants."""

    buffers: list[Value] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    constants: list[Value] = field(default_factory=list)


def _add(items: list, item) -> None:
    if item not in items:
        items.append(item)


def kernel_interface(op: LoopOp) -> KernelInterface:
    """The values ``op`` uses from outside itself; raises on any it cannot take."""
    inner: set[int] = set()
    for o in op.walk():
        inner.update(id(r) for r in o.results)
        for region in o.regions:
            inner.update(id(a) for a in region.block.args)
    iface = KernelInterface()
    loaded, stored = [], []
    for o in op.walk():
        if isinstance(o, LoopOp):
            for s in kernel_symbols(o.extent_list):
                _add(iface.symbols, s)
        if isinstance(o, DimOp):
            _add(iface.symbols, o["sym"])
        if isinstance(o, (LoadOp, MaskedLoadOp)):
            _add(loaded, o.operands[0])
        if isinstance(o, StoreOp):
            _add(stored, o.operands[1])
        for v in o.operands:
            if id(v) in inner:
                continue
            owner = getattr(v, "op", None)
            if isinstance(v.type, BufferType):
                _add(iface.buffers, v)
            elif isinstance(owner, DimOp):
                _add(iface.symbols, owner["sym"])
            elif isinstance(owner, ConstantOp):
                _add(iface.constants, v)
            else:
                raise MlfuseError(f"codegen: a kernel cannot take a {v.type} computed by "
                                  f"{owner.name if owner else 'the function'} outside it", o.loc)
    both = [b for b in stored if b in loaded]
    if both:
        raise MlfuseError(f"codegen: a kernel reads buffer %{both[0].name_hint or '?'} that it "
                          "also writes; its threads would race", op.loc)
    return iface


def narrow_index_tests(host, op, points: str, row: str) -> list[str]:
    """The host's tests that every index of a row kernel's call fits 31 bits (every
    buffer, and the points by their row values, under 2**31 values): where they hold, a
    kernel whose index divisions are 32-bit only (``narrow_divisions``) may run."""
    tests = [f"{host.buffer_values(b)} < 2**31" for b in kernel_interface(op).buffers]
    return list(dict.fromkeys(tests + [f"({points}) * ({row}) < 2**31"]))


def kernel_symbols(extents) -> list[str]:
    """The sizes a kernel takes for ``extents``: each symbol of a product, and a
    quotient (C*H*W/8) whole, as the host computes and checks it."""
    return list(dict.fromkeys(s for e in extents
                              for s in ([e] if is_quotient(e) else symbols_of([e]))))


def extent_factors(extents, name_of) -> list[str]:
    """Factors of the number of points of ``extents``: the symbols' names (``name_of``;
    a product dim B*H gives both, a quotient is one name), then the product of the int
    factors unless it is 1; ``["1"]`` for no extents."""
    split = [(1, (e,)) if is_quotient(e) else dim_factors(e) for e in extents]
    const = math.prod(c for c, _ in split)
    factors = [name_of(s) for _, names in split for s in names]
    if const != 1 or not factors:
        factors.append(str(const))
    return factors


def dim_code(d, name_of) -> str:
    """A dim as code: the int, the symbol's name (``name_of``), or a product's
    parenthesized factors."""
    if isinstance(d, int):
        return str(d)
    factors = extent_factors([d], name_of)
    return factors[0] if len(factors) == 1 else f"({' * '.join(factors)})"


@dataclass
class KernelCode:
    """A kernel op's emitted kernels and what the host needs to launch them."""

    op: LoopOp
    schedule: str              # "pointwise" or "row"
    interface: KernelInterface
    row_extents: list          # extents of a row kernel's top-level reduces and fors
    variants: dict[str, str]   # pointwise: {"pointwise" or "pointwise-prefetch": name,
                               # maybe "pointwise-vector": name}; row: {"registers" (maybe
                               # with "registers-vector") and/or "streaming": name}
    text: str
    vector_buffers: list[Value] = field(default_factory=list)  # aligned for a vector variant
    vector_extents: list[str] = field(default_factory=list)  # symbols VECTOR_WIDTH divides
    # contraction: the operand sides ("a", "b") that may be read 16 bytes at a time, with
    # their buffers (the host checks sizes and alignment and tells the kernel)
    vector_sides: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)  # a schedule's own launch constants
    # lean pointwise kernels: the run-time divisors (tuples of extents) whose magic
    # numbers (multiplier, shift) follow the dims among the kernel's parameters
    divisors: list = field(default_factory=list)
    vector_lanes: str = "VECTOR_WIDTH"  # values per vector of the vector variant
    # the text in parts that may each share their code with another kernel's
    # (shared_code.py): a contraction's tiles, and split-K's second kernel; [] = [text]
    pieces: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return next(iter(self.variants.values()))


__all__ = ["KernelCode", "KernelInterface", "dim_code", "extent_factors", "kernel_interface",
           "kernel_symbols"]
