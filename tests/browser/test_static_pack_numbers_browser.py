"""The static pack's Step by step on a phone, as the app: ``nums=auto`` prints no numbers in the cells on a phone
(pack.js drops the text it was built with), ``nums=1`` prints them there too; on a desktop auto prints them for
four tokens. The text drawn is the engine's numbers (tests/test_static_pack_numbers.py checks the built pages)."""

from __future__ import annotations

import pytest
from conftest import screenshot
from test_phone_layout_browser import as_iphone_13
from test_static_pack_browser import open_pack

from deploy import static_pack

LINKS = ["step_by_step?tokens=a+b+c+d&mask=causal", "step_by_step?tokens=a+b+c+d&mask=causal&nums=1"]
# Per drawn panel: its title and whether plotly draws text in its cells (the mask's ✓/✗ are text too).
DRAWN = """() => [...document.querySelectorAll('.panel .js-plotly-plot')].map((el, i) => ({
    title: window.PACK.figures[i].title, text: Boolean(el._fullData[0].text && el._fullData[0].texttemplate)}))"""


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("pack") / "pack"
    report = static_pack.build_pack(out, LINKS, "", lessons=())  # no lesson: only the two links (and the presets)
    assert not report.skipped
    return out


@pytest.fixture
def tab(browser_context):
    page = browser_context.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    yield page
    page.close()


def numbered(drawn: list[dict]) -> set[str]:
    """The panels (not masks) whose cells print numbers."""
    return {d["title"] for d in drawn if d["text"] and not d["title"].startswith("M:")}


def test_auto_prints_no_numbers_on_a_phone_but_on_a_desktop(pack, tab):
    tab.set_viewport_size({"width": 1280, "height": 720})
    open_pack(tab, pack / "link-1.html")
    desktop = tab.evaluate(DRAWN)
    assert "A_0 = softmax(L_0) (attention weights)" in numbered(desktop)
    as_iphone_13(tab)
    open_pack(tab, pack / "link-1.html")
    phone = tab.evaluate(DRAWN)
    screenshot(tab, "static_pack_step_by_step_auto_iphone")
    assert numbered(phone) == set()
    assert [d["text"] for d in phone if d["title"].startswith("M:")] == [True]  # the mask keeps its ✓/✗


def test_nums_1_prints_them_on_a_phone_too(pack, tab):
    as_iphone_13(tab)
    open_pack(tab, pack / "link-2.html")
    assert "A_0 = softmax(L_0) (attention weights)" in numbered(tab.evaluate(DRAWN))
