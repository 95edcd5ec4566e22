"""The static lesson pack in Chromium, opened from file:// with every network request blocked.

Every page draws all its heatmaps, no request fails or leaves the file system, and the values plotly holds
equal the engine's for that page (recomputed here from the engine and the lesson records). Presentation
(1280x720, arrow keys), the phone layout, hover and the camera's SVG are checked on a few pages. The
app's own camera button is checked against the real server too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deploy import static_pack
from mha_core.config import MHAConfig, run
from mha_core.presets import PRESET_INITS
from tests.browser.conftest import open_app, screenshot, wait_for_charts
from ui.pages.lessons import LESSONS
from ui.state.notebook_link import parse_link
from ui.state.urlstate import config_from_params, view_from_params

LINKS = [
    "http://127.0.0.1:8501/?tokens=a+b+c+d&mask=causal&heads=2&d_model=8",  # Heads (other pages: test_static_pack_links)
    "?tokens=a+b&heads=3&d_model=8",  # line 2: repaired by the app, so not built
    "?tokens=the+cat+sat+on+the+mat&pe=alibi&view=logits&mask=window&window=1",
    "?tokens=a+b+c&kv_tokens=x+y+z+w&pe=rope&kv_heads=2&null=1",
]


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("pack") / "pack"
    report = static_pack.build_pack(out, LINKS, "https://mha.example.org")
    assert [s.line for s in report.skipped] == [2]
    return out


def engine_panels(name: str) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """What page ``name`` must show, from the engine: the matrices and the masks (True = may attend)."""
    if name.startswith("preset-"):
        result = run(MHAConfig(init=name.removeprefix("preset-").removesuffix(".html")))
        return list(result.trace.weights), [result.mask] * result.trace.n_heads
    if name.startswith("link-"):
        line = LINKS[int(name.removeprefix("link-").removesuffix(".html")) - 1]
        params = parse_link(line).params
        config, _ = config_from_params(params)
        view = view_from_params(params, config)[0]["view"]
        result = run(config)
        matrices = {"weights": result.trace.weights, "logits": result.trace.logits, "scores": result.trace.scores}[view]
        return list(matrices), [result.mask] * result.trace.n_heads
    lesson = LESSONS[name.removeprefix("lesson-").removesuffix(".html")]
    matrices, masks = [], []
    for shown in lesson.findings(lesson.panels).figures:
        if hasattr(shown, "matrices"):
            matrices += list(shown.matrices)
            masks += [None if shown.mask is None else np.broadcast_to(shown.mask, shown.matrices.shape)[i]
                      for i in range(len(shown.matrices))]
        else:
            matrices.append(shown.matrix)
            masks.append(None)
    return matrices, masks


@pytest.fixture
def offline_page(browser_context):
    """A tab that may read files only: every other request is aborted and recorded."""
    page = browser_context.new_page()
    seen, failed = [], []
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    page.on("request", lambda request: seen.append(request.url))
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.seen, page.failed = seen, failed
    yield page
    page.close()


def open_pack(page, path) -> None:
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=30_000)


SHOWN = """() => [...document.querySelectorAll('.panel .js-plotly-plot')].map(el => ({
    z: Array.from(el._fullData[0].z, row => Array.from(row, v => (v === null || Number.isNaN(v)) ? null : v)),
    layers: el._fullData.length,
    grey: el._fullData.length > 1 ? Array.from(el._fullData[1].z, row => Array.from(row, v => v === null || Number.isNaN(v) ? 0 : 1)) : null,
}))"""


def test_every_page_shows_the_engines_numbers_offline(pack, offline_page):
    pages = sorted(p.name for p in pack.glob("*.html") if p.name != "index.html")
    assert len(pages) == len(LESSONS) + len(PRESET_INITS) + 3
    offline_page.goto((pack / "index.html").as_uri())
    assert offline_page.locator("a[href$='.html']").count() == len(pages)
    for name in pages:
        open_pack(offline_page, pack / name)
        matrices, masks = engine_panels(name)
        shown = offline_page.evaluate(SHOWN)
        assert len(shown) == len(matrices), name
        for panel, matrix, mask in zip(shown, matrices, masks, strict=True):
            z = np.array([[np.nan if v is None else v for v in row] for row in panel["z"]])
            masked = np.isneginf(matrix) if mask is None else ~np.asarray(mask) | np.isneginf(matrix)
            assert np.array_equal(np.isnan(z), masked), name  # masked cells left to the grey layer, as in the app
            assert np.array_equal(z[~masked], np.asarray(matrix, dtype=np.float32)[~masked].astype(np.float64)), name
            if masked.any():
                assert panel["layers"] == 2 and np.array_equal(np.array(panel["grey"], dtype=bool), masked), name
    assert offline_page.failed == []
    assert all(url.startswith("file://") for url in offline_page.seen), [u for u in offline_page.seen if "file:" not in u]
    assert sum(url.endswith("assets/plotly.min.js") for url in offline_page.seen) == len(pages)  # the index draws nothing


def test_hover_shows_the_value(pack, offline_page):
    open_pack(offline_page, pack / "preset-previous.html")
    result = run(MHAConfig(init="previous"))
    box = offline_page.locator("#plot-0 .nsewdrag").first.bounding_box()
    t = len(result.query_labels)
    i, j = 3, 2  # previous-token head: query 3 looks at key 2
    offline_page.mouse.move(box["x"] + (j + 0.5) * box["width"] / t, box["y"] + (i + 0.5) * box["height"] / t)
    offline_page.wait_for_selector("#plot-0 .hoverlayer .hovertext")
    text = offline_page.locator("#plot-0 .hoverlayer .hovertext").text_content()
    assert f"{result.trace.weights[0, i, j]:.4f}" in text and "3:on" in text and "2:sat" in text


def test_presentation_at_1280x720_and_the_arrow_keys_step_the_heads(pack, offline_page):
    offline_page.set_viewport_size({"width": 1280, "height": 720})
    open_pack(offline_page, pack / "link-3.html")
    offline_page.keyboard.press("p")
    offline_page.wait_for_function("document.body.classList.contains('present')")
    for head in range(3):
        offline_page.wait_for_function(f"document.getElementById('position').textContent.startsWith('head {head}')")
        # the presented panel settles after plotly's resize (seen once mid-resize at y=150 on a busy machine)
        offline_page.wait_for_function("""() => { const p = [...document.querySelectorAll('.panel')]
            .filter(e => e.offsetParent !== null); if (p.length !== 1) return false;
            const r = p[0].querySelector('.js-plotly-plot').getBoundingClientRect();
            return r.top >= 0 && r.bottom <= 721 && r.height >= 500; }""", timeout=10_000)
        visible = offline_page.locator(".panel:visible")
        assert visible.count() == 1
        box = visible.first.locator(".js-plotly-plot").bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= 720 + 1 and box["height"] >= 500
        title = visible.first.locator(".annotation-text").first.text_content()
        assert title == f"head {head} of 4"
        ticks = visible.first.locator(".ytick text").first.evaluate("el => parseFloat(getComputedStyle(el).fontSize)")
        assert ticks >= 18  # legible from the back of the room
        if head == 0:
            screenshot(offline_page, "static_pack_presentation_1280x720")
        offline_page.keyboard.press("ArrowRight")
    offline_page.keyboard.press("ArrowLeft")
    offline_page.wait_for_function("document.getElementById('position').textContent.startsWith('head 2')")


def test_the_phone_layout_stacks_the_heads(pack, offline_page):
    offline_page.set_viewport_size({"width": 390, "height": 844})
    open_pack(offline_page, pack / "preset-same.html")
    boxes = [offline_page.locator(f"#plot-{h}").bounding_box() for h in range(4)]
    assert len({round(b["x"]) for b in boxes}) == 1  # one column
    assert all(b["x"] >= 0 and b["x"] + b["width"] <= 390 + 1 for b in boxes)
    assert offline_page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(offline_page, "static_pack_phone_390x844")


def test_the_camera_saves_an_svg_named_after_the_page_and_panel(pack, offline_page):
    open_pack(offline_page, pack / "lesson-causal.html")
    offline_page.hover("#plot-1")
    with offline_page.expect_download() as download:
        offline_page.locator("#plot-1 .modebar-btn[data-title='Download plot']").click()
    assert download.value.suggested_filename == "mha-explorer_pack_lesson_causal_0_1.svg"
    titles = offline_page.locator("#plot-1 .modebar-btn").evaluate_all("bs => bs.map(b => b.dataset.title || '')")
    assert not [t for t in titles if "share" in t.lower() or "cloud" in t.lower()], titles  # nothing uploads it
    assert Path(download.value.path()).read_text(encoding="utf-8").lstrip().startswith("<svg")
    assert offline_page.failed == [] and all(url.startswith(("file://", "data:", "blob:")) for url in offline_page.seen)


def test_the_apps_camera_saves_an_svg_named_after_the_page_and_view(app_page, app_url):
    open_app(app_page, app_url, "?view=logits")
    wait_for_charts(app_page)
    chart = app_page.locator('[data-testid="stPlotlyChart"]').first
    chart.hover()
    assert "logit" in chart.locator(".js-plotly-plot").evaluate("el => el.data[0].hovertemplate")
    with app_page.expect_download() as download:
        chart.locator(".modebar-btn[data-title='Download plot']").click()
    assert download.value.suggested_filename == "mha-explorer_heads_logits.svg"
    assert Path(download.value.path()).read_text(encoding="utf-8").lstrip().startswith("<svg")
