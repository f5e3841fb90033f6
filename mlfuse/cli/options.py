"""What the verbs share: their common arguments and how they are read.

Each verb module (compile, opt, run, explain, bench) imports from here and from
``program``; ``main`` builds the parser from these helpers and imports a verb's
module only when that verb runs, so no module of this package imports another
that imports it back.
"""
from __future__ import annotations

import argparse
import sys

from mlfuse.errors import MlfuseError


def add_input(sp: argparse.ArgumentParser, output: bool = True, ir: bool = False) -> None:
    """The input file, -o and --print-ir-after-all (every verb but compile, which takes many)."""
    sp.add_argument("file", help="IR text" if ir else "a .fuse program or an .onnx model (by extension)")
    if output:
        add_output(sp)


def add_output(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("-o", "--output", help="write here instead of stdout")
    sp.add_argument("--print-ir-after-all", action="store_true",
                    help="print the IR after each pass to stderr")


def add_fusing(sp: argparse.ArgumentParser, no_fuse: bool = True) -> None:
    sp.add_argument("--func", help="only this function")
    if no_fuse:  # (bench always measures both)
        sp.add_argument("--no-fuse", action="store_true", help="one kernel per op (the baseline)")
    sp.add_argument("--fuse-limit", type=int, help="at most this many ops per fused kernel")


def add_precision(sp: argparse.ArgumentParser) -> None:
    """--matmul-precision: how f32 matmul and conv2d multiply (mlfuse/matmul_precision.py)."""
    from mlfuse.matmul_precision import DEFAULT, PRECISIONS
    sp.add_argument("--matmul-precision", choices=PRECISIONS, default=DEFAULT,
                    help="f32 matmul/conv2d: highest = exact fp32 (SIMT), high = 3xTF32 on "
                         "tensor cores (about fp32's error), medium = TF32 (10 mantissa bits)")


def add_dims(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--dim", action="append", metavar="N=SIZE", help="size of a symbolic dim")


def add_hardware(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--hw", action="append", metavar="NAME=VALUE",
                    help="a field of the hardware target changed (mlfuse/hardware.py), e.g. "
                         "row_staged_stores=true: the passes plan for it")


def hardware_in_effect(items: list[str] | None):
    """A context in which the passes' target has the --hw fields changed."""
    import dataclasses
    from contextlib import nullcontext

    from mlfuse.hardware import get_target, hw_setting, target_in_effect
    if not items:
        return nullcontext()
    try:
        fields = dict(hw_setting(item) for item in items)
    except ValueError as e:
        raise MlfuseError(f"--hw: {e}") from None
    return target_in_effect(dataclasses.replace(get_target(), **fields))


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


def fuse_options(args) -> dict:
    """The fuse pass's options from the command line (--fuse-limit)."""
    from mlfuse.transforms.fusion.options import check_cli_limit
    opts = {}
    if check_cli_limit(getattr(args, "fuse_limit", None)) is not None:
        opts["limit"] = args.fuse_limit
    return opts


def check_arguments(args) -> None:
    """What the command line alone can tell is wrong, before anything is read, compiled
    or written: the output over an input file included."""
    from mlfuse.cli.program import check_output
    fuse_options(args)
    parse_dims(getattr(args, "dim", None))
    inputs = getattr(args, "files", None) or [args.file]
    check_output(getattr(args, "output", None), inputs)


def print_after(enabled: bool):
    """A pass-manager hook printing the IR after each pass to stderr, or None."""
    if not enabled:
        return None

    def show(pass_name: str, text: str) -> None:
        sys.stderr.write(f"// ----- IR after {pass_name} -----\n{text}\n")
    return show
