"""A chart's mode bar in Debian's chromium: the camera (an SVG) is there, plotly.js 4's "Share chart..." (an upload
to Plotly Cloud) is not."""

from __future__ import annotations

from conftest import open_app, wait_for_charts

# The titles of the mode bar's buttons of the heads grid, and what its camera saves.
MODEBAR_JS = """() => {
  const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
  if (!el || !el.querySelector('.modebar-btn')) return null;
  return {titles: [...el.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('data-title') || ''),
          names: [...el.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('data-attr') || ''),
          share: !!el.querySelector('.modebar-btn[data-title^="Share"]'),
          format: el._context.toImageButtonOptions.format, cloud: el._context.showSendToCloud};
}"""


def test_the_mode_bar_has_the_svg_camera_and_no_share_button(app_page, app_url):
    page = app_page
    open_app(page, app_url, "?seed=3")
    wait_for_charts(page)
    page.locator(".st-key-heads_grid .js-plotly-plot").hover()  # the mode bar shows on hover
    bar = page.wait_for_function(MODEBAR_JS).json_value()
    assert not bar["share"] and not any("share" in title.lower() or "cloud" in title.lower()
                                        for title in bar["titles"]), bar["titles"]
    assert any(title.startswith("Download plot") for title in bar["titles"]), bar["titles"]
    assert bar["format"] == "svg" and bar["cloud"] is False, bar
