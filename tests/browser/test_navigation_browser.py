"""Moving between pages as a student does: a new page opens at its top, Back goes back one view, and a
new-tab link opens a new tab. Only a browser keeps a history and a scroll position."""

from __future__ import annotations

from conftest import open_app, wait_for_charts, wait_idle

MAIN_SCROLL = "document.querySelector('[data-testid=\"stMain\"]').scrollTop"


def test_back_goes_back_one_page_after_the_sidebar_menu(app_page, app_url):
    open_app(app_page, app_url, "?seed=3&heads=2")
    wait_for_charts(app_page)
    app_page.get_by_role("link", name="Step by step").click()
    app_page.wait_for_url("**/step_by_step?*")
    wait_idle(app_page)
    assert "seed=3" in app_page.url  # the link carried the settings
    app_page.go_back()
    app_page.wait_for_function("() => location.pathname === '/'")  # one press: back on Heads
    assert "seed=3" in app_page.url


def test_the_next_lesson_opens_at_its_top(app_page, app_url):
    open_app(app_page, app_url, "lessons?lesson=wo")
    wait_for_charts(app_page)
    button = app_page.get_by_role("link", name="next lesson →")
    button.scroll_into_view_if_needed()
    assert app_page.evaluate(MAIN_SCROLL) > 200
    button.click()
    app_page.wait_for_function("() => new URLSearchParams(location.search).get('lesson') === 'causal'")
    app_page.wait_for_function(f"() => {MAIN_SCROLL} === 0")


def test_opening_a_lesson_in_the_explorer_lands_at_the_top_and_new_tab_links_open_a_tab(app_page, app_url):
    open_app(app_page, app_url, "lessons?lesson=causal")
    wait_for_charts(app_page)
    new_tab = app_page.locator(".st-key-lesson_open_causal_0 a[target='_blank']").first
    assert "tokens=" in new_tab.get_attribute("href")
    button = app_page.locator(".st-key-lesson_open_causal_0 [data-testid='stPageLink-NavLink']")
    button.scroll_into_view_if_needed()
    assert app_page.evaluate(MAIN_SCROLL) > 200
    button.click()
    app_page.wait_for_function("() => location.pathname === '/'")
    wait_idle(app_page)
    app_page.wait_for_function(f"() => {MAIN_SCROLL} === 0")
