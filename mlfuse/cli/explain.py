"""``mlfuse explain``: the fusion report as text, JSON or Graphviz."""
from __future__ import annotations

from mlfuse.cli.options import fuse_options, parse_dims
from mlfuse.cli.program import load_program, write_output
from mlfuse.pipeline import lower
from mlfuse.tools.explain import explain_module, format_dot, format_json, format_text


def _compile_and_measure(program, reports, dims, limit, precision) -> None:
    """Compile for the GPU, run each function once on random inputs, and read back
    the registers, spills and shared memory Numba's compile reports."""
    from mlfuse.runtime.device import choose_device
    from mlfuse.errors import MlfuseError
    if choose_device(announce=False) != "cuda":
        raise MlfuseError("explain --compile needs a CUDA GPU (the simulator compiles nothing)")
    from mlfuse.tools.explain import attach_compiled_resources
    from mlfuse.tools.checking import bind_dims
    # the kernels the report describes: planned at the same dims, with the same limit
    compiled = program.compile(target="cuda", fuse_options={"dims": dims, "limit": limit},
                               matmul_precision=precision)
    for func in program.module.funcs:
        compiled[func.sym_name](*program.inputs(func, bind_dims(func, dims, default=64)))
    attach_compiled_resources(reports, compiled.python_module)


def explain_command(args) -> int:
    program = load_program(args.file, args.func)
    dims = program.dims(parse_dims(args.dim))
    rewrites: list[str] = []  # the tensor passes plan at the dims too
    loops = lower(program.copy(), "loops", fuse_options={"dims": dims}, remarks=rewrites)
    limit = 1 if args.no_fuse else fuse_options(args).get("limit")
    reports = explain_module(loops, dims, limit, matmul_precision=args.matmul_precision,
                             rewrites=rewrites)
    if args.compile:
        _compile_and_measure(program, reports, dims, limit, args.matmul_precision)
    if args.dot:
        text = format_dot(reports)
    elif args.json:
        text = format_json(reports)
    else:
        text = format_text(reports)
    write_output(text, args.output)
    return 0
