"""Every page and every lesson on a phone (390x844, a phone's User-Agent): no heatmap panel narrower than
150 px, and no plotly mode bar over the titles. Screenshots of a lesson and of presentation mode: test-artifacts/.

The pages are opened in one phone tab, the first in a new session and each other one as the sidebar's page menu
opens it (a history entry and a popstate, no new load of the app: a load cost Chromium ~1.5 s of CPU)."""

from __future__ import annotations

import pytest
from conftest import exceptions_on_page, open_app, open_in_app, screenshot, wait_drawn, wait_idle, wait_settled
from test_screens_browser import as_phone

from ui.pages.lessons import LESSONS
from ui.state.navigation import PAGES

MIN_PANEL_PX = 150
LINKS = [info.name if info.name != "heads" else "" for info in PAGES] + [f"lessons?lesson={key}" for key in LESSONS]

PANEL_WIDTHS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(plot =>
    Array.from(plot.querySelectorAll('.cartesianlayer .subplot .nsewdrag, .nsewdrag.drag'))
        .map(rect => ({width: rect.getBoundingClientRect().width, key: plot.closest('[class*="st-key-"]')?.className}))
        .filter(r => r.width > 0))"""
# Every live chart drawn by plotly (each shows its cells on a canvas first; plotly draws them after the run, one by one).
PLOTTED = """() => [...document.querySelectorAll('.mha-live')].every(c => !c.dataset.mhaShown
                                                                     || c.dataset.mhaPlotly === c.dataset.mhaShown)"""


@pytest.fixture(scope="module")
def phone(browser_context, app_url):
    """``phone(link)``: the module's phone tab showing ``link`` (the first in a new session, then as the menu does)."""
    page = browser_context.new_page()
    as_phone(page)
    sockets = []
    page.on("websocket", lambda socket: sockets.append(socket))

    def show(link: str):
        if sockets:
            open_in_app(page, sockets[-1], link, timeout=90_000)
        else:
            open_app(page, app_url, link)
            wait_idle(page, timeout=90_000)
        wait_drawn(page)  # every chart of the run mounted and drawn by plotly
        return page

    yield show
    page.close()


@pytest.mark.parametrize("link", LINKS, ids=lambda link: link or "heads")
def test_on_a_phone_every_heatmap_panel_is_wide_enough_and_no_mode_bar_is_shown(phone, link):
    app_page = phone(link)
    app_page.wait_for_function(PLOTTED, timeout=60_000)
    assert not exceptions_on_page(app_page)
    narrow = [p for p in app_page.evaluate(PANEL_WIDTHS) if p["width"] < MIN_PANEL_PX]
    assert narrow == []
    assert app_page.locator(".modebar-btn").count() == 0


def test_screenshots_of_a_lesson_and_of_presentation_mode_on_a_phone(app_page, app_url):
    as_phone(app_page)
    open_app(app_page, app_url, "lessons?lesson=causal")
    wait_idle(app_page)
    wait_settled(app_page)
    screenshot(app_page, "lesson_causal_phone_390x844")
    open_app(app_page, app_url, "?present=1&mask=causal")
    wait_idle(app_page)
    wait_settled(app_page)
    assert not exceptions_on_page(app_page)
    screenshot(app_page, "presentation_phone_390x844")
