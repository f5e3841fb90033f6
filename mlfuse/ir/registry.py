"""Dialects and the op registry a parser is handed.

A dialect module declares one :class:`Dialect` and decorates each op class with
``@DIALECT.op``; nothing is registered by importing a module. An
:class:`OpRegistry` is built explicitly from the dialects a client wants
(``mlfuse.dialects.default_registry()`` holds all of mlfuse's) and given to the
IR parser, so the IR core never reaches up into the dialects built on it.
"""
from __future__ import annotations

from typing import Iterable, Iterator

from mlfuse.ir.core import Operation


class Dialect:
    """A named group of ops, declared by the module that defines them."""

    def __init__(self, name: str, doc: str = ""):
        self.name = name
        self.doc = doc
        self.ops: dict[str, type[Operation]] = {}

    def op(self, cls: type[Operation]) -> type[Operation]:
        """Class decorator: declare ``cls`` as one of this dialect's ops."""
        assert cls.name not in self.ops, f"op {cls.name} declared twice"
        self.ops[cls.name] = cls
        return cls

    def __repr__(self) -> str:
        return f"<Dialect {self.name}: {len(self.ops)} ops>"


class OpRegistry:
    """The ops known to a parser: the union of the dialects it was built from."""

    def __init__(self, dialects: Iterable[Dialect]):
        self.dialects = list(dialects)
        self._ops: dict[str, type[Operation]] = {}
        for d in self.dialects:
            for name, cls in d.ops.items():
                assert name not in self._ops, f"op {name} declared by two dialects"
                self._ops[name] = cls

    def get(self, name: str) -> type[Operation] | None:
        return self._ops.get(name)

    def __getitem__(self, name: str) -> type[Operation]:
        return self._ops[name]

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def items(self):
        return self._ops.items()
