"""Bad inputs get one clear error (issue 16): the CLI prints ``mlfuse: error: ...``,
exits 1 and writes nothing; the API raises MlfuseError, or a TypeError/ValueError
naming the argument. Each test here was a traceback, a hang or a wrong answer before."""
import os
from pathlib import Path

import numpy as np
import pytest

import mlfuse
from mlfuse.cli.main import main
from mlfuse.errors import MlfuseError

ROOT = Path(__file__).resolve().parent.parent
CHAIN = str(ROOT / "examples" / "chain.fuse")
CHAIN_SRC = Path(CHAIN).read_text()


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_cli_error(capsys, *argv, says: str):
    code, out, err = cli(capsys, *argv)
    assert code == 1 and out == "", (code, out, err)
    # "mlfuse: error: ...", or "mlfuse: FILE:LINE:COL: error: ..." when it has a position,
    # after at most the line `run` announces the simulator with
    lines = [line for line in err.splitlines() if not line.startswith("mlfuse: running on")]
    assert lines[0].startswith("mlfuse: ") and "error: " in lines[0], err
    assert says in err and "Traceback" not in err, err
    return err


# -- 1. --fuse-limit and fuse_options ------------------------------------------------
@pytest.mark.parametrize("limit", ["0", "-1"])
@pytest.mark.parametrize("command", [["compile", "--emit", "fused"], ["explain"],
                                     ["run", "--dim", "N=2"]])
def test_fuse_limit_below_one_is_an_error(capsys, command, limit):
    assert_cli_error(capsys, command[0], CHAIN, *command[1:], "--fuse-limit", limit,
                     says=f"--fuse-limit takes a positive number of ops per kernel, got {limit}")


@pytest.mark.parametrize("options, says", [
    ({"limit": 0}, "fuse_options['limit'] must be a positive int"),
    ({"limit": 2.5}, "fuse_options['limit'] must be a positive int"),
    ({"limit": True}, "fuse_options['limit'] must be a positive int"),
    ({"bogus": 1}, "fuse_options has no option 'bogus' (options: dims, limit, target)"),
    ({"dims": {"N": -3}}, "fuse_options['dims']"),
    ({"target": "tpu"}, "fuse_options['target']"),
])
def test_bad_fuse_options_name_the_option(options, says):
    with pytest.raises(MlfuseError) as e:
        mlfuse.compile_source(CHAIN_SRC, fuse_options=options)
    assert says in str(e.value)


def test_fuse_limit_one_still_compiles():
    m = mlfuse.compile_source(CHAIN_SRC, fuse_options={"limit": 1})
    assert len(m.kernels("chain")) == 5


# -- 4. compile_source takes text --------------------------------------------------------
@pytest.mark.parametrize("text, says", [(None, "got NoneType"), (b"func", "got bytes"),
                                        (3, "got int")])
def test_compile_source_names_a_text_of_the_wrong_type(text, says):
    with pytest.raises(TypeError) as e:
        mlfuse.compile_source(text)
    assert "compile_source: text must be a str" in str(e.value) and says in str(e.value)


def test_compile_source_bytes_suggests_decoding():
    with pytest.raises(TypeError, match=r"decode"):
        mlfuse.compile_source(CHAIN_SRC.encode())


# -- 7. positions with \r, \f and \v ---------------------------------------------------
BAD_LINE_3 = ["func f(x: f32[N]) -> f32[N] {", "    y = x * 2.0", "    return exp(x, y)", "}", ""]
EXPECTED = ("bad.fuse:3:19: error: exp takes 1 argument(s) but 2 were given\n"
            "        return exp(x, y)\n" + " " * 22 + "^")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_error_positions_with_any_line_ending(newline):
    text = newline.join(BAD_LINE_3)
    with pytest.raises(MlfuseError) as e:
        mlfuse.compile_source(text, "bad.fuse")
    assert str(e.value) == EXPECTED, repr(str(e.value))


def test_form_feed_is_a_space_within_a_line():
    lines = list(BAD_LINE_3)
    lines[1] = "    y = x\f* 2.0"
    with pytest.raises(MlfuseError) as e:
        mlfuse.compile_source("\n".join(lines), "bad.fuse")
    assert str(e.value) == EXPECTED, repr(str(e.value))


def test_vertical_tab_is_located_on_its_own_line():
    """Not whitespace in .fuse (nor in Python): an error at its own position, the line
    shown whole (str.splitlines would break it there)."""
    lines = list(BAD_LINE_3)
    lines[1] = "    y = x\v* 2.0"
    with pytest.raises(MlfuseError) as e:
        mlfuse.compile_source("\n".join(lines), "bad.fuse")
    assert str(e.value) == ("bad.fuse:2:10: error: unexpected character '\\x0b'\n"
                            "        y = x * 2.0\n" + " " * 13 + "^"), repr(str(e.value))


def test_a_comment_ends_at_a_carriage_return():
    text = "# a comment\rfunc f(x: f32[N]) -> f32[N] {\r    return x $ 2.0\r}\r"
    with pytest.raises(MlfuseError) as e:
        mlfuse.compile_source(text, "cr.fuse")
    assert str(e.value).startswith("cr.fuse:3:14: error: unexpected character '$'"), str(e.value)


def test_a_program_with_carriage_returns_compiles():
    m = mlfuse.compile_source(CHAIN_SRC.replace("\n", "\r"), target="simulator")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(m.chain(x, x), np.maximum(x * 3, 0) * 0.5 + x)


# -- 8. command line arguments -------------------------------------------------------------
def test_a_dim_given_twice_is_an_error(capsys):
    assert_cli_error(capsys, "run", CHAIN, "--dim", "N=4", "--dim", "N=5",
                     says="--dim N given twice (4 and 5)")


def test_an_empty_output_name_is_an_error(capsys):
    assert_cli_error(capsys, "compile", CHAIN, "-o", "", says="-o needs a file name")


@pytest.mark.parametrize("command", [["compile", "--emit", "tensor"], ["explain"]])
def test_output_over_the_input_is_refused(capsys, tmp_path, command):
    src = tmp_path / "chain.fuse"
    src.write_text(CHAIN_SRC)
    err = assert_cli_error(capsys, command[0], src, *command[1:], "-o", src,
                           says="is an input file")
    assert src.read_text() == CHAIN_SRC, err


def test_opt_output_over_the_input_is_refused(capsys, tmp_path):
    src = tmp_path / "chain.mlir"
    code, loops, _ = cli(capsys, "compile", CHAIN, "--emit", "loops", "-o", src)
    text = src.read_text()
    assert_cli_error(capsys, "opt", src, "--passes", "fuse", "-o", src, says="is an input file")
    assert src.read_text() == text


def test_output_through_another_path_to_the_input_is_refused(capsys, tmp_path):
    src = tmp_path / "chain.fuse"
    src.write_text(CHAIN_SRC)
    os.symlink(src, tmp_path / "link.fuse")
    assert_cli_error(capsys, "compile", src, "-o", tmp_path / "." / "link.fuse",
                     says="is an input file")
    assert src.read_text() == CHAIN_SRC


def test_opt_rejects_an_empty_file(capsys, tmp_path):
    src = tmp_path / "empty.mlir"
    src.write_text("// nothing\n")
    assert_cli_error(capsys, "opt", src, says="no function in the file")


@pytest.mark.parametrize("dims, says", [("0", "sizes must be positive, got 0"),
                                        ("4294967296, 4294967296", "more than 2**62 elements")])
def test_opt_rejects_what_the_frontend_rejects_in_a_type(capsys, tmp_path, dims, says):
    src = tmp_path / "bad.mlir"
    src.write_text(f"func @f(%x: f32[{dims}]) -> (f32[{dims}]) {{\n"
                   "  return %x\n}\n")
    err = assert_cli_error(capsys, "opt", src, says=says)
    assert "bad.mlir:1:" in err


# -- 5. scalar and array arguments -------------------------------------------------------
@pytest.fixture(scope="module")
def scale():
    return mlfuse.compile_source("func scale(x: f32[N], a: f32) -> f32[N] {\n"
                                 "    return x * a\n}\n", target="simulator").scale


@pytest.mark.parametrize("value", [10 ** 400, -10 ** 400, 1e300, -3.5e38, 2 ** 128])
def test_a_scalar_beyond_the_dtype_is_refused(scale, value):
    with pytest.raises(ValueError) as e:
        scale(np.ones(2, np.float32), value)
    text = str(e.value)
    assert "parameter 'a' of @scale" in text and "beyond the largest f32" in text, text


@pytest.mark.parametrize("value", [3.0e38, 7, 0.1, float("inf"), float("-inf"), float("nan")])
def test_scalars_within_the_dtype_still_run(scale, value):
    got = scale(np.ones(2, np.float32), value)
    np.testing.assert_array_equal(got, np.full(2, np.float32(value)))


def test_a_masked_array_is_refused(scale):
    x = np.ma.masked_array(np.ones(2, np.float32), mask=[False, True])
    with pytest.raises(TypeError) as e:
        scale(x, 2.0)
    assert "parameter 'x' of @scale" in str(e.value) and "masked" in str(e.value)


# -- 6 and 8. no empty arrays (docs/language.md) ---------------------------------------------
@pytest.fixture(scope="module")
def rowmax():
    return mlfuse.compile_source("func rowmax(x: f32[R, C]) -> f32[R] {\n"
                                 "    return max(x, axis=1)\n}\n", target="simulator").rowmax


@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0, 0)])
def test_an_empty_array_is_a_value_error(rowmax, shape):
    """max over an empty axis has no identity: NumPy raises a ValueError; mlfuse has no
    empty arrays at all, and says so with the same kind of error before any launch."""
    with pytest.raises(ValueError) as e:
        rowmax(np.zeros(shape, np.float32))
    assert "parameter 'x' of @rowmax" in str(e.value) and "empty" in str(e.value)


def test_the_interpreter_agrees_that_max_of_nothing_is_an_error():
    from mlfuse.pipeline import parse_program
    from mlfuse.interp import run_tensor
    func = parse_program("func rowmax(x: f32[R, C]) -> f32[R] {\n"
                         "    return max(x, axis=1)\n}\n").funcs[0]
    with pytest.raises(ValueError):
        run_tensor(func, [np.zeros((3, 0), np.float32)])


def test_run_refuses_a_zero_dim(capsys):
    assert_cli_error(capsys, "run", CHAIN, "--dim", "N=0", says="sizes must be positive")


def test_run_refuses_an_empty_array_from_inputs(capsys, tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.zeros(0, np.float32), b=np.zeros(0, np.float32))
    assert_cli_error(capsys, "run", CHAIN, "--inputs", npz, says="empty")


# -- 9. sizes past 2**31 and 2**62 elements ---------------------------------------------------
def test_a_result_too_large_to_index_is_refused_before_any_launch():
    m = mlfuse.compile_source("func outer(x: f32[N], y: f32[M]) -> f32[N, M, 2147483648] {\n"
                              "    return broadcast_to(reshape(x, [N, 1, 1]) * reshape(y, [M, 1]),"
                              " [N, M, 2147483648])\n}\n", target="simulator")
    with pytest.raises(ValueError) as e:
        m.outer(np.ones(2 ** 16, np.float32), np.ones(2 ** 16, np.float32))
    assert "@outer" in str(e.value) and "2**62" in str(e.value)


# -- 3. ONNX models ------------------------------------------------------------------------
def _model(nodes, inputs, outputs, initializers=()):
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _vi(name, shape):
    from onnx import TensorProto, helper
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _import_error(model) -> str:
    from mlfuse.frontend.onnx_import import import_onnx
    with pytest.raises(MlfuseError) as e:
        import_onnx(model)
    return str(e.value)


def test_onnx_graph_input_with_an_empty_name():
    pytest.importorskip("onnx")
    from onnx import helper
    model = _model([helper.make_node("Relu", [""], ["y"])], [_vi("", [4])], [_vi("y", [4])])
    assert "graph input #0 has an empty name" in _import_error(model)


def test_onnx_required_node_input_with_an_empty_name():
    pytest.importorskip("onnx")
    from onnx import helper
    model = _model([helper.make_node("Add", ["x", ""], ["y"])], [_vi("x", [4])],
                   [_vi("y", [4])])
    text = _import_error(model)
    assert "(Add)" in text and "input 1 is required but empty" in text, text


@pytest.mark.parametrize("size", [8, 24])
def test_onnx_initializer_whose_raw_data_does_not_fit_its_dims(size):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], np.zeros(4, np.float32).tobytes(), raw=True)
    w.raw_data = b"\0" * size  # as a truncated or corrupt file has it
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])],
                   [_vi("y", [4])], [w])
    text = _import_error(model)
    assert f"initializer 'w' holds {size} bytes of data; its dims [4] of FLOAT need 16" in text


def test_onnx_input_too_large_to_index():
    pytest.importorskip("onnx")
    from onnx import helper
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2 ** 40, 2 ** 40])],
                   [_vi("y", [2 ** 40, 2 ** 40])])
    assert "graph input 'x'" in _import_error(model) and "2**62" in _import_error(model)


def test_onnx_input_too_large_to_index_on_the_command_line(capsys, tmp_path):
    pytest.importorskip("onnx")
    from onnx import helper
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2 ** 40, 2 ** 40])],
                   [_vi("y", [2 ** 40, 2 ** 40])])
    path = tmp_path / "big.onnx"
    path.write_bytes(model.SerializeToString())
    for command in ("compile", "explain"):
        assert_cli_error(capsys, command, path, says="2**62")


@pytest.mark.parametrize("second", ["y", "x"])
def test_onnx_value_written_twice(second):
    pytest.importorskip("onnx")
    from onnx import helper
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], [second])]
    model = _model(nodes, [_vi("x", [4])], [_vi("y", [4])])
    text = _import_error(model)
    assert f"output '{second}' is already" in text and "(Neg)" in text, text


# -- 2. fuse on loops IR that is not as lowering makes it ------------------------------------
IN_PLACE = """func @f(%x: buf<f32[N]>) -> (buf<f32[N]>) {
  %y = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i0: index) {
    %0 = loops.load %x, %i0 : f32
    loops.store %0, %y, %i0
  }
  loops.parallel {extents = [N]} (%i1: index) {
    %1 = loops.load %y, %i1 : f32
    %2 = arith.mul %1, %1 : f32
    loops.store %2, %y, %i1
  }
  return %y
}
"""
TWO_STORES = """func @f(%x: buf<f32[N]>) -> (buf<f32[N]>, buf<f32[N]>) {
  %y = loops.alloc : buf<f32[N]>
  %z = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i0: index) {
    %0 = loops.load %x, %i0 : f32
    loops.store %0, %y, %i0
    loops.store %0, %z, %i0
  }
  return %y, %z
}
"""
READ_BEFORE_WRITE = """func @f(%x: buf<f32[N]>) -> (buf<f32[N]>) {
  %y = loops.alloc : buf<f32[N]>
  %z = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i0: index) {
    %0 = loops.load %y, %i0 : f32
    loops.store %0, %z, %i0
  }
  loops.parallel {extents = [N]} (%i1: index) {
    %1 = loops.load %x, %i1 : f32
    loops.store %1, %y, %i1
  }
  return %z
}
"""


@pytest.mark.parametrize("passes", ["fuse", "no-fuse"])
@pytest.mark.parametrize("text, line, says", [
    (IN_PLACE, 7, "loads %y, the buffer it stores"),
    (TWO_STORES, 4, "stores 2 buffers"),
    (READ_BEFORE_WRITE, 4, "loads %y before the loop nest at"),
])
def test_fuse_refuses_loop_nests_it_cannot_plan(capsys, tmp_path, passes, text, line, says):
    """Was a RecursionError (in place), a silently dropped nest (two stores) and a
    reordering that read the buffer after it was written (read before write)."""
    src = tmp_path / "nests.mlir"
    src.write_text(text)
    err = assert_cli_error(capsys, "opt", src, "--passes", passes, says=says)
    assert f"nests.mlir:{line}:" in err


# -- the comparison rule: a wrong result is caught where inputs hold inf or a cast truncates ---
def _reference(source, args):
    from mlfuse.pipeline import parse_program
    from mlfuse.interp import run_tensor
    from mlfuse.interp.rounding import rounding_decided
    from mlfuse.tools.checking import program_size
    func = parse_program(source).funcs[0]
    with np.errstate(all="ignore"):
        (ref,), (undecided,) = run_tensor(func, args), rounding_decided(func, args)
    return ref, undecided, program_size(func, dims={"N": args[0].shape[0]})


INF_PROGRAMS = {
    "scale": "func f(x: f32[N], g: f32[N]) -> f32[N] { return x * g + x }",
    "centred": "func f(x: f32[N], g: f32[N]) -> f32[N] { return (x - mean(x)) * g + x }",
}


@pytest.mark.parametrize("name", sorted(INF_PROGRAMS))
@pytest.mark.parametrize("wrong", ["finite off by 1e-3", "inf sign", "nan to finite",
                                   "finite to inf"])
def test_a_wrong_result_is_caught_when_an_input_holds_inf(name, wrong):
    from mlfuse.tools.checking import compare
    x = np.array([1, 1, 1, 1, 2, 3, 0.5, -1], np.float32)
    g = np.array([np.inf, -np.inf, 0, 2, np.inf, 1, -1, 0.25], np.float32)
    ref, undecided, (ops, reduced) = _reference(INF_PROGRAMS[name], [x, g])
    decided = ~np.broadcast_to(undecided, ref.shape)
    assert decided.sum() >= 4  # most elements are still compared
    assert compare(ref, ref.copy(), ops, reduced, undecided=undecided).ok
    got = ref.copy()
    finite, inf, nan = (decided & np.isfinite(ref), decided & np.isinf(ref),
                        decided & np.isnan(ref))
    if wrong == "finite off by 1e-3":
        i = np.flatnonzero(finite)[-1]
        got[i] = ref[i] * np.float32(1.001) + np.float32(1e-3)
    elif wrong == "inf sign":
        if not inf.any():
            pytest.skip("no decided infinity in this result")
        got[np.flatnonzero(inf)[0]] *= -1
    elif wrong == "nan to finite":
        if not nan.any():
            pytest.skip("no decided NaN in this result")
        got[np.flatnonzero(nan)[0]] = 0
    else:
        got[np.flatnonzero(finite)[0]] = np.inf
    c = compare(ref, got, ops, reduced, undecided=undecided)
    assert not c.ok, c.message


def test_a_wrong_result_is_caught_next_to_a_truncating_cast():
    """1/3 * 3 is 1 or one ulp below: the cast to i32 gives 1 or 0, so that element is
    undecided; every other element must be exact."""
    from mlfuse.tools.checking import compare
    third = np.float32(1) / np.float32(3)
    x = np.array([third, 1, 2, -1.5, 0.25, 7], np.float32)
    ref, undecided, (ops, reduced) = _reference(
        "func f(x: f32[N]) -> i32[N] { return cast(x * 3.0, i32) }", [x])
    assert np.broadcast_to(undecided, ref.shape).tolist() == [True] + [False] * 5
    for i in range(1, 6):
        got = ref.copy()
        got[i] += 1
        assert not compare(ref, got, ops, reduced, undecided=undecided).ok


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.fuse")))
def test_kernels_index_past_2_31_elements_with_int64(example):
    """Sizes past 2**31 elements run: every kernel widens its block index to 64 bits
    (int64, or uint64 in lean pointwise kernels) before any arithmetic with it
    (cuda.blockIdx is 32-bit; cuda.grid would be too), and sizes reach kernels as
    Python ints (int64); a kernel indexing in uint32 is launched only under 2**31
    points. benchmarks/large_sizes.py runs such sizes on a GPU."""
    import re
    from mlfuse.codegen import generate
    from mlfuse.pipeline import compile_text
    source = generate(compile_text((ROOT / "examples" / example).read_text(), example), "cuda")
    assert "cuda.grid(" not in source
    uses = re.findall(r"(.{0,12})cuda\.blockIdx\.[xyz]", source)
    assert uses and all(u.endswith(("numba.int64(", "mba.uint64(", "mba.uint32("))
                        for u in uses), uses
    narrow = re.findall(r"def (\w+)\([^)]*\):\n(?:    .*\n|\n)*?.*numba\.uint32\(cuda\.blockIdx", source)
    for kernel in narrow:
        launch = re.search(rf"if (.*):.*\n\s+{kernel}\[", source)
        assert launch and "< 2**31" in launch.group(1), kernel
