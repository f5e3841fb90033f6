"""``mlfuse explain``: the fusion report as text, JSON or Graphviz."""
from __future__ import annotations

import sys
from pathlib import Path

from .cli import _read, _select_func, parse_dims
from .driver import lower, parse_program
from .explain import explain_module, format_dot, format_json, format_text


def explain_command(args) -> int:
    dims = parse_dims(args.dim)
    module = _select_func(parse_program(_read(args.file), args.file), args.func)
    loops = lower(module, "loops")
    if args.no_fuse:
        limit = 1
    else:
        limit = args.fuse_limit
    reports = explain_module(loops, dims, limit)
    if args.dot:
        text = format_dot(reports)
    elif args.json:
        text = format_json(reports)
    else:
        text = format_text(reports, dims)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
