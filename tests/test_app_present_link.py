"""AppTest: a link's bad ``present`` is told and falls back to off on every page, the same way, whether the page
draws the model's sidebar (Decoding, Heads, ...) or only the presentation switch (Lessons, Seed notebooks, Real
model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.address_bar import address
from ui.state.page_table import PAGES

ROOT = Path(__file__).resolve().parents[1]
BAD = "Link: `present=7` must be 0 or 1: using 0."  # what Decoding says (ui/state/urlstate.py's flag reader)


def open_page(name: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"app_pages/{name}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def present_warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "present" in w.value]


@pytest.mark.parametrize("name", [info.name for info in PAGES])
def test_every_page_warns_about_a_bad_present_and_falls_back_to_off(name):
    extra = {"lesson": "causal"} if name == "lessons" else {}
    at = open_page(name, present="7", **extra)
    assert present_warnings(at) == [BAD]
    assert at.session_state["w_present"] is False and "present" not in address(at)


@pytest.mark.parametrize("name", ["lessons", "seeds"])
def test_a_good_present_turns_presenting_on_without_a_word(name):
    at = open_page(name, present="1")
    assert present_warnings(at) == [] and at.session_state["w_present"] is True
    assert address(at)["present"] == "1"
