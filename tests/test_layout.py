"""The layout's rules (README, Layout): files and functions stay small, and no page's builders import
another page's. An exception is allowed only where the README's Layout section names it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("ui", "app_pages", "mha_core")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60  # docstring included


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def layout_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme[readme.index("## Layout"):]


def long_functions(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            if node.end_lineno - start + 1 > MAX_FUNCTION_LINES:
                found.append((node.name, node.end_lineno - start + 1))
    return found


def test_no_file_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): p.read_text().count("\n") for p in sources()}
    assert {p: n for p, n in long.items() if n > MAX_FILE_LINES} == {}


def test_a_function_over_60_lines_is_named_in_the_readme_with_its_reason():
    section = layout_section()
    unexplained = [(str(p.relative_to(ROOT)), name, n) for p in sources() for name, n in long_functions(p)
                   if f"`{name}` ({n} lines)" not in section]
    assert unexplained == []


def page_builders_imported(path: Path) -> set[str]:
    """The pages (``ui.pages.<page>``) whose builders ``path`` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ui.pages."):
            names.add(node.module.split(".")[2])
        elif isinstance(node, ast.ImportFrom) and node.module == "ui.pages":
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("path", [p for p in sources() if p.is_relative_to(ROOT / "ui")], ids=lambda p: p.name)
def test_no_module_in_ui_imports_another_pages_builders(path):
    parts = path.relative_to(ROOT / "ui").parts
    own = parts[1].removesuffix(".py") if parts[0] == "pages" else None
    assert page_builders_imported(path) - {own} == set()


def test_the_checks_catch_what_they_look_for(tmp_path):
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * 70)
    assert long_functions(long) == [("f", 71)]
    importer = tmp_path / "importer.py"
    importer.write_text("from ui.pages.decoding import position_configs\nfrom ui.pages import compare\n")
    assert page_builders_imported(importer) == {"decoding", "compare"}
    assert re.search(r"`multi_head_attention` \(\d+ lines\)", layout_section())
