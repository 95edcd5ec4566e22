"""The engine knows nothing of screens: importing mha_core pulls in no UI or data-frame library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Every module of the package, found on disk, so that a new one is checked too.
ENGINE_MODULES = ["mha_core"] + sorted(f"mha_core.{p.stem}" for p in (ROOT / "mha_core").glob("*.py") if p.stem != "__init__")
FORBIDDEN = ["streamlit", "plotly", "pandas", "torch", "matplotlib", "scipy"]


def modules_loaded_by(*modules: str) -> set[str]:
    """Top-level package names in sys.modules after importing ``modules`` in a fresh interpreter."""
    code = f"import json, sys, {', '.join(modules)}; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("modules", [["mha_core"], ENGINE_MODULES], ids=["package", "every-module"])
def test_engine_imports_no_ui_or_dataframe_library(modules):
    loaded = modules_loaded_by(*modules)
    assert "numpy" in loaded and "mha_core" in loaded  # the probe sees real imports
    assert not loaded & set(FORBIDDEN), f"importing {modules} loads {sorted(loaded & set(FORBIDDEN))}"


def test_the_probe_would_notice_an_import():
    # sqlite3 stands in for a forbidden library: cheap to import, and nothing in the engine needs it.
    assert "sqlite3" not in modules_loaded_by("mha_core")
    assert "sqlite3" in modules_loaded_by("mha_core", "sqlite3")
