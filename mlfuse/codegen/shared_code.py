"""Kernels whose code is the same but for names, compiled once.

A model repeats its layers: a transformer's blocks, a CNN's stages of identical
convolutions. Their fused kernels come out of code generation as the same code under
other names (the kernel's, its parameters', its local values', which follow the model's
value names), and Numba compiles each name on its own, about a second apiece (typing,
lowering, NVVM, ptxas): vit_tiny's 149 kernel definitions were 20 distinct codes.

``share_identical`` keys each kernel's text by its *form*: the bytecode CPython
compiles it to, where a function's locals, parameters and closure cells are slots by
number, so their names drop out; what remains named is what the text reads from the
module (globals, helpers, numba: kept as they are) and the module-level names it binds
(its kernel's names: numbered in order of appearance). Two texts of one form compute
the same thing given the same globals, which all kernels of a module share. (A
parameter name that a call's keyword could name is kept; a text that reads one of its
module-level names as an attribute gets a form of its own.) The first text of a form is
emitted; a later one becomes aliases of its module-level names (``main_graph_4 =
main_graph_2``), so the host function's launches stay as they were and one dispatcher
(one compile per argument types, one disk-cache entry) serves both. Sizes are
constants in a kernel's code, so only kernels over the same shapes share; comments
stay (they name the IR values each kernel computes). Hashing bytecode rather than a
walk of the syntax tree keeps this cheap: CPython compiles a model's megabyte of
kernel text in well under a second; walking its trees in Python took several.
"""
from __future__ import annotations

import dis
import re
import types

_STORES = ("STORE_NAME", "STORE_GLOBAL")


def _module_names(code: types.CodeType) -> list[str]:
    """The names the module-level code of a text binds, in order."""
    names = []
    for ins in dis.get_instructions(code):
        if ins.opname in _STORES and ins.argval not in names:
            names.append(ins.argval)
    return names


def _keyword_names(code: types.CodeType, out: set[str]) -> set[str]:
    """Every string in a tuple constant of ``code`` and its nested code: the names a
    call's keywords may give (CPython keeps a call's keywords as such a tuple)."""
    for const in code.co_consts:
        if isinstance(const, tuple):
            out.update(c for c in const if isinstance(c, str))
        elif isinstance(const, types.CodeType):
            _keyword_names(const, out)
    return out


def _form(code: types.CodeType, numbered: dict[str, int], keywords: set[str]):
    params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount
                              + bool(code.co_flags & 4) + bool(code.co_flags & 8)]
    return (code.co_code, getattr(code, "co_exceptiontable", b""),  # 3.11 on
            code.co_argcount, code.co_posonlyargcount,
            code.co_kwonlyargcount, code.co_flags, code.co_nlocals,
            len(code.co_cellvars), len(code.co_freevars),
            tuple(p if p in keywords else None for p in params),
            tuple(("<module name>", numbered[n]) if n in numbered else n
                  for n in code.co_names),
            tuple(_form(c, numbered, keywords) if isinstance(c, types.CodeType)
                  else (type(c).__name__, repr(c)) for c in code.co_consts))


def canonical_form(text: str) -> tuple[object, list[str]]:
    """(the form of ``text``, the module-level names it binds, in the order the form
    numbers them)."""
    code = compile(text, "<kernel>", "exec")
    names = _module_names(code)
    numbered = {n: i for i, n in enumerate(names)}
    if any(re.search(r"\.\s*" + re.escape(n) + r"\b", text) for n in names):
        return ("own form", text), names  # read as an attribute: keep it apart
    return _form(code, numbered, _keyword_names(code, set())), names


def _leading_comments(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


def share_identical(texts: list[str]) -> list[str]:
    """``texts`` (one per kernel, each binding its kernel's module-level names) with
    each text whose form an earlier one has replaced by aliases of that one's names
    (see the module doc)."""
    first: dict[object, list[str]] = {}
    out = []
    for text in texts:
        form, names = canonical_form(text)
        if form not in first:
            first[form] = names
            out.append(text)
            continue
        aliases = list(zip(names, first[form]))
        kernel = next((same for _, same in aliases if not same.startswith("_")), aliases[0][1])
        lines = _leading_comments(text)
        lines.append(f"# the code of {kernel} but for names: one compile serves both")
        lines += [f"{name} = {same}" for name, same in aliases]
        out.append("\n".join(lines) + "\n")
    return out


__all__ = ["canonical_form", "share_identical"]
