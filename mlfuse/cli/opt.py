"""``mlfuse opt``: run named passes on IR text of any level, like mlir-opt."""
from __future__ import annotations

from mlfuse.cli.options import fuse_options, hardware_in_effect, parse_dims, print_after
from mlfuse.cli.program import read_source, write_output
from mlfuse.errors import MlfuseError


def opt_command(args) -> int:
    from mlfuse.dialects import parse_ir
    from mlfuse.ir.pass_manager import PassManager
    from mlfuse.ir.printer import print_ir
    from mlfuse.transforms import get_pass
    module = parse_ir(read_source(args.file), args.file)
    if not module.funcs:  # as for a .fuse file: nothing to transform
        raise MlfuseError(f"no function in the file {args.file}")
    names = [p.strip() for p in (args.passes or "").split(",") if p.strip()]
    options = dict(fuse_options(args), dims=parse_dims(args.dim))
    by_pass = {"fuse": options, "no-fuse": options,
               "split-reductions": {"dims": options["dims"]},
               "schedule-contractions": {"precision": args.matmul_precision},
               "coalesce-axes": {"dims": options["dims"]},
               "flatten-row-nests": {"dims": options["dims"]},
               "flatten-column-nests": {"dims": options["dims"]}}
    with hardware_in_effect(args.hw):  # (--hw: the target the passes plan for)
        passes = [get_pass(n, **by_pass.get(n, {})) for n in names]
        PassManager(passes, verify_each=True,
                    print_after=print_after(args.print_ir_after_all)).run(module)
    text = print_ir(module)
    if args.print_decisions:  # comments, so the output still parses as IR
        text += "".join(f"// {p.name}: {remark}\n" for p in passes for remark in p.remarks())
    write_output(text, args.output)
    return 0
