"""One ``@cuda.jit`` kernel per ``loops.parallel`` / ``fused.kernel``.

"pointwise": a 1-D grid-stride loop over the flat index of the iteration space
(int64, so spaces past 2**31 points do not overflow), unravelled into the loop
indices with divmod; inner reduces and fors run sequentially in the thread.

"row": one block per point (blocks stride over points). At the top of the body, a
``loops.reduce`` is split over the block's threads (each accumulates a strided part,
then a block reduction hands the result to every thread) and a ``loops.for`` strides
its threads over the extent; other top-level ops run redundantly in every thread
(cheap scalars), and top-level stores are done by thread 0 alone.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field

from dialects.arith import ConstantOp
from dialects.fused import KernelOp
from dialects.loops import DimOp, ForOp, LoadOp, LoopOp, MaskedLoadOp, ReduceOp, StoreOp, YieldOp
from mlfuse.errors import MlfuseError
from mlfuse.ir.core import Block, Operation, Value
from mlfuse.ir.types import BufferType

from .emit_scalar import COMPUTE_TYPE, SHARED_TYPE, combine, identity, literal, scalar_expression
from .helpers import SCRATCH_SLOTS, block_reduce_name
from .names import Namer
from .writer import Writer

# Locals every kernel may define; IR names are kept off them.
_KERNEL_LOCALS = ("n_points", "start", "stride", "flat", "point", "rest", "tid", "nthreads")


_SCHEDULE_DOC = {
    "pointwise": "Pointwise over [{space}]: one thread per point (grid-stride).",
    "row": "Row schedule over [{space}]: one block per point, its threads share the rows.",
}


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
            for e in o.extent_list:
                if isinstance(e, str):
                    _add(iface.symbols, e)
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


def extent_factors(extents, name_of) -> list[str]:
    """Factors of the number of points of ``extents``: the symbols' names (``name_of``),
    then the product of the int extents unless it is 1; ``["1"]`` for no extents."""
    const = math.prod(e for e in extents if isinstance(e, int))
    factors = [name_of(e) for e in extents if isinstance(e, str)]
    if const != 1 or not factors:
        factors.append(str(const))
    return factors


@dataclass
class KernelCode:
    name: str
    op: LoopOp
    schedule: str
    interface: KernelInterface
    row_extents: list          # extents of a row kernel's top-level reduces and fors
    text: str


def _sources(op: LoopOp) -> list[str]:
    if isinstance(op, KernelOp):
        return list(op["sources"])
    source = op.attributes.get("source")
    return [source] if source else []


class KernelEmitter:
    def __init__(self, op: LoopOp, name: str, target: str, helpers: set[str], taken=()):
        self.op, self.name, self.target, self.helpers = op, name, target, helpers
        self.schedule = op["schedule"] if isinstance(op, KernelOp) else "pointwise"
        self.iface = kernel_interface(op)
        self.namer = Namer(taken)
        self.local = {n: self.namer.fresh(n) for n in _KERNEL_LOCALS}
        self.w = Writer()
        self.scratch: dict[str, str] = {}  # compute type -> shared array name

    # -- small pieces ------------------------------------------------------------
    def extent(self, e) -> str:
        return str(e) if isinstance(e, int) else self.sym[e]

    def points(self, extents) -> str:
        """int64 product of ``extents``: flat indices stay exact past 2**31."""
        factors = extent_factors(extents, self.sym.get)
        return " * ".join([f"numba.int64({factors[0]})"] + factors[1:])

    def index(self, values) -> str:
        return ", ".join(self.namer(v) for v in values) if values else "()"

    def define(self, value: Value, fallback: str) -> str:
        return self.namer.define(value, fallback)

    # -- the kernel --------------------------------------------------------------
    def emit(self) -> KernelCode:
        iface, w = self.iface, self.w
        params = [self.define(b, "buf") for b in iface.buffers]
        self.sym = {s: self.namer.fresh(s) for s in iface.symbols}
        params += list(self.sym.values())
        row_tops = [o for o in self.op.body.ops if isinstance(o, (ReduceOp, ForOp))] \
            if self.schedule == "row" else []
        sources = _sources(self.op)
        for line in textwrap.wrap(f"sources: {', '.join(sources)}", 92) if sources else []:
            w.line(f"# {line}")
        w.line("@cuda.jit")
        with w.indented(f"def {self.name}({', '.join(params)}):"):
            space = ", ".join(map(str, self.op.extent_list))
            w.line(f'"""{_SCHEDULE_DOC[self.schedule].format(space=space)}"""')
            for c in iface.constants:
                w.line(f"{self.define(c, 'const')} = {literal(c.op['value'], c.type.dtype)}")
            if self.schedule == "row":
                self.row_body(row_tops)
            else:
                self.pointwise_body()
        return KernelCode(self.name, self.op, self.schedule, iface,
                          [o["extent"] for o in row_tops], w.text())

    def pointwise_body(self) -> None:
        w, loc = self.w, self.local
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        w.line(f"{loc['start']} = numba.int64(cuda.blockIdx.x) * cuda.blockDim.x "
               "+ cuda.threadIdx.x")
        w.line(f"{loc['stride']} = numba.int64(cuda.gridDim.x) * cuda.blockDim.x")
        with w.indented(f"for {loc['flat']} in range({loc['start']}, {loc['n_points']}, "
                        f"{loc['stride']}):"):
            self.unravel(loc["flat"])
            self.block(self.op.body, top=False)

    def row_body(self, row_tops: list[Operation]) -> None:
        w, loc = self.w, self.local
        w.line(f"{loc['tid']} = cuda.threadIdx.x")
        w.line(f"{loc['nthreads']} = cuda.blockDim.x")
        for o in row_tops:
            if isinstance(o, ReduceOp):
                ctype = COMPUTE_TYPE[o.result.type.dtype]
                if ctype not in SHARED_TYPE:
                    raise MlfuseError(f"codegen: no block reduction of {o.result.type}", o.loc)
                if ctype not in self.scratch:
                    self.scratch[ctype] = self.namer.fresh(f"scratch_{ctype}")
                    w.line(f"{self.scratch[ctype]} = cuda.shared.array("
                           f"{SCRATCH_SLOTS[self.target]}, {SHARED_TYPE[ctype]})")
        w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
        with w.indented(f"for {loc['point']} in range(numba.int64(cuda.blockIdx.x), "
                        f"{loc['n_points']}, cuda.gridDim.x):"):
            self.unravel(loc["point"])
            self.block(self.op.body, top=True)

    def unravel(self, flat: str) -> None:
        """Loop indices from the flat index: divmod by the extents, last dim fastest."""
        args, extents = self.op.body.args, self.op.extent_list
        names = [self.define(a, f"i{d}") for d, a in enumerate(args)]
        if len(names) == 1:
            self.w.line(f"{names[0]} = {flat}")
        rest = flat
        for d in range(len(names) - 1, 0, -1):
            quotient = names[0] if d == 1 else self.local["rest"]
            self.w.line(f"{quotient}, {names[d]} = divmod({rest}, {self.extent(extents[d])})")
            rest = quotient

    # -- statements --------------------------------------------------------------
    def block(self, block: Block, top: bool) -> None:
        for op in block.ops:
            if not isinstance(op, YieldOp):
                self.statement(op, top and self.schedule == "row")

    def statement(self, op: Operation, shared: bool) -> None:
        """One op; ``shared``: it is at the top of a row kernel (the block shares it)."""
        w = self.w
        if op.name.startswith("arith."):
            operands = [self.namer(v) for v in op.operands]
            kind = op.name.split(".", 1)[1]
            text = scalar_expression(op, operands, self.target, self.helpers)
            w.line(f"{self.define(op.result, kind)} = {text}")
        elif isinstance(op, LoadOp):
            buf = op.operands[0]
            w.line(f"{self.define(op.result, self.namer(buf) + '_v')} = "
                   f"{self.load(buf, op.operands[1:])}")
        elif isinstance(op, MaskedLoadOp):
            buf, mask = op.operands[0], op.operands[1]
            other = literal(op["other"], buf.type.dtype)
            # the conditional expression reads memory only where the mask holds
            w.line(f"{self.define(op.result, self.namer(buf) + '_v')} = "
                   f"{self.load(buf, op.operands[2:])} if {self.namer(mask)} else {other}")
        elif isinstance(op, StoreOp):
            value, buf = op.operands[0], op.operands[1]
            line = f"{self.namer(buf)}[{self.index(op.operands[2:])}] = {self.namer(value)}"
            if shared:  # one value per point: one thread writes it
                with w.indented(f"if {self.local['tid']} == 0:"):
                    w.line(line)
            else:
                w.line(line)
        elif isinstance(op, DimOp):
            self.namer.bind(op.result, self.sym[op["sym"]])
        elif isinstance(op, ReduceOp) and shared:
            self.block_reduce(op)
        elif isinstance(op, ReduceOp):
            self.sequential_reduce(op)
        elif isinstance(op, ForOp):
            with w.indented(self.loop_header(op, shared)):
                self.block(op.body, top=False)
        else:
            raise MlfuseError(f"codegen: {op.name} cannot appear inside a kernel", op.loc)

    def load(self, buf: Value, indices) -> str:
        text = f"{self.namer(buf)}[{self.index(indices)}]"
        return f"np.float32({text})" if buf.type.dtype == "f16" else text

    def sequential_reduce(self, op: ReduceOp) -> None:
        acc = self.define(op.result, "acc")
        self.w.line(f"{acc} = {self.namer(op.operands[0])}")
        self.accumulate(op, acc, shared=False)

    def block_reduce(self, op: ReduceOp) -> None:
        dtype, combiner = op.result.type.dtype, op["combiner"]
        acc = self.define(op.result, "acc")
        part = self.namer.fresh(f"{acc}_part")
        self.w.line(f"# {combiner} over {op['extent']}: each thread takes a strided part, "
                    "then the block combines the parts")
        self.w.line(f"{part} = {identity(combiner, dtype)}")
        self.accumulate(op, part, shared=True)
        helper = block_reduce_name(combiner)
        self.helpers.add(helper)
        total = (f"{helper}({part}, {identity(combiner, dtype)}, "
                 f"{self.scratch[COMPUTE_TYPE[dtype]]})")
        init = self.namer(op.operands[0])
        self.w.line(f"{acc} = {combine(combiner, init, total, self.helpers, dtype)}")

    def loop_header(self, op: LoopOp, shared: bool) -> str:
        """The ``for`` over a reduce's or for's extent: the block's threads stride over
        it when ``shared``, else one thread runs all of it."""
        k = self.define(op.body.args[0], "k")
        extent = self.extent(op.extent_list[0])
        if shared:
            return f"for {k} in range({self.local['tid']}, {extent}, {self.local['nthreads']}):"
        return f"for {k} in range({extent}):"

    def accumulate(self, op: ReduceOp, acc: str, shared: bool) -> None:
        """The reduce's loop: its body, then ``acc = combine(acc, yielded)``."""
        with self.w.indented(self.loop_header(op, shared)):
            self.block(op.body, top=False)
            yielded = self.namer(op.body.ops[-1].operands[0])
            step = combine(op["combiner"], acc, yielded, self.helpers, op.result.type.dtype)
            self.w.line(f"{acc} = {step}")


def emit_kernel(op: LoopOp, name: str, target: str, helpers: set[str], taken=()) -> KernelCode:
    """The kernel's source and what its launch must pass; records the helpers it calls.
    ``taken``: module-level names its locals must not shadow."""
    return KernelEmitter(op, name, target, helpers, taken).emit()
