"""The RUN-line runner itself: it must fail whenever a RUN line does not do what it
says, so that an .mlir test can never pass by checking less than it appears to."""
import pytest

from ir_runner import RunFailure, run_file

IR = """func @f(%x: f32[N]) -> (f32[N]) {
  %y = tensor.relu %x : f32[N]
  return %y
}
"""


def check(tmp_path, header: str, ir: str = IR):
    path = tmp_path / "t.mlir"
    path.write_text(header + ir)
    run_file(path)


def fails(tmp_path, header: str, ir: str = IR) -> str:
    with pytest.raises(RunFailure) as e:
        check(tmp_path, header, ir)
    return str(e.value)


def test_a_matching_check_passes_and_a_wrong_one_fails_with_filechecks_report(tmp_path):
    check(tmp_path, "// RUN: mlfuse opt %s --passes cse | filecheck %s\n"
                    "// CHECK: tensor.relu %x\n")
    report = fails(tmp_path, "// RUN: mlfuse opt %s --passes cse | filecheck %s\n"
                             "// CHECK: tensor.exp %x\n")
    assert "t.mlir:1: RUN:" in report and "tensor.exp %x" in report and "--- input ---" in report


def test_not_expects_a_failure_and_2_to_1_pipes_the_error(tmp_path):
    check(tmp_path, "// RUN: not mlfuse opt %s --passes nope 2>&1 | filecheck %s\n"
                    "// CHECK: unknown pass 'nope'\n")
    assert "expected a failure, exit status 0" in fails(
        tmp_path, "// RUN: not mlfuse opt %s | filecheck %s\n// CHECK: relu\n")
    # without 2>&1 the error goes to stderr, not to filecheck
    assert "--- input ---" in fails(
        tmp_path, "// RUN: not mlfuse opt %s --passes nope | filecheck %s\n// CHECK: unknown pass\n")


def test_check_prefix_selects_the_checks(tmp_path):
    header = "// RUN: mlfuse opt %s | filecheck %s --check-prefix OTHER\n// OTHER: tensor.relu\n"
    check(tmp_path, header + "// CHECK: not in the output\n")
    assert "tensor.sin" in fails(tmp_path, header + "// OTHER: tensor.sin\n")


def test_every_run_line_runs_and_continuations_join(tmp_path):
    header = ("// RUN: mlfuse opt %s \\\n// RUN:   --passes cse | filecheck %s\n"
              "// RUN: mlfuse opt %s | filecheck %s --check-prefix TWO\n"
              "// CHECK: relu\n// TWO: tensor.sin\n")
    assert "t.mlir:3: RUN: mlfuse opt %s | filecheck %s --check-prefix TWO" in fails(tmp_path, header)


@pytest.mark.parametrize("header, message", [
    ("// no run line\n", "no '// RUN:' line"),
    ("// RUN: mlfuse opt %s\n", "must end in '| filecheck"),
    ("// RUN: mlfuse opt %s > out.txt | filecheck %s\n", "unsupported shell syntax '>'"),
    ("// RUN: mlfuse opt %s | grep relu | filecheck %s\n", "unsupported command 'grep relu'"),
    ("// RUN: mlfuse opt %s | filecheck %s\n// CHECK: relu\n// RUN: mlfuse opt %s \\\n",
     "ends in a continuation"),
    ("// RUN: mlfuse opt %s | filecheck %s --check-prefix NONE\n// CHECK: relu\n",
     "No check strings found"),
])
def test_run_lines_that_would_check_nothing_are_refused(tmp_path, header, message):
    assert message in fails(tmp_path, header)


def test_a_compiler_crash_is_never_an_expected_failure(tmp_path, monkeypatch):
    import mlfuse.cli

    def crash(args):
        raise AttributeError("a bug")
    monkeypatch.setattr(mlfuse.cli, "main", crash)
    with pytest.raises(AttributeError):
        check(tmp_path, "// RUN: not mlfuse opt %s 2>&1 | filecheck %s\n// CHECK: bug\n")
