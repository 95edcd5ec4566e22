"""Moving between pages as a student does: a new page opens at its top, Back goes back one view, and a
new-tab link opens a new tab. Only a browser keeps a history and a scroll position."""

from __future__ import annotations

from conftest import exceptions_on_page, open_app, wait_for_charts, wait_for_page_run, wait_idle

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


MENU = '[data-testid="stSidebar"] [data-testid="mhaPageMenu"]'


def menu_links(page) -> list[dict]:
    """The sidebar menu's links as the browser has them: text, address, aria-current."""
    return page.evaluate(f"""() => [...document.querySelectorAll('{MENU} a')].map(
        a => ({{text: a.innerText.replace(/^\\S+\\n?/, '').trim(), href: a.href, current: a.getAttribute('aria-current')}}))""")


def test_the_menu_is_one_element_of_real_links_marking_the_current_page(app_page, app_url):
    open_app(app_page, app_url, "step_by_step?seed=5&heads=2")
    wait_for_charts(app_page)
    assert app_page.locator(f'[data-testid="stSidebar"] [data-testid="stPageLink"], {MENU}').count() == 1
    menu = app_page.locator(MENU)
    assert menu.evaluate("n => n.tagName") == "NAV" and menu.get_attribute("aria-label") == "Pages"
    menu.hover()  # the addresses are read from the address bar when the menu is pointed at
    links = menu_links(app_page)
    assert [link["current"] for link in links].count("page") == 1
    current = next(link for link in links if link["current"] == "page")
    assert "Step by step" in app_page.locator(f'{MENU} a[aria-current="page"]').inner_text()
    search = app_page.evaluate("location.search")
    assert "seed=5" in search and all(link["href"].endswith(search) for link in links)  # each carries the settings
    assert current["href"] == f"{app_url}/step_by_step{search}"
    assert links[0]["href"] == f"{app_url}/{search}"  # the default page's address is the app's root


def test_one_history_entry_per_menu_click_and_back_forward_follow(app_page, app_url):
    open_app(app_page, app_url, "?seed=4&heads=2")
    wait_for_charts(app_page)
    start = app_page.evaluate("history.length")
    for name, path in (("Decoding", "/decoding"), ("About", "/about")):
        app_page.locator(MENU).get_by_role("link", name=name).click()
        app_page.wait_for_function("p => location.pathname === p", arg=path)
        wait_idle(app_page)
        app_page.wait_for_timeout(500)  # a second history entry, if any, comes with the run's page info
        assert "seed=4" in app_page.url
    assert app_page.evaluate("history.length") == start + 2  # one entry per click, none from the page's writing
    assert app_page.locator(f'{MENU} a[aria-current="page"]').inner_text().endswith("About")
    app_page.go_back()
    wait_for_page_run(app_page, "/decoding")
    app_page.go_back()
    wait_for_page_run(app_page, "/")
    wait_for_charts(app_page)
    app_page.go_forward()
    wait_for_page_run(app_page, "/decoding")
    app_page.wait_for_function(f"() => document.querySelector('{MENU} a[aria-current=\"page\"]')?.innerText.endsWith('Decoding')")
    assert "seed=4" in app_page.url and not exceptions_on_page(app_page)


def test_a_ctrl_click_on_the_menu_opens_the_page_with_its_settings_in_a_new_tab(app_page, app_url):
    open_app(app_page, app_url, "?seed=6&heads=2")
    wait_for_charts(app_page)
    with app_page.context.expect_page() as opened:
        app_page.locator(MENU).get_by_role("link", name="Step by step").click(modifiers=["Control"])
    tab = opened.value
    try:
        tab.wait_for_load_state()
        assert tab.url.startswith(f"{app_url}/step_by_step?") and "seed=6" in tab.url
    finally:
        tab.close()
    assert app_page.evaluate("location.pathname") == "/"  # the first tab stays where it was
