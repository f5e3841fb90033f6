"""The ``mlfuse`` command line: compile, opt, run, explain, bench."""
from __future__ import annotations

import argparse
import sys

from . import __version__
from .cli_program import load_program, read_source, write_output
from .errors import MlfuseError

EMIT_CHOICES = ("fuse", "tensor", "loops", "fused", "numba")


def parse_dims(items: list[str] | None) -> dict[str, int]:
    dims = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier() or not value.strip().isdigit():
            raise MlfuseError(f"--dim takes NAME=SIZE, got {item!r}")
        if name in dims:
            raise MlfuseError(f"--dim {name} given twice ({dims[name]} and {int(value)})")
        if int(value) < 1:  # as f32[0] in a signature: sizes are positive (docs/language.md)
            raise MlfuseError(f"--dim {item}: sizes must be positive; mlfuse has no empty "
                              "arrays")
        dims[name] = int(value)
    return dims


def check_arguments(args) -> None:
    """What the command line alone can tell is wrong, before anything is read, compiled
    or written: the output over an input file included."""
    from .cli_program import check_output
    _fuse_options(args)
    parse_dims(getattr(args, "dim", None))
    inputs = getattr(args, "files", None) or [args.file]
    check_output(getattr(args, "output", None), inputs)


def _fuse_options(args) -> dict:
    from .fuse_options import check_cli_limit
    opts = {}
    if check_cli_limit(getattr(args, "fuse_limit", None)) is not None:
        opts["limit"] = args.fuse_limit
    return opts


def _print_after(enabled: bool):
    if not enabled:
        return None

    def show(pass_name: str, text: str) -> None:
        sys.stderr.write(f"// ----- IR after {pass_name} -----\n{text}\n")
    return show


def _compile_one(path: str, args) -> str:
    from .driver import lower
    from .ir.printer import print_ir
    program = load_program(path, args.func)
    module = program.module
    if args.emit == "fuse":
        from .fuse_printer import print_fuse
        return print_fuse(module, program.header)
    level = "fused" if args.emit == "numba" else args.emit
    show = _print_after(args.print_ir_after_all)
    if show:
        show("parse", print_ir(module))
    module = lower(module, level, fuse=not args.no_fuse, fuse_options=_fuse_options(args),
                   print_after=show)
    if args.emit == "numba":
        from .codegen import generate
        return generate(module, target=args.target)
    return print_ir(module)


def cmd_compile(args) -> int:
    if len(args.files) > 1 and args.emit == "numba" and args.output:
        raise MlfuseError("-o with --emit numba takes one input file")
    outputs = []
    for path in args.files:
        text = _compile_one(path, args)
        if len(args.files) > 1:
            comment = "#" if args.emit in ("numba", "fuse") else "//"
            text = f"{comment} ----- {path} -----\n{text}"
        outputs.append(text)
    write_output("\n".join(outputs), args.output)
    return 0


def cmd_opt(args) -> int:
    from .ir.parser import parse_ir
    from .ir.passes import PassManager, get_pass
    from .ir.printer import print_ir
    module = parse_ir(read_source(args.file), args.file)
    if not module.funcs:  # as for a .fuse file: nothing to transform
        raise MlfuseError(f"no function in the file {args.file}")
    names = [p.strip() for p in (args.passes or "").split(",") if p.strip()]
    passes = [get_pass(n) for n in names]
    PassManager(passes, verify_each=True, print_after=_print_after(args.print_ir_after_all)).run(module)
    write_output(print_ir(module), args.output)
    return 0


def cmd_run(args) -> int:
    from .cli_run import run_command
    return run_command(args)


def cmd_explain(args) -> int:
    from .cli_explain import explain_command
    return explain_command(args)


def cmd_bench(args) -> int:
    from .cli_bench import bench_command
    return bench_command(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlfuse", description="mlfuse: a kernel-fusing compiler "
                                "from .fuse tensor programs to Numba CUDA kernels")
    p.add_argument("--version", action="version", version=f"mlfuse {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, output=True):
        sp.add_argument("file", help="IR text" if sp.prog.endswith(" opt") else
                        "a .fuse program or an .onnx model (by extension)")
        if output:
            sp.add_argument("-o", "--output", help="write here instead of stdout")
        sp.add_argument("--print-ir-after-all", action="store_true",
                        help="print the IR after each pass to stderr")

    def fusing(sp, no_fuse=True):
        sp.add_argument("--func", help="only this function")
        if no_fuse:  # (bench always measures both)
            sp.add_argument("--no-fuse", action="store_true",
                            help="one kernel per op (the baseline)")
        sp.add_argument("--fuse-limit", type=int, help="at most this many ops per fused kernel")

    c = sub.add_parser("compile", help="compile .fuse files or ONNX models and print IR, "
                       ".fuse source or Numba source")
    c.add_argument("files", nargs="+", metavar="FILE",
                   help=".fuse programs or .onnx models (by extension)")
    c.add_argument("-o", "--output", help="write here instead of stdout")
    c.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR after each pass to stderr")
    fusing(c)
    c.add_argument("--emit", choices=EMIT_CHOICES, default="numba",
                   help="fuse: the program as .fuse source (an ONNX model's equivalent); "
                        "tensor, loops, fused: IR after that level; numba: generated source")
    c.add_argument("--target", choices=("cuda", "simulator"), default="cuda",
                   help="code for a real GPU (warp shuffles) or Numba's CUDA simulator")
    c.set_defaults(fn=cmd_compile)

    o = sub.add_parser("opt", help="run named passes on IR text (like mlir-opt)")
    common(o)
    o.add_argument("--passes", default="", help="comma-separated pass names")
    o.set_defaults(fn=cmd_opt)

    r = sub.add_parser("run", help="run on random inputs and check against the NumPy interpreter")
    common(r, output=False)
    fusing(r)
    r.add_argument("--dim", action="append", metavar="N=SIZE", help="size of a symbolic dim")
    r.add_argument("--simulator", action="store_true", help="force Numba's CUDA simulator")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--inputs", metavar="NPZ", help="arrays by parameter name (np.savez) "
                   "instead of random ones, e.g. a fuzz failure's inputs")
    r.set_defaults(fn=cmd_run)

    e = sub.add_parser("explain", help="report the fusion decisions")
    common(e, output=True)
    fusing(e)
    e.add_argument("--dim", action="append", metavar="N=SIZE", help="size of a symbolic dim")
    form = e.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="machine-readable report")
    form.add_argument("--dot", action="store_true", help="Graphviz graph of ops coloured by kernel")
    e.add_argument("--compile", action="store_true",
                   help="also compile on the GPU and report real registers, spills, shared memory")
    e.set_defaults(fn=cmd_explain)

    b = sub.add_parser("bench", help="time fused vs unfused on the GPU")
    common(b, output=False)
    fusing(b, no_fuse=False)
    b.add_argument("--dim", action="append", metavar="N=SIZE", help="size of a symbolic dim")
    b.add_argument("--json", help="write the numbers here as JSON")
    b.add_argument("--tune", action="store_true",
                   help="first search each contraction kernel's tile shape for these sizes on "
                        "this GPU and remember it (later compiles use it)")
    b.set_defaults(fn=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_arguments(args)
        return args.fn(args)
    except MlfuseError as e:
        sys.stderr.write(f"mlfuse: {e}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
