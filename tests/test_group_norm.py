"""Quotient dims (``C / 8 * H * W``) and group norm as one kernel: the dim algebra, the
checks of a size that does not divide (compile time, call time, the interpreter, the
generated host function), numerics against the NumPy interpreter at tiny sizes under
the simulator, and the kernel count."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mlfuse
from mlfuse.dialects.fused import KernelOp
from mlfuse.errors import ArgumentValueError, MlfuseError
from mlfuse.interp import run_tensor
from mlfuse.ir.types import (IndivisibleDim, dim_monomial, dim_value, is_dim_text, product_dim, quotient_dim,
                             symbols_of)
from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import program_size, random_inputs

from helpers import assert_close

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "group_norm.fuse"

# groups as a dim of a parameter: C / G, checked per call like C / 8
GROUPS_AS_DIM = """
func gn(x: f32[N, C, H, W], groups: f32[G], gamma: f32[C]) -> f32[N, C, H, W] {
    rows = reshape(x, [N, G, C / G * H * W])
    m = mean(rows, axis=2, keepdims=true)
    d = rows - m
    v = mean(d * d, axis=2, keepdims=true)
    y = reshape(d * rsqrt(v + 1e-5), [N, C, H, W])
    return y * reshape(gamma, [1, C, 1, 1])
}
"""


@pytest.mark.parametrize("factors, divisor, text", [
    (["C", "H", "W"], 8, "C*H*W/8"),
    (["C"], "G", "C/G"),
    ([2, "N"], 4, "N/2"),
    (["C", "G"], "G", "C"),
    ([8], "G", "8/G"),
    ([12], 4, 3),
    ([6, "B", "H"], "3*H", "2*B"),
])
def test_quotients_have_one_canonical_text(factors, divisor, text):
    assert quotient_dim(product_dim(factors), divisor) == text
    if isinstance(text, str):
        assert is_dim_text(text)


def test_a_quotient_that_does_not_divide_names_its_dims():
    assert dim_value("C*H*W/8", {"C": 4, "H": 3, "W": 2}) == 3
    with pytest.raises(IndivisibleDim, match=r"dim C\*H\*W/8 is not a whole number: C\*H\*W = "
                       r"30 is not divisible by 8 \(C=5, H=3, W=2\)"):
        dim_value("C*H*W/8", {"C": 5, "H": 3, "W": 2})
    with pytest.raises(IndivisibleDim):
        quotient_dim(7, 2)


_FACTOR = st.one_of(st.integers(1, 6), st.sampled_from(["A", "B", "C"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(_FACTOR, min_size=1, max_size=4), st.lists(_FACTOR, min_size=1, max_size=3),
       st.fixed_dictionaries({"A": st.integers(1, 7), "B": st.integers(1, 7),
                              "C": st.integers(1, 7)}))
def test_dim_algebra_agrees_with_the_sizes(up, down, sizes):
    """A quotient of products is canonical (its text parses to itself), its symbols are
    the factors', and its size is the sizes' quotient where that is whole."""
    top, bottom = product_dim(up), product_dim(down)
    try:
        q = quotient_dim(top, bottom)
    except IndivisibleDim:  # the symbols cancel, and the integers do not divide
        (ct, et), (cb, eb) = dim_monomial(top), dim_monomial(bottom)
        assert et == eb and (ct / cb).denominator != 1
        return
    assert isinstance(q, int) or is_dim_text(q)
    assert product_dim([q]) == q and product_dim([q, bottom]) == top
    assert set(symbols_of([q])) <= set(symbols_of([top, bottom]))
    t, b = dim_value(top, sizes), dim_value(bottom, sizes)
    if t % b:
        with pytest.raises(IndivisibleDim):
            dim_value(q, sizes)
    else:
        assert dim_value(q, sizes) == t // b


def _kernels(module, name):
    return [k for k in module.ir.func(name).body.ops if isinstance(k, KernelOp)]


def _check(source, name, dims, seed=0):
    func = next(f for f in parse_program(source, "t.fuse").funcs if f.sym_name == name)
    inputs = random_inputs(func, dims, seed=seed)
    expected = run_tensor(func, inputs)
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    got = module[name](*inputs)
    n_ops, reduced = program_size(func)
    assert_close(got, expected[0], n_ops, reduced=reduced)
    return module


def test_group_norm_is_one_kernel_and_matches_the_interpreter():
    module = _check(EXAMPLE.read_text(), "group_norm", {"N": 1, "C": 16, "H": 3, "W": 2})
    (kernel,) = _kernels(module, "group_norm")
    assert kernel["extents"] == ["N", 8] and kernel["schedule"] == "row"


def test_a_channel_index_is_one_division_not_two():
    """The channel of a value along a group's row, ``(B + k) // W // H``, is divided once
    by ``W * H`` in the generated code (a division's result is never divided again)."""
    import re

    from mlfuse.codegen import generate
    from mlfuse.pipeline import compile_text
    text = generate(compile_text(EXAMPLE.read_text(), "g.fuse"), "cuda")
    quotients = set(re.findall(r"(\w+) = _divmod_index\([^\n]*\)\[0\]", text))
    divided = set(re.findall(r"_divmod_index\((\w+),", text))
    assert quotients and not quotients & divided
    assert re.search(r"_divmod_index\(\w+, W \* H\)\[0\]", text)


def test_groups_as_a_dim_is_one_kernel_and_matches_the_interpreter():
    module = _check(GROUPS_AS_DIM, "gn", {"N": 2, "C": 6, "G": 3, "H": 2, "W": 5}, seed=3)
    assert len(_kernels(module, "gn")) == 1


def test_a_call_whose_sizes_do_not_divide_is_refused():
    module = mlfuse.compile_file(EXAMPLE, target="simulator")
    x = np.ones((1, 3, 1, 2), np.float32)
    with pytest.raises(ArgumentValueError, match=r"C\*H\*W/8 is not a whole number: C\*H\*W "
                       r"= 6 is not divisible by 8 \(C=3, H=1, W=2\)"):
        module.group_norm(x, np.ones(3, np.float32), np.ones(3, np.float32))
    # the generated host function checks as well (a module used on its own)
    from numba import cuda
    host = module.python_module.ENTRY_POINTS["group_norm"]
    with pytest.raises(ValueError, match=r"dim C\*H\*W/8 is not a whole number"):
        host(*(cuda.to_device(a) for a in (x, np.ones(3, np.float32), np.ones(3, np.float32))))


def test_the_interpreter_refuses_sizes_that_do_not_divide_at_the_reshape():
    func = parse_program(GROUPS_AS_DIM, "t.fuse").funcs[0]
    inputs = random_inputs(func, {"N": 1, "C": 4, "G": 3, "H": 1, "W": 1})
    with pytest.raises(MlfuseError, match=r"t.fuse:3:12: error: tensor.reshape: dim C\*H\*W/G is "
                       r"not a whole number: C\*H\*W = 4 is not divisible by 3"):
        run_tensor(func, inputs)


@pytest.mark.parametrize("name", ["group_norm", "l2norm_both", "residual_layernorm"])
def test_the_suite_cases_of_the_fusion_misses_are_one_kernel_at_their_sizes(name):
    """benchmarks/cases.py's group norm, row L2 norm with both outputs and residual +
    layernorm with both outputs: one kernel each at the benchmark sizes (explain's count),
    moving at least 256 MB."""
    import sys
    sys.path.insert(0, str(EXAMPLE.parent.parent / "benchmarks"))
    from cases import CASES
    from mlfuse.pipeline import compile_text
    from mlfuse.tools.explain import explain_module
    case = next(c for c in CASES if c.name == name)
    (report,) = explain_module(compile_text(case.source, f"{name}.fuse", level="loops"),
                               case.dims)
    assert report.kernels_after == 1 and report.bytes_after >= 256 * 2 ** 20
