"""``mlfuse explain``: the fusion report as text, JSON or Graphviz."""
from __future__ import annotations

import sys
from pathlib import Path

from .cli import _fuse_options, _read, _select_func, parse_dims
from .driver import lower, parse_program
from .explain import explain_module, format_dot, format_json, format_text


def _compile_and_measure(args, module, reports, dims) -> None:
    """Compile for the GPU, run each function once on random inputs, and read back
    the registers, spills and shared memory Numba's compile reports."""
    from .device import choose_device
    from .errors import MlfuseError
    if choose_device(announce=False) != "cuda":
        raise MlfuseError("explain --compile needs a CUDA GPU (the simulator compiles nothing)")
    from .api import compile_source
    from .explain import attach_compiled_resources
    from .testing import bind_dims, random_inputs
    compiled = compile_source(_read(args.file), args.file, target="cuda",
                              fuse_options=_fuse_options(args))
    for func in module.funcs:
        compiled[func.sym_name](*random_inputs(func, bind_dims(func, dims, default=64)))
    attach_compiled_resources(reports, compiled.python_module)


def explain_command(args) -> int:
    dims = parse_dims(args.dim)
    module = _select_func(parse_program(_read(args.file), args.file), args.func)
    loops = lower(module, "loops")
    if args.no_fuse:
        limit = 1
    else:
        limit = args.fuse_limit
    reports = explain_module(loops, dims, limit)
    if args.compile:
        _compile_and_measure(args, module, reports, dims)
    if args.dot:
        text = format_dot(reports)
    elif args.json:
        text = format_json(reports)
    else:
        text = format_text(reports)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
