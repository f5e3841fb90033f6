"""The pipeline: .fuse text -> tensor IR -> loops IR -> fused IR (kernels).

Each step is a named pass, so ``mlfuse opt --passes`` can run any of them on IR text.
"""
from __future__ import annotations

from typing import Callable

from mlfuse.ir.builtin import ModuleOp
from mlfuse.ir.pass_manager import PassManager
from mlfuse.transforms import get_pass

LEVELS = ("tensor", "loops", "fused")


def parse_program(text: str, filename: str = "<string>") -> ModuleOp:
    """Parse .fuse source into the tensor dialect (verified, with source locations)."""
    from mlfuse.frontend import parse_source
    return parse_source(text, filename)


def pass_names(level: str, fuse: bool = True) -> list[str]:
    """The passes that take a freshly parsed tensor module down to ``level``."""
    names = ["decompose", "cse", "split-reductions", "cse"]
    if level in ("loops", "fused"):
        names.append("lower-tensor-to-loops")
    if level == "fused":
        names += ["fuse" if fuse else "no-fuse", "schedule-contractions", "coalesce-axes",
                  "flatten-row-nests", "flatten-column-nests"]
    return names


def lower(module: ModuleOp, level: str = "fused", fuse: bool = True, fuse_options: dict | None = None,
          print_after: Callable[[str, str], None] | None = None,
          matmul_precision: str | None = None, remarks: list | None = None) -> ModuleOp:
    """``matmul_precision``: how f32 contractions multiply (mlfuse/matmul_precision.py;
    None: "highest", exact fp32). ``remarks``: a list the passes' remarks are appended
    to, "pass-name: remark" each (explain prints the tensor passes' rewrites)."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of {', '.join(LEVELS)}")
    from mlfuse.matmul_precision import check_matmul_precision
    from mlfuse.transforms.fusion.options import check_fuse_options
    fuse_options = check_fuse_options(fuse_options)
    options = {"fuse": fuse_options or {},
               "split-reductions": {"dims": (fuse_options or {}).get("dims")},
               "schedule-contractions": {"precision": check_matmul_precision(matmul_precision)},
               "coalesce-axes": {"dims": (fuse_options or {}).get("dims")},
               "flatten-row-nests": {"dims": (fuse_options or {}).get("dims")},
               "flatten-column-nests": {"dims": (fuse_options or {}).get("dims")}}
    passes = [get_pass(name, **options.get(name, {})) for name in pass_names(level, fuse)]
    module = PassManager(passes, verify_each=True, print_after=print_after).run(module)
    if remarks is not None:
        remarks += [f"{p.name}: {r}" for p in passes for r in p.remarks()]
    return module


def compile_text(text: str, filename: str = "<string>", level: str = "fused", fuse: bool = True,
                 fuse_options: dict | None = None, print_after=None,
                 matmul_precision: str | None = None) -> ModuleOp:
    """Parse .fuse source and lower it to ``level``."""
    module = parse_program(text, filename)
    if print_after is not None:
        from mlfuse.ir.printer import print_ir
        print_after("parse", print_ir(module))
    return lower(module, level, fuse, fuse_options, print_after, matmul_precision)
