"""Passes and a pass manager that can verify and print after each one.

Which passes exist is listed in one place, ``mlfuse.transforms.PASSES``; this core
module knows none of them."""
from __future__ import annotations

from typing import Callable

from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.printer import print_ir
from mlfuse.ir.verifier import verify

class Pass:
    """A module-to-module transformation with a name (used by ``mlfuse opt --passes``)."""

    name = "unnamed"
    doc = ""

    def run(self, module: ModuleOp) -> None:
        raise NotImplementedError

    def remarks(self) -> list[str]:
        """What the pass decided and why, one line each, after ``run`` (``mlfuse opt
        --print-decisions`` prints them as comments after the IR, so tests can check them)."""
        return []


class PassManager:
    def __init__(self, passes: list[Pass], verify_each: bool = True,
                 print_after: Callable[[str, str], None] | None = None):
        self.passes = passes
        self.verify_each = verify_each
        self.print_after = print_after

    def run(self, module: ModuleOp) -> ModuleOp:
        for p in self.passes:
            p.run(module)
            if self.verify_each:
                verify(module)
            if self.print_after is not None:
                self.print_after(p.name, print_ir(module))
        return module
