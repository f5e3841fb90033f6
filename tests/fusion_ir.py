"""Tiny builders of loops-level IR text, for fusion tests on hand-built graphs."""


def pointwise(out, extents, expr_lines, result, dtype="f32"):
    """A nest over ``extents`` storing %result into a fresh buffer %out.
    expr_lines use %i0.. as indices."""
    idx = ", ".join(f"%i{k}: index" for k in range(len(extents)))
    ids = ", ".join(f"%i{k}" for k in range(len(extents)))
    body = "\n".join("    " + line for line in expr_lines)
    dims = ", ".join(map(str, extents))
    return (f"  %{out} = loops.alloc : buf<{dtype}[{dims}]>\n"
            f"  loops.parallel {{extents = [{dims}]}} ({idx}) {{\n{body}\n"
            f"    loops.store %{result}, %{out}{', ' if ids else ''}{ids}\n  }}\n")


def row_sum(out, src, rows, cols, combiner="add", init="0.0"):
    """%out[i, 0] = reduce over k of %src[i, k] (keepdims)."""
    return (f"  %{out} = loops.alloc : buf<f32[{rows}, 1]>\n"
            f"  loops.parallel {{extents = [{rows}, 1]}} (%i0: index, %i1: index) {{\n"
            f"    %{out}_init = arith.constant {{value = {init}}} : f32\n"
            f"    %{out}_r = loops.reduce %{out}_init {{combiner = \"{combiner}\", extent = {cols}}}"
            f" : f32 (%k: index) {{\n"
            f"      %{out}_v = loops.load %{src}, %i0, %k : f32\n"
            f"      loops.yield %{out}_v\n    }}\n"
            f"    loops.store %{out}_r, %{out}, %i0, %i1\n  }}\n")


def func(name, params, results, body, ret):
    ps = ", ".join(f"%{n}: buf<{t}>" for n, t in params)
    rs = ", ".join(f"buf<{t}>" for t in results)
    return f"func @{name}({ps}) -> ({rs}) {{\n{body}  return {', '.join('%' + r for r in ret)}\n}}\n"
