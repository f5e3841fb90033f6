"""The index-map ops (slice, concat, pad, gather, iota), the .fuse syntax and builtins
that build them (subscripts, split, arange, ...), product dims (B*H) and matmul of any
rank: NumPy semantics at the tensor level, the same values from the lowered and fused
IR and from the generated kernels (CUDA simulator), and fusion into one kernel."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mlfuse
from mlfuse.dialects.shapes import slice_params
from mlfuse.errors import ArgumentError, MlfuseError
from mlfuse.frontend import parse_source
from mlfuse.frontend.fuse_printer import print_fuse
from mlfuse.interp import run_loops, run_tensor
from mlfuse.ir.printer import print_ir
from mlfuse.pipeline import compile_text

from helpers import assert_close, random_inputs

PROPERTY = settings(max_examples=25, deadline=None)


def levels(source: str, args: list) -> dict:
    """Every result of ``source`` at the tensor level (the oracle) and from the loops,
    fused and unfused IR interpreters."""
    out = {"tensor": run_tensor(parse_source(source, "t.fuse").funcs[0], args)}
    for level, fuse in (("loops", True), ("fused", True), ("fused", False)):
        out[f"{level} fuse={fuse}"] = run_loops(
            compile_text(source, "t.fuse", level=level, fuse=fuse).funcs[0], args)
    return out


def kernels(source: str, args: list, fuse: bool = True) -> tuple:
    out = getattr(mlfuse.compile_source(source, "t.fuse", fuse=fuse, target="simulator"),
                  "f")(*args)
    return out if isinstance(out, tuple) else (out,)


def assert_levels_equal(source: str, args: list, want: list) -> None:
    """Index maps move elements without arithmetic: every level gives exactly ``want``."""
    for what, got in levels(source, args).items():
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=f"{what}\n{source}")


def type_text(dtype: str, shape) -> str:
    return f"{dtype}[{', '.join(map(str, shape))}]"


# -- properties against NumPy ------------------------------------------------------------
shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3)
bounds = st.one_of(st.none(), st.integers(-7, 7))


@st.composite
def subscripts(draw, shape):
    """Items of a basic-indexing subscript of an array of ``shape``: some for leading
    axes, then maybe ... and some for trailing axes."""
    def item(size):
        if draw(st.booleans()):
            return draw(st.integers(-size, size - 1))
        return slice(draw(bounds), draw(bounds), draw(st.sampled_from([None, 1, 2, 3, -1, -2])))
    lead = draw(st.integers(0, len(shape)))
    trail = draw(st.integers(0, len(shape) - lead))
    items = [item(size) for size in shape[:lead]]
    if trail or draw(st.booleans()):
        items.append(Ellipsis)
    items += [item(size) for size in shape[len(shape) - trail:]]
    return tuple(items)


def item_text(item) -> str:
    if item is Ellipsis:
        return "..."
    if isinstance(item, int):
        return str(item)
    return ":".join("" if v is None else str(v) for v in (item.start, item.stop, item.step))


@PROPERTY
@given(shape=shapes, data=st.data())
def test_subscript_is_numpy_basic_indexing(shape, data):
    items = data.draw(subscripts(shape))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    want = x[items]
    assume(want.size > 0)  # empty results are errors, tested below
    source = (f"func f(x: {type_text('f32', shape)}) -> {type_text('f32', want.shape)} {{\n"
              f"    return x[{', '.join(map(item_text, items)) or '...'}]\n}}\n")
    assert_levels_equal(source, [x], [want])


@PROPERTY
@given(size=st.integers(1, 6), start=bounds, stop=bounds, step=st.sampled_from([None, 1, 2, -1, -3]))
def test_slice_params_are_pythons(size, start, stop, step):
    first, by, count = slice_params(size, start, stop, step)
    assert [first + k * by for k in range(count)] == list(range(size))[start:stop:step]


@PROPERTY
@given(shape=shapes, data=st.data())
def test_concat_is_numpy_concatenate(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    parts = []
    for k, n in enumerate(sizes):
        part_shape = list(shape)
        part_shape[axis] = n
        parts.append(np.arange(np.prod(part_shape), dtype=np.int32).reshape(part_shape) * 10 + k)
    want = np.concatenate(parts, axis=axis)
    params = ", ".join(f"p{k}: {type_text('i32', p.shape)}" for k, p in enumerate(parts))
    names = ", ".join(f"p{k}" for k in range(len(parts)))
    written_axis = axis - len(shape) if data.draw(st.booleans()) else axis
    source = (f"func f({params}) -> {type_text('i32', want.shape)} {{\n"
              f"    return concat([{names}], axis={written_axis})\n}}\n")
    assert_levels_equal(source, parts, [want])


@PROPERTY
@given(shape=shapes, data=st.data())
def test_pad_is_numpy_pad(shape, data):
    widths = [data.draw(st.tuples(st.integers(0, 2), st.integers(0, 2))) for _ in shape]
    value = data.draw(st.sampled_from([0.0, -1.5, 7.0]))
    x = np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)
    want = np.pad(x, widths, constant_values=np.float32(value))
    source = (f"func f(x: {type_text('f32', shape)}) -> {type_text('f32', want.shape)} {{\n"
              f"    return pad(x, {[list(w) for w in widths]}, value={value})\n}}\n")
    assert_levels_equal(source, [x], [want])


def take_with_fill(x, indices, axis):
    """The documented gather: NumPy take, negatives wrapped once, nan (or the int fill)
    where an index is outside [-size, size)."""
    size = x.shape[axis]
    i = np.where(indices < 0, indices + size, indices)
    inside = (i >= 0) & (i < size)
    out = np.take(x, np.clip(i, 0, size - 1), axis=axis)
    fill = np.nan if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    mask = inside.reshape((1,) * axis + inside.shape + (1,) * (x.ndim - axis - 1))
    return np.where(mask, out, np.array(fill).astype(x.dtype))


@PROPERTY
@given(shape=shapes, index_shape=st.lists(st.integers(1, 3), max_size=2), data=st.data())
def test_take_is_numpy_take_with_a_fill_out_of_range(shape, index_shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    size = shape[axis]
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 0.5
    indices = np.array(data.draw(st.lists(st.integers(-size - 2, size + 1),
                                          min_size=int(np.prod(index_shape)),
                                          max_size=int(np.prod(index_shape)))),
                       dtype=np.int32).reshape(index_shape)
    want = take_with_fill(x, indices, axis)
    if ((indices >= -size) & (indices < size)).all():
        np.testing.assert_array_equal(want, np.take(x, indices, axis=axis))
    source = (f"func f(x: {type_text('f32', shape)}, i: {type_text('i32', index_shape)}) -> "
              f"{type_text('f32', want.shape)} {{\n    return take(x, i, axis={axis})\n}}\n")
    assert_levels_equal(source, [x, indices], [want])


# -- the generated kernels (CUDA simulator) ------------------------------------------------
def test_kernels_gather_with_out_of_range_indices_in_every_dtype():
    """Kernels cannot raise: an index outside the axis yields nan (floats), the most
    negative int (i32) or true (bool), as the interpreter says; negatives wrap once."""
    source = """
func f(x: f32[5, 3], h: f16[5], k: i32[5], b: bool[5], i: i32[8]) -> (f32[8, 3], f16[8], i32[8], bool[8]) {
    return take(x, i), take(h, i), take(k, i), take(b, i)
}
"""
    x, h, k, _, _ = random_inputs(parse_source(source).funcs[0], {}, seed=1)
    b = np.array([False] * 5)
    i = np.array([0, 4, -1, -5, 5, -6, 2**31 - 1, -2**31], dtype=np.int32)
    want = run_tensor(parse_source(source).funcs[0], [x, h, k, b, i])
    assert np.isnan(want[0][4:]).all() and not np.isnan(want[0][:4]).any()
    assert list(want[2][4:]) == [-2**31] * 4 and list(want[3]) == [False] * 4 + [True] * 4
    np.testing.assert_array_equal(want[0][:4], x[[0, 4, 4, 0]])
    for fuse in (True, False):
        for g, w in zip(kernels(source, [x, h, k, b, i], fuse), want):
            np.testing.assert_array_equal(g, w)


def test_kernels_embedding_layernorm_and_positions_fuse_and_agree():
    """An embedding lookup, positions from arange, a layernorm (a row reduction over the
    gathered values): the data-dependent loads inside a reduction schedule."""
    source = """
func f(table: f32[V, D], ids: i32[B, 6], pos: f32[6, D], g: f32[D], b: f32[D]) -> f32[B, 6, D] {
    e = take(table, ids) + pos * cast(reshape(arange(1, 7), [6, 1]), f32)
    return layernorm(e, g, b)
}
"""
    func = parse_source(source).funcs[0]
    args = random_inputs(func, {"V": 9, "D": 8, "B": 1}, seed=4)
    args[1] = np.abs(args[1]) % 9  # every id inside the table here
    want = run_tensor(func, args)
    fused = compile_text(source, "t.fuse")
    assert sum(op.name == "fused.kernel" for op in fused.funcs[0].body.ops) == 1
    for g, w in zip(kernels(source, args), want):
        assert_close(g, w, 12, "embedding layernorm", 8)


def test_kernels_concat_slices_and_pad_around_reductions():
    """Concat of two producers into a softmax (row schedule), a reversed slice into a
    sum over the leading axis (column-wise), a padded row into a max."""
    source = """
func f(x: f32[N, 5], y: f32[N, 3], z: f32[7, 5]) -> (f32[N, 8], f32[3], f32[N]) {
    s = softmax(concat([exp(x), y * 2.0], axis=1))
    c = sum(z[::-2, 1:4], axis=0)
    m = max(pad(relu(x), [[0, 0], [2, 1]], value=-1.0), axis=1)
    return s, c, m
}
"""
    func = parse_source(source).funcs[0]
    args = random_inputs(func, {"N": 3}, seed=3)
    want = run_tensor(func, args)
    for fuse in (True, False):
        for g, w in zip(kernels(source, args, fuse), want):
            assert_close(g, w, 8, "concat/slice/pad", 8)


@pytest.mark.parametrize("n", [1 << 20, 64])
def test_kernels_gathered_and_concatenated_values_in_every_reduction_schedule(n):
    """Planned for N = 2**20 rows: warp-rows (rows of 8 and 16), split-columns (over
    N) and row (the whole sum, its nest over [N, 8] one loop, whose split plan spreads
    it over the GPU, storing g as it goes); for 64: warp-rows, strips (a block per strip
    of columns) and row. The kernels run at N = 9."""
    source = """
func f(t: f32[V, 8], ids: i32[N], x: f32[N, 8]) -> (f32[], f32[8], f32[N], f32[N]) {
    g = take(t, ids) * x
    return sum(g), sum(g, axis=0), max(g, axis=1), sum(concat([g, x[:, ::-1]], axis=1), axis=1)
}
"""
    module = compile_text(source, "t.fuse", fuse_options={"dims": {"N": n, "V": 10}})
    schedules = {k["schedule"] for k in module.funcs[0].body.ops if k.name == "fused.kernel"}
    assert schedules == ({"warp-rows", "row", "split-columns"} if n > 64 else
                         {"warp-rows", "strips", "row"})
    func = parse_source(source).funcs[0]
    args = random_inputs(func, {"N": 9, "V": 10}, seed=9)
    args[1] = np.abs(args[1])  # ids in range: the sums would be all nan otherwise
    want = run_tensor(func, args)
    compiled = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                     fuse_options={"dims": {"N": n, "V": 10}})
    for g, w in zip(compiled.f(*args), want):
        assert_close(g, w, 4, f"N planned {n}", 9)


def test_kernels_vector_variants_keep_computed_indices_scalar():
    """Innermost extents of 16: the vector variant moves the plain loads and the store
    four at a time, the slice's and gather's computed indices one at a time."""
    source = """
func f(x: f32[N, 32], y: f32[N, 16], t: f32[10, 16], i: i32[N]) -> (f32[N, 16], f32[N, 16]) {
    return x[:, 8:24] + y, take(t, i) * y
}
"""
    func = parse_source(source).funcs[0]
    module = mlfuse.compile_source(source, "t.fuse", target="simulator")
    assert "_load_vector" in module.source  # a vector variant exists for these kernels
    args = random_inputs(func, {"N": 6}, seed=2)
    want = run_tensor(func, args)
    for g, w in zip(module.f(*args), want):
        np.testing.assert_array_equal(g, w)


# -- product dims and matmul of any rank --------------------------------------------------
ATTENTION = """
func f(q: f32[B, H, S, D], k: f32[B, H, S, D], v: f32[B, H, S, D]) -> (f32[B, S, H*D], f32[B*H, S, D]) {
    scores = matmul(q, transpose(k, [0, 1, 3, 2])) * 0.5
    o = matmul(softmax(scores, axis=-1), v)
    return reshape(transpose(o, [0, 2, 1, 3]), [B, S, H*D]), reshape(q, [B*H, S, D])
}
"""


def test_attention_with_symbolic_heads_through_product_dims():
    func = parse_source(ATTENTION).funcs[0]
    assert str(func.args[0].type) == "f32[B, H, S, D]"
    assert [str(t) for t in func["result_types"]] == ["f32[B, S, D*H]", "f32[B*H, S, D]"]
    assert "tensor.matmul" in print_ir(parse_source(ATTENTION))
    args = random_inputs(func, {"B": 1, "H": 2, "S": 3, "D": 2}, seed=7)
    q, k, v = args
    scores = q @ k.transpose(0, 1, 3, 2) * np.float32(0.5)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v
    want = [o.transpose(0, 2, 1, 3).reshape(1, 3, 4), q.reshape(2, 3, 2)]
    for what, got in {**levels(ATTENTION, args), "kernels": kernels(ATTENTION, args)}.items():
        for g, w in zip(got, want):
            assert_close(g, w, 16, what, 8)


MATMULS = [((4,), (4, 3)), ((2, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2)),
           ((3, 4), (2, 2, 4, 5)), ((2, 3, 2, 4), (2, 3, 4, 2)), ((2, 3, 4), (4, 2))]


def test_matmul_of_any_rank_is_numpys():
    params = ", ".join(f"a{k}: {type_text('f32', a)}, b{k}: {type_text('f32', b)}"
                       for k, (a, b) in enumerate(MATMULS))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for pair in MATMULS for s in pair]
    want = [args[2 * k] @ args[2 * k + 1] for k in range(len(MATMULS))]
    results = ", ".join(type_text("f32", w.shape) for w in want)
    source = (f"func f({params}) -> ({results}) {{\n    return "
              + ", ".join(f"matmul(a{k}, b{k})" for k in range(len(MATMULS))) + "\n}\n")
    for what, got in {**levels(source, args), "kernels": kernels(source, args)}.items():
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(np.asarray(g), np.asarray(w, dtype=np.float32), 8, f"{what} {k}", 4)


def test_matmul_batch_dims_that_do_not_broadcast_are_an_error_at_the_call():
    with pytest.raises(MlfuseError, match=r"shapes \[2\] and \[3\] do not broadcast") as info:
        parse_source("func f(a: f32[2, 4, 5], b: f32[3, 5, 6]) -> f32[2, 4, 6] {\n"
                     "    return matmul(a, b)\n}\n", "t.fuse")
    assert (info.value.loc.line, info.value.loc.column) == (2, 12)


def test_product_dims_are_checked_at_call_time():
    """A parameter with a product dim (IR text only; .fuse keeps them to results) must
    match the product of its factors' sizes, in the interpreter and the runtime."""
    from mlfuse.dialects import parse_ir
    from mlfuse.pipeline import lower
    text = ("func @f(%x: f32[B, H], %y: f32[B*H]) -> (f32[B*H]) {\n"
            "  %r = tensor.reshape %x {shape = [\"B*H\"]} : f32[H*B]\n"
            "  %s = tensor.add %r, %y : f32[B*H]\n  return %s\n}\n")
    x, y = np.ones((2, 3), np.float32), np.ones(6, np.float32)
    func = parse_ir(text).funcs[0]
    assert str(func.body.ops[0].result.type) == "f32[B*H]"  # canonical: names sorted
    np.testing.assert_array_equal(run_tensor(func, [x, y])[0], np.full(6, 2, np.float32))
    with pytest.raises(ArgumentError, match=r"expected B\*H = 6"):
        run_tensor(func, [x, np.ones(5, np.float32)])
    module = mlfuse.compile_ir(lower(parse_ir(text)), target="simulator")
    np.testing.assert_array_equal(module.f(x, y), np.full(6, 2, np.float32))
    with pytest.raises(ArgumentError, match=r"must be B\*H = 6, got 5"):
        module.f(x, np.ones(5, np.float32))


# -- split, arange, iota, printing --------------------------------------------------------
def test_symbolic_axes_whole_reversed_first_and_last():
    source = """
func f(x: f32[B, S, 4]) -> (f32[B, 4], f32[B, 4], f32[B, S, 4], f32[B, 1, 2], f32[1, S]) {
    return x[:, -1], x[:, 0], x[::-1, ::-1], x[:, -1:, 1:3], x[-1:, :, 3]
}
"""
    x = np.arange(2 * 5 * 4, dtype=np.float32).reshape(2, 5, 4)
    want = [x[:, -1], x[:, 0], x[::-1, ::-1], x[:, -1:, 1:3], x[-1:, :, 3]]
    assert_levels_equal(source, [x], want)
    for g, w in zip(kernels(source, [x]), want):
        np.testing.assert_array_equal(g, w)
    text = print_fuse(parse_source(source, "t.fuse"))
    assert "x[:, -1:, :]" in text and "x[::-1, ::-1, :]" in text
    assert print_fuse(parse_source(text, "printed.fuse")) == text


def test_split_into_equal_parts_and_by_sizes():
    source = """
func f(x: f32[N, 6]) -> (f32[N, 2], f32[N, 2], f32[N, 2], f32[N, 1], f32[N, 5]) {
    a, b, c = split(x, 3, axis=-1)
    d, e = split(x, [1, 5], axis=1)
    return a, b, c, d, e
}
"""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert_levels_equal(source, [x], np.split(x, 3, axis=1) + np.split(x, [1], axis=1))


def test_split_of_a_product_dim_by_its_coefficient():
    source = """
func f(x: f32[N, 3]) -> (f32[N, 3], f32[N, 3]) {
    a, b = split(concat([x, exp(x)]), 2)
    return a, b
}
"""
    with pytest.raises(MlfuseError, match="cannot split symbolic axis 0"):
        parse_source(source, "t.fuse")


def test_arange_and_iota():
    source = """
func f(x: f32[N, 4]) -> (i32[5], i32[3], f32[4], f16[4], f32[N, 4], i32[2, N]) {
    return arange(5), arange(2, 11, 3), arange(1, 2, 0.25), arange(0.0, 1.0, 0.25, dtype=f16), x + iota([N, 4], axis=1, dtype=f32), iota([2, N])
}
"""
    x = np.zeros((3, 4), np.float32)
    want = [np.arange(5, dtype=np.int32), np.arange(2, 11, 3, dtype=np.int32),
            np.float32(1) + np.arange(4, dtype=np.float32) * np.float32(0.25),
            np.arange(4).astype(np.float16) * np.float16(0.25),
            np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)),
            np.broadcast_to(np.arange(2, dtype=np.int32)[:, None], (2, 3))]
    assert_levels_equal(source, [x], want)
    for g, w in zip(kernels(source, [x]), want):
        np.testing.assert_array_equal(g, w)


def test_indexing_ops_print_as_fuse_and_parse_back():
    source = """
func f(x: f32[N, 6], i: i32[3], y: f32[5, 3]) -> (f32[N, 3], f32[N, 12], f32[N, 9], f32[3], f32[2, 3], i32[2, N], f32[N, 2], f32[3*N, 6]) {
    a, b = split(x, [2, 4], axis=1)
    return take(x, i, axis=1), concat([x, x], axis=-1), pad(x, [[0, 0], [1, 2]], value=1.5), y[-1], y[3::-2], iota([2, N]), a, reshape(concat([x, x, x]), [N*3, 6])
}
"""
    module = parse_source(source, "t.fuse")
    text = print_fuse(module)
    again = parse_source(text, "printed.fuse")
    assert [op.name for op in again.funcs[0].body.ops] == [op.name for op in module.funcs[0].body.ops]
    assert print_fuse(again) == text
    func = module.funcs[0]
    args = random_inputs(func, {"N": 2}, seed=5)
    for g, w in zip(run_tensor(again.funcs[0], args), run_tensor(func, args)):
        np.testing.assert_array_equal(g, w)


def test_the_indexing_section_of_the_language_docs_compiles():
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "docs" / "language.md").read_text()
    section = text[text.index("## Indexing"):text.index("## Composite ops")]
    blocks = [b for b in re.findall(r"```\n(.*?)```", section, re.S) if "func " in b]
    assert len(blocks) >= 6
    for block in blocks:
        compile_text(block, "language.md")
