"""Indented source text, built line by line."""
from __future__ import annotations

from contextlib import contextmanager


class Writer:
    def __init__(self, indent: str = "    "):
        self.lines: list[str] = []
        self.depth = 0
        self.unit = indent

    def line(self, text: str = "") -> None:
        self.lines.append(self.unit * self.depth + text if text else "")

    @contextmanager
    def indented(self, header: str):
        """``header`` (e.g. ``for k in range(n):``) and a block indented under it."""
        self.line(header)
        self.depth += 1
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.line("pass")
            self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
