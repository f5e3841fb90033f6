"""Find the grammar folder from a source checkout or from an installed wheel.

In a checkout the grammars live in ``grammar/`` beside ``mlfuse/``; the wheel
ships the same files as ``mlfuse/grammar/`` (see pyproject.toml).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent  # the mlfuse package


@lru_cache(maxsize=None)
def grammar_path(filename: str) -> Path:
    for folder in (_HERE / "grammar", _HERE.parent / "grammar"):
        candidate = folder / filename
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"mlfuse grammar file {filename} not found beside {_HERE}")


@lru_cache(maxsize=None)
def grammar_text(filename: str) -> str:
    return grammar_path(filename).read_text(encoding="utf-8")
