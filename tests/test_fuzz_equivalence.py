"""Property-based fuzzing: random programs mean the same at every level.

Profiles (MLFUSE_FUZZ): "ci" (default, a few hundred programs, small shapes),
"long" (thousands), "gpu" (the kernel properties on a real GPU, larger shapes).
A failing program is printed as .fuse source; `mlfuse run` on it reproduces it.
"""
import os
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import mlfuse
from mlfuse.driver import compile_text, lower, parse_program
from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.explain import explain_module
from mlfuse.interp import run_loops, run_tensor
from mlfuse.ir import parse_ir, print_ir, verify
from mlfuse.ir.passes import get_pass
from mlfuse.testing import compare, program_size

from strategies import inputs_for, programs

PROFILE = os.environ.get("MLFUSE_FUZZ", "ci")
EXAMPLES = {"ci": (300, 40, 150), "long": (3000, 400, 1500), "gpu": (200, 200, 50)}[PROFILE]
DIMS = {"N": 2, "M": 3} if PROFILE != "gpu" else {"N": 37, "M": 300}
TARGET = "cuda" if PROFILE == "gpu" else "simulator"
common = settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=PROFILE == "ci")


def _check_same(ref, got, func, what):
    ops, reduced = program_size(func)
    for i, (r, g) in enumerate(zip(ref, got)):
        c = compare(r, g, ops, reduced)
        assert c.ok, f"{what}, result {i}: {c.message} (max abs error {c.max_abs_error:.3g})"


def _levels(source):
    """The program at every level, each verified and round-tripped through its text."""
    tensor = parse_program(source, "fuzz.fuse")
    out = {"tensor": tensor}
    for name, (level, fuse) in {"loops": ("loops", True), "fused": ("fused", True),
                                "unfused": ("fused", False)}.items():
        module = compile_text(source, "fuzz.fuse", level=level, fuse=fuse)
        verify(module)
        text = print_ir(module)
        assert print_ir(parse_ir(text)) == text, f"{name} IR does not round-trip"
        out[name] = module
    return out


@settings(common, max_examples=EXAMPLES[0])
@given(st.data())
def test_interpreters_agree_at_every_level(data):
    program = data.draw(programs())
    source = program.source()
    note(source)
    levels = _levels(source)
    func = levels["tensor"].funcs[0]
    args = data.draw(inputs_for(func, DIMS))
    with np.errstate(all="ignore"):
        ref = run_tensor(func, args)
        for name in ("loops", "fused", "unfused"):
            _check_same(ref, run_loops(levels[name].funcs[0], args), func, name)


@settings(common, max_examples=EXAMPLES[2])
@given(programs())
def test_fusion_never_adds_kernels_or_bytes(program):
    note(program.source())
    module = compile_text(program.source(), "fuzz.fuse", level="loops")
    (report,) = explain_module(module, {"N": 1024, "M": 4096})
    assert report.kernels_after <= report.kernels_before
    assert report.bytes_after <= report.bytes_before
    assert report.intermediate_bytes_after <= report.intermediate_bytes_before


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN/inf inputs in simulated threads
@settings(common, max_examples=EXAMPLES[1])
@given(st.data())
def test_generated_kernels_agree_fused_and_unfused(data):
    program = data.draw(programs(max_ops=6))
    source = program.source()
    note(source)
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, DIMS))
    with np.errstate(all="ignore"):
        ref = run_tensor(func, args)
    for fuse in (True, False):
        mod = mlfuse.compile_source(source, "fuzz.fuse", fuse=fuse, target=TARGET)
        got = mod.f(*args)
        _check_same(ref, got if isinstance(got, tuple) else (got,), func, f"kernels fuse={fuse}")


def _mutate(text: str, rnd: random.Random) -> str:
    tokens = re.findall(r"%?\w+|\S", text)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(tokens))
        how = rnd.choice(["delete", "duplicate", "swap"])
        if how == "delete":
            del tokens[i]
        elif how == "duplicate":
            tokens.insert(i, tokens[i])
        else:
            j = rnd.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
    return " ".join(tokens)


@settings(common, max_examples=EXAMPLES[2])
@given(programs(), st.integers(0, 2 ** 32), st.sampled_from(["tensor", "loops", "fused"]))
def test_mutated_ir_text_gives_a_module_or_a_positioned_error(program, seed, level):
    text = print_ir(compile_text(program.source(), "fuzz.fuse", level=level))
    mutated = _mutate(text, random.Random(seed))
    note(mutated)
    try:
        module = parse_ir(mutated, "mutated.mlir")
        passes = {"tensor": ["decompose", "cse", "lower-tensor-to-loops", "fuse"],
                  "loops": ["fuse"], "fused": ["cse"]}[level]
        for name in passes:
            get_pass(name).run(module)
            verify(module)
    except MlfuseError as e:
        assert e.loc is not None or "error" in str(e)


@settings(common, max_examples=10)
@given(programs(max_ops=3, allow_compute=False), st.sampled_from(["count", "dtype", "shape", "layout"]))
def test_wrong_calls_name_the_argument_and_write_nothing(program, mistake):
    source = program.source()
    func = parse_program(source, "fuzz.fuse").funcs[0]
    mod = mlfuse.compile_source(source, "fuzz.fuse", target=TARGET)
    from mlfuse.testing import random_inputs
    args = random_inputs(func, DIMS)
    before = [a.copy() for a in args]
    bad = list(args)
    if mistake == "count":
        bad = bad[:-1]
    elif mistake == "dtype":
        bad[0] = bad[0].astype(np.float16)
    elif mistake == "shape":
        bad[0] = np.zeros(bad[0].shape + (2,), bad[0].dtype)
    else:
        bad[0] = np.repeat(bad[0][..., None], 2, axis=-1)[..., 0]  # same values, not contiguous
        if bad[0].flags.c_contiguous:
            return  # a size-1 array is contiguous whatever its strides
    with pytest.raises(ArgumentError) as info:
        mod.f(*bad)
    named = [p for p, _ in program.params]
    assert mistake == "count" or named[0] in str(info.value)
    for a, b in zip(args, before):
        assert np.array_equal(a, b, equal_nan=True)
