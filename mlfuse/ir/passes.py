"""Named passes and a pass manager that can verify and print after each one."""
from __future__ import annotations

import inspect
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


def register_pass(cls):
    PASS_REGISTRY[cls.name] = cls
    return cls


def get_pass(name: str, **options) -> Pass:
    from .. import passes_loaded  # noqa: F401  (registers every pass)
    cls = PASS_REGISTRY.get(name)
    if cls is None:
        known = ", ".join(sorted(PASS_REGISTRY))
        raise MlfuseError(f"unknown pass '{name}' (known: {known})")
    params = inspect.signature(cls.__init__).parameters
    takes = sorted(p for p in params if p != "self")
    for option in options:  # checked here, not as a TypeError from inside the pass
        if option not in params or option == "self":
            raise MlfuseError(f"pass '{name}' has no option '{option}' "
                              f"(options: {', '.join(takes) or 'none'})")
    return cls(**options)


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
