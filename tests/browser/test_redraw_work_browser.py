"""What a Seed + leaves alone in Debian's chromium (issue 38: the browser's work per run): the settings element keeps
the lines under its controls when a run sends the same ones (a warning is not read out again), the page menu keeps
its links, and a chart off screen is skipped by the browser at the height plotly draws it, so the page keeps its
length when the charts come into view."""

from __future__ import annotations

from conftest import control_selector, exceptions_on_page, open_app, press_seed_plus, setting, wait_drawn, wait_idle

from mha_core.config import MHAConfig

# Marks the first line under a control and the first page link, to find out after a run whether they are the same
# DOM nodes (a rebuilt node has no mark).
MARK_JS = """sel => { const note = document.querySelector(sel); const link = document.querySelector('[data-testid="mhaPageLink"]');
  note.__mhaKept = true; link.__mhaKept = true; }"""
KEPT_JS = """sel => { const note = document.querySelector(sel); const link = document.querySelector('[data-testid="mhaPageLink"]');
  return {note: !!note && note.__mhaKept === true, link: !!link && link.__mhaKept === true,
          text: note ? note.textContent : null, href: link ? link.getAttribute('href') : null}; }"""


def test_a_run_that_sends_the_same_lines_and_links_leaves_their_nodes_in_place(app_page, app_url):
    page = app_page
    open_app(page, app_url, "?seed=3&heads=4")
    wait_drawn(page)
    selector = control_selector("w_heads", "notes")
    d_k = MHAConfig().d_model // 4
    assert f"d_k = {d_k}" in page.locator(selector).first.text_content()
    page.evaluate(MARK_JS, selector)
    page.locator('[data-testid="mhaPageLink"]').first.hover()  # the link takes the address when pointed at
    press_seed_plus(page)
    page.wait_for_function("() => new URLSearchParams(location.search).get('seed') === '4'")
    wait_idle(page)
    page.locator('[data-testid="mhaPageLink"]').first.hover()
    kept = page.evaluate(KEPT_JS, selector)
    assert kept["note"] and kept["link"], kept  # the same nodes: nothing rebuilt
    assert "seed=4" in kept["href"]  # ... and the link still carries the new address
    assert f"d_k = {d_k}" in kept["text"]

    setting(page, "w_heads", "select").select_option(label="2")  # other lines: the note is rebuilt with them
    page.wait_for_function("([sel, text]) => document.querySelector(sel)?.textContent.includes(text)",
                           arg=[selector, f"d_k = {MHAConfig().d_model // 2}"])
    assert not page.evaluate(KEPT_JS, selector)["note"]
    assert not exceptions_on_page(page)


def test_charts_off_screen_are_skipped_at_their_figures_height_and_the_page_keeps_its_length(app_page, app_url):
    page = app_page
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, app_url, "step_by_step?seed=3")
    wait_drawn(page)
    charts = page.evaluate("""() => [...document.querySelectorAll('.mha-live')].map(r => ({
        visibility: r.style.contentVisibility, size: r.style.containIntrinsicSize,
        height: r.querySelector('.js-plotly-plot')?._fullLayout?.height ?? null,
        box: r.getBoundingClientRect().height}))""")
    assert len(charts) >= 5
    for chart in charts:
        assert chart["visibility"] == "auto" and chart["height"], chart
        assert chart["size"] == f"auto {chart['height']}px", chart  # skipped at the height plotly draws it
        assert abs(chart["box"] - chart["height"]) <= 2, chart
    length = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    skipped = page.evaluate("() => [...document.querySelectorAll('.mha-live .mha-live-plot')].filter(p => "
                            "!p.checkVisibility({contentVisibilityAuto: true})).length")
    assert skipped >= 3  # the charts below the first screen are not rendered (their contents skipped)
    for n in range(len(charts)):  # each chart into view: rendered, and the page as long as before
        page.locator(".mha-live").nth(n).scroll_into_view_if_needed()
        page.wait_for_function("n => document.querySelectorAll('.mha-live .mha-live-plot')[n].checkVisibility("
                               "{contentVisibilityAuto: true})", arg=n)
    after = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    assert abs(after - length) <= 4, (length, after)
    assert not exceptions_on_page(page)
