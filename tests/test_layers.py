"""The layer order of docs/ARCHITECTURE.md ("Layers") holds for the project's own imports.

The source of every package is parsed, not imported (fast, and code no other test reaches counts),
imports inside functions and under ``TYPE_CHECKING`` included. It fails on an import cycle between
modules or between units, on a unit the order does not place, and on more than one arrow up.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flinktune", "models", "jobs", "dags", "plugins", "data_contracts", "benchmarks")
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def module_files(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> its file, for every ``.py`` file under ``packages``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _own(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module of ours that ``name`` (a module or a name in one) lives in, or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports. ``from a import b`` is an arrow to ``a.b`` where that
    is a module, else to ``a``; relative imports are resolved."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    kept = package[: len(package) - node.level + 1]
                    base = ".".join([*kept, base] if base else kept)
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        graph[name] = {t for t in (_own(t, modules) for t in targets) if t and t != name}
    return graph


def unit(module: str) -> str:
    """The unit the layer order places: a top-level package, or a package or module directly under flinktune."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "flinktune" and len(parts) > 1 else parts[0]


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def documented_layers(text: str) -> list[list[str]]:
    """The units of each numbered line of the "## Layers" section, top layer first."""
    match = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"{ARCHITECTURE}: no '## Layers' section"
    layers = [re.findall(r"`([\w.]+)`", line) for line in re.findall(r"^\d+\. .*$", match.group(1), re.M)]
    assert layers, f"{ARCHITECTURE}: the Layers section lists no layer (numbered lines of `unit` names)"
    return layers


def up_arrows(graph: Mapping[str, Iterable[str]], rank: Mapping[str, int]) -> dict[tuple[str, str], list[str]]:
    """(unit, unit above it) -> the module arrows that make it; ``rank`` 0 is the top layer."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for source, targets in graph.items():
        for target in targets:
            a, b = unit(source), unit(target)
            if a != b and rank[b] < rank[a]:
                found[(a, b)].append(f"{source} -> {target}")
    return dict(found)


MODULES = module_files()
GRAPH = import_graph(MODULES)
LAYERS = documented_layers(ARCHITECTURE.read_text())
RANK = {u: i for i, layer in enumerate(LAYERS) for u in layer}


def test_every_unit_is_placed_once_and_exists() -> None:
    placed = [u for layer in LAYERS for u in layer]
    assert len(placed) == len(set(placed)), f"placed twice: {sorted({u for u in placed if placed.count(u) > 1})}"
    units = {unit(m) for m in MODULES}
    assert units - set(placed) == set(), f"not in {ARCHITECTURE.name}'s Layers: add them to a line"
    assert set(placed) - units == set(), f"in {ARCHITECTURE.name}'s Layers but not in the source: remove them"


def test_no_import_cycle_between_modules() -> None:
    assert cycles(GRAPH) == []


def test_no_import_cycle_between_units() -> None:
    units: dict[str, set[str]] = defaultdict(set)
    for source, targets in GRAPH.items():
        units[unit(source)].update(unit(t) for t in targets if unit(t) != unit(source))
    assert cycles(units) == []


def test_at_most_one_arrow_up_and_it_is_named() -> None:
    up = up_arrows(GRAPH, RANK)
    assert len(up) <= 1, f"arrows against the layer order: {up}"
    text = ARCHITECTURE.read_text()
    for a, b in up:
        assert f"`{a}` -> `{b}`" in text, (
            f"{a} -> {b} goes up the layers: name it (`{a}` -> `{b}`) and why in {ARCHITECTURE.name}"
        )


def test_the_checker_sees_a_cycle_an_up_arrow_and_a_lazy_relative_import(tmp_path: Path) -> None:
    # Guards the checker: each of these must be found, or the tests above pass on nothing.
    (tmp_path / "flinktune" / "low").mkdir(parents=True)
    (tmp_path / "flinktune" / "__init__.py").write_text("")
    (tmp_path / "flinktune" / "top.py").write_text("import flinktune.low.b\n")
    (tmp_path / "flinktune" / "low" / "__init__.py").write_text("")
    (tmp_path / "flinktune" / "low" / "a.py").write_text("def f():\n    from . import b\n")
    (tmp_path / "flinktune" / "low" / "b.py").write_text("from flinktune.low.a import f\nfrom flinktune.top import x\n")
    modules = module_files(tmp_path, ["flinktune"])
    graph = import_graph(modules)
    assert graph["flinktune.low.a"] == {"flinktune.low.b"}
    assert cycles(graph) == [["flinktune.low.a", "flinktune.low.b", "flinktune.top"]]
    up = up_arrows(graph, {"flinktune": 2, "flinktune.top": 0, "flinktune.low": 1})
    assert up == {("flinktune.low", "flinktune.top"): ["flinktune.low.b -> flinktune.top"]}


def test_the_documented_order_is_read_from_numbered_lines() -> None:
    text = "# A\n\n## Layers\n\nprose `not_a_unit`\n\n1. top: `a`, `b`\n2. bottom: `c`\n\n## Next\n3. `d`\n"
    assert documented_layers(text) == [["a", "b"], ["c"]]
