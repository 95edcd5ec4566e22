"""Every page of the app runs without an exception, with the default settings and after a page switch."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui import navigation

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "app_pages").glob("*.py"))


def start(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    return at.run()


def exceptions(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.exception]


def test_every_page_file_is_routed():
    assert "app_pages/heads.py" in PAGES and len(PAGES) >= 6
    assert sorted(info.path for info in navigation.PAGES) == PAGES, "a page file is missing from ui/navigation.py"
    assert "st.navigation(all_pages())" in (ROOT / "app.py").read_text()


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_without_an_exception(page):
    at = start()
    at.switch_page(page).run()
    assert not exceptions(at), exceptions(at)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_in_presentation_mode(page):
    at = start({"present": "1", "mask": "causal"})
    at.switch_page(page).run()
    assert not exceptions(at), exceptions(at)


def test_a_tour_of_every_page_and_back_raises_nothing():
    """(That the settings survive the tour is checked in a real browser: AppTest resends stale
    values for untouched number inputs after ``switch_page``, which a browser never does.)"""
    at = start({"heads": "2", "mask": "causal", "view": "logits"})
    for page in [*PAGES, "app_pages/heads.py"]:
        at.switch_page(page).run()
        assert not exceptions(at), (page, exceptions(at))
    assert at.get("plotly_chart"), "the Heads page lost its figure"
