"""A link to a page that does not exist, in Debian's chromium: Heads opens with the link's settings and says, on the
page, that the page does not exist and which pages do."""

from __future__ import annotations

import numpy as np
from conftest import exceptions_on_page, open_app, screenshot
from test_live_chart_browser import live_panels

from mha_core.config import MHAConfig, run
from ui.state.navigation import PAGES


def test_an_unknown_page_says_so_and_keeps_the_settings(app_page, app_url):
    page = app_page
    open_app(page, app_url, "nonexistent_page?seed=3")
    notice = page.locator('[data-testid="stAlert"]', has_text="There is no page")
    notice.wait_for()
    text = notice.inner_text()
    assert "/nonexistent_page" in text and all(f"/{info.name}" in text for info in PAGES), text
    assert page.locator("h1", has_text="Heads").count() == 1
    assert "seed=3" in page.url
    np.testing.assert_allclose(live_panels(page, "heads_grid"), run(MHAConfig(seed=3)).trace.weights, atol=1e-6)
    assert not exceptions_on_page(page)
    page.keyboard.press("Escape")  # Streamlit's own "Page not found" dialog, which names no page
    screenshot(page, "unknown_page")
