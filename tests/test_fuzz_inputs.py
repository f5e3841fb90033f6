"""Property-based fuzzing of bad input: the compiler and compiled functions refuse it
with an mlfuse error, never another exception.

4. Mutated random programs (tokens deleted, duplicated, swapped; characters inserted;
   numbers replaced by out-of-range or odd ones)
   give a module or an MlfuseError with a position, and a module that parses compiles.
   Mutated IR text, as `mlfuse opt` sees it (parse_ir, then passes verified after each),
   gives a module or an MlfuseError with a position. (Arbitrary text and mutations of
   the examples are in tests/test_frontend_errors.py.)
5. A wrong call of a compiled function (argument count, dtype, rank, dim, a symbolic
   dim bound twice differently, non-contiguous, host/device mix, not an array) raises
   an ArgumentError naming the argument, before any kernel runs: nothing is written.
"""
import re

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from strategies import SMALL_DIMS, TARGET, fuzz_settings, programs
from test_frontend_errors import check_parse

import mlfuse
from mlfuse.pipeline import compile_text, lower, parse_program
from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.ir import print_ir
from mlfuse.dialects import parse_ir
from mlfuse.ir.pass_manager import PassManager
from mlfuse.transforms import get_pass
from mlfuse.tools.checking import random_inputs

TOKEN = re.compile(r"\*\*|[<>=!]=|%?[\w.]+|\S")
MUTATION = st.tuples(st.sampled_from(["delete", "duplicate", "swap", "insert", "renumber"]),
                     st.integers(0, 10 ** 6), st.integers(0, 10 ** 6),
                     st.sampled_from(list("()[]{},:=-+*/<>%#.0123456789eNxf \n") + ["->", "**"]))
# what "renumber" puts in place of a number: out-of-range axes, sizes, odd values
NUMBERS = ["0", "1", "2", "3", "5", "-1", "-7", "64", "2.5", "1e40", "99999999999999999999"]


def mutate(text: str, mutations) -> str:
    tokens = TOKEN.findall(text)
    for kind, a, b, new in mutations:
        i, j = a % len(tokens), b % len(tokens)
        if kind == "delete" and len(tokens) > 1:
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "swap":
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == "renumber":  # the b-th number of the text, if there is one
            numbers = [k for k, t in enumerate(tokens) if re.fullmatch(r"-?\d[\w.]*", t)]
            if numbers:
                tokens[numbers[b % len(numbers)]] = NUMBERS[a % len(NUMBERS)]
        else:
            tokens.insert(i, new)
    return " ".join(tokens)


@fuzz_settings("mutations")
@given(programs(max_ops=5), st.lists(MUTATION, min_size=1, max_size=3))
def test_mutated_programs_give_a_module_or_a_located_error(program, mutations):
    text = mutate(program.source(), mutations)
    note(text)
    check_parse(text)
    try:
        module = parse_program(text, "fuzz.fuse")
    except MlfuseError:
        return
    lower(module, "fused")  # what parses and verifies must compile


# What `mlfuse opt` runs after IR of each level (any pass on any IR must be safe).
OPT_PASSES = {"tensor": ["decompose", "cse", "lower-tensor-to-loops", "fuse"],
              "loops": ["cse", "fuse"], "fused": ["cse"]}


@fuzz_settings("mutations")
@given(programs(max_ops=5), st.lists(MUTATION, min_size=1, max_size=3),
       st.sampled_from(sorted(OPT_PASSES)))
def test_mutated_ir_gives_a_module_or_a_located_error(program, mutations, level):
    text = mutate(print_ir(compile_text(program.source(), "fuzz.fuse", level=level)), mutations)
    note(text)
    try:
        module = parse_ir(text, "mutated.mlir")
        PassManager([get_pass(n) for n in OPT_PASSES[level]], verify_each=True).run(module)
    except MlfuseError as e:
        assert e.loc is not None and e.loc.file == "mutated.mlir", f"no position: {e}"
        str(e)


def _not_contiguous(a):
    return np.repeat(a[..., None], 2, axis=-1)[..., 0]  # same values, strided


def _device(a):
    from numba import cuda
    return cuda.to_device(a)


# mistake -> (which argument it names, how it breaks the argument list)
MISTAKES = {
    "count": (None, lambda args, i: args[:-1]),
    "extra": (None, lambda args, i: args + [args[0]]),
    "dtype": ("param", lambda args, i: _swap(args, i, args[i].astype(np.float16))),
    "rank": ("param", lambda args, i: _swap(args, i, args[i][None])),
    "dim": ("param", lambda args, i: _swap(args, i, np.concatenate([args[i]] * 2, axis=-1))),
    "layout": ("param", lambda args, i: _swap(args, i, _not_contiguous(args[i]))),
    "list": ("param", lambda args, i: _swap(args, i, args[i].tolist())),
    "mixed": ("param", lambda args, i: _swap(args, i, _device(args[i]))),
}


def _swap(args, i, value):
    return args[:i] + [value] + args[i + 1:]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@fuzz_settings("calls")
@given(programs(max_ops=3, contractions=False), st.sampled_from(sorted(MISTAKES)), st.data())
def test_wrong_calls_name_the_argument_and_write_nothing(program, mistake, data):
    source = program.source()
    note(source)
    func = parse_program(source, "fuzz.fuse").funcs[0]
    mod = mlfuse.compile_source(source, "fuzz.fuse", target=TARGET)
    args = random_inputs(func, SMALL_DIMS)
    names, (named, breaks) = [v.name for v in program.params], MISTAKES[mistake]
    i = data.draw(st.integers(0, len(args) - 1))
    if mistake in ("layout", "dim", "list") and (not args[i].ndim or args[i].size == 1):
        return  # contiguous whatever its strides; no dim to grow; a list of one is a scalar
    last = program.params[i].shape[-1] if args[i].ndim else None
    if mistake == "dim" and sum(last in v.shape for v in program.params) == 1:
        return  # a symbolic dim only this argument has may take any size
    if mistake == "mixed" and len(args) == 1:
        return  # a single device argument is a valid call
    bad = breaks(list(args), i)
    before = [a.copy() for a in args]
    launched = []
    mod.f.host = lambda *a: launched.append(a)  # the kernels must not be reached
    with pytest.raises(ArgumentError) as info:
        mod.f(*bad)
    message = str(info.value)
    assert "@f" in message
    if named:  # "mixed" may name the other side of the mix: some parameter is named
        assert names[i] in message or (mistake == "mixed" and any(n in message for n in names))
    assert not launched
    for a, b in zip(args, before):
        assert np.array_equal(a, b, equal_nan=True)
