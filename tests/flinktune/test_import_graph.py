"""The import graph's forbidden arrows besides the layer order (docs/ARCHITECTURE.md, "Layers").

Every import counts, the ones inside functions too: a lazy import is still an arrow. The source is
parsed, not imported, so the test is fast and sees code no other test reaches.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every absolute module ``path`` imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _arrows(sources: str, target: str) -> list[str]:
    """``module -> import`` for every import of ``target`` (or below it) from the files under ``sources``."""
    found = []
    for path in sorted((REPO / sources).rglob("*.py")):
        for name in sorted(_imports(path)):
            if name == target or name.startswith(target + "."):
                found.append(f"{_module(path)} -> {name}")
    return found


def _owner(name: str, packages: tuple[str, ...]) -> str | None:
    return next((p for p in packages if name == p or name.startswith(p + ".")), None)


@pytest.mark.parametrize(
    "sources,target,why",
    [
        ("jobs", "flinktune.orchestration", "a job reaches the cluster through flinktune.backends"),
        ("flinktune/extract", "flinktune.localflink", "the Flink REST poller is flinktune.localflink.rest_extract"),
        ("flinktune/tuner", "flinktune.policies", "policies (make_policy) build the tuner, not the other way"),
        ("flinktune/decision", "flinktune.orchestration", "the decision stage runs without Airflow"),
        ("models", "flinktune.orchestration", "models are trained by jobs, wired by orchestration"),
    ],
)
def test_no_forbidden_arrow(sources: str, target: str, why: str) -> None:
    assert (REPO / sources).is_dir(), f"{sources} is gone: update this test and docs/ARCHITECTURE.md"
    assert _arrows(sources, target) == [], why


def test_dag_files_reach_the_project_only_through_dag_tasks() -> None:
    # DAG files are wiring: every task body is a function of flinktune.orchestration.dag_tasks.
    own = ("flinktune", "jobs", "models", "data_contracts", "plugins", "benchmarks")
    arrows = [(p.name, n) for p in sorted((REPO / "dags").glob("*.py")) for n in sorted(_imports(p)) if n.split(".")[0] in own]
    assert arrows, "the DAG files import dag_tasks: the arrow finder must see them"
    assert [a for a in arrows if not a[1].startswith("flinktune.orchestration.dag_tasks")] == []


def test_orchestration_is_imported_only_by_dags_plugins_and_itself() -> None:
    # The demo and the rehearsal start Airflow through flinktune.airflow_local, not through orchestration.
    stray = [a for a in _arrows("flinktune", "flinktune.orchestration") if not a.startswith("flinktune.orchestration")]
    assert stray == []


def test_the_two_orchestration_parts_do_not_import_each_other() -> None:
    parts = tuple(f"flinktune.orchestration.{p}" for p in ("dag_tasks", "plugin_ui"))
    crossing = []
    for path in sorted((REPO / "flinktune" / "orchestration").rglob("*.py")):
        own = _owner(_module(path), parts)
        for name in _imports(path):
            other = _owner(name, parts)
            if own and other and other != own:
                crossing.append(f"{_module(path)} -> {name}")
    assert crossing == []


def test_the_arrow_finder_sees_lazy_imports(tmp_path: Path) -> None:
    # Guards the test itself: an import inside a function must count.
    path = tmp_path / "lazy.py"
    path.write_text("def f():\n    from flinktune.orchestration.dag_tasks.tasks import decide\n")
    assert "flinktune.orchestration.dag_tasks.tasks" in _imports(path)
