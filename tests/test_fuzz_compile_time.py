"""Property: long programs (hundreds of ops, many parameters) compile to Numba source
in time proportional to their length (issue 16), with no recursion error on the way.

Programs are random DAGs over [R, C] tensors: elementwise ops on any earlier values
(so producers are shared and parameters many), and row reductions broadcast back, so
the fusion planner meets chains, diamonds, reductions and horizontal candidates.
The bound is CPU time (the machine may be shared): a fixed start-up plus a cost per
statement, generous enough to hold for any near-linear pipeline, far below what a
quadratic planner took (a 300-statement chain: 120 s and more before the change).
Elementwise programs get a tighter bound: their groups are priced by facts the planner
keeps per group (mlfuse/transforms/fusion/group_facts.py), not by building kernels.
"""
import sys
import time
from pathlib import Path

import pytest

from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from strategies import FUZZ

from mlfuse.codegen import generate
from mlfuse.pipeline import compile_text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from compile_time import chain_source, sum_source  # noqa: E402

# no shrinking: a slow example shrinks through many more slow ones
SETTINGS = settings(FUZZ, max_examples=3 if FUZZ.derandomize else 50,  # ci: 3
                    phases=[Phase.explicit, Phase.reuse, Phase.generate])
# Generous: a group with row reductions is still rebuilt from its nests at each merge
# (quadratic in the size of that group), which a group of 300 ops feels.
SECONDS_PER_STATEMENT = 0.1
START_UP_SECONDS = 2.0

UNARY = ["exp", "relu", "tanh", "sigmoid", "abs"]
BINARY = ["+", "-", "*", "maximum"]


@st.composite
def long_programs(draw, reductions=True):
    """(source, statements): every value is used, by a later statement or returned,
    so dead-code elimination keeps the whole program."""
    params = [f"x{i}" for i in range(draw(st.integers(1, 80)))]
    values, lines, unused = list(params), [], list(params)
    kinds = ["unary", "binary", "binary", "recent"] + (["reduce"] if reductions else [])
    for n in range(draw(st.integers(100, 250))):
        kind = draw(st.sampled_from(kinds))
        a = unused.pop(0) if unused else draw(st.sampled_from(values))
        if kind == "unary":
            expr = f"{draw(st.sampled_from(UNARY))}({a})"
        elif kind == "reduce":
            expr = f"{a} - max({a}, axis=1, keepdims=true)"
        else:  # recent: a chain through the latest values, as real models have
            b = values[-1] if kind == "recent" else draw(st.sampled_from(values))
            op = draw(st.sampled_from(BINARY))
            expr = f"maximum({a}, {b})" if op == "maximum" else f"{a} {op} {b}"
        lines.append(f"    v{n} = {expr}")
        values.append(f"v{n}")
        unused.append(f"v{n}")
    results = [v for v in unused if v.startswith("v")][-8:]
    unused = [v for v in unused if v not in results]
    while unused:  # fold what is left into the last result
        lines.append(f"    r{len(lines)} = {results[-1]} + {unused.pop()}")
        results[-1] = f"r{len(lines) - 1}"
    signature = ", ".join(f"{p}: f32[R, C]" for p in params)
    types = ", ".join(["f32[R, C]"] * len(results))
    return (f"func f({signature}) -> ({types}) {{\n" + "\n".join(lines) +
            f"\n    return {', '.join(results)}\n}}\n", len(lines))


def _compiles_in_time(program, start_up: float, per_statement: float) -> None:
    source, statements = program
    start = time.process_time()
    module = compile_text(source, "long.fuse")
    generate(module, "cuda")
    seconds = time.process_time() - start
    assert seconds < start_up + per_statement * statements, \
        f"{statements} statements took {seconds:.1f} s"


@pytest.mark.skipif(FUZZ.derandomize, reason=(
    "issue 16, open: a group with row reductions is still priced by building its kernel "
    "at each try (group_facts.py prices elementwise groups only), and the kernel builder "
    "re-inlines row-level values at every use before CSE, so some programs take minutes "
    "(benchmarks/inputs/row_reduction_chain.fuse, 100 statements: ~200 s CPU); run it with "
    "MLFUSE_FUZZ=long"))
@SETTINGS
@given(long_programs())
def test_long_programs_compile_in_time_proportional_to_their_length(program):
    _compiles_in_time(program, START_UP_SECONDS, SECONDS_PER_STATEMENT)


@SETTINGS
@given(long_programs(reductions=False))
def test_long_elementwise_programs_compile_in_time_proportional_to_their_length(program):
    """Elementwise only: one group of hundreds of nests, priced by its facts at each merge
    (about 1 ms per statement, 0.2 s for 240, on the CI machine; 2.3 s before)."""
    _compiles_in_time(program, 0.5, 0.004)


@pytest.mark.parametrize("source", [chain_source(1000), sum_source(500)], ids=["chain-1000", "sum-500"])
def test_a_long_chain_and_a_wide_sum_compile_to_numba_source_in_seconds(source):
    """Issue 16's programs (benchmarks/compile_time.py): one fused group of 1000 and of
    500 nests, priced at each merge by facts kept per group instead of a rebuilt kernel
    (before: 48 s for the chain on the GPU host and 10.6 s CPU for the sum on the 2-core
    CI machine; now about 1.5 s and 0.8 s CPU there). The bound is the issue's 5 s
    target with room for a slower machine."""
    start = time.process_time()
    generate(compile_text(source, "long.fuse"), "cuda")
    seconds = time.process_time() - start
    assert seconds < 8, f"took {seconds:.1f} s"
