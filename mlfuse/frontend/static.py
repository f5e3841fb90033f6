"""Compile-time arguments of built-in functions (``axis=1``, ``[1, C, 1, 1]``, ``dtype=f16``).

The builder evaluates such an argument into plain Python (ints, floats, bools,
lists and :class:`Name`); :func:`convert_static` then checks it against the
parameter's kind and normalizes it into the op attribute.
"""
from __future__ import annotations

import difflib

from mlfuse.errors import Location, MlfuseError
from mlfuse.ir.types import DTYPES, symbols_of


class Name(str):
    """A bare name in a constant argument: a symbolic dim or a dtype, with its position."""

    def __new__(cls, text: str, loc: Location):
        self = super().__new__(cls, text)
        self.loc = loc
        return self


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _show(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(map(_show, v)) + "]"
    return str(v)


def _fail(what: str, value, loc: Location):
    raise MlfuseError(f"expected {what}, got {_show(value)}", loc)


def _int(v, loc, symbols):
    return v if _is_int(v) else _fail("an integer", v, loc)


def _float(v, loc, symbols):
    return float(v) if _is_int(v) or isinstance(v, float) else _fail("a number", v, loc)


def _bool(v, loc, symbols):
    return v if isinstance(v, bool) else _fail("true or false", v, loc)


def _ints(v, loc, symbols):
    if v is None or (isinstance(v, list) and all(map(_is_int, v))):
        return v
    return _fail("a list of integers", v, loc)


def _axes(v, loc, symbols):
    if v is None or _is_int(v) or (isinstance(v, list) and all(map(_is_int, v))):
        return v
    return _fail("an axis or a list of axes", v, loc)


def _pair(v, loc, symbols):
    if _is_int(v):
        return [v, v]
    if isinstance(v, list) and len(v) == 2 and all(map(_is_int, v)):
        return v
    return _fail("an integer or a list of two integers", v, loc)


def _pair_or_none(v, loc, symbols):  # None: the builder's default (a pool's stride)
    return None if v is None else _pair(v, loc, symbols)


def _dtype(v, loc, symbols):
    if v is None:  # an optional dtype left out (arange picks one)
        return None
    if isinstance(v, str) and v in DTYPES:  # a Name, or a parameter's default
        return str(v)
    close = difflib.get_close_matches(str(v), DTYPES, n=1)
    hint = f"; did you mean {close[0]}?" if close else f" (one of {', '.join(DTYPES)})"
    raise MlfuseError(f"expected a dtype, got {_show(v)}{hint}", getattr(v, "loc", loc))


def _dims(v, loc, symbols):
    if not isinstance(v, list):
        _fail("a shape list such as [1, N]", v, loc)
    for d in v:
        if isinstance(d, Name):
            for s in symbols_of([d]):  # each name of a product B*H too
                if s not in symbols:
                    known = ", ".join(sorted(symbols)) or "none"
                    raise MlfuseError(f"unknown dim '{s}' (this function's dims: {known})", d.loc)
        elif not _is_int(d):
            _fail("a shape list of integers and dim names", v, loc)
    return [d if _is_int(d) else str(d) for d in v]


def _number(v, loc, symbols):
    return v if v is None or _is_int(v) or isinstance(v, float) else _fail("a number", v, loc)


def _parts(v, loc, symbols):
    if _is_int(v) or (isinstance(v, list) and v and all(map(_is_int, v))):
        return v
    return _fail("a count or a list of sizes", v, loc)


def _pads(v, loc, symbols):
    if isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 and all(map(_is_int, p))
                                   and min(p) >= 0 for p in v):
        return v
    return _fail("a list of [low, high] pairs of non-negative integers, one per axis", v, loc)


_CONVERTERS = {"int": _int, "float": _float, "bool": _bool, "ints": _ints, "axes": _axes,
               "pair": _pair, "pair_or_none": _pair_or_none, "dtype": _dtype, "dims": _dims,
               "number": _number, "parts": _parts, "pads": _pads}
STATIC_KINDS = tuple(_CONVERTERS)


def convert_static(kind: str, value, loc: Location, symbols=frozenset()):
    """Check ``value`` against ``kind`` and return the attribute value; MlfuseError at ``loc``."""
    return _CONVERTERS[kind](value, loc, symbols)
