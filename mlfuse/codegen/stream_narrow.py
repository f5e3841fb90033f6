"""The streaming row kernel's narrow twin: the same kernel (row_plans.py, "streaming")
with its segment cursors and index divisions in unsigned 32 bits, for calls whose every
index fits 31 bits.

Batch-norm training over many channels of short segments ([256, 1024, 7, 7]: rows of
12544 values in segments of 49, no whole vectors) runs the scalar streaming kernel,
instruction-bound (ncu on the H100: 64% of the SMs' issue, 46% of DRAM bandwidth). Its
place cursors (segment_cursors.py) were 64-bit, and LLVM turned each back into a segment
count times the stride: a 64-bit product and its carries a value, 104 B spilled at 64
registers (ptxas sm_90). In 32 bits the cursors are an add and a carry each, and the
slots' bounds, where nothing else reads the loop index (row_plans.index_unused), a 32-bit
test: 2562 -> 1909 SASS lines, 47 registers, no spill. On the H100 the twin took 5-20%
less time than the 64-bit kernel at seven shapes (BENCHMARKS.md, sixteenth session).
The 64-bit kernel stays the one of last resort; the host
launches this one where ``narrow_index_tests`` hold (every buffer and the points' row
values under 2**31), the vector twin (stream_vector.py) taking whole-vector rows first.
Only kernels with segmented accesses get it: plain rows walk ``row_base + k`` offsets
that no cursor carries.
"""
from __future__ import annotations

from mlfuse.codegen.emit_kernel import KernelEmitter
from mlfuse.codegen.kernel_code import narrow_index_tests

_DOC = ("Row schedule over [{space}]: one block per point, its threads share the rows; "
        "each row loop re-reads the row; offsets in 32 bits (the host checked they fit).")


class StreamNarrowEmitter(KernelEmitter):
    """The streaming variant with 32-bit segment cursors and divisions (module doc)."""

    narrow_divisions = True

    def __init__(self, op, name, target, helpers, hw, taken=()):
        super().__init__(op, name, "streaming", target, helpers, hw, taken)

    def kernel_def(self, extra_params=(), doc=None):
        return super().kernel_def(extra_params, doc or _DOC)


def stream_narrow_code(op, name: str, target: str, helpers: set[str], names, hw,
                       variants: dict) -> tuple[dict, str]:
    """The twin's launch entry (``stream_narrow``: its kernel) and text, for a kernel
    with a streaming variant and segmented accesses; nothing elsewhere."""
    if "streaming" not in variants:
        return {}, ""
    kname = names.fresh(f"{name}_streaming_narrow")
    emitter = StreamNarrowEmitter(op, kname, target, set(), hw, names.taken)
    text = emitter.emit()
    if not emitter.segments:  # (no cursor to narrow: the 64-bit kernel is as good)
        return {}, ""
    helpers |= emitter.helpers  # (only a kept kernel's helpers join the module)
    return {"stream_narrow": {"kernel": kname}}, text


def stream_narrow_choice(host, kernel, points: str, row: str, grid: str, args: list[str],
                         call: str) -> list[str]:
    """The host's lines launching the streaming kernel: the narrow twin on ``grid``
    where every index fits 31 bits, else ``call`` (the 64-bit kernel's launch)."""
    twin = kernel.launch.get("stream_narrow")
    if twin is None:
        return [call]
    tests = narrow_index_tests(host, kernel.op, points, row)
    return [f"if {' and '.join(tests)}:  # every index fits 31 bits",
            host.w.unit + host.call(twin["kernel"], grid, args), "else:", host.w.unit + call]


__all__ = ["StreamNarrowEmitter", "stream_narrow_code", "stream_narrow_choice"]
