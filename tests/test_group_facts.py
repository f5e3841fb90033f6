"""The fusion planner prices a flat group of elementwise nests by facts it keeps per group
(mlfuse/transforms/fusion/group_facts.py) instead of building the group's kernel at each
try. With ``Planner.check_facts`` it also builds every such kernel and compares the two
prices (bytes read and written, flops, registers, threads, extents, schedule): these
tests plan examples, hand-written IR and random programs that way, so a fact that drifts
from the kernel the builder makes fails here, not as a silently different plan. They
also check the grouping's topological ranks (grouping.py), which bound the cycle search.
"""
import glob
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import FUZZ, programs

from fusion_ir import func, pointwise
from mlfuse.dialects import parse_ir
from mlfuse.pipeline import compile_text
from mlfuse.transforms.fusion.fuse import FusePass, Planner
from mlfuse.transforms.fusion.group_facts import GroupFacts

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(glob.glob(str(ROOT / "examples" / "*.fuse"))) + \
    sorted(glob.glob(str(ROOT / "tests" / "regressions" / "*.fuse")))


@pytest.fixture
def checked(monkeypatch):
    """Plan with every fact-priced group built and compared; counts those groups."""
    monkeypatch.setattr(Planner, "check_facts", True)
    priced = []
    cost = GroupFacts.cost

    def counting(self, facts, outputs):
        result = cost(self, facts, outputs)
        priced.append(result is not None)
        return result

    monkeypatch.setattr(GroupFacts, "cost", counting)
    return priced


def plan(module, **options):
    """Plan every function of a loops-level module; checks the ranks of each grouping."""
    planners = []
    for f in module.funcs:
        planner, groups = FusePass(**options).plan_for(f)
        _check_ranks(planner)
        planners.append(planner)
    return planners


def _check_ranks(planner):
    """Every group is ranked below the groups that load what it stores."""
    for g in planner.groups:
        for n in planner.loaded(g):
            writer = planner.own_group(n)
            assert writer._rank < g._rank, (writer, g)


def plan_source(source, **options):
    return plan(compile_text(source, "facts.fuse", level="loops"), **options)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: Path(p).name)
def test_facts_price_the_groups_of_every_example_as_their_kernels(path, checked):
    plan_source(Path(path).read_text())


def test_facts_price_a_long_chain_without_building_it(checked, monkeypatch):
    """A chain of 60 multiplies: every try is priced by facts (and checked), one kernel."""
    built = []
    monkeypatch.setattr(Planner, "check_facts", False)
    original = Planner._built
    monkeypatch.setattr(Planner, "_built", lambda self, *a, **k: built.append(1) or original(self, *a, **k))
    lines = ["    y0 = x * 1.0001"] + [f"    y{i} = y{i - 1} * x" for i in range(1, 60)]
    source = "func chain(x: f32[N]) -> f32[N] {\n" + "\n".join(lines) + "\n    return y59\n}\n"
    (planner,) = plan_source(source)
    assert len(planner.groups) == 1 and all(checked) and len(checked) >= 59
    assert not built  # priced by facts alone; the final kernel is built by rewrite


def test_merged_copies_make_identical_ops_one(checked):
    """A copy of %x joins its readers: exp(copy) and exp(x) become one op, and so do the
    products of them (merging classes in turn); the facts see the CSE the builder does."""
    body = pointwise("c", ["N"], ["%v = loops.load %x, %i0 : f32"], "v")
    body += pointwise("b", ["N"], [
        "%1 = loops.load %c, %i0 : f32", "%2 = arith.exp %1 : f32",
        "%3 = loops.load %x, %i0 : f32", "%4 = arith.exp %3 : f32",
        "%5 = arith.mul %2, %4 : f32", "%6 = arith.mul %4, %4 : f32",
        "%7 = arith.add %5, %6 : f32"], "7")
    body += pointwise("d", ["N"], [
        "%8 = loops.load %b, %i0 : f32", "%9 = loops.load %c, %i0 : f32",
        "%10 = arith.sub %8, %9 : f32"], "10")
    module = parse_ir(func("f", [("x", "f32[N]")], ["f32[N]", "f32[N]"], body, ["d", "b"]))
    (planner,) = plan(module)
    assert len(planner.groups) == 1 and any(checked)
    facts = planner.groups[0]._facts.tables()
    assert facts.flops == 4  # exp, mul (both products one), add, sub


@st.composite
def elementwise_dags(draw):
    """Elementwise programs over [R, C] and broadcast [C] values that share producers,
    repeat constants and loads, and return several values: the groups facts price."""
    params = [("x0", "f32[R, C]"), ("b", "f32[C]")] + \
        [(f"x{i}", "f32[R, C]") for i in range(1, draw(st.integers(1, 4)))]
    values, lines = [p for p, _ in params], []  # all [R, C] but b
    for n in range(draw(st.integers(3, 20))):
        a, b = draw(st.sampled_from(values[:1] + values[2:])), draw(st.sampled_from(values))
        expr = draw(st.sampled_from([f"exp({a})", f"{a} * 2.0", f"{a} + {b}", f"{a} * {b}",
                                     f"maximum({a}, {b})", f"relu({a}) - {b}", f"-{a}"]))
        lines.append(f"    v{n} = {expr}")
        values.append(f"v{n}")
    results = draw(st.lists(st.sampled_from(values[len(params):]), min_size=1, max_size=3,
                            unique=True))
    signature = ", ".join(f"{p}: {t}" for p, t in params)
    types = ", ".join(["f32[R, C]"] * len(results))
    return (f"func f({signature}) -> ({types}) {{\n" + "\n".join(lines) +
            f"\n    return {', '.join(results)}\n}}\n")


@settings(FUZZ, max_examples=25 if FUZZ.derandomize else 500)
@given(elementwise_dags())
def test_facts_price_random_elementwise_programs_as_their_kernels(source):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Planner, "check_facts", True)
        plan_source(source)


@settings(FUZZ, max_examples=25 if FUZZ.derandomize else 1000)
@given(programs())
def test_facts_price_random_programs_as_their_kernels(program):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Planner, "check_facts", True)
        plan_source(program.source(), dims={"N": 1024, "M": 4096})
