"""Every user mistake is one MlfuseError at the exact offending token, never a traceback."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlfuse.errors import MlfuseError
from mlfuse.frontend import parse_source

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.fuse"))

HEAD = "func f(x: f32[N, 3], y: f32[4], i: i32[N], h: f16[N]) -> f32[N, 3] {\n"

# (name, source, position, message substring); positions are file:line:col.
CASES = [
    ("syntax error", HEAD + "    r = x +\n    return x\n}\n", "3:5", "unexpected 'return'"),
    ("bad character", HEAD + "    return x $ 2\n}\n", "2:14", "unexpected character '$'"),
    ("chained comparison", HEAD + "    c = x < x < x\n    return x\n}\n", "2:15", "unexpected '<'"),
    ("end of file", HEAD + "    return x", "2:13", "unexpected end of file"),
    ("unknown op", HEAD + "    return rellu(x)\n}\n", "2:12", "unknown function 'rellu'; did you mean 'relu'?"),
    ("too many args", HEAD + "    return exp(x, x)\n}\n", "2:19", "exp takes 1 argument(s) but 2 were given"),
    ("missing arg", HEAD + "    return maximum(x)\n}\n", "2:12", "maximum is missing argument 'y'"),
    ("unknown keyword", HEAD + "    s = sum(x, axes=0)\n    return x\n}\n", "2:16",
     "sum has no parameter 'axes' (parameters: x, axis, keepdims)"),
    ("duplicate keyword", HEAD + "    s = sum(x, axis=0, axis=0)\n    return x\n}\n", "2:24",
     "sum got two values for 'axis'"),
    ("keyword and positional", HEAD + "    s = sum(x, 0, axis=0)\n    return x\n}\n", "2:19",
     "sum got two values for 'axis'"),
    ("ill-typed keyword", HEAD + "    s = sum(x, keepdims=1)\n    return x\n}\n", "2:25",
     "expected true or false, got 1"),
    ("ill-typed pair", HEAD + "    return conv2d(x, x, stride=[1, 2, 3])\n}\n", "2:32",
     "expected an integer or a list of two integers, got [1, 2, 3]"),
    ("non-constant keyword", HEAD + "    s = sum(x, axis=x)\n    return x\n}\n", "2:21",
     "expected an axis or a list of axes"),
    ("positional after keyword", HEAD + "    s = sum(axis=0, x)\n    return x\n}\n", "2:21",
     "positional argument after a keyword argument"),
    ("broadcast mismatch", HEAD + "    return x + y\n}\n", "2:14",
     "shapes [N, 3] and [4] do not broadcast (dim 3 vs 4)"),
    ("call shape mismatch", HEAD + "    return matmul(x, x)\n}\n", "2:12",
     "matmul inner dims differ: [N, 3] x [N, 3]"),
    ("reshape count", HEAD + "    r = reshape(y, [3])\n    return x\n}\n", "2:9",
     "cannot reshape [4] to [3]: element counts differ"),
    ("dtype mismatch", HEAD + "    return x * cast(x, dtype=f64)\n}\n", "2:14",
     "mul operands have different dtypes (f32, f64)"),
    ("float op on int", HEAD + "    r = exp(i)\n    return x\n}\n", "2:9", "exp needs a float dtype, got i32"),
    ("bad dtype name", HEAD + "    return cast(x, dtype=f61)\n}\n", "2:26", "expected a dtype, got f61; did you mean f64?"),
    ("bad axis", HEAD + "    s = sum(x, axis=2)\n    return x\n}\n", "2:21", "axis 2 is out of range for rank 2"),
    ("repeated axis", HEAD + "    s = sum(x, axis=[0, -2])\n    return x\n}\n", "2:21", "axis 0 given twice"),
    ("bad softmax axis", HEAD + "    return softmax(x, axis=-3)\n}\n", "2:28", "axis -3 is out of range for rank 2"),
    ("undefined name", HEAD + "    return x + xx\n}\n", "2:16", "undefined name 'xx'"),
    ("use before definition", HEAD + "    a = b\n    b = x\n    return x\n}\n", "2:9", "undefined name 'b'"),
    ("redefined name", HEAD + "    a = x\n    a = x\n    return a\n}\n", "3:5",
     "'a' is already defined (as a value at t.fuse:2:5); names cannot be rebound"),
    ("rebound parameter", HEAD + "    x = exp(x)\n    return x\n}\n", "2:5",
     "'x' is already defined (as a parameter at t.fuse:1:8)"),
    ("duplicate parameter", "func f(x: f32[N], x: f32[N]) -> f32[N] {\n    return x\n}\n", "1:19",
     "'x' is already defined (as a parameter at t.fuse:1:8)"),
    ("duplicate function", "func f(x: f32) -> f32 {\n  return x\n}\nfunc f(x: f32) -> f32 {\n  return x\n}\n",
     "4:6", "function 'f' is already defined at t.fuse:1:6"),
    ("wrong return count", HEAD + "    return x, x\n}\n", "2:5",
     "returns 2 value(s) (f32[N, 3], f32[N, 3]) but the function declares 1 (f32[N, 3])"),
    ("wrong return type", HEAD + "    return y\n}\n", "2:12",
     "return value 1 has type f32[4] but the function declares f32[N, 3]"),
    ("missing return", HEAD + "    a = x\n}\n", "1:6", "function 'f' has no return statement"),
    ("statement after return", HEAD + "    return x\n    a = x\n}\n", "3:5", "statement after return"),
    ("unknown dtype", "func f(x: f33[N]) -> f32[N] {\n    return x\n}\n", "1:11",
     "unknown dtype 'f33'; did you mean 'f32'?"),
    ("zero dim", "func f(x: f32[0]) -> f32[0] {\n    return x\n}\n", "1:15", "dims must be positive integers, got 0"),
    ("fractional dim", "func f(x: f32[2.5]) -> f32[N] {\n    return x\n}\n", "1:15",
     "dims must be positive integers, got 2.5"),
    ("huge dim", "func f(x: f32[99999999999999999999]) -> f32[N] {\n    return x\n}\n", "1:15",
     "a tensor of more than 2**62 elements is too large to index"),
    ("huge element count", "func f(x: f32[N, 4294967296, 4294967296]) -> f32[N] {\n    return x\n}\n",
     "1:30", "concrete dims up to here: 18446744073709551616"),
    ("unbound result dim", "func f(x: f32[N]) -> f32[M] {\n    return x\n}\n", "1:26",
     "result dim 'M' is not a dim of any parameter"),
    ("unknown shape symbol", HEAD + "    r = reshape(x, [M, 3])\n    return x\n}\n", "2:21", "unknown dim 'M'"),
    ("fractional int literal", HEAD + "    r = i * 2.5\n    return x\n}\n", "2:13",
     "literal 2.5 is not a whole number, but its partner operand is i32"),
    ("literal overflows f16", HEAD + "    r = h + 70000.0\n    return x\n}\n", "2:13", "literal 70000.0 overflows f16"),
    ("literal alone", HEAD + "    return 1.0\n}\n", "2:12", "must be a tensor, not the literal 1.0"),
    ("literal for bool", "func f(c: bool[N]) -> bool[N] {\n    return c == 1\n}\n", "2:17",
     "number 1 cannot stand for a bool operand"),
    ("literal comparison", HEAD + "    r = where(1 < 2, x, x)\n    return x\n}\n", "2:17", "no bool constants"),
    ("list as value", HEAD + "    return x + [1]\n}\n", "2:16", "a list is not a value here"),
    ("huge integer", HEAD + "    return x * 99999999999999999999\n}\n", "2:16", "too large"),
    # indexing
    ("index out of range", HEAD + "    r = y[4]\n    return x\n}\n", "2:11",
     "index 4 is out of range for axis 0 of size 4"),
    ("negative index out of range", HEAD + "    r = x[:, -4]\n    return x\n}\n", "2:14",
     "index -4 is out of range for axis 1 of size 3"),
    ("index on symbolic axis", HEAD + "    r = x[1]\n    return x\n}\n", "2:11",
     "index 1 on symbolic axis 0 (N): only 0 and -1 are known to exist"),
    ("slice of symbolic axis", HEAD + "    r = x[1:]\n    return x\n}\n", "2:11",
     "slice 1: of symbolic size N has a size that depends on N"),
    ("zero step", HEAD + "    r = y[1:3:0]\n    return x\n}\n", "2:15", "slice step cannot be 0"),
    ("too many indices", HEAD + "    r = y[0, 1]\n    return x\n}\n", "2:14",
     "too many indices: 2 for a value of rank 1 (f32[4])"),
    ("two ellipses", HEAD + "    r = x[..., ...]\n    return x\n}\n", "2:16", "one ... at most"),
    ("empty slice", HEAD + "    r = y[3:1]\n    return x\n}\n", "2:11",
     "this slice of axis 0 (size 4) is empty; mlfuse has no empty arrays"),
    ("tensor index", HEAD + "    r = y[i]\n    return x\n}\n", "2:11",
     "a subscript takes integer constants; take(x, indices, axis) gathers"),
    ("split count", HEAD + "    a, b = split(y, 3)\n    return x\n}\n", "2:21",
     "cannot split size 4 into 3 equal parts"),
    ("split sizes", HEAD + "    a, b = split(y, [1, 2])\n    return x\n}\n", "2:12",
     "split sizes [1, 2] must be positive and add up to axis 0's size 4"),
    ("split names", HEAD + "    a, b, c = split(y, 2)\n    return x\n}\n", "2:5",
     "3 names but the right side gives 2 values"),
    ("split to one name", HEAD + "    a = split(y, 2)\n    return x\n}\n", "2:5",
     "the right side gives 2 values; assign them to 2 names"),
    ("names for one value", HEAD + "    a, b = exp(y)\n    return x\n}\n", "2:5",
     "2 names but the right side gives 1 value"),
    ("split used as a value", HEAD + "    return exp(split(x, 3, axis=1))\n}\n", "2:16",
     "this gives 3 values; assign them to as many names"),
    ("concat shapes", HEAD + "    r = concat([x, y])\n    return x\n}\n", "2:9",
     "concat along axis 0: shapes [N, 3] and [4] differ off that axis"),
    ("concat symbolic sum", HEAD + "    r = concat([h, cast(y, f16)])\n    return x\n}\n",
     "2:9", "concat along axis 0 of sizes N, 4: their sum is no dim"),
    ("pad pairs", HEAD + "    r = pad(y, [[1, 2], [0, 0]])\n    return x\n}\n", "2:16",
     "pad needs one [low, high] pair per axis: 1 for f32[4], got 2"),
    ("negative pad", HEAD + "    r = pad(y, [[-1, 2]])\n    return x\n}\n", "2:16",
     "expected a list of [low, high] pairs of non-negative integers"),
    ("pad symbolic axis", HEAD + "    r = pad(x, [[1, 0], [0, 0]])\n    return x\n}\n", "2:9",
     "cannot pad symbolic axis 0 (N)"),
    ("take float indices", HEAD + "    r = take(y, x)\n    return x\n}\n", "2:9",
     "gather indices must be i32 or i64, got f32"),
    ("empty arange", HEAD + "    r = arange(3, 1)\n    return x\n}\n", "2:9",
     "arange(3, 1, 1) is empty"),
    ("product dim in a parameter", "func f(x: f32[B*H]) -> f32[B] {\n    return x\n}\n", "1:15",
     "a product such as B*H may only appear in result types"),
    ("unknown product factor", HEAD + "    r = reshape(x, [N*M])\n    return x\n}\n", "2:21",
     "unknown dim 'M'"),
    ("quotient of integers", HEAD + "    r = reshape(x, [N, 9 / 2 * 2 / 3])\n    return x\n}\n",
     "2:26", "9 / 2 is not a whole number"),
    ("quotient by zero", HEAD + "    r = reshape(x, [N * 3 / 0])\n    return x\n}\n", "2:27",
     "a dim divided by 0"),
    ("quotient by a float", HEAD + "    r = reshape(x, [N * 3 / 1.5])\n    return x\n}\n", "2:27",
     "a quotient in a constant divides integers and dim names"),
    ("quotient of an unknown dim", HEAD + "    r = reshape(x, [3, N / M])\n    return x\n}\n", "2:24",
     "unknown dim 'M'"),
    ("quotient count", HEAD + "    r = reshape(x, [N / 2, 2])\n    return x\n}\n", "2:9",
     "cannot reshape [N, 3] to [N/2, 2]: element counts differ"),
    ("quotient in a result type", "func f(x: f32[N]) -> f32[N / 3 / 0] {\n    return x\n}\n",
     "1:34", "dims must be positive integers, got 0"),
    ("integer quotient in a result type", "func f(x: f32[N]) -> f32[7 / 2] {\n    return x\n}\n",
     "1:28", "7 / 2 is not a whole number"),
]


def error_of(source: str) -> str:
    with pytest.raises(MlfuseError) as info:
        parse_source(source, "t.fuse")
    assert info.value.loc is not None
    return str(info.value)


@pytest.mark.parametrize("source, position, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_names_the_offending_token(source, position, message):
    text = error_of(source)
    header, line, caret = text.splitlines()
    assert header.startswith(f"t.fuse:{position}: error: "), text
    assert message in header, text
    column = int(position.split(":")[1])
    assert caret == " " * (4 + column - 1) + "^"
    assert line == "    " + source.splitlines()[int(position.split(":")[0]) - 1]


@pytest.mark.parametrize("source", ["", "\n\n", "# a comment, no function\n"])
def test_a_file_without_functions_is_an_error_at_its_start(source):
    with pytest.raises(MlfuseError, match="no function in the file") as info:
        parse_source(source, "t.fuse")
    assert (info.value.loc.line, info.value.loc.column) == (1, 1)


def check_parse(text: str) -> None:
    """A module or an MlfuseError with a position: never any other exception."""
    try:
        module = parse_source(text, "fuzz.fuse")
    except MlfuseError as e:
        assert e.loc is not None and e.loc.file == "fuzz.fuse" and e.loc.line >= 1
        str(e)  # formatting the caret display must work too
    else:
        assert module.name == "builtin.module"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_gives_a_module_or_a_located_error(text):
    check_parse(text)


_TOKEN = re.compile(r"\*\*|[<>=!]=|\d+\.?\d*(?:[eE][-+]?\d+)?|\w+|\S")
# comments dropped: the mutated tokens are joined on one line
_PROGRAMS = [re.sub(r"#[^\n]*", "", p.read_text()) for p in EXAMPLES]
_MUTATION = st.tuples(st.sampled_from(["delete", "duplicate", "swap"]), st.integers(0, 10 ** 6),
                      st.integers(0, 10 ** 6))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_PROGRAMS), st.lists(_MUTATION, min_size=1, max_size=3))
def test_mutated_programs_give_a_module_or_a_located_error(program, mutations):
    tokens = _TOKEN.findall(program)
    for kind, a, b in mutations:
        i, j = a % len(tokens), b % len(tokens)
        if kind == "delete":
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        else:
            tokens[i], tokens[j] = tokens[j], tokens[i]
    check_parse(" ".join(tokens))


def test_deep_nesting_is_a_located_error_not_a_crash():
    text = error_of(HEAD + "    a = x\n    return " + "relu(" * 5000 + "x" + ")" * 5000 + "\n}\n")
    assert text.startswith("t.fuse:3:5: error: expression nested too deeply")


def test_long_operator_chains_build_without_recursion():
    # an operator tree is as deep as the expression is long: built with an explicit stack
    from mlfuse.frontend import parse_source
    func = parse_source(HEAD + "    return " + "-" * 5000 + "x\n}\n", "t.fuse").funcs[0]
    assert sum(op.name == "tensor.neg" for op in func.body.ops) == 5000
    terms = " + ".join(f"x * {k}.0" for k in range(3000))
    func = parse_source(HEAD + f"    return {terms}\n}}\n", "t.fuse").funcs[0]
    adds = [op for op in func.body.ops if op.name == "tensor.add"]
    assert len(adds) == 2999 and adds[-1].loc.column > adds[0].loc.column  # left to right
