"""The engine's layers (issue 33): mha_core's modules import one another in one direction only.

The import graph is read with ``ast`` from the source, every import counted wherever it stands (module level,
under ``if TYPE_CHECKING``, inside a function or a class). Cycles anywhere in the project are
``tests/test_import_layers.py``'s; this file fails on any import of an ``mha_core`` module inside a function (the
way a cycle used to be hidden; an external package imported late to save start-up time is allowed) and on steps
that do not sit below the variants.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_layers import cycles  # the project's one cycle finder (its own test plants cycles)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mha_core"


def module_name(path: Path) -> str:
    """mha_core/kernels.py -> mha_core.kernels; mha_core/__init__.py -> mha_core."""
    return PACKAGE if path.name == "__init__.py" else f"{PACKAGE}.{path.stem}"


def imported_modules(node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The mha_core modules one import statement loads (``from mha_core import kernels`` loads mha_core.kernels)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if node.level or node.module is None:
        raise AssertionError(f"relative import at line {node.lineno}: mha_core imports by absolute name")
    found = {node.module} & modules
    found |= {f"{node.module}.{alias.name}" for alias in node.names} & modules
    return found


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Edges module -> the mha_core modules it imports anywhere, and the imports found inside functions."""
    paths = sorted((root / PACKAGE).glob("*.py"))
    modules = {module_name(p) for p in paths}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    hidden: list[str] = []
    for path in paths:
        name = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for outer in ast.walk(tree):
            inside_function = isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            body = ast.walk(outer) if inside_function else [outer]
            for node in body:
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                targets = imported_modules(node, modules) - {name}
                graph[name] |= targets
                if inside_function and targets:
                    hidden.append(f"{name} line {node.lineno} imports {sorted(targets)} inside a function")
    return graph, sorted(set(hidden))


def test_a_function_level_import_is_found(tmp_path):
    (tmp_path / PACKAGE).mkdir()
    (tmp_path / PACKAGE / "low.py").write_text("def f():\n    from mha_core import high\n    return high\n")
    (tmp_path / PACKAGE / "high.py").write_text("from mha_core.low import f\n")
    graph, hidden = import_graph(tmp_path)
    assert graph == {"mha_core.low": {"mha_core.high"}, "mha_core.high": {"mha_core.low"}}
    assert hidden == ["mha_core.low line 2 imports ['mha_core.high'] inside a function"]
    assert cycles(graph) == [["mha_core.high", "mha_core.low"]]


def test_mha_core_hides_no_import_inside_a_function():
    _, hidden = import_graph(ROOT)
    assert hidden == []


def test_the_primitive_steps_sit_below_the_variants():
    """steps.py imports no kernel, MLA or dispatcher; kernels and MLA import the steps, not the dispatcher."""
    graph, _ = import_graph(ROOT)
    assert graph["mha_core.steps"] <= {"mha_core.positions"}
    for module in ("mha_core.kernels", "mha_core.mla", "mha_core.inputs", "mha_core.attention_checks"):
        assert "mha_core.steps" in graph[module] and "mha_core.attention" not in graph[module], module
