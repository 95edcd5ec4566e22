"""The app in Debian's chromium: live figures follow the controls, every page opens, links restore the view,
and presentation mode fits a 1280x720 projector in light and dark themes. Screenshots: test-artifacts/."""

from __future__ import annotations

import numpy as np
from conftest import (
    chart_trace_count,
    choose_setting,
    exceptions_on_page,
    open_app,
    press_seed_plus,
    screenshot,
    setting,
    wait_for_charts,
    wait_idle,
)
from playwright.sync_api import expect
from shown_charts import decode

from mha_core.config import MHAConfig, run
from tools.launch import VIEWPORT

PAGES = ["Step by step", "Lessons", "Seed notebooks", "Real model", "About", "Heads"]


def wait_for_traces(page, count: int, key: str = "heads_grid", timeout: float = 30_000) -> None:
    """Wait until the live figure of widget ``key`` holds exactly ``count`` panels (masked cells' grey layers,
    which have no colour axis, left out)."""
    page.wait_for_function(
        """([key, n]) => { const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
                          return !!el && !!el.data && el.data.filter(t => t.coloraxis).length === n; }""",
        arg=[key, count],
        timeout=timeout,
    )


def live_layout(page, key: str = "heads_grid") -> dict:
    """The layout of the live figure of widget ``key``, waiting while a rerun swaps the element."""
    handle = page.wait_for_function(
        """key => { const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
                    return el && el.layout && el.data ? el.layout : null; }""",
        arg=key,
    )
    return handle.json_value()


def panel_titles(page, key: str = "heads_grid") -> list[str]:
    """The subplot titles of the live figure (from its layout, not from the redrawn text nodes)."""
    return [a["text"] for a in live_layout(page, key)["annotations"]]


def wait_for_first_title(page, text: str, key: str = "heads_grid") -> None:
    """Wait until the live figure's first subplot title reads ``text``."""
    page.wait_for_function(
        """([key, text]) => { const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
                             return !!(el && el.layout && el.layout.annotations &&
                                       el.layout.annotations[0].text === text); }""",
        arg=[key, text],
    )


def test_the_heads_figure_follows_the_head_count(app_page, app_url):
    open_app(app_page, app_url)
    wait_for_traces(app_page, 4)
    assert chart_trace_count(app_page) == 4
    screenshot(app_page, "heads_default")
    choose_setting(app_page, "w_heads", "2")
    wait_for_traces(app_page, 2)
    assert panel_titles(app_page) == ["head 0", "head 1"]
    assert "heads=2" in app_page.url  # the link follows
    choose_setting(app_page, "w_heads", "8")
    wait_for_traces(app_page, 8)
    assert not exceptions_on_page(app_page)


def test_every_page_opens_from_the_sidebar_and_settings_survive(app_page, app_url):
    open_app(app_page, app_url, "?heads=2&d_model=24&mask=causal&view=logits&avg=1")
    wait_for_traces(app_page, 3)
    nav = app_page.locator('[data-testid="stSidebar"] [data-testid="mhaPageMenu"]')  # the menu: our page links
    for name in PAGES:
        nav.get_by_text(name, exact=True).click()
        app_page.wait_for_timeout(300)  # let the rerun start before waiting for its end
        wait_idle(app_page)
        assert not exceptions_on_page(app_page), (name, exceptions_on_page(app_page))
        screenshot(app_page, "page_" + name.lower().replace(" ", "_"))
    wait_for_traces(app_page, 3)  # back on Heads: 2 heads + the average, as before the tour
    assert panel_titles(app_page)[-1] == "average of heads"
    for part in ("heads=2", "d_model=24", "mask=causal", "view=logits", "avg=1"):
        assert part in app_page.url


def test_a_deep_link_restores_the_view(app_page, app_url):
    open_app(app_page, app_url, "?tokens=a+b+a+c&heads=2&d_model=8&mask=causal&view=logits&avg=1&seed=7")
    wait_for_traces(app_page, 3)
    layout = live_layout(app_page)
    assert layout["coloraxis"]["cmid"] == 0  # the logits view: diverging around 0
    assert layout["xaxis"]["tickvals"] == ["0:a", "1:b", "2:a", "3:c"]  # repeated 'a' kept apart
    selected = app_page.locator(".st-key-w_view button[aria-checked='true'], .st-key-w_view button[kind*='Active']")
    assert "logits" in selected.first.inner_text()
    # a text box may read empty for a moment after a fresh load while its widget state arrives (seen once in a
    # full run, with the chart already drawn from "a b a c"): wait for the value, fail if it never comes
    expect(setting(app_page, "w_tokens", "text")).to_have_value("a b a c", timeout=10_000)
    expect(setting(app_page, "w_seed", "number")).to_have_value("7", timeout=10_000)


def _presentation(app_page, app_url, theme: str) -> None:
    query = "?present=1&mask=causal" + ("&embed_options=dark_theme" if theme == "dark" else "")
    open_app(app_page, app_url, query)
    wait_for_traces(app_page, 1)
    wait_for_charts(app_page)
    app_page.wait_for_timeout(500)  # plotly's first paint
    assert not app_page.locator('[data-testid="stSidebar"]').is_visible()
    assert app_page.get_by_text("Show controls").is_visible()
    box = app_page.locator(".st-key-heads_grid").bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], box  # fits the projector
    assert box["width"] >= 500
    assert panel_titles(app_page) == ["head 0 of 4"]
    screenshot(app_page, f"present_{theme}")
    app_page.get_by_role("button", name="Next ▶").click()
    wait_for_first_title(app_page, "head 1 of 4")
    # the address element comes last in the run (ui/widgets/address.py): the panel may be drawn before it writes
    app_page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '1'", timeout=10_000)
    background = app_page.evaluate(
        "() => getComputedStyle(document.querySelector('[data-testid=\"stApp\"]')).backgroundColor"
    )
    channels = [int(c) for c in background.split("(")[1].split(")")[0].split(",")[:3]]
    assert (sum(channels) / 3 < 80) == (theme == "dark"), background
    text_size = app_page.evaluate(
        """() => parseFloat(getComputedStyle(document.querySelector(
               '[data-testid="stMain"] [data-testid="stMarkdownContainer"] p')).fontSize)"""
    )
    assert text_size >= 20  # enlarged for the back row
    assert not exceptions_on_page(app_page)


def test_presentation_mode_fits_a_projector_in_the_light_theme(app_page, app_url):
    _presentation(app_page, app_url, "light")


def test_presentation_mode_fits_a_projector_in_the_dark_theme(app_page, app_url):
    _presentation(app_page, app_url, "dark")


FIRST_PANEL_Z_JS = """() => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
    const panel = el && el.data ? el.data.find(t => t.coloraxis) : null; return panel ? panel.z : null; }"""


def test_presentation_modes_show_controls_seed_plus_redraws_with_the_new_seed(app_page, app_url):
    """Presentation mode: the settings element sits in the "Show controls" popover (no sidebar); its Seed "+" sends
    one change, the address follows and the heatmap shows the engine's head 0 at the new seed."""
    open_app(app_page, app_url, "?present=1&mask=causal")
    wait_for_traces(app_page, 1)
    shown = decode(app_page.wait_for_function(FIRST_PANEL_Z_JS).json_value())  # a masked cell is drawn blank (NaN)
    np.testing.assert_allclose(np.nan_to_num(shown, nan=0.0), run(MHAConfig(mask="causal")).trace.weights[0], atol=1e-6)
    assert setting(app_page, "w_seed", "up").count() == 0 or not setting(app_page, "w_seed", "up").is_visible()
    app_page.get_by_role("button", name="Show controls").click()
    expect(setting(app_page, "w_seed", "up")).to_be_visible()
    assert app_page.locator('[data-testid="stPopoverBody"]').locator(setting(app_page, "w_seed", "up")).count() == 1
    press_seed_plus(app_page)
    app_page.wait_for_function("() => new URLSearchParams(location.search).get('seed') === '1'", timeout=30_000)
    wait_idle(app_page)
    expected = run(MHAConfig(mask="causal", seed=1)).trace.weights[0]
    assert not np.allclose(expected, run(MHAConfig(mask="causal")).trace.weights[0], atol=1e-3)
    for _ in range(100):  # the run's figure may come a moment after the address
        shown = decode(app_page.evaluate(FIRST_PANEL_Z_JS))
        if shown.shape == expected.shape and np.allclose(np.nan_to_num(shown, nan=0.0), expected, atol=1e-6):
            break
        app_page.wait_for_timeout(200)
    np.testing.assert_allclose(np.nan_to_num(shown, nan=0.0), expected, atol=1e-6)
    expect(setting(app_page, "w_seed", "number")).to_have_value("1")
    screenshot(app_page, "present_show_controls_seed_plus")
    assert not exceptions_on_page(app_page)
