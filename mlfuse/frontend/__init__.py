"""The .fuse language frontend: source text -> verified tensor-dialect module.

``parse_source`` is the one entry point; every user mistake comes out as a single
MlfuseError with the file, line and column of the offending token.
"""
from __future__ import annotations

from functools import lru_cache

from lark import Lark
from lark.exceptions import UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from mlfuse.errors import Location, MlfuseError, normalize_newlines
from mlfuse.syntax.grammars import grammar_text
from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.verifier import verify
from mlfuse.syntax.lark_errors import convert_lark_error

from mlfuse.frontend.builder import SourceContext, build_module

__all__ = ["parse_source"]


@lru_cache(maxsize=None)
def _lark() -> Lark:
    return Lark(grammar_text("fuse.lark"), parser="lalr", lexer="basic",
                propagate_positions=True, maybe_placeholders=True)


def _readable_expected(e: UnexpectedInput) -> None:
    """Show fixed-text terminals as their text ('<=', 'return'), not Lark's generated names."""
    if isinstance(e, UnexpectedToken) and e.expected:
        terminals = {t.name: t.pattern for t in _lark().terminals}
        e.expected = {repr(terminals[n].value) if isinstance(terminals.get(n), PatternStr) else n
                      for n in e.expected}


def parse_source(text: str, filename: str = "<string>") -> ModuleOp:
    """Parse .fuse source into a verified tensor-dialect module (composites kept whole)."""
    text = normalize_newlines(text)  # so that every position counts lines as editors do
    ctx = SourceContext(text, filename)
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        _readable_expected(e)
        raise convert_lark_error(e, filename, text) from None
    module = build_module(tree, ctx)
    if not module.funcs:  # blank, or only comments: nothing a command could compile or run
        raise MlfuseError("no function in the file; a .fuse file holds one or more "
                          "'func NAME(...) -> TYPE { ... }'", Location(filename, 1, 1, text))
    verify(module)
    return module
