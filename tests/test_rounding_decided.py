"""mlfuse.interp.rounding: the elements whose NaN/inf status (or bool value) the evaluation
order decides, found by checking the reference computation, and only those."""
from pathlib import Path

import numpy as np
import pytest

from mlfuse.dtypes import BFLOAT16
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.interp import run_loops, run_tensor
from mlfuse.interp.rounding import _ELEMENTWISE, _RULES, rounding_decided
from mlfuse.dialects import default_registry
from mlfuse.tools.checking import compare, program_size

REGRESSION = Path(__file__).resolve().parent / "regressions" / "layernorm_inf_gamma_equal_values"
F32 = np.float32
INF = np.inf


def decided(source: str, *args):
    """(reference results, undecided masks) of the one function in ``source``."""
    func = parse_program(source, "t.fuse").funcs[0]
    with np.errstate(all="ignore"):
        return run_tensor(func, list(args)), rounding_decided(func, list(args))


def one(body: str, params: str = "x: f32[4], g: f32[4]", result: str = "f32[4]") -> str:
    return f"func f({params}) -> {result} {{\n    return {body}\n}}\n"


def regression_case():
    source = REGRESSION.with_suffix(".fuse").read_text()
    with np.load(REGRESSION.with_suffix(".npz")) as a:
        return source, [a["x"], a["gamma"], a["beta"]]


def test_the_open_case_is_undecided_where_orders_disagree_and_only_there():
    source, args = regression_case()
    func = parse_program(source, "t.fuse").funcs[0]
    with np.errstate(all="ignore"):
        (want,) = run_tensor(func, args)
        (got,) = run_loops(compile_text(source, "t.fuse", level="loops").funcs[0], args)
        (undecided,) = rounding_decided(func, args)
    # NumPy's pairwise mean is exact here, the running sum is not: NaN against +-inf
    assert np.isnan(want[0]) and np.isinf(got[0])
    ops, reduced = program_size(func)
    assert not compare(want, got, ops, reduced).ok
    # every element meeting the infinite gamma is undecided; the finite one is compared
    np.testing.assert_array_equal(undecided, np.isinf(args[1]))
    c = compare(want, got, ops, reduced, undecided=undecided)
    assert c.ok and c.left_out == 8 and "8 undecided element(s) left out" in c.message


@pytest.mark.parametrize("x", [[1, 1, 1, 1], [0, 1, 2, 3], [0.5, -0.25, 0.5, 0.25]],
                         ids=["ones", "integers", "binary fractions"])
def test_a_cancellation_every_order_computes_exactly_stays_decided(x):
    """Sums of small integers and binary fractions are exact in any order, so
    inf * (x - mean(x)) is the same NaN or inf everywhere and must be compared."""
    (r,), (u,) = decided(one("g * (x - mean(x, axis=0, keepdims=true))"),
                         np.array(x, F32), np.full(4, INF, F32))
    assert not u.any()
    assert np.isnan(r).any() or np.isinf(r).all()


def test_an_element_minus_itself_is_exactly_zero_in_every_order():
    """The same element on both sides: one value (CSE merges the two means), or one
    element seen through a view (reshape, transpose, broadcast_to)."""
    m = "mean(x, axis=0, keepdims=true)"
    (r, c), (u, uc) = decided(one(f"g * ({m} - {m}), {m} == {m}",
                                  result="(f32[4], bool[1])"),
                              np.full(4, 0.1, F32), np.full(4, INF, F32))
    assert np.isnan(r).all() and c.all() and not u.any() and not uc.any()
    src = ("func f(x: f32[2, 2], g: f32[2, 2]) -> (bool[2, 2], f32[2, 2]) {\n"
           "    s = x * 0.1\n    t = reshape(transpose(reshape(s, [4]), perm=[0]), [2, 2])\n"
           "    return s <= t, g * (transpose(transpose(s)) - broadcast_to(s, [2, 2]))\n}\n")
    (c, r), (uc, u) = decided(src, np.array([[1, 3], [3, 1]], F32), np.full((2, 2), INF, F32))
    assert c.all() and np.isnan(r).all() and not uc.any() and not u.any()


def test_functions_exact_at_an_exact_zero_and_exact_casts_stay_decided():
    """exp(0) = cos(0) = 1 and sigmoid(0) = 0.5 in every libm; small integers cast exactly."""
    body = ("g * (exp(x) - cos(x)), g * (sigmoid(x) - 0.5), "
            "g * (cast(cast(x, dtype=i32), dtype=f32) - x)")
    (a, b, c), undecided = decided(one(body, result="(f32[4], f32[4], f32[4])"),
                                  np.zeros(4, F32), np.full(4, INF, F32))
    assert np.isnan(a).all() and np.isnan(b).all() and np.isnan(c).all()
    assert not any(u.any() for u in undecided)


def test_a_clearly_nonzero_difference_stays_decided():
    (r,), (u,) = decided(one("g * (x - mean(x, axis=0, keepdims=true))"),
                         np.array([0.1, 0.2, 0.3, 0.7], F32), np.full(4, INF, F32))
    assert np.isinf(r).all() and not u.any()


def cancelling():
    """x - mean(x) over four equal values 0.1: 0 here, an ulp in another order."""
    return np.full(4, 0.1, F32)


@pytest.mark.parametrize("body, result", [
    ("1.0 / (x - mean(x, axis=0, keepdims=true))", "f32[4]"),
    ("log(x - mean(x, axis=0, keepdims=true))", "f32[4]"),
    ("sqrt(x - mean(x, axis=0, keepdims=true))", "f32[4]"),
    ("x - mean(x, axis=0, keepdims=true) > 0.0", "bool[4]"),
    ("x >= mean(x, axis=0, keepdims=true)", "bool[4]"),
    ("cast(x - mean(x, axis=0, keepdims=true), dtype=bool)", "bool[4]"),
], ids=["divisor", "log", "sqrt", "sign", "tie", "cast to bool"])
def test_ops_that_jump_at_zero_or_a_tie_are_undecided_on_a_cancelling_operand(body, result):
    (_,), (u,) = decided(one(body, "x: f32[4]", result), cancelling())
    assert u.all()
    (_,), (u,) = decided(one(body, "x: f32[4]", result), np.array([0.1, 0.2, 0.3, 0.7], F32))
    assert not u.any()


def test_undecided_elements_reach_what_they_feed_and_nothing_else():
    src = ("func f(x: f32[2, 4], g: f32[2, 4]) -> (f32[2], f32[2, 4], f32[2, 2]) {\n"
           "    d = g * (x - mean(x, axis=1, keepdims=true))\n"
           "    return sum(d, axis=1), where(d > 0.0, x, g), matmul(d, transpose(x))\n}\n")
    x = np.stack([np.full(4, 0.1, F32), np.array([0.1, 0.2, 0.3, 0.7], F32)])
    g = np.full((2, 4), INF, F32)
    _, (rows, chosen, product) = decided(src, x, g)
    np.testing.assert_array_equal(rows, [True, False])  # row 0 cancels, row 1 does not
    np.testing.assert_array_equal(chosen, np.repeat([[True], [False]], 4, axis=1))
    np.testing.assert_array_equal(product, np.repeat([[True], [False]], 2, axis=1))


def test_a_contraction_of_inf_with_a_cancelling_factor_is_undecided():
    src = ("func f(a: f32[2, 3], x: f32[3, 4]) -> f32[2, 4] {\n"
           "    return matmul(a, x - mean(x, axis=1, keepdims=true))\n}\n")
    a = np.array([[INF, 1, 1], [1, 1, 1]], F32)
    x = np.stack([np.full(4, 0.1, F32), np.arange(4, dtype=F32), np.arange(4, dtype=F32)])
    _, (u,) = decided(src, a, x)
    np.testing.assert_array_equal(u, [[True] * 4, [False] * 4])


def test_a_sum_that_reaches_the_largest_float_may_overflow():
    biggest = np.finfo(F32).max
    a = F32(biggest * 0.6)
    x = np.array([[a, biggest - a], [a, F32(1.0)]], F32)  # row 0 sums to exactly the max
    (r,), (u,) = decided(one("sum(x, axis=1)", "x: f32[2, 2]", "f32[2]"), x)
    assert r[0] == biggest and list(u) == [True, False]


def test_every_primitive_tensor_op_has_a_rule():
    from mlfuse.dialects.elementwise import ELEMENTWISE
    composites = {"tensor.softmax", "tensor.layernorm", "tensor.rmsnorm"}
    primitives = {n for n in default_registry() if n.startswith("tensor.")} - composites
    elementwise = {f"tensor.{name}" for name in ELEMENTWISE}
    assert set(_ELEMENTWISE) == set(ELEMENTWISE)
    assert primitives - elementwise == set(_RULES)


def test_a_bf16_difference_of_exact_operands_may_be_held_unrounded():
    """A kernel holds a bf16 result in f32 until it stores it: 3 - 2**-7 is 2.9921875
    there and 3 (its bf16 rounding) where it was stored and loaded back, so comparing
    it with 3 is undecided; the comparison with 0 is not."""
    (ties, zeros), (u_ties, u_zeros) = decided(
        "func f(x: bf16[2], y: bf16[2]) -> (bool[2], bool[2]) {\n"
        "    d = x - y\n    return x <= d, d <= y - y\n}\n",
        np.array([3, 1], BFLOAT16), np.array([2 ** -7, 0.5], BFLOAT16))
    assert ties.tolist() == [True, False] and zeros.tolist() == [False, False]
    assert u_ties.tolist() == [True, False] and not u_zeros.any()
