"""The fp32 matmul precision (mlfuse/matmul_precision.py): f32 contractions as 3xTF32
("high", variant "mma-tf32x3") and TF32 ("medium", "mma-tf32") on tensor cores
(mlfuse/codegen/emit_tf32.py), under the simulator whose twins follow the PTX ISA
(tests/test_ptx_tf32.py). Against the NumPy interpreter with the agreement rule at the
precision's unit; the error of each precision against a float64 reference; the option
through the API, the CLI and explain; the kernels through ptxas for sm_90."""
import numpy as np
import pytest

import mlfuse
from mlfuse.cli.main import main as cli
from mlfuse.errors import MlfuseError
from mlfuse.interp import run_tensor
from mlfuse.pipeline import compile_text, parse_program
from mlfuse.tools.checking import compare, matmul_eps, program_size, random_inputs


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))


MATMUL = ("func f(x: f32[M, K], w: f32[K, N], b: f32[N]) -> f32[M, N] {\n"
          "    return relu(matmul(x, w) + b)\n}\n")
# Small: the 3xTF32 twins run three warp-wide mma per tile step in Python threads.
CASES = {
    # N and K multiples of 4: both operands copied 16 bytes at a time; partial M, N, K
    "copied": (MATMUL, {"M": 9, "N": 12, "K": 12}, "high"),
    # odd N and K: each f32 copied on its own by a 4-byte cp.async
    "copied_4_bytes": (MATMUL, {"M": 5, "N": 7, "K": 9}, "high"),
    # odd sizes, transposed operands and tanh: gathered value by value
    "gathered": ("func f(x: f32[K, M], w: f32[N, K]) -> f32[M, N] {\n"
                 "    return tanh(matmul(transpose(x), transpose(w)))\n}\n",
                 {"M": 9, "N": 7, "K": 13}, "medium"),
    "batched": ("func f(x: f32[B, M, K], y: f32[B, K, N]) -> f32[B, M, N] {\n"
                "    return matmul(x, y) * 0.5\n}\n", {"B": 2, "M": 5, "N": 8, "K": 8}, "high"),
    # implicit GEMM: the weights are the M side, the im2col gather the N side
    "conv": ("func f(x: f32[N, 3, 5, 5], w: f32[4, 3, 3, 3], b: f32[4]) -> f32[N, 4, 5, 5] {\n"
             "    return relu(conv2d(x, w, stride=1, padding=1) + reshape(b, [1, 4, 1, 1]))\n}\n",
             {"N": 1}, "medium"),
}
VARIANT = {"high": "mma-tf32x3", "medium": "mma-tf32"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tf32_contractions_agree_with_the_interpreter_at_their_precision(name):
    source, dims, precision = CASES[name]
    module = mlfuse.compile_source(source, f"{name}.fuse", target="simulator",
                                   matmul_precision=precision)
    kernels = module.kernels("f")
    assert [(k["schedule"], k["variant"]) for k in kernels] == [
        ("contraction", VARIANT[precision])]
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=7)
    (want,) = run_tensor(func, args)
    got = module.f(*args)
    assert got.dtype == np.float32
    ops, reduced = program_size(func, dims=dims)
    c = compare(want, got, ops, reduced, unit=matmul_eps(kernels))
    assert c.ok, (name, c.message, c.max_abs_error)


def _relative_error(source: str, dims: dict, precision: str) -> float:
    """max |got - exact| / max |exact| of f's result, exact computed in float64."""
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=11)
    exact = np.maximum(args[0].astype(np.float64) @ args[1].astype(np.float64) + args[2], 0)
    got = mlfuse.compile_source(source, "e.fuse", target="simulator",
                                matmul_precision=precision).f(*args)
    return float(np.abs(got - exact).max() / np.abs(exact).max())


def test_3xtf32_error_is_within_2x_of_fp32_and_tf32_error_is_far_larger():
    """The issue's accuracy target, measured under the simulator (the GPU's own figure
    is the benchmark case's): 3xTF32 within 2x of fp32 SIMT's error against float64,
    plain TF32 orders of magnitude worse (its 10 mantissa bits)."""
    dims = {"M": 16, "N": 16, "K": 16}
    errors = {p: _relative_error(MATMUL, dims, p) for p in ("highest", "high", "medium")}
    assert errors["high"] <= 2 * errors["highest"], errors
    assert errors["medium"] > 100 * errors["highest"], errors
    assert errors["medium"] < 2.0**-9, errors  # still TF32's: inputs rounded to 2^-11


def test_tf32_results_fail_the_fp32_rule_and_pass_at_the_tf32_unit():
    """The agreement rule must know TF32's precision: a medium result is not f32-exact
    (so the f32 tolerance would call a correct kernel wrong) and meets the rule at
    TF32's unit, 2^-10."""
    source, dims = MATMUL, {"M": 16, "N": 8, "K": 16}
    module = mlfuse.compile_source(source, "m.fuse", target="simulator",
                                   matmul_precision="medium")
    func = parse_program(source).funcs[0]
    args = random_inputs(func, dims, seed=2)
    (want,) = run_tensor(func, args)
    got = module.f(*args)
    ops, reduced = program_size(func, dims=dims)
    assert matmul_eps(module.kernels("f")) == 2.0**-10
    assert not compare(want, got, ops, reduced).ok
    assert compare(want, got, ops, reduced, unit=2.0**-10).ok


def test_the_precision_is_checked_and_named_in_the_error():
    with pytest.raises(MlfuseError, match="matmul_precision must be one of highest, high, "
                                          "medium, got 'low'"):
        compile_text(MATMUL, "t.fuse", matmul_precision="low")
    with pytest.raises(MlfuseError, match="matmul_precision"):
        mlfuse.compile_source(MATMUL, "t.fuse", target="simulator", matmul_precision="HIGH")


def test_the_cli_takes_the_precision_on_every_verb(tmp_path, capsys):
    path = tmp_path / "mm.fuse"
    path.write_text(MATMUL)
    assert cli(["compile", str(path), "--emit", "fused", "--matmul-precision", "medium"]) == 0
    assert 'variant = "mma-tf32"' in capsys.readouterr().out
    assert cli(["explain", str(path), "--matmul-precision", "high"]) == 0
    assert "multiplies: mma-tf32x3 (3xTF32 on tensor cores" in capsys.readouterr().out
    assert cli(["explain", str(path)]) == 0
    assert "multiplies: simt (exact fp32" in capsys.readouterr().out
    assert cli(["run", str(path), "--simulator", "--matmul-precision", "medium",
                "--dim", "M=5", "--dim", "N=8", "--dim", "K=8"]) == 0
    assert capsys.readouterr().out.strip().endswith("PASS")
    with pytest.raises(SystemExit):  # argparse: an unknown choice, with the choices
        cli(["compile", str(path), "--matmul-precision", "low"])
    assert "choose from 'highest', 'high', 'medium'" in capsys.readouterr().err


def test_the_generated_module_keeps_the_variant_readable():
    from mlfuse.codegen import generate
    text = generate(compile_text(MATMUL, "t.fuse", matmul_precision="high"), "cuda")
    assert "_mma_tf32 = _mma_intrinsic(\"tf32\", \"m16n8k8\")" in text
    assert "cvt.rna.tf32.f32" in text and "small terms first" in text
    medium = generate(compile_text(MATMUL, "t.fuse", matmul_precision="medium"), "cuda")
    assert "_tf32_round(" in medium and "_tf32_split(x" not in medium


def test_3xtf32_takes_its_narrow_tiles_when_an_operand_is_not_copied_16_bytes(monkeypatch):
    """3xTF32's tiles of 64 x 32 warp tiles spill with up to four times the copies a
    thread (4- or 8-byte copies): the host picks among MMA_TF32_NARROW_TILES then (here,
    on the simulator's geometry: 32 x 32 only with 16-byte copies)."""
    from mlfuse.codegen import helpers
    monkeypatch.setitem(helpers.MMA_GEOMETRY, "simulator",
                        {"tiles": ((32, 32), (16, 16)), "tf32_tiles": ((32, 32), (16, 16)),
                         "tf32_narrow_tiles": ((16, 16),), "warps": ((16, 16),), "bk": 16})
    module = mlfuse.compile_source(MATMUL.replace("func f(", "func narrow("), "narrow.fuse",
                                   target="simulator", matmul_precision="high")
    python_module = module.python_module
    kernel = python_module.narrow_0
    geometry = python_module._contraction_geometry
    assert geometry(kernel, 4096, 4096, 4096, 1, (4, 4))[0][:2] == (32, 32)
    for copies in [(1, 4), (4, 2), (0, 4), (False, False)]:
        assert geometry(kernel, 4096, 4096, 4096, 1, copies)[0][:2] == (16, 16), copies
    args = random_inputs(parse_program(MATMUL).funcs[0], {"M": 33, "N": 9, "K": 7}, seed=3)
    module.narrow(*args)  # odd N and K: 4-byte copies, so the narrow tile
    assert list(kernel.kernels) == [(16, 16, 1, 1, False)]


def test_3xtf32_odd_stage_counts_and_split_k_agree_with_the_interpreter():
    """The K loop runs two stages an iteration (the split sums added to acc once per
    two; an odd count runs one more, of zeros past K). K = 48 is 3 stages of 16, split
    in two shares of 2 stages and 1: the second's iteration runs a stage past its share,
    which must read zeros, not the first share's K (each share's copies stop at its end)."""
    source = MATMUL.replace("func f(", "func odd(")  # a program of its own
    module = mlfuse.compile_source(source, "odd.fuse", target="simulator",
                                   matmul_precision="high")
    kernel = module.python_module.odd_0
    func = parse_program(source).funcs[0]
    dims = {"M": 5, "N": 8, "K": 48}
    args = random_inputs(func, dims, seed=9)
    (want,) = run_tensor(func, args)
    ops, reduced = program_size(func, dims=dims)
    kernel.tuned[(5, 8, 48, 1)] = (16, 16, 2)
    c = compare(want, module.odd(*args), ops, reduced, unit=matmul_eps(module.kernels("odd")))
    assert c.ok, c.message
    assert [config[-1] for config in kernel.kernels] == [True]  # the split kernel ran
