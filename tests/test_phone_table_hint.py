"""On a phone, Heads' "What each head does" table is wider than the screen and scrolls with no scroll bar: a line
above it says so and names every column."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.charts.tables import DIAGNOSTIC_COLUMNS
from ui.widgets.phone import swipe_hint

ROOT = Path(__file__).resolve().parents[1]


def test_the_hint_names_every_column():
    assert swipe_hint(["head", "entropy", "on first token"]) == (
        "↔ Swipe the table sideways for all its 3 columns: head, entropy, on first token.")


def heads_page(monkeypatch, phone: bool) -> AppTest:
    # the page's own `from ui.state.device import on_phone` runs on every run, so it reads the patched function
    monkeypatch.setattr("ui.state.device.on_phone", lambda: phone)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["diagnostics_open"] = True  # the table's section, drawn only while open (as a click leaves it)
    at.run()
    assert not at.exception
    return at


def test_on_a_phone_the_head_table_says_it_scrolls(monkeypatch):
    at = heads_page(monkeypatch, phone=True)
    table = next(d.value for d in at.dataframe if "entropy" in d.value.columns)
    hints = [c.value for c in at.caption if c.value.startswith("↔ Swipe the table sideways")]
    assert hints == [swipe_hint([table.index.name, *table.columns])]
    assert all(label in hints[0] for label, _ in DIAGNOSTIC_COLUMNS.values())


def test_on_a_desktop_it_does_not(monkeypatch):
    at = heads_page(monkeypatch, phone=False)
    assert any("entropy" in d.value.columns for d in at.dataframe)  # the table is there, its hint is not
    assert not [c for c in at.caption if c.value.startswith("↔ Swipe")]
