"""What the commands read and write: a program from a .fuse file or an ONNX model.

Every command (compile, run, explain, bench) takes either kind of file, picked by
extension, and gets the same thing back: a verified tensor-level module, plus the
arrays an ONNX model binds to some of its parameters (its initializers). Reading
and writing files never ends in a traceback: a missing file, a directory, bytes
that are not UTF-8 or an unwritable output are one MlfuseError.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from mlfuse.errors import MlfuseError
from mlfuse.syntax.source_file import read_source


def check_output(out: str | None, inputs: list[str]) -> None:
    """``-o out`` names a file that is none of the ``inputs`` (checked before any work,
    so that a mistake never overwrites the source)."""
    if out is None:
        return
    if not out:
        raise MlfuseError("-o needs a file name (leave -o out to write to stdout)")
    target = Path(out)
    for path in inputs:
        source = Path(path)
        try:
            same = target.exists() and source.exists() and target.samefile(source)
        except OSError:
            same = False
        if same or target.resolve() == source.resolve():
            raise MlfuseError(f"-o {out} is an input file; refusing to overwrite it")


def write_output(text: str, out: str | None) -> None:
    """Write ``text`` to the file ``out``, or to stdout when ``out`` is None."""
    if out is None:
        sys.stdout.write(text)
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as e:
        raise MlfuseError(f"cannot write {out}: {e.strerror}") from None


def is_onnx(path: str) -> bool:
    return path.lower().endswith(".onnx")


@dataclass
class Program:
    """A tensor-level module and where it came from."""

    path: str
    module: object                 # ModuleOp, tensor dialect (composites kept whole)
    header: str = ""               # a comment for --emit fuse
    constants: dict = field(default_factory=dict)
    # parameter name -> array: parameters a model binds itself (ONNX initializers)

    @property
    def name(self) -> str:
        return Path(self.path).stem or "module"

    def copy(self):
        """A fresh copy of the module, for passes that rewrite in place."""
        from mlfuse.dialects import parse_ir
        from mlfuse.ir.printer import print_ir
        return parse_ir(print_ir(self.module))

    def compile(self, fuse: bool = True, target: str | None = None,
                fuse_options: dict | None = None, matmul_precision: str | None = None):
        """Lower, fuse, generate and load the whole module (a CompiledModule)."""
        from mlfuse.api import compile_ir
        from mlfuse.pipeline import lower
        module = lower(self.copy(), "fused", fuse, fuse_options,
                       matmul_precision=matmul_precision)
        return compile_ir(module, target, self.name)

    def dims(self, given: dict) -> dict:
        """``given`` (from --dim), checked: every name is a symbolic dim of some function
        (a typo such as --dim n=5 would otherwise leave N at its default)."""
        known = sorted({d for f in self.module.funcs for a in f.args for d in a.type.shape
                        if isinstance(d, str)})
        unknown = [name for name in given if name not in known]
        if unknown:
            raise MlfuseError(f"--dim {unknown[0]}: no such symbolic dim in {self.path} "
                              f"(dims: {', '.join(known) or 'none'})")
        return given

    def inputs(self, func, dims: dict, seed: int = 0) -> list:
        """Arguments for ``func``: random arrays, and the model's own arrays for the
        parameters it binds itself."""
        from mlfuse.tools.checking import random_inputs
        args = random_inputs(func, dims, seed)
        return [self.constants.get(p.name_hint, a) for p, a in zip(func.args, args)]


def load_program(path: str, func: str | None = None) -> Program:
    """A .fuse file or an .onnx model (by extension), keeping only function ``func``
    when given."""
    if is_onnx(path):
        from mlfuse.frontend.onnx_import import import_onnx
        imported = import_onnx(path)
        header = f"Imported from {Path(path).name} by mlfuse."
        if imported.constants:
            names = ", ".join(name for name, _ in imported.constants)
            header += (f"\nThe parameters after the graph inputs hold the model's initializers "
                       f"({names});\nmlfuse.compile_onnx binds them on every call.")
        program = Program(path, imported.module, header, dict(imported.constants))
    else:
        from mlfuse.pipeline import parse_program
        program = Program(path, parse_program(read_source(path), path))
    select_func(program.module, func)
    return program


def select_func(module, name: str | None):
    """Keep only function ``name`` in the module (all when None)."""
    if name is None:
        return module
    names = [f.sym_name for f in module.funcs]
    if name not in names:
        raise MlfuseError(f"no function '{name}' (have: {', '.join(names) or 'none'})")
    for f in list(module.funcs):
        if f.sym_name != name:
            module.body.detach(f)
    return module
