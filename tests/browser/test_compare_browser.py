"""A compare link in a real browser: it opens B's differing setting, and the URL keeps b_ after a change."""

from __future__ import annotations

from conftest import exceptions_on_page, open_app, screenshot, setting, wait_for_charts, wait_idle

B_SCALE = "() => new URLSearchParams(location.search).get('b_scale') === 'none'"


def test_a_compare_link_round_trips(app_page, app_url):
    open_app(app_page, app_url, "compare?mask=causal&b_scale=none")
    wait_for_charts(app_page, count=2)
    assert not exceptions_on_page(app_page)
    main = app_page.locator('[data-testid="stMain"]')
    assert "B differs from A in: Scale sqrt_dk → none" in main.inner_text()
    app_page.wait_for_function(B_SCALE)
    # A change in the sidebar (A's seed): the address still carries B's change, and B follows A's seed
    seed = setting(app_page, "w_seed", "number")
    seed.fill("7")
    seed.press("Enter")
    app_page.wait_for_function("() => new URLSearchParams(location.search).get('seed') === '7'")
    wait_idle(app_page)
    app_page.wait_for_function(B_SCALE)
    assert "B differs from A in: Scale sqrt_dk → none" in main.inner_text()
    screenshot(app_page, "compare_1280x720")


def test_heads_take_it_apart_screens(app_page, app_url):
    open_app(app_page, app_url, "?knock=0,2&present=1")
    wait_for_charts(app_page)
    assert not exceptions_on_page(app_page)
    open_app(app_page, app_url, "?knock=0,2")
    wait_for_charts(app_page)
    section = app_page.get_by_text("Take it apart", exact=False).first
    section.scroll_into_view_if_needed()
    wait_idle(app_page)
    screenshot(app_page, "take_apart_1280x720")
    app_page.locator(".st-key-quiz_open summary").click()  # the quick check, drawn only while open
    app_page.get_by_text("Your answer", exact=True).scroll_into_view_if_needed()
    wait_idle(app_page)
    screenshot(app_page, "quiz_1280x720")
    assert "knock=0%2C2" in app_page.url or "knock=0,2" in app_page.url


def test_the_take_it_apart_section_is_drawn_only_once_opened(app_page, app_url):
    open_app(app_page, app_url, "")
    wait_for_charts(app_page, count=2)  # the heads, the concatenation with the output (What each head does: closed)
    main = app_page.locator('[data-testid="stMain"]')
    assert main.locator(".st-key-apart_head").count() == 0  # closed: its widgets and figures were never sent
    app_page.get_by_text("Take it apart", exact=False).first.click()
    app_page.locator(".st-key-apart_head").wait_for()
    wait_for_charts(app_page, count=5)
    assert not exceptions_on_page(app_page)
