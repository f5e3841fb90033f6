"""The mlfuse command line: each command's output and exit code."""
import json
from pathlib import Path

import numpy as np
import pytest

from mlfuse import __version__
from mlfuse.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
CHAIN = str(ROOT / "examples" / "chain.fuse")
SOFTMAX = str(ROOT / "examples" / "softmax.fuse")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("level, marker", [("tensor", "tensor.relu"), ("loops", "loops.parallel"),
                                           ("fused", "fused.kernel"), ("numba", "@cuda.jit")])
def test_compile_emits_each_level(capsys, level, marker):
    code, out, _ = run(capsys, "compile", CHAIN, "--emit", level)
    assert code == 0 and marker in out


def test_compile_several_files_and_output_file(capsys, tmp_path):
    target = tmp_path / "all.mlir"
    code, out, _ = run(capsys, "compile", CHAIN, SOFTMAX, "--emit", "tensor", "-o", str(target))
    text = target.read_text()
    assert code == 0 and out == ""
    assert "func @chain" in text and "func @softmax" in text


def test_no_fuse_keeps_one_kernel_per_op(capsys):
    _, fused, _ = run(capsys, "compile", CHAIN, "--emit", "fused")
    _, unfused, _ = run(capsys, "compile", CHAIN, "--emit", "fused", "--no-fuse")
    assert fused.count("fused.kernel") == 1 and unfused.count("fused.kernel") == 5


def test_print_ir_after_all_names_every_pass(capsys):
    code, _, err = run(capsys, "compile", CHAIN, "--emit", "fused", "--print-ir-after-all")
    for name in ("parse", "decompose", "cse", "lower-tensor-to-loops", "fuse"):
        assert f"IR after {name} -----" in err


def test_opt_runs_passes_on_ir_text(capsys, tmp_path):
    _, loops, _ = run(capsys, "compile", SOFTMAX, "--emit", "loops")
    src = tmp_path / "softmax.mlir"
    src.write_text(loops)
    code, out, _ = run(capsys, "opt", str(src), "--passes", "fuse")
    assert code == 0 and out.count("fused.kernel") == 1 and "schedule = \"row\"" in out


def test_opt_print_decisions_output_still_parses(capsys, tmp_path):
    _, loops, _ = run(capsys, "compile", SOFTMAX, "--emit", "loops")
    src, fused = tmp_path / "softmax.mlir", tmp_path / "fused.mlir"
    src.write_text(loops)
    code, _, _ = run(capsys, "opt", str(src), "--passes", "fuse", "--print-decisions",
                     "-o", str(fused))
    decisions = [line for line in fused.read_text().splitlines() if line.startswith("// fuse: ")]
    assert code == 0 and len(decisions) == 4  # one per producer: m, sub, e, sum
    code, again, _ = run(capsys, "opt", str(fused))  # the decisions are comments
    assert code == 0 and again + "".join(d + "\n" for d in decisions) == fused.read_text()


def test_opt_hw_refuses_a_name_that_is_no_target_field(capsys, tmp_path):
    """--hw NAME=VALUE (tests/ir/fuse/staged_rows.mlir plans with a field changed): a
    name that is no field is a user error (exit 1, no traceback)."""
    _, loops, _ = run(capsys, "compile", SOFTMAX, "--emit", "loops")
    src = tmp_path / "softmax.mlir"
    src.write_text(loops)
    code, _, err = run(capsys, "opt", str(src), "--passes", "fuse", "--hw", "no_such_knob=1")
    assert code == 1 and "--hw: no hardware field 'no_such_knob'" in err and "Traceback" not in err


def test_user_errors_exit_1_with_position_and_no_traceback(capsys, tmp_path):
    bad = tmp_path / "bad.fuse"
    bad.write_text("func f(x: f32[N]) -> f32[N] {\n    return exp(x, x)\n}\n")
    code, out, err = run(capsys, "compile", str(bad), "--emit", "tensor")
    assert code == 1 and "bad.fuse:2:" in err and "^" in err and "Traceback" not in err
    code, _, err = run(capsys, "opt", str(bad), "--passes", "nope")
    assert code == 1 and "error:" in err
    code, _, err = run(capsys, "compile", str(tmp_path / "missing.fuse"))
    assert code == 1 and "cannot read" in err


@pytest.mark.parametrize("command", ["compile", "opt", "run", "explain"])
def test_bytes_that_are_not_utf8_are_a_located_error(capsys, tmp_path, command):
    junk = tmp_path / "junk.fuse"
    junk.write_bytes(b"func f(x: f32[N]) -> f32[N] {\n  return x \xff\x00\x1b[2J\n}\n")
    code, out, err = run(capsys, command, str(junk))
    header, line, caret = err.splitlines()
    assert code == 1 and out == "" and "Traceback" not in err
    assert header == f"mlfuse: {junk}:2:12: error: byte 0xff is not UTF-8 (is this a binary file?)"
    assert line == "      return x \ufffd\ufffd\ufffd[2J"  # control characters not echoed
    assert caret == " " * (4 + 11) + "^"


def test_a_byte_order_mark_is_dropped(capsys, tmp_path):
    src = tmp_path / "bom.fuse"
    src.write_bytes(b"\xef\xbb\xbf" + Path(CHAIN).read_bytes())
    code, out, _ = run(capsys, "compile", str(src), "--emit", "tensor")
    assert code == 0 and out.startswith("func @chain")


def test_a_file_with_no_function_is_an_error(capsys, tmp_path):
    empty = tmp_path / "empty.fuse"
    empty.write_text("# nothing here yet\n")
    for command in ("compile", "run"):
        code, out, err = run(capsys, command, str(empty))
        assert code == 1 and out == ""
        assert err.startswith(f"mlfuse: {empty}:1:1: error: no function in the file")


def test_an_output_that_cannot_be_written_is_an_error(capsys, tmp_path):
    missing_dir = tmp_path / "no" / "such" / "dir" / "out.py"
    for argv in (["compile", CHAIN, "-o", str(missing_dir)],
                 ["explain", CHAIN, "-o", str(missing_dir)]):
        code, _, err = run(capsys, *argv)
        assert code == 1 and err == f"mlfuse: error: cannot write {missing_dir}: " \
                                    "No such file or directory\n"


def test_unknown_pass_and_function_are_errors(capsys, tmp_path):
    _, loops, _ = run(capsys, "compile", CHAIN, "--emit", "loops")
    src = tmp_path / "c.mlir"
    src.write_text(loops)
    code, _, err = run(capsys, "opt", str(src), "--passes", "fusee")
    assert code == 1 and "unknown pass 'fusee'" in err
    code, _, err = run(capsys, "compile", CHAIN, "--func", "nope")
    assert code == 1 and "no function 'nope' (have: chain)" in err


def test_run_checks_against_the_interpreter_on_the_simulator(capsys):
    code, out, err = run(capsys, "run", SOFTMAX, "--dim", "R=3", "--dim", "C=40", "--simulator")
    assert code == 0 and "PASS" in out and "1 kernel(s)" in out
    assert "simulator" in err


def test_run_takes_inputs_from_an_npz_file_and_leaves_out_undecided_elements(capsys, tmp_path):
    case = ROOT / "tests" / "regressions" / "layernorm_inf_gamma_equal_values"
    code, out, _ = run(capsys, "run", str(case.with_suffix(".fuse")),
                       "--inputs", str(case.with_suffix(".npz")))
    assert code == 0 and "8 undecided element(s) left out): PASS" in out
    text = tmp_path / "not.npz"
    text.write_text("x = 1\n")
    for inputs, message in ((tmp_path / "missing.npz", "cannot read inputs"),
                            (text, "is not an .npz file of arrays (np.savez)")):
        code, out, err = run(capsys, "run", CHAIN, "--inputs", str(inputs))
        assert code == 1 and message in err and out == ""


def test_run_reads_bf16_inputs_that_np_savez_stored_as_raw_bytes(capsys, tmp_path):
    # np.savez keeps an ml_dtypes bfloat16 array as '|V2'; a bf16 parameter takes it as bf16
    import ml_dtypes
    program = tmp_path / "half.fuse"
    program.write_text("func f(x: bf16[3]) -> bf16[3] {\n    return x * 2.0\n}\n")
    np.savez(tmp_path / "half.npz", x=np.array([1.5, -np.inf, 3.0], dtype=ml_dtypes.bfloat16))
    code, out, err = run(capsys, "run", str(program), "--inputs", str(tmp_path / "half.npz"),
                         "--simulator")
    assert code == 0 and "bfloat16[3]" in out and "PASS" in out, err


def test_explain_text_json_and_dot(capsys):
    code, out, _ = run(capsys, "explain", SOFTMAX, "--dim", "R=16384", "--dim", "C=4096")
    assert code == 0 and "kernels:       5 -> 1" in out
    code, out, _ = run(capsys, "explain", SOFTMAX, "--json")
    data = json.loads(out)["softmax"]
    assert data["kernels_after"] == 1 and data["intermediates_after"] == 0
    code, out, _ = run(capsys, "explain", CHAIN, "--dot")
    assert out.startswith("digraph mlfuse") and "chain_0" in out


def test_bench_without_a_gpu_says_so_and_exits_2(capsys):
    code, out, err = run(capsys, "bench", CHAIN, "--dim", "N=1024")
    assert code == 2 and "no CUDA GPU" in err


def test_bench_checks_and_reports_each_function_with_stand_ins_for_the_gpu(
        capsys, tmp_path, monkeypatch):
    """bench's plumbing on the simulator: the GPU check, the copy bandwidth and the
    timer are stand-ins; compiling, checking against the interpreter, the table and
    --json are the real thing (for a .fuse file and an ONNX model's bound initializers)."""
    import mlfuse.tools.benchmark
    import mlfuse.cli.bench
    import mlfuse.runtime.memory
    from mlfuse.cli.program import Program
    calls = []

    def fake_timer(fn, n_sets=1, **kw):
        fn(0)
        calls.append(n_sets)
        return mlfuse.tools.benchmark.summarize([0.5, 0.5, 0.5])
    compile_for_gpu = Program.compile
    monkeypatch.setattr(mlfuse.cli.bench, "gpu_present", lambda: True)
    monkeypatch.setattr(mlfuse.cli.bench, "measure_copy_bandwidth", lambda: 2.0e12)
    monkeypatch.setattr(mlfuse.runtime.memory, "install", lambda: None)
    monkeypatch.setattr(mlfuse.tools.benchmark, "time_gpu", fake_timer)
    monkeypatch.setattr(Program, "compile", lambda self, fuse=True, target=None, fuse_options=None,
                        matmul_precision=None:
                        compile_for_gpu(self, fuse, "simulator", fuse_options, matmul_precision))
    out = tmp_path / "bench.json"
    code, text, _ = run(capsys, "bench", CHAIN, "--dim", "N=1000", "--json", str(out))
    assert code == 0 and "| chain | 0.500 | 0.500 |" in text and "| 1 / 5 | yes |" in text
    (chain,) = json.loads(out.read_text())["functions"]
    assert chain["fused"]["checked"] and chain["unfused"]["checked"] and len(calls) == 2
    # fused: read x, b and write once (4000 bytes each); unfused: 5 kernels, 12 transfers
    assert (chain["bytes_fused"], chain["bytes_unfused"]) == (12000, 48000)
    code, text, _ = run(capsys, "bench", CHAIN, "--dim", "N=1000", "--fuse-limit", "2",
                        "--json", str(out))
    (chain,) = json.loads(out.read_text())["functions"]
    assert chain["fused"]["kernels"] == 3 and chain["bytes_fused"] == 32000  # as planned
    onnx_model = ROOT / "examples" / "onnx" / "mlp.onnx"
    pytest.importorskip("onnx")
    code, text, _ = run(capsys, "bench", str(onnx_model))
    assert code == 0 and "| main_graph |" in text and text.rstrip().endswith("| yes |")


def test_version_and_bad_dim(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and __version__ in capsys.readouterr().out
    code, _, err = run(capsys, "run", CHAIN, "--dim", "N=ten")
    assert code == 1 and "--dim takes NAME=SIZE" in err
    for command in ("run", "explain"):  # (bench checks the same, after finding a GPU)
        code, out, err = run(capsys, command, CHAIN, "--dim", "n=5")  # a typo for N
        assert (code, out) == (1, "")
        assert err == f"mlfuse: error: --dim n: no such symbolic dim in {CHAIN} (dims: N)\n"


def test_run_with_inputs_too_large_to_make_is_an_error(capsys):
    code, out, err = run(capsys, "run", CHAIN, "--dim", f"N={2 ** 50}")
    assert code == 1 and "Traceback" not in err
    assert f"error: cannot make inputs for chain with N={2 ** 50}: " in err


def test_explain_prints_one_form(capsys):
    with pytest.raises(SystemExit) as info:
        main(["explain", CHAIN, "--json", "--dot"])
    assert info.value.code == 2 and "not allowed with" in capsys.readouterr().err
