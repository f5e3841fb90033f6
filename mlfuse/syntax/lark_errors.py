"""Turn Lark's exceptions into one MlfuseError with file:line:col and a caret."""
from __future__ import annotations

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from mlfuse.errors import Location, MlfuseError, source_lines

# Readable names for Lark's anonymous terminals.
_TERMINAL_NAMES = {
    "LPAR": "'('", "RPAR": "')'", "LBRACE": "'{'", "RBRACE": "'}'", "LSQB": "'['", "RSQB": "']'",
    "COMMA": "','", "COLON": "':'", "EQUAL": "'='", "MORETHAN": "'>'", "LESSTHAN": "'<'",
    "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'", "_NL": "end of line",
    "NAME": "a name", "VALUE": "a %value", "OPNAME": "an op name", "DTYPE": "a dtype",
    "SIGNED_INT": "an integer", "SIGNED_FLOAT": "a number", "INT": "an integer", "NUMBER": "a number",
    "FLOAT": "a number", "ESCAPED_STRING": "a string", "FUNCNAME": "@name", "$END": "end of file",
}


def _describe(names) -> str:
    shown = sorted({_TERMINAL_NAMES.get(n, n.lower().strip("_")) for n in names})
    if len(shown) > 6:
        shown = shown[:6] + ["..."]
    return ", ".join(shown)


def location_of(node, filename: str, source: str) -> Location:
    """The Location of a Lark token or tree (built with propagate_positions=True)."""
    meta = node if isinstance(node, Token) else node.meta
    return Location(filename, getattr(meta, "line", None) or 1,
                    getattr(meta, "column", None) or 1, source)


def convert_lark_error(e: UnexpectedInput, filename: str, source: str) -> MlfuseError:
    line, column = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        lines = source_lines(source)
        if len(lines) > 1 and not lines[-1]:
            lines.pop()  # the end of the file is on the last line that has text after it
        line, column = len(lines), len(lines[-1]) + 1
        message = "unexpected end of file"
        expected = getattr(e, "expected", None)
        if expected:
            message += f"; expected {_describe(expected)}"
    elif isinstance(e, UnexpectedToken):
        tok: Token = e.token
        message = f"unexpected {tok.value!r}" if tok.value.strip() else "unexpected end of line"
        if e.expected:
            message += f"; expected {_describe(e.expected)}"
    elif isinstance(e, UnexpectedCharacters):
        ch = source[e.pos_in_stream] if 0 <= e.pos_in_stream < len(source) else "?"
        message = f"unexpected character {ch!r}"
    else:  # pragma: no cover - Lark has no other input errors today
        message = str(e).splitlines()[0]
    return MlfuseError(message, Location(filename, line, column, source))
