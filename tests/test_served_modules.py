"""The components' code served from static/mha/ (ui/widgets/served.py), not sent inside every element (issue 38)."""

import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.widgets import served

ROOT = Path(__file__).resolve().parents[1]
# What an element may still carry as code: the loader's few lines (the live chart's module was 39 KB, the settings
# element's 7 KB).
INLINE_LIMIT = 1_000


def test_every_element_of_the_pages_carries_a_loader_not_its_module():
    for page in ("app_pages/heads.py", "app_pages/step_by_step.py"):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
        at.switch_page(page).run()
        assert not at.exception
        elements = list(at.get("bidi_component"))
        names = {element.proto.component_name for element in elements}
        assert {"mha_live_chart", "mha_controls", "mha_page_menu"} <= names, names
        for element in elements:
            proto = element.proto
            assert len(proto.js_content.encode()) <= INLINE_LIMIT, (page, proto.component_name)


def test_the_loader_imports_the_named_files_at_one_version():
    text = served.loader("live.js", "live_canvas.js")
    version = served.version()
    assert re.fullmatch(r"[0-9a-f]{16}", version)
    for name in ("live.js", "live_canvas.js"):
        assert f'"{name}?v={version}"' in text
    assert "export default served.default" in text
    with pytest.raises(FileNotFoundError):
        served.loader("missing.js")


def test_the_version_changes_with_any_served_file(tmp_path, monkeypatch):
    copy = tmp_path / "mha"
    shutil.copytree(served.SERVED_DIR, copy)
    monkeypatch.setattr(served, "SERVED_DIR", copy)
    served.version.cache_clear()
    try:
        before = served.version()
        (copy / "live_canvas.js").write_text((copy / "live_canvas.js").read_text() + "\n// changed\n")
        served.version.cache_clear()
        assert served.version() != before
    finally:
        served.version.cache_clear()


def test_a_served_module_imports_only_its_neighbours_at_its_own_version():
    """live.js imports the canvas' half with its own ``?v=`` (a new live.js never meets an old live_canvas.js from the
    browser's cache); every relative import names a file that is served."""
    for module in served.SERVED_DIR.glob("*.js"):
        text = module.read_text()
        assert not re.search(r"^\s*import\s.*from\s", text, re.MULTILINE), f"{module.name}: a static import has no version"
        for name in re.findall(r"import\(`\./([\w.]+)\$\{VERSION\}`\)", text):
            assert (served.SERVED_DIR / name).is_file(), (module.name, name)
        if "import(" in text:
            assert "const VERSION = new URL(import.meta.url).search;" in text
