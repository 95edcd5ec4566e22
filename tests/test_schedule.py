"""The test run's schedule (tests/conftest.py's SLOW_FILES_FIRST): every file it names exists, and xdist keeps the
order (a renamed file would drop out of it silently and could be left to the end of the run again)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def slow_files_first() -> tuple[str, ...]:
    tree = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SLOW_FILES_FIRST" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("tests/conftest.py has no SLOW_FILES_FIRST")


def test_every_file_the_schedule_names_is_a_test_file_once():
    names = slow_files_first()
    assert len(names) == len(set(names))
    assert [name for name in names if not (TESTS / name).is_file() or not Path(name).name.startswith("test_")] == []


def test_xdist_keeps_the_collected_order():
    options = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--dist loadfile" in options["addopts"] and "--no-loadscope-reorder" in options["addopts"]
    requirements = (TESTS.parent / "requirements-dev.txt").read_text().splitlines()
    assert any(line.startswith("pytest-xdist>=3.8") for line in requirements)  # the option came with xdist 3.8.0
