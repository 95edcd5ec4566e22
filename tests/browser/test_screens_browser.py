"""What only a browser shows: the Heads page on a phone, masked cells' hover, token text as typed.
Screenshots: test-artifacts/."""

from __future__ import annotations

from conftest import exceptions_on_page, open_app, screenshot, wait_for_charts

PHONE = {"width": 390, "height": 844}
PHONE_AGENT = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/156.0.0.0 Mobile Safari/537.36"
)


def as_phone(page) -> None:
    """Make the tab a phone's: its size, touch, and the User-Agent the server reads."""
    page.set_viewport_size(PHONE)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setUserAgentOverride", {"userAgent": PHONE_AGENT})
    cdp.send("Emulation.setTouchEmulationEnabled", {"enabled": True})


def live_figure(page, key: str = "heads_grid") -> dict:
    handle = page.wait_for_function(
        """key => { const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
                    return el && el.layout && el.data ? {layout: el.layout, n: el.data.length} : null; }""",
        arg=key,
    )
    return handle.json_value()


def test_on_a_phone_heads_stack_in_one_column_with_no_mode_bar_and_every_control_in_view(app_page, app_url):
    as_phone(app_page)
    open_app(app_page, app_url, "?heads=4&mask=causal")
    wait_for_charts(app_page)
    assert not exceptions_on_page(app_page)
    layout = live_figure(app_page)["layout"]
    domains = {tuple(layout[f"xaxis{s}"]["domain"]) for s in ("", "2", "3", "4")}
    assert len(domains) == 1  # every head in the same column, one under another
    assert app_page.locator(".st-key-heads_grid .modebar-btn").count() == 0  # no mode bar over the titles
    app_page.locator(".st-key-diagnostics_open summary").click()  # What each head does: its similarity map
    wait_for_charts(app_page, count=3)  # ... on any chart of the page
    assert app_page.locator('[data-testid="stPlotlyChart"] .modebar-btn').count() == 0
    for selector in (".st-key-w_view", ".st-key-w_avg"):
        box = app_page.locator(selector).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] + 1, selector
    screenshot(app_page, "heads_phone_390x844")


def test_on_a_desktop_the_heads_sit_side_by_side(app_page, app_url):
    open_app(app_page, app_url, "?heads=4")
    wait_for_charts(app_page)
    layout = live_figure(app_page)["layout"]
    assert len({tuple(layout[f"xaxis{s}"]["domain"]) for s in ("", "2", "3", "4")}) == 4


def hover_text(page, panel: int, row: int, col: int, expect: str, key: str = "heads_grid") -> str:
    """Move the mouse over cell (row, col) of panel ``panel`` until plotly's hover label contains ``expect``
    (plotly may miss a move while it is still drawing); return the label's text, or the last one seen."""
    page.wait_for_selector(f".st-key-{key} .js-plotly-plot")  # other figures on the page may come first
    point = page.evaluate(
        """([key, p, r, c]) => {
            const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
            el.scrollIntoView({block: 'center'});  // the cell must be on screen to be hovered
            const suffix = p === 0 ? '' : String(p + 1);
            const xa = el._fullLayout['xaxis' + suffix], ya = el._fullLayout['yaxis' + suffix];
            const rect = el.getBoundingClientRect();
            return {x: rect.left + xa._offset + xa.c2p(c), y: rect.top + ya._offset + ya.c2p(r)};
        }""",
        [key, panel, row, col],
    )
    text = ""
    for nudge in range(6):
        page.mouse.move(1, 1)  # away first, so that the label read is this cell's, not the last one's
        page.mouse.move(point["x"] + nudge % 3, point["y"] + nudge % 3)
        try:
            page.wait_for_function(
                """want => [...document.querySelectorAll('.hoverlayer .hovertext')]
                              .some(el => el.textContent.includes(want))""",
                arg=expect,
                timeout=5_000,
            )
        except Exception:  # playwright's TimeoutError: try again
            continue
        text = " ".join(page.locator(".hoverlayer .hovertext").all_text_contents())
        break
    return text


def test_hovering_a_masked_cell_says_masked_in_every_view(app_page, app_url):
    for view in ("weights", "logits", "scores"):
        open_app(app_page, app_url, f"?tokens=a+b+c+d&heads=2&mask=causal&view={view}")
        wait_for_charts(app_page)
        masked = hover_text(app_page, panel=0, row=0, col=3, expect="key 3:d")  # query 0 may not see key 3
        assert "masked (−∞ → weight 0)" in masked, (view, masked)
        allowed = hover_text(app_page, panel=0, row=3, col=0, expect="query 3:d")
        assert "masked (−∞" not in allowed and "key 0:a" in allowed, (view, allowed)


def test_token_text_is_shown_as_typed_in_tick_labels(app_page, app_url):
    open_app(app_page, app_url, "?tokens=the+<b>x</b>+a<br>b&heads=2")
    wait_for_charts(app_page)
    app_page.locator(".st-key-heads_grid .ytick text").first.wait_for()  # the heads figure, not just any figure
    ticks = app_page.locator(".st-key-heads_grid .ytick text").all_text_contents()
    assert "1:<b>x</b>" in ticks and "2:a<br>b" in ticks, ticks


def first_title(page, key: str = "heads_grid") -> str:
    return live_figure(page, key)["layout"]["annotations"][0]["text"]


def press_until_title_changes(page, key_name: str, tries: int = 4) -> str:
    """Press ``key_name`` and return the heads figure's new first title. A key pressed before the page
    has attached its shortcut listeners is lost, so press again while nothing changed (never twice once it did)."""
    before = first_title(page)
    for _ in range(tries):
        page.keyboard.press(key_name)
        try:
            page.wait_for_function(
                """old => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
                            return el && el.layout && el.layout.annotations[0].text !== old; }""",
                arg=before,
                timeout=6_000,
            )
            return first_title(page)
        except Exception:  # playwright's TimeoutError: the key did not arrive, try again
            continue
    return first_title(page)


def test_in_presentation_mode_the_arrow_keys_step_through_the_heads(app_page, app_url):
    open_app(app_page, app_url, "?present=1&heads=4")
    wait_for_charts(app_page)
    assert first_title(app_page) == "head 0 of 4"
    app_page.locator(".st-key-head_next").wait_for()
    assert press_until_title_changes(app_page, "ArrowRight") == "head 1 of 4"
    assert press_until_title_changes(app_page, "ArrowLeft") == "head 0 of 4"
    assert press_until_title_changes(app_page, "ArrowLeft") == "head 3 of 4"  # wraps around


def test_a_click_on_the_mask_editor_toggles_a_cell_and_the_heads_follow(app_page, app_url):
    open_app(app_page, app_url, "?tokens=x+y+z&heads=2&mask=custom&cmask=100.110.111")
    wait_for_charts(app_page)
    editor = app_page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').first
    box = editor.bounding_box()
    row_px = 35  # the data editor's header and row height
    # the last column (key 2:z) of the first row (query 0:x): blocked, so a click allows it
    app_page.mouse.click(box["x"] + box["width"] - 30, box["y"] + row_px + row_px / 2)
    app_page.wait_for_function("() => new URLSearchParams(location.search).get('cmask') === '101.110.111'")
    app_page.wait_for_function(  # head 0's grey layer no longer covers (query 0, key 2)
        """() => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
                   const grey = el && el.data ? el.data.find(t => !t.coloraxis) : null;
                   return !!grey && grey.text[0][2] === '' && grey.text[0][1] === '×'; }"""
    )
    screenshot(app_page, "mask_editor_1440")
