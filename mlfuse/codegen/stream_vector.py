"""The streaming row kernel's vector twin: each row loop re-reads its row a tile of
16-byte vectors at a time.

A row kernel whose rows pass what registers hold, at calls with many rows (264 or more
on an H100, no held variant), streams them (row_plans.py, "streaming"): each pass walks
the row in tiles of a thread's values, a value a load. Batch-norm training over many
channels ([64, 1024, 14, 14]: rows of 12544 values in segments of 196) ran that kernel
instruction-bound (ncu: 66% of the SMs' issue, 45% of DRAM bandwidth). Where the rows
are whole vectors this twin moves them as the split plan's vector stages do
(split_stages.StageEmitter's vector walk: tiles of a thread's vectors, a tile's loads
first, lanes, vector stores; segmented accesses divided once a vector, flat rows at
their row bases, divisions the lanes share once a vector), but as one kernel with a
block a row: every level's reduces are block reductions, then the loops after them, as
the scalar streaming kernel does, so it is launched in its place (``stream_vector``
launch entry: the host's tests are the split plan's vector tests: whole-vector rows and
row bases, aligned buffers, indices under 2**31).
"""
from __future__ import annotations

from mlfuse.codegen.emit_kernel import MAX_THREADS, KernelEmitter
from mlfuse.codegen.row_plans import _row_loops
from mlfuse.codegen.split_stages import StageEmitter, vector_tests
from mlfuse.codegen.vector import vector_buffers
from mlfuse.ir.core import Operation

_DOC = ("Row schedule over [{space}]: one block per point, its threads share the rows; "
        "each row loop re-reads the row a tile of 16-byte vectors at a time.")


class StreamVectorEmitter(StageEmitter):
    """The vector twin of the streaming variant (module doc): the split plan's vector
    walk over the whole row, every reduce reduced by the block."""

    def __init__(self, op, name, target, helpers, hw, taken=()):
        super().__init__(op, name, 0, target, helpers, hw, taken, vectors=True)
        self.launch_bound = str(MAX_THREADS)  # blocks of up to 1024 (row_stream.py)
        self.staged_fors = set()  # (no stages: every for a pass of its own)
        self.ragged_end = False  # (its host runs it on rows of whole vectors only)

    def walked(self) -> list[Operation]:
        return _row_loops(self.op)

    def emit(self) -> str:
        w, loc = self.w, self.local
        with self.kernel_def([], _DOC):
            walked = self.plan_walk()
            w.line(f"{loc['n_points']} = {self.points(self.op.extent_list)}")
            w.line(f"{loc['n_k']} = {self.points(walked[0].extent_list)}")
            with w.indented(f"for {loc['point']} in range(numba.int64(cuda.blockIdx.x), "
                            f"{loc['n_points']}, cuda.gridDim.x):"):
                self.unravel(loc["point"])
                self.row_base_lines()
                w.line(f"{loc['lo']} = 0")
                w.line(f"{loc['hi']} = {loc['n_k']}")
                self.block(self.op.body, top=True)
        return self.w.text()

    def backward_pass(self) -> bool:  # (the scalar streaming kernel's alternation)
        return KernelEmitter.backward_pass(self)

    def leader(self) -> str:
        return KernelEmitter.leader(self)

    def statement(self, op: Operation, shared: bool) -> None:
        if id(op) in self.lane_ops or not shared:  # a lane's shared divisions, a lane's ops
            return super().statement(op, shared)
        return KernelEmitter.statement(self, op, shared)  # reduces by the block, loops, stores


def stream_vector_code(op, name: str, target: str, helpers: set[str], names, hw,
                       variants: dict) -> tuple[dict, str]:
    """The twin's launch entry (``stream_vector``: its kernel, the buffers it moves whole
    and what the host checks of its row bases) and text, for a kernel with a streaming
    variant whose rows move vectors; nothing elsewhere."""
    if "streaming" not in variants or hw.vector_width <= 1:
        return {}, ""
    kname = names.fresh(f"{name}_streaming_vector")
    emitter = StreamVectorEmitter(op, kname, target, set(), hw, names.taken)
    text = emitter.emit()
    if not emitter.vector_accesses:  # (no dtype with a vector: bf16, i64)
        return {}, ""
    helpers |= emitter.helpers  # (only a kept kernel's helpers join the module)
    multiples = list({repr(m): m for m in emitter.multiples}.values())
    return {"stream_vector": {"kernel": kname, "buffers": vector_buffers(emitter.vector_accesses),
                              "multiples": multiples}}, text


def stream_vector_choice(host, kernel, points: str, row: str, grid: str, args: list[str],
                         scalar: list[str]) -> list[str]:
    """The host's lines for a streaming launch: the twin on ``grid`` where its vector
    tests hold, else the lines ``scalar`` (the scalar streaming kernels' launch)."""
    twin = kernel.launch.get("stream_vector")
    if twin is None:
        return scalar
    tests = vector_tests(host, kernel, twin, points, row)
    return [f"if {' and '.join(tests)}:  # whole vectors, aligned",
            host.w.unit + host.call(twin["kernel"], grid, args), "else:"] + \
        [host.w.unit + line for line in scalar]


__all__ = ["StreamVectorEmitter", "stream_vector_code", "stream_vector_choice"]
