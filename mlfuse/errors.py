"""One error type for everything a user can get wrong, with a source position."""
from __future__ import annotations

from dataclasses import dataclass


def normalize_newlines(text: str) -> str:
    """``\r\n`` and a lone ``\r`` as ``\n``: the one line break the parsers and every
    position count (form feed and vertical tab are spaces within a line, as in Python)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def source_lines(text: str) -> list[str]:
    """The lines of a source text as positions count them (not ``str.splitlines``,
    which also breaks at form feeds, vertical tabs and other separators)."""
    return normalize_newlines(text).split("\n")


@dataclass(frozen=True)
class Location:
    """A position in a source file (1-based line and column)."""

    file: str
    line: int
    column: int
    source: str | None = None  # whole text of the file, for the caret display

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class MlfuseError(Exception):
    """A user-facing error. ``str()`` gives ``file:line:col: error: msg``, the line and a caret."""

    def __init__(self, message: str, loc: Location | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        if self.loc is None:
            return f"error: {self.message}"
        text = f"{self.loc}: error: {self.message}"
        if self.loc.source is not None:
            lines = source_lines(self.loc.source)
            if 1 <= self.loc.line <= len(lines):
                # one column per character: a tab, form feed or vertical tab shows as a space
                line = lines[self.loc.line - 1].expandtabs(1).replace("\f", " ").replace("\v", " ")
                caret = " " * max(self.loc.column - 1, 0) + "^"
                text += f"\n    {line}\n    {caret}"
        return text


class ArgumentError(MlfuseError, TypeError):
    """A compiled function was called with wrong arguments."""


class ArgumentValueError(ArgumentError, ValueError):
    """An argument of the right kind whose value mlfuse cannot take: an empty array, a
    scalar beyond its dtype's range, sizes too large to index (a ValueError, as NumPy
    raises for a reduction over nothing; still an ArgumentError)."""
