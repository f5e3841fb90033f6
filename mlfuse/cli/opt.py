"""``mlfuse opt``: run named passes on IR text of any level, like mlir-opt."""
from __future__ import annotations

from mlfuse.cli.options import print_after
from mlfuse.cli.program import read_source, write_output


def opt_command(args) -> int:
    from mlfuse.dialects import parse_ir
    from mlfuse.ir.pass_manager import PassManager
    from mlfuse.ir.printer import print_ir
    from mlfuse.transforms import get_pass
    module = parse_ir(read_source(args.file), args.file)
    names = [p.strip() for p in (args.passes or "").split(",") if p.strip()]
    passes = [get_pass(n) for n in names]
    PassManager(passes, verify_each=True, print_after=print_after(args.print_ir_after_all)).run(module)
    write_output(print_ir(module), args.output)
    return 0
