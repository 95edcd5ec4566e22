"""A link to a page that does not exist: Streamlit runs the first page (Heads); the page says so, names the pages
that exist, and keeps the link's settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from tests.address_bar import address
from tests.sidebar_controls import control
from ui.state.navigation import PAGES, unknown_page, unknown_page_message

ROOT = Path(__file__).resolve().parents[1]


def test_only_a_name_that_is_no_page_is_unknown():
    assert unknown_page("nonexistent_page") == "nonexistent_page"
    assert unknown_page("/nonexistent_page/") == "nonexistent_page"
    assert [unknown_page(info.name) for info in PAGES] == [None] * len(PAGES)
    assert unknown_page("") is None and unknown_page(None) is None  # the app's root is Heads, not an error


def test_the_message_names_the_link_and_every_page():
    text = unknown_page_message("nonexistent_page")
    assert "/nonexistent_page" in text and "Heads" in text
    for info in PAGES:
        assert f"{info.title} (`/{info.name}`)" in text


@pytest.fixture
def asked_for(monkeypatch):
    """Runs app.py as if the browser's address named ``page`` (what Streamlit reads from the URL path)."""
    def run(page: str, **params) -> AppTest:
        monkeypatch.setattr(PagesManager, "intended_page_name", property(lambda self: page))
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        for name, value in params.items():
            at.query_params[name] = value
        return at.run()
    return run


def test_an_unknown_page_is_reported_on_heads_with_the_links_settings(asked_for):
    at = asked_for("nonexistent_page", seed="3")
    assert not at.exception
    warnings = [w.value for w in at.warning if "/nonexistent_page" in w.value]
    assert warnings == [unknown_page_message("nonexistent_page")]
    assert at.title[0].value == "Heads"
    assert address(at)["seed"] == "3" and control(at, "w_seed").value == 3


def test_a_page_that_exists_says_nothing_of_the_kind(asked_for):
    at = asked_for("step_by_step")
    assert not at.exception
    assert not [w for w in at.warning if "There is no page" in w.value]
    assert at.title[0].value != "Heads"
