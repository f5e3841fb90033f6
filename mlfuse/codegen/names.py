"""Readable, valid and unique Python names for IR values in generated code."""
from __future__ import annotations

import keyword
import re

from mlfuse.ir.core import Value

# Names the generated module itself defines or imports; IR names must not shadow them.
RESERVED = frozenset({"math", "np", "numba", "cuda", "range", "divmod", "min", "max", "abs",
                      "True", "False", "None"})


def identifier(text: str, fallback: str = "v") -> str:
    """``text`` made into a Python identifier (invalid characters become ``_``)."""
    name = re.sub(r"\W", "_", text or "")
    if not name or name[0].isdigit():
        name = f"{fallback}{name}" if name else fallback
    if keyword.iskeyword(name) or name in RESERVED:
        name += "_"
    return name


class Namer:
    """Gives each value one name, unique within a scope (a kernel or a host function).

    A value's IR name hint is kept when free (``%m`` -> ``m``); clashes get a suffix
    (``m_1``); values without a hint are named after what computes them (``mul``).
    """

    def __init__(self, taken=()):
        self.taken: set[str] = set(RESERVED) | set(taken)
        self.names: dict[int, str] = {}

    def fresh(self, base: str) -> str:
        base = identifier(base)
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name

    def define(self, value: Value, fallback: str) -> str:
        """Name ``value`` (once): its hint, else ``fallback``."""
        if id(value) not in self.names:
            self.names[id(value)] = self.fresh(value.name_hint or fallback)
        return self.names[id(value)]

    def bind(self, value: Value, name: str) -> None:
        """Make ``value`` stand for an existing name (e.g. a kernel parameter)."""
        self.names[id(value)] = name

    def __contains__(self, value: Value) -> bool:
        return id(value) in self.names

    def __call__(self, value: Value) -> str:
        return self.names[id(value)]
