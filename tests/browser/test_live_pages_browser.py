"""Live charts on Lessons and Compare in Debian's chromium: a control change updates a chart element in place
(the element, tagged before, is found again after) and what it draws then is the engine's, computed here."""

from __future__ import annotations

import numpy as np
from conftest import exceptions_on_page, open_app, press_seed_plus, screenshot, wait_drawn, wait_idle
from shown_charts import decode

from mha_core.config import MHAConfig, run
from ui.pages.lessons import LESSONS

ATOL = 1e-6  # the figures carry float32

# The live figure of a key, read from the browser's own copy: its panels' z (plotly's typed-array spec; the grey
# layers of masked cells, which have no colour axis, left out) and its font size; null until it is drawn.
FIGURE_JS = """key => {
  const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  if (!el || !el.data || !el.layout) return null;
  return {z: el.data.filter(t => t.coloraxis).map(t => t.z), font: el.layout.font.size, tag: el.__mhaTag ?? null};
}"""


def live_figure(page, key: str) -> dict:
    """What the live chart of widget ``key`` draws now: panels (decoded), font size, and the tag it carries."""
    shown = page.wait_for_function(FIGURE_JS, arg=key).json_value()
    return {**shown, "z": [decode(z) for z in shown["z"]]}


def tag(page, key: str, name: str) -> None:
    """Mark the chart element of ``key`` with a JS property: a new element would not carry it."""
    page.evaluate("([key, name]) => { document.querySelector(`.st-key-${key} .js-plotly-plot`).__mhaTag = name; }",
                  [key, name])


def masked(weights: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Weights as a figure shows them: NaN where the mask forbids (those cells are the grey layer's)."""
    return weights if mask is None else np.where(mask, weights, np.nan)


def test_the_causal_lesson_chart_survives_presentation_mode_and_still_draws_the_engines_weights(app_page, app_url):
    page = app_page
    open_app(page, app_url, "lessons?lesson=causal")
    key = "lesson_causal_grid_0"
    free, causal = (run(panel.config) for panel in LESSONS["causal"].panels)
    expected = [masked(free.trace.weights[0], None), masked(causal.trace.weights[0], causal.mask)]  # (T, T) each
    before = live_figure(page, key)
    np.testing.assert_allclose(before["z"], expected, atol=ATOL)
    assert before["font"] == 15
    tag(page, key, "before")

    # the sidebar's toggle: larger text for a projector (on Lessons a Streamlit toggle: no settings element there)
    page.get_by_text("Presentation mode").click()
    page.wait_for_function("key => document.querySelector(`.st-key-${key} .js-plotly-plot`)?.layout?.font?.size === 18",
                           arg=key)
    wait_idle(page)

    after = live_figure(page, key)
    assert after["tag"] == "before", "the chart element was replaced, not updated in place"
    assert after["font"] == 18
    np.testing.assert_allclose(after["z"], expected, atol=ATOL)
    assert not exceptions_on_page(page)


def test_a_seed_change_redraws_both_compare_charts_in_place_with_the_engines_numbers(app_page, app_url):
    page = app_page
    open_app(page, app_url, "compare?mask=causal&b_scale=none&seed=3")
    for key in ("cmp_pair", "cmp_delta"):
        live_figure(page, key)
        tag(page, key, "before")
    before = page.evaluate("() => document.querySelector('.st-key-cmp_pair .js-plotly-plot').data[0].z.bdata")

    press_seed_plus(page)
    page.wait_for_function(
        """before => { const el = document.querySelector('.st-key-cmp_pair .js-plotly-plot');
                      return !!el && !!el.data && el.data[0].z.bdata !== before; }""",
        arg=before,
    )
    wait_idle(page)
    wait_drawn(page)  # plotly redraws one chart per idle moment after the run: the delta's may come after the pair's

    pair, delta = live_figure(page, "cmp_pair"), live_figure(page, "cmp_delta")
    assert (pair["tag"], delta["tag"]) == ("before", "before"), "a chart element was replaced, not updated in place"
    a, b = run(MHAConfig(mask="causal", seed=4)), run(MHAConfig(mask="causal", scale_rule="none", seed=4))
    np.testing.assert_allclose(pair["z"], [masked(a.trace.weights[0], a.mask), masked(b.trace.weights[0], b.mask)],
                               atol=ATOL)
    np.testing.assert_allclose(delta["z"], b.trace.weights - a.trace.weights, atol=ATOL)
    assert not exceptions_on_page(page)
    screenshot(page, "live_pages_compare_after_seed_plus")
