"""Imports point one way (README, Layout), read from the source with ``ast``: every import statement, those
inside functions included, so an import moved into a function cannot hide a cycle.

- the pure builders (``ui/charts``, ``ui/pipeline``) import no Streamlit, parse no links (``urllib.parse``) and
  import none of the code that renders (``ui/state``, ``ui/widgets``, ``ui/run``, ``ui/pages``, ``app_pages``);
- no cycle between the folders of ``ui/``, and none among modules;
- no arrow back between top-level folders: the engine imports nothing above it, ``ui`` no page, and ``bench/`` and
  ``deploy/`` not each other (what both need, the launcher, is in ``tools/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_FOLDERS = ("app_pages", "ui", "content", "mha_core", "bench", "deploy", "tools")
PURE = ("ui.charts", "ui.pipeline")
RENDER = ("ui.state", "ui.widgets", "ui.run", "ui.pages", "app_pages", "app")
PURE_MUST_NOT_IMPORT = ("streamlit", "urllib.parse", *RENDER)
# What each top-level folder must not import: the folders above it, and bench/deploy sideways.
MUST_NOT_IMPORT = {
    "mha_core": {"content", "ui", "app_pages", "app", "bench", "deploy", "tools"},
    "content": {"ui", "app_pages", "app", "bench", "deploy", "tools"},
    "ui": {"app_pages", "app", "bench", "deploy", "tools"},
    "app_pages": {"app", "bench", "deploy", "tools"},
    "tools": {"mha_core", "content", "ui", "app_pages", "app", "bench", "deploy"},
    "bench": {"deploy"},
    "deploy": {"bench"},
}


def project_modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for app.py and every module of the top-level folders."""
    modules = {"app": root / "app.py"} if (root / "app.py").exists() else {}
    for folder in TOP_FOLDERS:
        for path in (root / folder).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), relative imports resolved."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project's modules it imports (a name is its longest prefix that is a module)."""
    modules = project_modules(root)

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return {module: {owner(n) for n in imported_names(module, path) if owner(n) not in (None, module)}
            for module, path in modules.items()}


def is_in(module: str, folders) -> bool:
    return any(module == folder or module.startswith(folder + ".") for folder in folders)


def pure_violations(root: Path) -> list[tuple[str, str]]:
    """(pure module, what it imports that it must not): Streamlit, link parsing, render code."""
    return sorted((module, name) for module, path in project_modules(root).items() if is_in(module, PURE)
                  for name in imported_names(module, path) if is_in(name, PURE_MUST_NOT_IMPORT))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def ui_folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The folders of ``ui/`` (``ui.charts``, ``ui.pages``, ...) and which others each imports."""
    def folder(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folders: dict[str, set[str]] = {}
    for module, imported in graph.items():
        if module.startswith("ui."):
            folders.setdefault(folder(module), set()).update(
                folder(other) for other in imported if other.startswith("ui.") and folder(other) != folder(module))
    return folders


def back_arrows(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, imported module) pairs that point from a top-level folder to one it must not import."""
    return sorted((module, other) for module, imported in graph.items() for other in imported
                  if other.split(".")[0] in MUST_NOT_IMPORT.get(module.split(".")[0], ()))


GRAPH = import_graph(ROOT)


def test_the_graph_sees_the_project():
    assert {"app", "ui.charts.figures", "ui.pipeline.steps", "mha_core.attention", "bench.report", "tools.launch"} <= set(GRAPH)
    assert "ui.charts.figures" in GRAPH["ui.pipeline.steps"]


def test_pure_builders_import_no_streamlit_no_link_parsing_and_no_render_code():
    assert pure_violations(ROOT) == []


def test_no_cycle_between_the_folders_of_ui():
    assert cycles(ui_folder_graph(GRAPH)) == []


@pytest.mark.parametrize("folder", TOP_FOLDERS)
def test_no_import_cycle_among_modules(folder):
    assert [c for c in cycles(GRAPH) if any(m.split(".")[0] == folder for m in c)] == []


def test_no_arrow_back_between_top_level_folders():
    assert back_arrows(GRAPH) == []


def test_the_checks_catch_what_they_look_for(tmp_path):
    plants = {
        "ui/charts/chart.py": "import streamlit as st\nfrom urllib.parse import urlsplit\n",
        "ui/charts/hidden.py": "def f():\n    from ui.widgets.state import KEEP\n",
        "ui/charts/uses_pipeline.py": "from ui.pipeline import steps\n",
        "ui/pipeline/steps.py": "from ..charts import uses_pipeline\n",
        "ui/widgets/state.py": "KEEP = 1\n",
        "bench/a.py": "from deploy.b import x\n",
        "deploy/b.py": "x = 1\n",
        "mha_core/m.py": "import ui.charts.chart\n",
    }
    for name, text in plants.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert pure_violations(tmp_path) == [("ui.charts.chart", "streamlit"), ("ui.charts.chart", "urllib.parse"),
                                         ("ui.charts.chart", "urllib.parse.urlsplit"),
                                         ("ui.charts.hidden", "ui.widgets.state"), ("ui.charts.hidden", "ui.widgets.state.KEEP")]
    assert cycles(graph) == [["ui.charts.uses_pipeline", "ui.pipeline.steps"]]
    assert cycles(ui_folder_graph(graph)) == [["ui.charts", "ui.pipeline"]]
    assert back_arrows(graph) == [("bench.a", "deploy.b"), ("mha_core.m", "ui.charts.chart")]
