"""The walker the passes after fusion share: each ``fused.kernel`` of a module in turn,
rewritten in place or replaced by a new kernel, at the sizes in ``dims`` (symbols not
bound there take the target's default size), with one remark per rewrite."""
from __future__ import annotations

from mlfuse.dialects.fused import KernelOp
from mlfuse.hardware import get_target
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.pass_manager import Pass


class KernelPass(Pass):
    """Subclasses define ``rewrite(kernel) -> (kernel, remarks)``: the kernel that stands
    in its place (the same one, rewritten in place, or a new one) and what was done."""

    def __init__(self, dims: dict | None = None, target: str | None = None):
        self.dims = dims or {}
        self.target = get_target(target)
        self._remarks: list[str] = []

    def rewrite(self, kernel: KernelOp) -> tuple[KernelOp, list[str]]:
        raise NotImplementedError

    def run(self, module: ModuleOp) -> None:
        self._remarks = []
        for kernel in [op for op in module.walk() if isinstance(op, KernelOp)]:
            new, remarks = self.rewrite(kernel)
            if new is not kernel:
                kernel.parent.insert_before(kernel, new)
                kernel.erase()
            self._remarks += [f"{new['kernel_name']}: {r}" for r in remarks]

    def remarks(self) -> list[str]:
        return list(self._remarks)


__all__ = ["KernelPass"]
