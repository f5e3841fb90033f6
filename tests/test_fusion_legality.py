"""Fusion legality and grouping on hand-built loop-nest graphs (IR text in, IR out)."""
from mlfuse.ir import print_ir, verify
from mlfuse.dialects import parse_ir
from mlfuse.transforms import get_pass
from mlfuse.transforms.fusion.fuse import Group, Planner
from mlfuse.transforms.fusion.graph import NestGraph
from mlfuse.hardware import get_target

from fusion_ir import func, pointwise, row_sum


def fuse(text, **options):
    module = parse_ir(text)
    p = get_pass("fuse", **options)
    p.run(module)
    verify(module)
    again = print_ir(module)
    assert print_ir(parse_ir(again)) == again
    return module, p.plans[0]


def kernels(module):
    return [op for op in module.funcs[0].body.ops if op.name == "fused.kernel"]


def allocs(module):
    return [op for op in module.funcs[0].body.ops if op.name == "loops.alloc"]


def count(kernel, name):
    return sum(1 for op in kernel.walk() if op.name == name)


def load(buf, dst, idx="%i0"):
    return f"%{dst} = loops.load %{buf}, {idx} : f32"


DIAMOND = func("diamond", [("x", "f32[N]")], ["f32[N]"],
               pointwise("a", ["N"], [load("x", "v"), "%r = arith.exp %v : f32"], "r")
               + pointwise("b", ["N"], [load("a", "v"), "%r = arith.mul %v, %v : f32"], "r")
               + pointwise("c", ["N"], [load("a", "v"), "%r = arith.neg %v : f32"], "r")
               + pointwise("d", ["N"], [load("b", "u"), load("c", "w"),
                                        "%r = arith.add %u, %w : f32"], "r"), ["d"])


def test_diamond_is_one_kernel_computing_the_shared_producer_once():
    module, plan = fuse(DIAMOND)
    (k,) = kernels(module)
    assert count(k, "arith.exp") == 1 and count(k, "loops.load") == 1
    assert count(k, "loops.store") == 1
    assert [a.result.name_hint for a in allocs(module)] == ["d"]
    assert {d.action for d in plan.decisions} == {"fused"}


MULTI = func("multi", [("x", "f32[N]"), ("b", "f32[N]")], ["f32[N]", "f32[N]"],
             pointwise("h", ["N"], [load("x", "u"), load("b", "w"), "%r = arith.add %u, %w : f32"], "r")
             + pointwise("g", ["N"], [load("h", "v"), "%r = arith.gelu %v : f32"], "r"), ["g", "h"])


def test_intermediate_also_returned_is_written_once_from_the_same_kernel():
    module, plan = fuse(MULTI)
    (k,) = kernels(module)
    stored = [op.operands[1].name_hint for op in k.walk() if op.name == "loops.store"]
    assert sorted(stored) == ["g", "h"]
    assert count(k, "arith.add") == 1
    assert plan.decisions[0].action == "multi-output"


FULL = func("full", [("x", "f32[N]")], ["f32[N]"],
            "  %s = loops.alloc : buf<f32[]>\n"
            "  loops.parallel {extents = []} () {\n"
            "    %z = arith.constant {value = 0.0} : f32\n"
            "    %r = loops.reduce %z {combiner = \"add\", extent = N} : f32 (%k: index) {\n"
            "      %v = loops.load %x, %k : f32\n      loops.yield %v\n    }\n"
            "    loops.store %r, %s\n  }\n"
            + pointwise("y", ["N"], [load("x", "v"), "%t = loops.load %s : f32",
                                     "%r = arith.div %v, %t : f32"], "r"), ["y"])


def test_full_reduction_then_broadcast_use_needs_two_kernels_and_says_why():
    module, plan = fuse(FULL)
    assert len(kernels(module)) == 2
    (d,) = [d for d in plan.decisions if d.producer == "s"]
    assert d.action == "kept" and "grid-wide barrier" in d.reason


def test_a_full_reduction_and_its_prologue_value_also_returned_make_one_kernel():
    """``y`` is stored along the reduced axis but reads no reduction: it is stored as the
    values are reduced (split_stages.py's staged for), x read once; a value over every
    element that reads the sum still waits for a second kernel."""
    module, plan = fuse_source(
        "func f(x: f32[N]) -> (f32[N], f32[]) {\n  y = x * 2.0 + 1.0\n"
        "  return y, mean(y)\n}\n", dims={"N": 1 << 24})
    (k,) = kernels(module)
    assert count(k, "loops.store") == 2 and k["schedule"] == "row" and k["split_stages"] == 1
    (d,) = [d for d in plan.decisions if d.producer == "y"]
    assert d.action == "multi-output"
    module, _ = fuse_source(
        "func f(x: f32[N]) -> (f32[N], f32[N]) {\n  y = x * 2.0\n"
        "  return y, y - mean(y)\n}\n", dims={"N": 1 << 24})
    assert len(kernels(module)) == 2


def test_a_whole_tensor_reduction_over_several_axes_with_its_prologue_returned_is_one_kernel():
    """Over [R, C] the kernel's nests as strips over rows would be one block; the planner
    prices it as flatten-row-nests leaves it, a row kernel over [] with a split plan."""
    from mlfuse.pipeline import compile_text
    module = compile_text("func f(p: f32[B, D], t: f32[B, D]) -> (f32[B, D], f32[]) {\n"
                          "  d = p - t\n  return d, mean(d * d)\n}\n", "t.fuse",
                          fuse_options={"dims": {"B": 4096, "D": 4096}})
    (k,) = kernels(module)
    assert k["schedule"] == "row" and k["split_stages"] == 1 and k["flat_nests"] == [["B", "D"]]


CYCLE = func("cycle", [("x", "f32[R, C]")], ["f32[R, 1]"],
             row_sum("a", "x", "R", "C")
             + "  %b = loops.alloc : buf<f32[1, 1]>\n"
               "  loops.parallel {extents = [1, 1]} (%i0: index, %i1: index) {\n"
               "    %z = arith.constant {value = 0.0} : f32\n"
               "    %r = loops.reduce %z {combiner = \"add\", extent = R} : f32 (%k: index) {\n"
               "      %c0 = arith.constant {value = 0} : index\n"
               "      %v = loops.load %a, %k, %c0 : f32\n      loops.yield %v\n    }\n"
               "    loops.store %r, %b, %i0, %i1\n  }\n"
             + pointwise("c", ["R", 1], ["%c0 = arith.constant {value = 0} : index",
                                         "%u = loops.load %a, %i0, %i1 : f32",
                                         "%w = loops.load %b, %c0, %c0 : f32",
                                         "%r = arith.add %u, %w : f32"], "r"), ["c"])


def test_fusing_around_an_outside_kernel_would_make_a_cycle_and_is_refused():
    module, plan = fuse(CYCLE)
    assert len(kernels(module)) == 3
    (d,) = [d for d in plan.decisions if d.producer == "a"]
    assert d.action == "kept"
    graph = NestGraph(parse_ir(CYCLE).funcs[0])
    a, b, c = graph.nests
    planner = Planner(graph, get_target(), {}, None)
    assert not planner.acyclic([Group([a, c], [a, c]), Group([b], [b])])
    assert planner.acyclic([Group([a], [a]), Group([b], [b]), Group([c], [c])])


def test_kernels_come_out_in_an_order_where_writes_precede_reads():
    module, _ = fuse(CYCLE)
    written = {"x"}
    for k in kernels(module):
        for op in k.walk():
            if op.name == "loops.load":
                assert op.operands[0].name_hint in written
        written |= {op.operands[1].name_hint for op in k.walk() if op.name == "loops.store"}


def test_fuse_limit_caps_group_size():
    module, plan = fuse(DIAMOND, limit=1)
    assert len(kernels(module)) == 4
    assert all("--fuse-limit" in d.reason for d in plan.decisions)


SOFTMAX_LIKE = func("rows", [("x", "f32[R, C]")], ["f32[R, C]"],
                    row_sum("m", "x", "R", "C", "max", "-inf")
                    + pointwise("e", ["R", "C"], ["%c0 = arith.constant {value = 0} : index",
                                                  "%u = loops.load %x, %i0, %i1 : f32",
                                                  "%w = loops.load %m, %i0, %c0 : f32",
                                                  "%d = arith.sub %u, %w : f32",
                                                  "%r = arith.exp %d : f32"], "r")
                    + row_sum("s", "e", "R", "C")
                    + pointwise("y", ["R", "C"], ["%c0 = arith.constant {value = 0} : index",
                                                  "%u = loops.load %e, %i0, %i1 : f32",
                                                  "%w = loops.load %s, %i0, %c0 : f32",
                                                  "%r = arith.div %u, %w : f32"], "r"), ["y"])


def test_reduction_with_prologue_and_epilogue_over_rows_is_one_row_kernel():
    module, plan = fuse(SOFTMAX_LIKE, dims={"C": 4096, "R": 16384})
    (k,) = kernels(module)
    assert k["schedule"] == "row" and k["extents"] == ["R"]
    assert count(k, "loops.reduce") == 2 and count(k, "loops.for") == 1
    assert [a.result.name_hint for a in allocs(module)] == ["y"]


def test_short_rows_run_several_rows_per_warp():
    """Rows shorter than a warp whose length is a symbol: the row kernel with its
    short-row plan (codegen/short_rows.py: a group of threads per row, picked per call),
    not a block per row alone nor a thread walking a row."""
    module, _ = fuse(SOFTMAX_LIKE, dims={"C": 8})
    (k,) = kernels(module)
    assert k["schedule"] == "row" and k.attributes.get("warp_rows") == 1


def test_no_fuse_keeps_one_kernel_per_nest():
    module = parse_ir(SOFTMAX_LIKE)
    get_pass("no-fuse").run(module)
    verify(module)
    assert len(kernels(module)) == 4
    assert len(allocs(module)) == 4


def fuse_source(text, dims=None):
    from mlfuse.pipeline import compile_text
    loops = compile_text(text, "t.fuse", level="loops")
    return fuse(print_ir(loops), dims=dims or {})


def test_cheap_producer_feeding_two_kernels_is_rematerialized_in_each():
    # e * s reads the whole-tensor sum at every element: a kernel after the sum's
    module, plan = fuse_source(
        "func f(x: f32[N]) -> (f32[], f32[N]) {\n  e = exp(x)\n  s = sum(e)\n"
        "  return s, e * s\n}\n", dims={"N": 1 << 24})
    ks = kernels(module)
    assert len(ks) == 2
    assert all(count(k, "arith.exp") == 1 for k in ks)  # computed in both kernels
    assert all(a.result.name_hint != "e" for a in allocs(module))  # never written to memory
    (d,) = [d for d in plan.decisions if d.producer == "e"]
    assert d.action == "rematerialized" and d.cost_after_us < d.cost_before_us


def test_independent_nests_over_one_space_share_a_launch():
    module, plan = fuse_source(
        "func f(x: f32[N], y: f32[N]) -> (f32[N], f32[N]) {\n  return exp(x), sin(y)\n}\n")
    (k,) = kernels(module)
    assert count(k, "loops.store") == 2
    assert [d.action for d in plan.decisions] == ["horizontal"]


def test_register_budget_refuses_a_group_that_would_spill():
    from mlfuse.transforms.fusion.fuse import Planner
    from mlfuse.transforms.fusion.kernel_builder import CannotFuse
    import dataclasses
    graph = NestGraph(parse_ir(DIAMOND).funcs[0])
    tiny = dataclasses.replace(get_target(), register_budget=1)
    planner = Planner(graph, tiny, {}, None)
    group = Group(list(graph.nests), list(graph.nests))
    try:
        planner.build(group, [group])
        raise AssertionError("expected the register budget to refuse the group")
    except CannotFuse as e:
        assert "register estimate" in str(e) and "budget 1" in str(e)
