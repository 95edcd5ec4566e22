"""The address bar kept by one element (ui/widgets/address.py): it follows every change without a history entry,
Back leaves the page as after a link, a reload keeps the settings, and a bad link's value is corrected in it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from conftest import control_selector, exceptions_on_page, open_app, wait_for_charts, wait_for_page_run, wait_idle

SEED_UP = control_selector("w_seed", "up")
SEED = control_selector("w_seed", "number")
MENU = '[data-testid="mhaPageMenu"]'


def query(page) -> dict[str, str]:
    """The address bar's parameters (one value each)."""
    return {name: values[-1] for name, values in parse_qs(urlparse(page.url).query).items()}


def wait_for_seed(page, expected: str) -> None:
    """Wait until the Seed box shows ``expected`` (a reload draws the page before its first run's values)."""
    page.wait_for_function("([sel, s]) => document.querySelector(sel)?.value === s", arg=[SEED, expected])


def seed_up(page, expected: int) -> None:
    """Press Seed + and wait until the run is over and the address bar carries the new seed."""
    page.locator(SEED_UP).click()
    page.wait_for_function("s => new URLSearchParams(location.search).get('seed') === s", arg=str(expected))
    wait_idle(page)


def test_seed_plus_rewrites_the_address_without_a_history_entry(app_page, app_url):
    open_app(app_page, app_url, "?seed=3&heads=2")
    wait_for_charts(app_page)
    start = app_page.evaluate("history.length")
    for seed in (4, 5, 6):
        seed_up(app_page, seed)
        assert app_page.locator(SEED).input_value() == str(seed)  # the widget and the address agree
        assert query(app_page)["heads"] == "2"
    app_page.wait_for_timeout(500)  # a late history entry, if any, would come with the run's page info
    assert app_page.evaluate("history.length") == start
    assert not exceptions_on_page(app_page)


def test_back_after_the_menu_comes_back_to_heads_with_its_last_settings_and_a_reload_keeps_them(app_page, app_url):
    open_app(app_page, app_url, "?seed=3&heads=2")
    wait_for_charts(app_page)
    seed_up(app_page, 4)
    app_page.locator(MENU).get_by_role("link", name="Step by step").click()
    app_page.wait_for_url("**/step_by_step?*")
    wait_idle(app_page)
    assert query(app_page)["seed"] == "4"  # the menu's link carried the settings
    seed_up(app_page, 5)
    app_page.go_back()
    wait_for_page_run(app_page, "/")
    wait_for_charts(app_page)
    wait_for_seed(app_page, "4")
    assert query(app_page)["seed"] == "4"  # Heads as it was left
    seed_up(app_page, 5)
    app_page.reload()
    wait_idle(app_page)
    wait_for_charts(app_page)
    wait_for_seed(app_page, "5")
    assert query(app_page)["seed"] == "5"
    assert query(app_page)["heads"] == "2" and not exceptions_on_page(app_page)


def test_a_bad_value_in_a_link_is_named_on_the_page_and_corrected_in_the_address_bar(app_page, app_url):
    open_app(app_page, app_url, "?seed=3&heads=banana")
    wait_for_charts(app_page)
    app_page.wait_for_function("() => !new URLSearchParams(location.search).get('heads')?.includes('banana')")
    warnings = app_page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts()
    assert any("banana" in text for text in warnings), warnings
    assert query(app_page)["seed"] == "3" and query(app_page).get("heads", "1").isdigit()
    assert not exceptions_on_page(app_page)
