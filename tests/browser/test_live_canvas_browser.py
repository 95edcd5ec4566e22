"""Canvas first, plotly after (static/mha/live_canvas.js) in Debian's chromium: before plotly draws, each heatmap's
cells are on a canvas in the colour the engine's value takes on the figure's colour scale, in the panel and the row
the figure puts them; a masked (NaN) cell shows the plot's background; once plotly has drawn, no canvas is shown
(each chart keeps its canvas, hidden, for its next figure).

plotly.js is held back by a route that answers only when the test says (a shared link's first paint), or
Plotly.react is held (a redraw, plotly already on the page)."""

from __future__ import annotations

import numpy as np
import plotly.colors
from conftest import exceptions_on_page, open_app, press_seed_plus, screenshot, wait_idle

from mha_core.config import MHAConfig, run
from ui.charts.figures import MASKED_COLOUR, MASKED_SOLID, SIGNED_SCALE, WEIGHT_SCALE, signed_range

PLOTLY_FILES = "**/app/static/plotly*.js"
TOLERANCE = 3  # levels of 255 per channel: the browser's colour rounding
WHITE = (255, 255, 255)  # the light theme's background, under the plot's translucent background
# The canvas of a chart (by key): its plot areas by axis pair ("xy", "x2y2", ...), whether they are plotly's own
# ("exact") or laid out from the figure ("estimated"), and the pixels at the CSS points asked for.
CANVAS_JS = """([key, points]) => {
  const root = document.querySelector(`.st-key-${key} .mha-live`);
  const canvas = root && root.__mhaCanvas;
  if (!canvas || !canvas.isConnected || canvas.hidden || !root.__mhaCanvasAreas) return null;
  const scale = canvas.width / parseFloat(canvas.style.width), ctx = canvas.getContext("2d");
  return {mode: root.__mhaCanvasAreas.mode, boxes: root.__mhaCanvasAreas.boxes, hidden: canvas.getAttribute("aria-hidden"),
          shown: root.dataset.mhaShown || null,
          pixels: points.map(([x, y]) => [...ctx.getImageData(Math.floor(x * scale), Math.floor(y * scale), 1, 1).data])};
}"""
NO_CANVAS_JS = """() => document.querySelectorAll('.mha-live canvas:not([hidden])').length === 0
  && document.querySelectorAll('.mha-live').length > 0
  && [...document.querySelectorAll('.mha-live')].every(r => r.dataset.mhaPlotly && r.dataset.mhaPlotly === r.dataset.mhaShown)"""


def rgb(colour: str) -> np.ndarray:
    """'#rrggbb' or 'rgb(r, g, b)' as three floats."""
    if colour.startswith("#"):
        return np.array(plotly.colors.hex_to_rgb(colour), dtype=float)
    return np.array(plotly.colors.unlabel_rgb(colour), dtype=float)


def scale_colour(scale, value: float, low: float, high: float) -> np.ndarray:
    """The colour ``value`` takes on ``scale`` ([[position, colour], ...]) over [low, high], channels interpolated."""
    t = float(np.clip((value - low) / (high - low), 0.0, 1.0))
    positions = [p for p, _c in scale]
    k = max(1, min(int(np.searchsorted(positions, t, side="left")), len(scale) - 1))
    (p0, c0), (p1, c1) = scale[k - 1], scale[k]
    f = 0.0 if p1 == p0 else (t - p0) / (p1 - p0)
    return rgb(c0) + (rgb(c1) - rgb(c0)) * f


def plot_background() -> np.ndarray:
    """What a NaN cell shows: the figures' translucent plot background over the page's white."""
    *channels, alpha = (float(part) for part in MASKED_COLOUR[MASKED_COLOUR.index("(") + 1:-1].split(","))
    return np.array(channels) * alpha + np.array(WHITE) * (1 - alpha)


def cell_points(box: dict, rows: int, cols: int, cells, where: float = 0.5) -> list[list[float]]:
    """CSS points inside cells (i, j) of a panel: row 0 at the top (the figures reverse y: query 0 first), column
    0 at the left; ``where`` 0.5 is a cell's centre, 0.25 a point between its centre and its top-left corner."""
    return [[box["x"] + (j + where) * box["w"] / cols, box["y"] + (i + where) * box["h"] / rows] for i, j in cells]


def read_canvas(page, key: str, points=None) -> dict:
    """The chart's canvas as CANVAS_JS reads it, waiting until the canvas is up."""
    return page.wait_for_function(CANVAS_JS, arg=[key, points or []]).json_value()


def check_panel(page, key: str, pair: str, matrix: np.ndarray, colour_of, background_at=()) -> int:
    """Compare the canvas of panel ``pair`` with ``matrix`` (rows × cols) cell by cell: each finite cell's centre
    has the colour ``colour_of(value)``, each NaN cell (``background_at``: (i, j) or a colour) the expected
    background. Returns how many cells were compared."""
    rows, cols = matrix.shape
    box = read_canvas(page, key)["boxes"][pair]
    cells = [(i, j) for i in range(rows) for j in range(cols) if np.isfinite(matrix[i, j])]
    pixels = read_canvas(page, key, cell_points(box, rows, cols, cells))["pixels"]
    for (i, j), pixel in zip(cells, pixels, strict=True):
        expected = colour_of(matrix[i, j])
        assert np.abs(np.array(pixel[:3]) - expected).max() <= TOLERANCE, \
            f"{key} {pair} cell ({i}, {j}) = {matrix[i, j]:.4f}: canvas {pixel[:3]}, expected {np.round(expected)}"
    for cells_at, expected in background_at:
        pixels = read_canvas(page, key, cell_points(box, rows, cols, cells_at, where=0.25))["pixels"]
        for (i, j), pixel in zip(cells_at, pixels, strict=True):
            assert np.abs(np.array(pixel[:3]) - expected).max() <= TOLERANCE, \
                f"{key} {pair} masked cell ({i}, {j}): canvas {pixel[:3]}, expected {np.round(expected)}"
    return len(cells)


def hold_plotly(page) -> list:
    """Hold every request for plotly.js until ``release_plotly``; the held routes."""
    held = []
    page.route(PLOTLY_FILES, lambda route: held.append(route))
    return held


def release_plotly(page, held: list) -> None:
    """Let the held requests for plotly.js through, and any later one."""
    for route in held:
        route.continue_()
    page.unroute(PLOTLY_FILES)


def test_heads_first_paint_is_the_engines_weights_on_a_canvas_before_plotly(app_page, app_url):
    page = app_page
    held = hold_plotly(page)
    open_app(page, app_url, "?seed=3&mask=causal")
    weights = run(MHAConfig(seed=3, mask="causal")).trace.weights  # (nh, T, T), 0 where masked
    nh, t, _ = weights.shape
    masked = [(i, j) for i in range(t) for j in range(t) if j > i]
    grey = rgb(MASKED_SOLID)
    state = read_canvas(page, "heads_grid")
    assert state["mode"] == "estimated" and state["hidden"] == "true" and state["shown"]
    assert page.locator(".st-key-heads_grid .js-plotly-plot").count() == 0, "plotly drew although it was held"
    for h in range(nh):
        shown = weights[h].copy()
        shown[np.array([[j > i for j in range(t)] for i in range(t)])] = np.nan  # the masked layer covers these
        pair = "xy" if h == 0 else f"x{h + 1}y{h + 1}"
        compared = check_panel(page, "heads_grid", pair, shown, lambda v: scale_colour(WEIGHT_SCALE, v, 0.0, 1.0),
                               background_at=[(masked, grey)])
        assert compared == t * (t + 1) // 2
    screenshot(page, "live_canvas_heads_before_plotly")

    release_plotly(page, held)
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)
    assert page.locator(".st-key-heads_grid .js-plotly-plot .hm image").count() >= nh
    assert not exceptions_on_page(page)


def test_step_by_step_panels_and_a_masked_cell_on_the_canvas(app_page, app_url):
    page = app_page
    held = hold_plotly(page)
    open_app(page, app_url, "step_by_step?seed=3&mask=causal&nums=0")
    trace = run(MHAConfig(seed=3, mask="causal")).trace
    t = trace.weights.shape[1]
    merged = {name: getattr(trace, name).transpose(1, 0, 2).reshape(t, -1) for name in ("q", "k", "v")}  # (T, C)
    bound = signed_range(np.stack(list(merged.values())))
    for n, name in enumerate(("q", "k", "v")):  # the second row of the Q, K, V chart, on one colour bar
        check_panel(page, "sbs_qkv_rows", f"x{n + 4}y{n + 4}", merged[name],
                    lambda v: scale_colour(SIGNED_SCALE, v, -bound, bound))
    check_panel(page, "sbs_softmax_0", "xy", trace.weights[0], lambda v: scale_colour(WEIGHT_SCALE, v, 0.0, 1.0))
    logits = np.where(np.isneginf(trace.logits[0]), np.nan, trace.logits[0])  # -inf: sent as NaN, left blank
    edge = signed_range(logits)
    masked = [(i, j) for i in range(t) for j in range(t) if j > i]
    check_panel(page, "sbs_scores_scale_mask_rows", "x4y4", logits,
                lambda v: scale_colour(SIGNED_SCALE, v, -edge, edge), background_at=[(masked, plot_background())])
    screenshot(page, "live_canvas_step_by_step_before_plotly")

    release_plotly(page, held)
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)
    assert not exceptions_on_page(page)


def test_the_cells_numbers_are_written_on_the_canvas_when_the_page_prints_them(app_page, app_url):
    page = app_page
    held = hold_plotly(page)
    open_app(page, app_url, "step_by_step?seed=3&nums=1")
    weights = run(MHAConfig(seed=3)).trace.weights[0]  # (T, T): the softmax panel follows head 0
    t = weights.shape[0]
    box = read_canvas(page, "sbs_softmax_0")["boxes"]["xy"]
    for i, j in ((0, 0), (2, 3), (t - 1, t - 1)):
        cell = scale_colour(WEIGHT_SCALE, weights[i, j], 0.0, 1.0)
        (x, y), = cell_points(box, t, t, [(i, j)])
        line = [[x + dx, y] for dx in np.arange(-0.3, 0.3, 0.02) * box["w"] / t]  # across the middle of the cell
        pixels = np.array(read_canvas(page, "sbs_softmax_0", line)["pixels"])[:, :3]
        assert (np.abs(pixels - cell).max(axis=1) > 60).any(), f"no number written in cell ({i}, {j})"
        assert (np.abs(pixels - cell).max(axis=1) <= TOLERANCE).any(), f"cell ({i}, {j}) is not its colour around its number"
    release_plotly(page, held)
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)


HOLD_REACT_JS = """() => { const real = window.__mhaRealReact = window.Plotly.react; window.__mhaRelease = [];
    window.Plotly.react = (...args) => new Promise(done => window.__mhaRelease.push(() => done(real(...args)))); }"""
RELEASE_REACT_JS = "() => { window.Plotly.react = window.__mhaRealReact; window.__mhaRelease.forEach(f => f()); }"
CANVAS_UP_JS = """before => { const r = document.querySelector('.st-key-heads_grid .mha-live');
                                  return r.dataset.mhaShown !== before && !!r.__mhaCanvas && !r.__mhaCanvas.hidden; }"""


def open_plotted(page, app_url: str, query: str) -> str:
    """Open ``query`` and wait until plotly has drawn every chart; the Heads grid's digest on screen."""
    open_app(page, app_url, query)
    page.wait_for_function("() => !!document.querySelector('.st-key-heads_grid .js-plotly-plot')?._fullLayout",
                           timeout=60_000)
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)
    return page.evaluate("() => document.querySelector('.st-key-heads_grid .mha-live').dataset.mhaShown")


def test_a_redraw_into_other_panels_lays_them_out_from_the_figure_not_on_plotlys_old_ones(app_page, app_url):
    page = app_page
    before = open_plotted(page, app_url, "?seed=3&avg=1")  # four heads and their average: two rows of panels
    page.evaluate(HOLD_REACT_JS)
    page.locator(".st-key-w_avg label").first.click()  # the average off: four panels in one row, laid out anew
    page.wait_for_function(CANVAS_UP_JS, arg=before)
    wait_idle(page)
    state = read_canvas(page, "heads_grid")
    pairs = ["xy"] + [f"x{n}y{n}" for n in range(2, 5)]
    assert state["mode"] == "estimated" and sorted(state["boxes"]) == sorted(pairs)  # not plotly's old panels
    weights = run(MHAConfig(seed=3)).trace.weights  # (nh, T, T)
    for pair, matrix in zip(pairs, weights, strict=True):
        check_panel(page, "heads_grid", pair, matrix, lambda v: scale_colour(WEIGHT_SCALE, v, 0.0, 1.0))
    screenshot(page, "live_canvas_heads_average_off_before_plotly")
    page.evaluate(RELEASE_REACT_JS)
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)


def test_seed_plus_draws_the_new_weights_over_plotlys_plot_areas_before_plotly_redraws(app_page, app_url):
    page = app_page
    before = open_plotted(page, app_url, "?seed=3")
    areas = page.evaluate("""() => { const f = document.querySelector('.st-key-heads_grid .js-plotly-plot')._fullLayout;
        return Object.fromEntries(['', '2', '3', '4'].map(n => [`x${n}y${n}`,
          {x: f['xaxis' + n]._offset, y: f['yaxis' + n]._offset, w: f['xaxis' + n]._length, h: f['yaxis' + n]._length}])); }""")
    page.evaluate(HOLD_REACT_JS)
    press_seed_plus(page)
    page.wait_for_function(CANVAS_UP_JS, arg=before)
    wait_idle(page)
    state = read_canvas(page, "heads_grid")
    assert state["mode"] == "exact" and state["boxes"] == areas  # laid exactly over plotly's plot areas
    weights = run(MHAConfig(seed=4)).trace.weights
    for h in range(weights.shape[0]):
        pair = "xy" if h == 0 else f"x{h + 1}y{h + 1}"
        check_panel(page, "heads_grid", pair, weights[h], lambda v: scale_colour(WEIGHT_SCALE, v, 0.0, 1.0))
    old = page.evaluate("() => document.querySelector('.st-key-heads_grid .mha-live').dataset.mhaPlotly")
    assert old == before, "plotly has not redrawn yet: its last figure is the one before Seed +"
    screenshot(page, "live_canvas_heads_redraw_before_plotly")

    page.evaluate(RELEASE_REACT_JS)
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)
    assert not exceptions_on_page(page)


# Whether a chart's canvas has words in a cell: the pixels across the middle of cell (0, 0) of its first panel, all
# of that cell's colour without words. The panel's size from plotly's graph of the same figure shape.
WORDS_JS = """key => { const root = document.querySelector(`.st-key-${key} .mha-live`), canvas = root.__mhaCanvas;
  if (!canvas || canvas.hidden) return null;
  const box = root.__mhaCanvasAreas.boxes.xy, z = root.querySelector('.js-plotly-plot').data[0].z;
  const scale = canvas.width / parseFloat(canvas.style.width), ctx = canvas.getContext('2d');
  const [rows, cols] = z.shape ? String(z.shape).split(',').map(Number) : [z.length, z[0].length];
  const w = box.w / cols, h = box.h / rows, y = Math.floor((box.y + h / 2) * scale);
  const line = [...Array(20).keys()].map(k => [...ctx.getImageData(Math.floor((box.x + w * (0.2 + 0.03 * k)) * scale), y, 1, 1).data]);
  return Math.max(...[0, 1, 2].map(c => Math.max(...line.map(p => p[c])) - Math.min(...line.map(p => p[c])))); }"""


def test_the_numbers_of_a_chart_far_off_screen_are_written_when_it_comes_near(app_page, app_url):
    page = app_page
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/step_by_step?seed=3&nums=1")
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)  # plotly has drawn every chart
    # (the charts with numbers in their cells, nums=1: the heads' split, the scores, the softmax, A·V)
    near, far = "sbs_split_rows", "sbs_softmax_0"  # on the screen; two screens below it
    page.locator(f".st-key-{near}").scroll_into_view_if_needed()
    page.evaluate(HOLD_REACT_JS)
    before = page.evaluate(f"() => document.querySelector('.st-key-{far} .mha-live').dataset.mhaShown")
    press_seed_plus(page)
    page.wait_for_function(f"b => document.querySelector('.st-key-{far} .mha-live').dataset.mhaShown !== b", arg=before)
    wait_idle(page)
    assert page.evaluate(WORDS_JS, near) > 60  # near: its numbers with its cells
    assert page.evaluate(WORDS_JS, far) <= TOLERANCE  # far: its cells only, one colour across the cell
    page.locator(f".st-key-{far}").scroll_into_view_if_needed()
    page.wait_for_function(f"k => ({WORDS_JS})(k) > 60", arg=far)  # near now: the numbers written
    page.evaluate(RELEASE_REACT_JS)
    page.wait_for_function(NO_CANVAS_JS, timeout=60_000)
    assert not exceptions_on_page(page)
