"""Named passes and a pass manager that can verify and print after each one."""
from __future__ import annotations

from typing import Callable

from ..errors import MlfuseError
from .builtin import ModuleOp
from .printer import print_ir
from .verifier import verify

PASS_REGISTRY: dict[str, "Pass"] = {}


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


def register_pass(cls):
    PASS_REGISTRY[cls.name] = cls
    return cls


def get_pass(name: str, **options) -> Pass:
    from .. import passes_loaded  # noqa: F401  (registers every pass)
    try:
        return PASS_REGISTRY[name](**options)
    except KeyError:
        known = ", ".join(sorted(PASS_REGISTRY))
        raise MlfuseError(f"unknown pass '{name}' (known: {known})") from None


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
