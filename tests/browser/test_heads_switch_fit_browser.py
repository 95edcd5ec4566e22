"""The Heads page's matrix switch shows every kernel's labels whole (a kernel's own labels, from its record, are
longer than softmax's: differential's 'raw scores q·k' was cut at 1280x720 in the toolbar's 3:2 columns), and
presentation mode's figure ends inside a 1280x720 projector's screen whatever message a link's fallback brings.
Screenshots: test-artifacts/."""

from __future__ import annotations

import pytest
from conftest import exceptions_on_page, open_app, screenshot, wait_for_charts
from test_phone_layout_browser import as_iphone_13

from ui.charts.views import kernel_views

KERNELS = ["softmax", "differential", "linear"]
SIZES = {"projector": (1280, 720), "laptop": (1440, 900)}

# Each option of the switch (widget key w_view): its text, whether the text overflows its own box, and how far its
# box reaches past the right edge of the option group's visible part (> 0: cut off, or scrolled out of sight).
OPTIONS = """() => [...document.querySelectorAll('.st-key-w_view button')].map(button => {
    const text = button.querySelector('p') || button;
    let box = button.parentElement;  // the nearest ancestor that clips what overflows it
    while (box && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
    return {text: text.innerText, overflows: text.scrollWidth > text.clientWidth,
            past_edge: button.getBoundingClientRect().right - box.getBoundingClientRect().right};
})"""

FIGURE = """() => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
    return el && el.data ? el.getBoundingClientRect().toJSON() : null; }"""


def switch_options(page) -> list[dict]:
    page.wait_for_selector(".st-key-w_view button")
    page.wait_for_timeout(300)  # the group measures its width after its buttons are drawn
    return page.evaluate(OPTIONS)


def assert_whole(options: list[dict], labels: list[str]) -> None:
    assert [o["text"] for o in options] == labels
    assert [o["text"] for o in options if o["overflows"] or o["past_edge"] > 0.5] == []


@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernels_view_labels_are_shown_whole(app_page, app_url, kernel, size):
    app_page.set_viewport_size({"width": size[0], "height": size[1]})
    open_app(app_page, app_url, f"?kernel={kernel}")
    labels = [view.label for view in kernel_views(kernel).values()]  # the kernel record's words
    assert_whole(switch_options(app_page), labels)
    assert not exceptions_on_page(app_page)
    wait_for_charts(app_page)
    screenshot(app_page, f"heads_switch_{kernel}_{size[0]}x{size[1]}")


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernels_short_labels_are_shown_whole_on_a_phone(app_page, app_url, kernel):
    as_iphone_13(app_page)
    open_app(app_page, app_url, f"?kernel={kernel}")
    labels = [view.short_label for view in kernel_views(kernel).values()]
    assert_whole(switch_options(app_page), labels)


@pytest.mark.parametrize("link", ["?present=1&kernel=differential&colours=max", "?present=1"],
                         ids=["differential-fallback", "plain"])
def test_the_presented_figure_ends_inside_a_projectors_screen(app_page, app_url, link):
    app_page.set_viewport_size({"width": 1280, "height": 720})
    open_app(app_page, app_url, link)
    figure = app_page.wait_for_function(FIGURE).json_value()
    app_page.wait_for_timeout(500)  # the toolbar's last widgets settle
    figure = app_page.evaluate(FIGURE)
    screenshot(app_page, f"heads_present_{link.replace('?', '').replace('&', '_')}")
    assert figure["height"] > 300  # drawn large, not squeezed to fit
    assert figure["bottom"] <= 720, f"the figure's bottom row is cut off at {figure['bottom']:.0f} px"
    if "colours=max" in link:  # the fallback is still said, where it takes no height
        assert "no colour range to choose" in app_page.locator('[data-testid="stToast"]').inner_text()
    assert not exceptions_on_page(app_page)
