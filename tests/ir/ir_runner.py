"""Runs the ``// RUN:`` lines of an IR-text test, like LLVM's lit (tests/ir/conftest.py
collects the files; tests/ir/README.md says how to write one).

The grammar is a small subset of the shell, run in this process for speed (no
subprocess, no shell): ``%s`` is the file's path; stages are separated by ``|``; a stage
is ``[not] mlfuse ARGS [2>&1]`` (``mlfuse.cli.main``, stdout captured; ``2>&1`` also
passes stderr down the pipe) or ``filecheck ARGS`` (the PyPI ``filecheck`` package, the
LLVM FileCheck port, reading the previous stage's output). ``not`` expects a failing
exit status; an exception out of the compiler fails the test either way (a crash is
never an expected error). Every RUN line must end in ``| filecheck``, and anything
else is refused, so a RUN line never silently checks less than it says.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

RUN_LINE = re.compile(r"^\s*//\s*RUN:\s?(.*)$")


class RunFailure(Exception):
    """A RUN line did not do what it says; the message is the whole report."""


def run_file(path: Path) -> None:
    """Run every RUN line of ``path``; raises RunFailure on the first that fails."""
    runs = run_lines(path)
    if not runs:
        raise RunFailure(f"{path}: no '// RUN:' line")
    for line_no, command in runs:
        try:
            run_pipeline(command, path)
        except RunFailure as e:
            raise RunFailure(f"{path.name}:{line_no}: RUN: {command}\n{e}") from None


def run_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, command) for each RUN command, continuation lines joined."""
    runs, pending = [], None
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = RUN_LINE.match(line)
        if not m:
            continue
        text = m.group(1).strip()
        start, head = pending if pending else (no, "")
        text = head + " " + text if head else text
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip())
            continue
        pending = None
        runs.append((start, text))
    if pending:
        raise RunFailure(f"{path}:{pending[0]}: RUN line ends in a continuation '\\'")
    return runs


@dataclass
class Stage:
    argv: list[str]
    expect_failure: bool = False
    stderr_to_stdout: bool = False


def parse_pipeline(command: str, path: Path) -> list[Stage]:
    tokens = shlex.split(command.replace("%s", shlex.quote(str(path))))
    stages, current = [], []
    for tok in tokens + ["|"]:
        if tok != "|":
            current.append(tok)
            continue
        if not current:
            raise RunFailure("empty stage in the pipeline")
        stage = Stage(current)
        if stage.argv[0] == "not":
            stage.expect_failure, stage.argv = True, stage.argv[1:]
        if stage.argv and stage.argv[-1] == "2>&1":
            stage.stderr_to_stdout, stage.argv = True, stage.argv[:-1]
        if not stage.argv or stage.argv[0] not in RUNNERS:
            raise RunFailure(f"unsupported command {' '.join(current)!r} "
                             f"(a stage runs one of: {', '.join(RUNNERS)})")
        shell = [t for t in stage.argv if t in ("<", ">", ">>", "&&", ";", "||", "2>&1", "&")]
        if shell:
            raise RunFailure(f"unsupported shell syntax {shell[0]!r} (only '|', 'not', '2>&1')")
        stages.append(stage)
        current = []
    if stages[-1].argv[0] != "filecheck":
        raise RunFailure("a RUN line must end in '| filecheck ...', or it checks nothing")
    return stages


def run_pipeline(command: str, path: Path) -> None:
    text = ""
    for stage in parse_pipeline(command, path):
        out, err = io.StringIO(), io.StringIO()
        status = RUNNERS[stage.argv[0]](stage.argv[1:], text, out,
                                        out if stage.stderr_to_stdout else err)
        if (status != 0) != stage.expect_failure:
            want = "a failure" if stage.expect_failure else "success"
            raise RunFailure(f"{' '.join(stage.argv)}: expected {want}, exit status {status}\n"
                             f"--- stdout ---\n{out.getvalue()}--- stderr ---\n{err.getvalue()}")
        text = out.getvalue()


def run_mlfuse(args: list[str], stdin: str, out, err) -> int:
    from mlfuse.cli import main
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return main(args)
        except SystemExit as e:  # argparse: a bad option or --help
            return e.code if isinstance(e.code, int) else 1


def run_filecheck(args: list[str], stdin: str, out, err) -> int:
    from filecheck.finput import FInput
    from filecheck.matcher import Matcher
    from filecheck.options import parse_argv_options
    from filecheck.parser import Parser
    opts = parse_argv_options(["filecheck", *args])
    if opts.input_file != "-":
        raise RunFailure("filecheck reads the previous stage's output here, not --input-file")
    with contextlib.redirect_stderr(err):  # the matcher takes sys.stderr when made
        matcher = Matcher(opts, FInput("<stdin>", FInput.canonicalize_line_ends(stdin)),
                          Parser.from_opts(opts))
        status = matcher.run()
    if status != 0:
        err.write(f"--- input ---\n{stdin}")
    return status


RUNNERS = {"mlfuse": run_mlfuse, "filecheck": run_filecheck}
