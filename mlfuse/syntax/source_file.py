"""Reading a source file (.fuse or IR text) for the compiler: its text, or an error
at the line and column of the first byte that is not UTF-8."""
from __future__ import annotations

from pathlib import Path

from mlfuse.errors import Location, MlfuseError


def read_source(path: str) -> str:
    """The text of a source file; bytes that are not UTF-8 are an error at their
    line and column (the line shown with the undecodable bytes replaced)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise MlfuseError(f"cannot read {path}: {e.strerror}") from None
    try:
        return data.decode("utf-8-sig")  # a byte order mark (some Windows editors) is dropped
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        line = data[:e.start].count(b"\n") + 1
        column = len(data[line_start:e.start].decode("utf-8", "replace")) + 1
        # undecodable bytes and control characters shown as U+FFFD, one for one
        shown = "".join(c if c.isprintable() or c in "\n\t" else "\ufffd"
                        for c in data.decode("utf-8", "replace"))
        kind = "a binary file" if b"\0" in data else "text in another encoding"
        raise MlfuseError(f"byte 0x{data[e.start]:02x} is not UTF-8 (is this {kind}?)",
                          Location(path, line, column, shown)) from None
