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


def asks_for(path: Path, fixture: str) -> bool:
    """A function of the file takes ``fixture`` as a parameter (a test or a fixture of the file)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and fixture in [a.arg for a in node.args.args]
               for node in ast.walk(tree))


def test_every_file_that_reads_transformers_llama_runs_on_one_worker():
    from tests.conftest import ONE_WORKER, work_unit

    asking = sorted(path.name for path in TESTS.glob("test_*.py") if asks_for(path, "llama"))
    assert sorted(ONE_WORKER["llama"]) == asking  # a new file that asks for it would read it again elsewhere
    assert {work_unit(f"tests/{name}::test_x[a]") for name in asking} == {"llama"}
    assert work_unit("tests/test_attention.py::test_x") == "tests/test_attention.py"
    assert work_unit("tests/browser/test_languages_browser.py::test_y[es]") == "tests/browser/test_languages_browser.py"



def test_the_grouped_scheduler_is_made_for_loadfile_only():
    from tests.conftest import pytest_xdist_make_scheduler

    other = type("Config", (), {"getoption": lambda self, name: {"dist": "load"}[name]})()
    assert pytest_xdist_make_scheduler(other, None) is None  # another --dist: xdist's own scheduling
