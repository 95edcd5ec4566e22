"""The attention-sinks lesson presented on a 1280x720 projector, in Debian's chromium: the 11x11 map's cells are
square (it was a wide strip) and the whole map fits the screen's height."""

from __future__ import annotations

from conftest import exceptions_on_page, open_app, screenshot, wait_for_charts

PLOT_JS = """() => {
  const el = document.querySelector('.st-key-lesson_sinks_heatmap_0 .js-plotly-plot');
  if (!el || !el._fullLayout) return null;
  const size = el._fullLayout._size;
  return {w: size.w, h: size.h, height: el.getBoundingClientRect().height, cols: el.data[0].x.length,
          rows: el.data[0].y.length};
}"""


def test_the_presented_sinks_map_has_square_cells_and_fits_720_pixels(app_page, app_url):
    page = app_page
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, app_url, "lessons?lesson=sinks&present=1")
    wait_for_charts(page)
    page.locator(".st-key-lesson_sinks_heatmap_0").scroll_into_view_if_needed()
    plot = page.wait_for_function(PLOT_JS).json_value()
    cell_w, cell_h = plot["w"] / plot["cols"], plot["h"] / plot["rows"]
    assert plot["cols"] == plot["rows"] == 11
    assert abs(cell_w / cell_h - 1) < 0.1, plot  # square cells, not a strip
    assert cell_h >= 30, plot  # large enough to read from the back
    assert plot["height"] <= 720, plot  # the whole chart on the screen at once
    assert not exceptions_on_page(page)
    screenshot(page, "lesson_sinks_present_1280x720")
