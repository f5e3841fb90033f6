"""``mlfuse compile``: .fuse programs or ONNX models to IR, .fuse source or Numba source."""
from __future__ import annotations

from mlfuse.cli.options import fuse_options, print_after
from mlfuse.cli.program import load_program, write_output
from mlfuse.errors import MlfuseError

EMIT_CHOICES = ("fuse", "tensor", "loops", "fused", "numba")


def compile_one(path: str, args) -> str:
    from mlfuse.ir.printer import print_ir
    from mlfuse.pipeline import lower
    program = load_program(path, args.func)
    module = program.module
    if args.emit == "fuse":
        from mlfuse.frontend.fuse_printer import print_fuse
        return print_fuse(module, program.header)
    level = "fused" if args.emit == "numba" else args.emit
    show = print_after(args.print_ir_after_all)
    if show:
        show("parse", print_ir(module))
    module = lower(module, level, fuse=not args.no_fuse, fuse_options=fuse_options(args),
                   print_after=show, matmul_precision=args.matmul_precision)
    if args.emit == "numba":
        from mlfuse.codegen import generate
        return generate(module, target=args.target)
    return print_ir(module)


def compile_command(args) -> int:
    if len(args.files) > 1 and args.emit == "numba" and args.output:
        raise MlfuseError("-o with --emit numba takes one input file")
    outputs = []
    for path in args.files:
        text = compile_one(path, args)
        if len(args.files) > 1:
            comment = "#" if args.emit in ("numba", "fuse") else "//"
            text = f"{comment} ----- {path} -----\n{text}"
        outputs.append(text)
    write_output("\n".join(outputs), args.output)
    return 0
