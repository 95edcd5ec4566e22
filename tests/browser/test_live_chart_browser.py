"""Live charts (ui/widgets/live.py) in Debian's chromium: a control change updates the chart element in place
(the same DOM element, tagged before, carries the new data after) and what it then draws is the engine's."""

from __future__ import annotations

import numpy as np
from conftest import exceptions_on_page, open_app, press_seed_plus, screenshot, wait_idle
from shown_charts import decode

from mha_core.config import MHAConfig, run
from mha_core.inputs import token_labels
from ui.charts import describe
from ui.i18n import _, using_language

# The live figure of a key: its panels' z as plotly's typed-array spec (the masked cells' grey layers, which
# have no colour axis, left out), or null while a rerun has not drawn it yet.
PANELS_JS = """key => {
  const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  return el && el.data ? el.data.filter(t => t.coloraxis).map(t => t.z) : null;
}"""


def live_panels(page, key: str) -> list[np.ndarray]:
    """The matrices the live figure of widget ``key`` draws, decoded from the browser's own copy of its data."""
    return [decode(z) for z in page.wait_for_function(PANELS_JS, arg=key).json_value()]


def test_seed_plus_redraws_the_heads_chart_in_place_with_the_engines_weights(app_page, app_url):
    page = app_page
    open_app(page, app_url, "?seed=3")
    np.testing.assert_allclose(live_panels(page, "heads_grid"), run(MHAConfig(seed=3)).trace.weights, atol=1e-6)
    page.evaluate("() => { document.querySelector('.st-key-heads_grid .js-plotly-plot').__mhaTag = 'before'; }")
    before = page.evaluate("() => document.querySelector('.st-key-heads_grid .js-plotly-plot').data[0].z.bdata")

    press_seed_plus(page)
    page.wait_for_function(
        """before => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
                      return !!el && !!el.data && el.data[0].z.bdata !== before; }""",
        arg=before,
    )
    wait_idle(page)

    assert page.evaluate("() => document.querySelector('.st-key-heads_grid .js-plotly-plot').__mhaTag") == "before", \
        "the chart element was replaced, not updated in place"
    expected = run(MHAConfig(seed=4)).trace.weights  # (nh, T, T)
    np.testing.assert_allclose(live_panels(page, "heads_grid"), expected, atol=1e-6)
    assert not exceptions_on_page(page)
    chart = page.evaluate("""() => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
        return {svg: el._context.toImageButtonOptions.format, modebar: !!el.querySelector('.modebar'),
                label: el.getAttribute('aria-label'), colourbar: !!el.querySelector('.colorbar')}; }""")
    # the alt text is the chart in words (ui.charts.describe, itself checked against loops) of the engine's weights
    labels = token_labels(MHAConfig().tokens)
    described = " ".join(describe.grid_lines(expected, labels, labels, kind="weights",
                                             titles=[f"head {h}" for h in range(expected.shape[0])]))
    assert chart == {"svg": "svg", "modebar": True, "colourbar": True, "label": described}, chart
    screenshot(page, "live_chart_heads_after_seed_plus")


def test_every_step_by_step_chart_survives_seed_plus(app_page, app_url):
    page = app_page
    open_app(page, app_url, "step_by_step?seed=3")
    # plotly draws the charts one by one once the run is over (each had its canvas first): wait for the last
    page.wait_for_function("""() => { const charts = [...document.querySelectorAll('.mha-live')];
        return charts.length > 0 && charts.every(c => c.dataset.mhaPlotly && c.dataset.mhaPlotly === c.dataset.mhaShown); }""")
    count = page.evaluate("""() => { const els = [...document.querySelectorAll('.js-plotly-plot')];
                                     els.forEach((el, i) => { el.__mhaTag = i; }); return els.length; }""")
    assert count > 5  # one chart per row of panels, a dozen at the defaults
    before = page.evaluate("() => document.querySelector('.js-plotly-plot').data[0].z.bdata")
    press_seed_plus(page)
    page.wait_for_function("before => document.querySelector('.js-plotly-plot').data[0].z.bdata !== before", arg=before)
    wait_idle(page)
    tags = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map(el => el.__mhaTag ?? null)")
    assert tags == list(range(count))
    assert not exceptions_on_page(page)


# The words in a live chart's place when plotly.js cannot draw it (a screen reader reads them; ui/widgets/live.py's
# "failed", in the reader's language), or null while they are not there.
FAILED_JS = """prefix => { const alt = document.querySelector('.st-key-heads_grid .mha-live-alt');
  return alt && alt.textContent.startsWith(prefix) ? alt.textContent : null; }"""


def test_a_chart_plotly_cannot_draw_says_so_in_the_readers_language(app_page, app_url):
    app_page.route("**/app/static/plotly-*.js", lambda route: route.abort())  # plotly.js never arrives
    open_app(app_page, app_url, "?lang=es")
    with using_language("es"):
        words = _("Chart not drawn: {reason}")
    assert not words.startswith("Chart")  # the catalog translates it
    prefix = words.split("{reason}")[0]
    shown = app_page.wait_for_function(FAILED_JS, arg=prefix).json_value()
    assert shown.startswith(f"{prefix}could not load ") and "/app/static/plotly-" in shown
