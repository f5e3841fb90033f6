"""The layout's rules (docs/architecture.md), checked on the source: no import cycles,
levels import only downwards, and passes and codegen never test an op's name prefix."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, package in (("mlfuse", "mlfuse"), ("dialects", "mlfuse.dialects")):
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts
                     if p != "__init__"]
            mods[".".join([package, *parts])] = path
    return mods


def _imports(path: Path, module_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _graph(module_level_only: bool) -> dict[str, set[str]]:
    mods = _modules()
    return {m: {n for n in _imports(p, module_level_only) if n in mods and n != m}
            for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, successors = work[-1]
            w = next(successors, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_at_module_level():
    assert _cycles(_graph(module_level_only=True)) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_ir_core_imports_no_dialect_pass_or_codegen():
    for name, imported in _graph(module_level_only=False).items():
        if name.startswith("mlfuse.ir"):
            upward = [m for m in imported if not m.startswith(("mlfuse.ir", "mlfuse.errors",
                                                                "mlfuse.syntax"))]
            assert not upward, f"{name} imports {upward}"


def test_codegen_imports_nothing_from_transforms():
    for name, imported in _graph(module_level_only=False).items():
        if name.startswith("mlfuse.codegen"):
            assert not [m for m in imported if m.startswith("mlfuse.transforms")], name


def test_passes_and_codegen_read_traits_not_name_prefixes():
    prefix_test = re.compile(r"""\.name\.startswith\(|name\.startswith\(\(?["'](arith|tensor|loops|fused)\.""")
    offenders = []
    for folder in ("mlfuse/transforms", "mlfuse/codegen"):
        for path in (ROOT / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if prefix_test.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_no_module_past_600_lines_without_a_stated_reason():
    long = []
    for path in list((ROOT / "mlfuse").rglob("*.py")) + list((ROOT / "dialects").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 600 and "Why this module is long" not in text[:3000]:
            long.append(str(path.relative_to(ROOT)))
    assert long == []
