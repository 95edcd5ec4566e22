"""Presentation mode zooms every st.dataframe (its canvas font is out of CSS's reach): the zoomed table must still
fill its column, on an iPhone 13 as on a projector. It took three quarters of it (half a phone's width, a column
cut off) while its box was narrowed to 100% / 1.35 of a column that the zoom does not scale."""

from __future__ import annotations

import pytest
from conftest import exceptions_on_page, open_app, screenshot, wait_idle
from test_phone_layout_browser import as_iphone_13

# Each table's drawn width, its column's (the element container's) and the zoom it is drawn at.
TABLE_WIDTHS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')].map(t => ({
    table: t.getBoundingClientRect().width, column: t.closest('[data-testid="stElementContainer"]').clientWidth,
    zoom: getComputedStyle(t).zoom, grid: t.querySelector('canvas')?.getBoundingClientRect().width || 0}))"""
LINKS = ["?present=1", "step_by_step?present=1", "lessons?lesson=causal&present=1"]
STEP_ROW = ".st-key-sbs_controls"  # Step by step's own row of controls (ui/widgets/controls.py STEP_KEY)


def tables_drawn(page, link: str) -> list[dict]:
    open_app(page, page.app_url, link)
    wait_idle(page, timeout=90_000)
    section = page.locator(".st-key-diagnostics_open summary")  # Heads' table: drawn once its section is opened
    if section.count():
        section.click()
        wait_idle(page, timeout=90_000)
    numbers = page.locator(f'{STEP_ROW} [data-key="w_sbs_table"] input[role=switch]')  # Step by step: its matrices as
    if numbers.count():  # tables (its row sums are a markdown table, which presentation mode enlarges as text)
        numbers.click()
        wait_idle(page, timeout=90_000)
    page.wait_for_selector('[data-testid="stMain"] [data-testid="stDataFrame"] canvas', timeout=30_000)
    page.wait_for_timeout(500)  # the other tables of the page
    assert not exceptions_on_page(page)
    return page.evaluate(TABLE_WIDTHS)


@pytest.fixture
def tab(app_page, app_url):
    app_page.app_url = app_url
    return app_page


@pytest.mark.parametrize("link", LINKS, ids=["heads", "step_by_step", "lesson"])
def test_presented_tables_fill_a_phones_width(tab, link):
    as_iphone_13(tab)
    tables = tables_drawn(tab, link)
    screenshot(tab, f"present_tables_iphone_{link.split('?')[0] or 'heads'}")
    assert tables, "no table drawn"
    assert all(t["zoom"] == "1.35" for t in tables), tables  # zoomed: the large font of presentation mode
    assert [t for t in tables if t["table"] < 0.98 * t["column"]] == []
    assert [t for t in tables if t["grid"] < 0.95 * t["column"]] == []  # the cells' canvas too, not only its box
    # a column is the phone's width less the page's margins (and a section's, 292 of 390 px for Heads' table)
    assert all(t["column"] > 0.7 * 390 for t in tables), tables


def test_a_presented_table_fills_its_column_on_a_projector(tab):
    tab.set_viewport_size({"width": 1280, "height": 720})
    tables = tables_drawn(tab, "step_by_step?present=1")  # the matrices as tables, some in columns side by side
    assert tables and [t for t in tables if t["table"] < 0.98 * t["column"]] == []
