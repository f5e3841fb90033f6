"""The ``mlfuse`` command line: the parser of every verb, and dispatch to the verb's
module (``compile``, ``opt``, ``run``, ``explain``, ``bench``; shared options in
``options``)."""
from __future__ import annotations

import argparse
import importlib
import sys

from mlfuse import __version__
from mlfuse.cli.compile import EMIT_CHOICES
from mlfuse.cli.options import (add_dims, add_fusing, add_hardware, add_input, add_output,
                                add_precision, check_arguments)
from mlfuse.errors import MlfuseError

# verb -> (module, function): imported only when the verb runs
COMMANDS = {
    "compile": ("mlfuse.cli.compile", "compile_command"),
    "opt": ("mlfuse.cli.opt", "opt_command"),
    "run": ("mlfuse.cli.run", "run_command"),
    "explain": ("mlfuse.cli.explain", "explain_command"),
    "bench": ("mlfuse.cli.bench", "bench_command"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlfuse", description="mlfuse: a kernel-fusing compiler "
                                "from .fuse tensor programs to Numba CUDA kernels")
    p.add_argument("--version", action="version", version=f"mlfuse {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="compile .fuse files or ONNX models and print IR, "
                       ".fuse source or Numba source")
    c.add_argument("files", nargs="+", metavar="FILE",
                   help=".fuse programs or .onnx models (by extension)")
    add_output(c)
    add_fusing(c)
    add_precision(c)
    c.add_argument("--emit", choices=EMIT_CHOICES, default="numba",
                   help="fuse: the program as .fuse source (an ONNX model's equivalent); "
                        "tensor, loops, fused: IR after that level; numba: generated source")
    c.add_argument("--target", choices=("cuda", "simulator"), default="cuda",
                   help="code for a real GPU (warp shuffles) or Numba's CUDA simulator")

    o = sub.add_parser("opt", help="run named passes on IR text (like mlir-opt)")
    add_input(o, ir=True)
    from mlfuse.transforms import PASSES
    o.add_argument("--passes", default="", help="comma-separated pass names: "
                   + ", ".join(PASSES))
    o.add_argument("--fuse-limit", type=int, help="at most this many ops per fused kernel")
    add_precision(o)
    add_dims(o)
    add_hardware(o)
    o.add_argument("--print-decisions", action="store_true",
                   help="after the IR, print each pass's decisions with their reasons as "
                        "'// PASS: ...' comment lines (fuse: one per producer)")

    r = sub.add_parser("run", help="run on random inputs and check against the NumPy interpreter")
    add_input(r, output=False)
    add_fusing(r)
    add_precision(r)
    add_dims(r)
    r.add_argument("--simulator", action="store_true", help="force Numba's CUDA simulator")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--inputs", metavar="NPZ", help="arrays by parameter name (np.savez) "
                   "instead of random ones, e.g. a fuzz failure's inputs")

    e = sub.add_parser("explain", help="report the fusion decisions")
    add_input(e)
    add_fusing(e)
    add_precision(e)
    add_dims(e)
    form = e.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="machine-readable report")
    form.add_argument("--dot", action="store_true", help="Graphviz graph of ops coloured by kernel")
    e.add_argument("--compile", action="store_true",
                   help="also compile on the GPU and report real registers, spills, shared memory")

    b = sub.add_parser("bench", help="time fused vs unfused on the GPU")
    add_input(b, output=False)
    add_fusing(b, no_fuse=False)
    add_precision(b)
    add_dims(b)
    b.add_argument("--json", help="write the numbers here as JSON")
    b.add_argument("--tune", action="store_true",
                   help="first search each contraction kernel's tile shape and K split for these sizes on "
                        "this GPU and remember it (later compiles use it)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module, function = COMMANDS[args.command]
    try:
        check_arguments(args)
        return getattr(importlib.import_module(module), function)(args)
    except MlfuseError as e:
        sys.stderr.write(f"mlfuse: {e}\n")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
