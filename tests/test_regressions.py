"""Every program in tests/regressions/ (one per bug found) through every level:
the interpreters at each level and the simulated kernels, fused and unfused, agree
with the tensor-level NumPy interpreter, and fusion moves no more bytes and launches
no more kernels than --no-fuse (explain model). A program's inputs are random, or
the arrays of the .npz file beside it (by parameter name) where the bug needs them."""
from pathlib import Path

import numpy as np
import pytest

import mlfuse
from mlfuse.dtypes import from_saved
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.explain import explain_module
from mlfuse.interp import run_loops, run_tensor
from mlfuse.interp.rounding import rounding_decided
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close

CASES = sorted((Path(__file__).resolve().parent / "regressions").glob("*.fuse"))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_regression_program_agrees_at_every_level(path):
    text = path.read_text()
    func = parse_program(text, path.name).funcs[0]
    args = _inputs(path, func)
    ops, reduced = program_size(func)
    with np.errstate(all="ignore"):
        want = run_tensor(func, args)
        undecided = rounding_decided(func, args)
        got = {f"{level} fuse={fuse}": run_loops(compile_text(text, path.name, level=level,
                                                             fuse=fuse).funcs[0], args)
               for level, fuse in (("loops", True), ("fused", True), ("fused", False))}
        for fuse in (True, False):
            out = mlfuse.compile_source(text, path.name, fuse=fuse, target="simulator").f(*args)
            got[f"kernels fuse={fuse}"] = out if isinstance(out, tuple) else (out,)
    for what, results in got.items():
        assert len(results) == len(want)
        for g, w, u in zip(results, want, undecided):
            assert_close(g, w, ops, f"{path.stem} {what}", reduced, undecided=u)
    for dims in ({"N": 1, "M": 1}, {"N": 1024, "M": 4096}):
        (report,) = explain_module(compile_text(text, path.name, level="loops"), dims)
        assert report.kernels_after <= report.kernels_before, dims
        assert report.bytes_after <= report.bytes_before, dims


def _inputs(path: Path, func) -> list:
    saved = path.with_suffix(".npz")
    if not saved.exists():
        return random_inputs(func, {"N": 5, "M": 3}, seed=7)
    with np.load(saved) as arrays:
        return [from_saved(arrays[p.name_hint], p.type.dtype) for p in func.args]
