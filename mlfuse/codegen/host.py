"""The host function of a ``func``: binds dims, allocates buffers, launches kernels.

It takes device arrays and checks nothing (``mlfuse.runtime.arguments`` checks arguments
before calling it): symbolic dims are read from the first parameter that has them.
"""
from __future__ import annotations

import math

import numpy as np

from mlfuse.dialects.arith import ConstantOp
from mlfuse.dialects.fused import KernelOp
from mlfuse.dialects.loops import AllocOp, DimOp, ParallelOp
from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import FuncOp, ReturnOp
from mlfuse.ir.dims import quotient_dims
from mlfuse.ir.types import BufferType, dim_monomial, is_quotient, product_dim, symbols_of
from mlfuse.dialects.contraction import contraction_of
from mlfuse.dialects.reductions import reread_value_bytes

from mlfuse.codegen.flat_rows import aligned_start_tests
from mlfuse.codegen.kernel_code import KernelCode, dim_code, extent_factors
from mlfuse.codegen.split_stages import stages_launch
from mlfuse.codegen.stream_narrow import stream_narrow_choice
from mlfuse.codegen.stream_vector import stream_vector_choice
from mlfuse.codegen.held_rows import shared_rows_launch
from mlfuse.codegen.peeled_rows import peeled_choice
from mlfuse.codegen.row_plans import whole_vector_slots
from mlfuse.codegen.scalar import STORAGE_TYPE
from mlfuse.codegen.names import Namer, identifier
from mlfuse.codegen.writer import Writer


def _tuple(items: list[str]) -> str:
    """Python tuple syntax: ``()``, ``(a,)``, ``(a, b)``."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


class HostEmitter:
    def __init__(self, func: FuncOp, host_name: str, kernels: dict[int, KernelCode],
                 helpers: set[str], taken=(), target: str = "cuda"):
        self.func, self.host_name, self.kernels, self.helpers = func, host_name, kernels, helpers
        self.target = target
        self.namer = Namer(taken)
        self.dims: dict[str, str] = {}  # symbol -> host variable holding its size
        self.points_var: str | None = None  # holds a launch's number of points
        self.w = Writer()

    def buffer_values(self, buf) -> str:
        """The number of values of ``buf`` as host code (its dims' variables multiplied)."""
        return " * ".join(extent_factors(buf.type.shape, self.dims.__getitem__))

    def dim(self, d, where) -> str:
        """A dim as host code (a product of symbols: their variables multiplied)."""
        for s in [d] if is_quotient(d) else symbols_of([d]):
            if s not in self.dims:
                raise MlfuseError(f"codegen: dim {s} of @{self.func.sym_name} is not the size of "
                                  "any parameter, so no call can bind it", where.loc)
        return dim_code(d, self.dims.__getitem__)

    def emit(self) -> str:
        w, func = self.w, self.func
        params = [self.namer.define(a, f"arg{i}") for i, a in enumerate(func.args)]
        with w.indented(f"def {self.host_name}({', '.join(params)}):"):
            w.line(f'"""Host side of @{func.sym_name}: takes and returns device arrays."""')
            self.bind_dims()
            for op in func.body.ops:
                self.statement(op)
        return w.text()

    def bind_dims(self) -> None:
        for arg in self.func.args:
            if not isinstance(arg.type, BufferType):
                raise MlfuseError(f"codegen: parameter of @{self.func.sym_name} is {arg.type}, "
                                  "not a buffer", self.func.loc)
            for axis, d in enumerate(arg.type.shape):
                if isinstance(d, str) and d.isidentifier() and d not in self.dims:
                    self.dims[d] = self.namer.fresh(d)
                    self.w.line(f"{self.dims[d]} = {self.namer(arg)}.shape[{axis}]")
        for q in quotient_dims(self.func):
            self.bind_quotient(q)

    def bind_quotient(self, q: str) -> None:
        """A quotient dim (C*H*W/8) computed once, after checking that it divides (the
        argument checks did; this keeps a standalone module as safe)."""
        coefficient, exponents = dim_monomial(q)
        up = product_dim([coefficient.numerator, *(n for n, e in exponents.items()
                                                    for _ in range(max(e, 0)))])
        down = product_dim([coefficient.denominator, *(n for n, e in exponents.items()
                                                        for _ in range(max(-e, 0)))])
        up_code, down_code = self.dim(up, self.func), self.dim(down, self.func)
        with self.w.indented(f"if {up_code} % {down_code}:"):
            self.w.line(f"raise ValueError(f\"@{self.func.sym_name}: dim {q} is not a whole "
                        f"number: {up} = {{{up_code}}} is not divisible by {{{down_code}}}\")")
        self.dims[q] = self.namer.fresh(identifier(q))
        self.w.line(f"{self.dims[q]} = {up_code} // {down_code}")
    def statement(self, op) -> None:
        w = self.w
        if isinstance(op, AllocOp):
            t = op.result.type
            shape = _tuple([self.dim(d, op) for d in t.shape])
            w.line(f"{self.namer.define(op.result, 'buf')} = cuda.device_array("
                   f"{shape}, dtype=np.{STORAGE_TYPE[t.dtype]})")
        elif isinstance(op, DimOp):
            self.namer.bind(op.result, self.dim(op["sym"], op))
        elif isinstance(op, ConstantOp):
            pass  # each kernel that uses it defines it itself
        elif isinstance(op, (ParallelOp, KernelOp)):
            self.launch(self.kernels[id(op)])
        elif isinstance(op, ReturnOp):
            names = [self.namer(v) for v in op.operands]
            w.line(f"return {names[0]}" if len(names) == 1 else f"return {_tuple(names)}")
        else:
            raise MlfuseError(f"codegen: {op.name} cannot appear outside a kernel", op.loc)

    def launch(self, kernel: KernelCode) -> None:
        op = kernel.op
        args = [self.namer(b) for b in kernel.interface.buffers]
        args += [self.dim(s, op) for s in kernel.interface.symbols]
        for s in symbols_of(op.extent_list):
            self.dim(s, op)  # raises if unbound
        factors = extent_factors(op.extent_list, lambda s: self.dims[s])
        if len(factors) == 1:
            points = factors[0]
        else:
            if self.points_var is None:
                self.points_var = self.namer.fresh("n_points")
            points = self.points_var
            self.w.line(f"{points} = {' * '.join(factors)}")
        if kernel.schedule == "row":
            self.row_launch(kernel, points, args)
        elif kernel.schedule in ("split-rows", "split-columns"):
            from mlfuse.codegen.split_host import split_launch
            split_launch(self, kernel, points, args)
        elif kernel.schedule == "warp-rows":
            from mlfuse.codegen.schedule_warp_rows import warp_rows_launch
            warp_rows_launch(self, kernel, points, args)
        elif kernel.schedule == "transpose-tiles":
            from mlfuse.codegen.transpose_tiles import tiles_launch
            tiles_launch(self, kernel, points, args)
        elif kernel.schedule == "strip-tiles":
            from mlfuse.codegen.schedule_strip_tiles import strip_tiles_launch
            strip_tiles_launch(self, kernel, points, args)
        elif kernel.schedule == "strips":
            from mlfuse.codegen.schedule_strips import strips_launch
            strips_launch(self, kernel, points, args)
        elif kernel.schedule == "contraction":
            self.contraction_launch(kernel, points, args)
        else:
            self.helpers.add("_pointwise_blocks")
            per_thread = "POINTS_PER_THREAD" if "pointwise-prefetch" in kernel.variants else "1"
            grid = f"_pointwise_blocks({points}, {per_thread}), THREADS_PER_BLOCK"
            lines = []
            for dims in kernel.divisors:  # lean addressing: divisions by multiply-high
                self.helpers.add("_magic")
                m, s = (self.namer.fresh(n) for n in ("magic", "shift"))
                divisor = " * ".join(extent_factors(list(dims), lambda d: self.dims[d]))
                lines.append(f"{m}, {s} = _magic({divisor}, {points})")
                args = args + [m, s]
            calls = {kind: self.call(name, grid, args) for kind, name in kernel.variants.items()}
            if kernel.vector_lanes != "VECTOR_WIDTH" and "pointwise-vector" in calls:
                calls["pointwise-vector"] = self.call(  # more points a thread: fewer blocks
                    kernel.variants["pointwise-vector"],
                    f"_pointwise_blocks({points}, POINTS_PER_THREAD_16), THREADS_PER_BLOCK", args)
            # the vector kernel indexes in 32 bits: spaces under 2**31 points
            small = [f"{points} < 2**31"] if "pointwise-vector" in kernel.variants else []
            self.guarded(op, points, lines + self.vector_choice(kernel, calls, "pointwise-vector",
                                                                small))

    def vector_choice(self, kernel: KernelCode, calls: dict[str, str], vector: str,
                      tests: list[str] = ()) -> list[str]:
        """The launch lines of the scalar kernel (the first variant), or, when ``vector``
        is a variant, of it where the buffers are aligned for it (and ``tests`` hold)
        and of the scalar one elsewhere."""
        scalar = calls[next(iter(kernel.variants))]
        if vector not in calls:
            return [scalar]
        self.helpers.add("_vector_ready")
        buffers = ", ".join(self.namer(b) for b in kernel.vector_buffers)
        lanes = kernel.vector_lanes
        tests = list(tests) + [f"{self.dim(e, kernel.op)} % {lanes} == 0"
                               for e in kernel.vector_extents]
        width = "" if lanes == "VECTOR_WIDTH" else f", width={lanes}"
        if kernel.vector_buffers:  # (flat rows' buffers alone: their tests are in ``tests``)
            tests.append(f"_vector_ready({buffers}{width})")
        unit = self.w.unit
        return [f"if {' and '.join(tests)}:  # whole vectors, aligned", unit + calls[vector],
                "else:", unit + scalar]

    def multiple_tests(self, multiples, kernel_op=None) -> list[str]:
        """The host's checks that VECTOR_WIDTH divides each product of ``multiples``
        (flat rows' bases: ``flat_rows.base_multiples``), a test each."""
        tests = []
        for factors in multiples:
            texts = [self.dim(f, kernel_op) if isinstance(f, str) else str(f) for f in factors]
            text = " * ".join(t if t.isidentifier() or t.isdigit() else f"({t})"
                              for t in texts) or "1"
            tests.append(f"{text} % VECTOR_WIDTH == 0")
        return list(dict.fromkeys(tests))

    def call(self, kernel: str, grid: str, args: list[str]) -> str:
        return f"{kernel}[{grid}]({', '.join(args)})"

    def launch_line(self, line: str) -> None:
        """A line of a launch; a long kernel call gets its arguments on a line of their own."""
        w = self.w
        head, _, args = line.partition("](")
        indent = len(line) - len(line.lstrip())
        if args and len(w.unit * w.depth) + len(line) > 92:
            w.line(f"{head}](")
            w.line(f"{line[:indent]}{w.unit * 2}{args}")
        else:
            w.line(line)

    def row_launch(self, kernel: KernelCode, points: str, args: list[str]) -> None:
        """One block per point; the registers variant when the rows fit in it."""
        self.helpers.update({"_row_blocks", "_row_threads"})
        extents = list(dict.fromkeys(self.dim(e, kernel.op) for e in kernel.row_extents)) or ["1"]
        row = extents[0] if len(extents) == 1 else f"max({', '.join(extents)})"
        reread = reread_value_bytes(kernel.op)
        threads = {"registers": f"_row_threads(-(-{row} // VALUES_PER_THREAD), REGISTER_ROW_THREADS)",
                   "streaming": f"_stream_row_threads({row}, {reread}, STREAM_ROW_THREADS, "
                                "SM_COUNT, L2_BYTES)"}
        threads["registers-vector"] = threads["registers"]
        if "streaming" in kernel.variants:
            self.helpers.add("_stream_row_threads")
        calls = {kind: self.call(name, f"_row_blocks({points}), {threads[kind]}", args)
                 for kind, name in kernel.variants.items()}
        streamed = []
        if "streaming" in calls:  # (its vector twin where the rows are whole vectors, its
            # 32-bit twin where every index fits 31 bits)
            grid = f"_row_blocks({points}), {threads['streaming']}"
            scalar = stream_narrow_choice(self, kernel, points, row, grid, args, calls["streaming"])
            streamed = stream_vector_choice(self, kernel, points, row, grid, args, scalar)
        if "registers" not in calls:
            lines = streamed
        else:
            flat_tests = self.multiple_tests(kernel.launch.get("vector_multiples", ()), kernel.op) \
                + aligned_start_tests(self, kernel.launch.get("flat_vector_buffers", ())) \
                + [whole_vector_slots(kernel.vector_lanes)]
            lines = self.vector_choice(kernel, calls, "registers-vector", flat_tests)
            if "peeled" in kernel.launch:  # rows of no whole vectors (peeled_rows.py)
                call = self.call(kernel.launch["peeled"]["kernel"], f"_row_blocks({points}), "
                                 f"{threads['registers']}", args)
                lines = peeled_choice(self, kernel, call, lines)
            if "streaming" in calls:
                unit = self.w.unit
                lines = [f"if {row} <= VALUES_PER_THREAD * REGISTER_ROW_THREADS:  # fits in "
                         "registers"] + [unit + line for line in lines] + [
                         "else:"] + [unit + line for line in streamed]
        unit = self.w.unit
        before, held = [], None
        stages = len(kernel.launch.get("stages", ()))
        if "shared_rows" in kernel.launch:  # long rows held in registers and shared memory
            before, branches, held = shared_rows_launch(self, kernel, points, row, args, stages)
            lines = branches + ["else:"] + [unit + line for line in lines]
        if "short" in kernel.launch:  # short rows at this call: a group of lanes per row
            from mlfuse.codegen.short_rows import short_rows_launch  # (first: rows a warp holds)
            lines = short_rows_launch(self, kernel, points, row, args, lines)
        if stages:  # few long rows: each split across blocks
            self.helpers.add("_split_stages")
            split = f"_split_stages({points}, {row}, {reread})"
            if held is not None:  # unless held rows move them faster
                split += f" and not ({held})"
            lines = [f"if {split}:"] + \
                [unit + line for line in stages_launch(self, kernel, points, row, args)] + \
                ["else:"] + [unit + line for line in lines]
        lines = before + lines
        self.guarded(kernel.op, points, lines)

    def contraction_launch(self, kernel: KernelCode, points: str, args: list[str]) -> None:
        """Tile shape and grid from the sizes; the 16-byte operand reads where the
        operand's rows are whole 16-byte groups (4 floats, 8 halves) from a 16-byte
        aligned start."""
        c = contraction_of(kernel.op)
        extents = kernel.op.extent_list
        name_of = lambda s: self.dims[s]  # noqa: E731
        sizes = {}
        for side, dims in (("m", c.m_dims), ("n", c.n_dims), ("batch", c.batch_dims)):
            sizes[side] = " * ".join(extent_factors([extents[d] for d in dims], name_of))
        k_size = " * ".join(extent_factors(c.k_extents, name_of))
        flags = []
        # B is read along N unless its buffer is K-major (a SIMT kernel's [N, K] weight)
        b_along = sizes["n"] if c.direct_load("b") is not None else k_size
        for side, along in (("a", k_size), ("b", b_along)):
            buffer = kernel.vector_sides.get(side)
            if buffer is None:
                flags.append("False")
                continue
            # whole 16-byte groups: along the tile axis, and in each row of the buffer (A
            # side and a K-major B: a row is the flattened K, the load's trailing dims
            # being the reduction's; B side: the buffer's last dim); and an aligned start
            row = k_size if along is k_size else self.dim(buffer.type.shape[-1], kernel.op)
            itemsize = np.dtype(STORAGE_TYPE[buffer.type.dtype]).itemsize
            group = 16 // itemsize
            sizes_4 = list(dict.fromkeys((along, row)))
            if kernel.op["variant"].startswith("mma"):  # cp.async of 16, 8 or 4 bytes: the widest
                self.helpers.add("_copy_values")
                flags.append(f"_copy_values({self.namer(buffer)}, {itemsize}, "
                             f"{', '.join(sizes_4)})")
                continue
            if any(n.isdigit() and int(n) % group for n in sizes_4):
                flags.append("False")
                continue
            self.helpers.add("_vector_ready")  # brings _address
            checks = [f"({n}) % {group} == 0" for n in sizes_4 if not n.isdigit()]
            flags.append(" and ".join(checks + [f"_address({self.namer(buffer)}) % 16 == 0"]))
        self.helpers.update({"_contraction_geometry", "_contraction_plan"})
        tiles, grid, threads = (self.namer.fresh(n) for n in ("tiles", "grid", "threads"))
        config = self.namer.fresh("config")
        split = f"{tiles}[2] > 1"
        geometry = (f"{tiles}, {grid}, {threads} = _contraction_geometry({kernel.name}, "
                    f"{sizes['m']}, {sizes['n']}, {k_size}, {sizes['batch']}")
        names = "  # BM, BN, VECTOR_A, VECTOR_B, SPLIT"
        if kernel.op["variant"].startswith("mma"):  # the copies first: they narrow the tiles
            copies = self.namer.fresh("copies")
            lines = [f"{copies} = ({flags[0]}, {flags[1]})  # values per cp.async of A, B",
                     f"{geometry}, {copies})",
                     f"{config} = {tiles}[:2] + {copies} + ({split},){names}"]
        else:  # WIDE (given only where true): 64-bit flat offsets, where an operand the
            # kernel steps through (simt_fetch.py) reaches 2**31 values
            wide = " or ".join(f"{self.buffer_values(b)} >= 2**31" for b in kernel.launch["wide"])
            wide = f" + ((True,) if {wide} else ())" if wide else ""
            lines = [f"{geometry})",
                     f"{config} = {tiles}[:2] + ({flags[0]}, {flags[1]}, {split}){wide}"
                     f"{names}{', WIDE' if wide else ''}"]
        tiled = f"{kernel.name}[{config}]"
        # the launch gives the dynamic shared memory the tile's kernel takes (its stages)
        launch = f"{grid}, {threads}, 0, {kernel.name}.shared_bytes({config})"
        # the last argument: the partial sums of a split K; any array when not split
        whole = self.call(tiled, launch, args + [args[0]])
        finish = kernel.variants.get("finish")
        if finish is None:  # K too short to split: one kernel
            lines.append(whole)
        else:
            from mlfuse.codegen.split_k import partial_dtype
            self.helpers.add("_pointwise_blocks")
            partials = self.namer.fresh("partials")
            unit = self.w.unit
            lines += [f"if {split}:  # split-K: partial sums per share, then the second kernel "
                      "adds them and runs the epilogue",
                      f"{unit}{partials} = cuda.device_array(({tiles}[2], {points}), "
                      f"dtype=np.{partial_dtype(kernel.op)})",
                      unit + self.call(tiled, launch, args + [partials]),
                      unit + self.call(finish, f"_pointwise_blocks({points}, 1), THREADS_PER_BLOCK",
                                       args + [partials, f"{tiles}[2]"]),
                      "else:", unit + whole]
        self.guarded(kernel.op, points, lines)

    def guarded(self, op, points: str, lines: list[str]) -> None:
        """``lines`` (a launch), unless the iteration space is empty."""
        if not symbols_of(op.extent_list):
            if math.prod(op.extent_list) > 0:
                for line in lines:
                    self.launch_line(line)
            else:
                self.w.line("# empty iteration space, not launched")
            return
        with self.w.indented(f"if {points} > 0:  # an empty iteration space launches nothing"):
            for line in lines:
                self.launch_line(line)


def emit_host(func: FuncOp, host_name: str, kernels: dict[int, KernelCode], helpers: set[str],
              taken=(), target: str = "cuda") -> str:
    """Source of the host function ``host_name`` for ``func``; ``kernels`` maps each
    kernel op (by id) to its emitted code; ``taken``: module-level names (kernels,
    helpers) its locals must not shadow."""
    return HostEmitter(func, host_name, kernels, helpers, taken, target).emit()
