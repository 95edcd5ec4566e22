"""A teacher's path through the lessons (issue 23, item 7): 'next lesson →' and '→ Open in the explorer' are
navigations the browser's history records. Back returns to the lesson, with its address and its content;
Forward comes back; and the address bar never shows one page's path with another page's parameters."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from conftest import open_app, wait_for_charts, wait_for_page_run, wait_idle

from ui.pages.lessons import LESSONS

EXPLORER_PARAMS = ("tokens", "mask", "d_model", "heads", "seed")  # what only the explorer's address carries

# Every address the tab shows, as it changes: each history call is recorded, and a 5 ms poll catches the rest.
RECORD_URLS = """() => {
  window.__urls = [location.pathname + location.search];
  const note = () => {
    const now = location.pathname + location.search;
    if (window.__urls[window.__urls.length - 1] !== now) window.__urls.push(now);
  };
  for (const name of ['pushState', 'replaceState']) {
    const original = history[name].bind(history);
    history[name] = (...args) => { const out = original(...args); note(); return out; };
  }
  window.addEventListener('popstate', note);
  window.__poll = setInterval(note, 5);
}"""


def header(page) -> str:
    return page.locator('[data-testid="stHeading"] h2').first.inner_text()


def hybrids(urls: list[str]) -> list[str]:
    """Addresses with a lesson's path and the explorer's parameters, or the explorer's path and a lesson's."""
    bad = []
    for url in urls:
        parts = urlsplit(url)
        params = parse_qs(parts.query)
        on_lessons = parts.path.rstrip("/").endswith("/lessons")
        if on_lessons and any(name in params for name in EXPLORER_PARAMS):
            bad.append(url)
        if not on_lessons and "lesson" in params:
            bad.append(url)
    return bad


def wait_for_lesson(page, key: str) -> None:
    """Wait until the lesson's own run has drawn its heading (the run has started) and has ended."""
    page.wait_for_function("k => new URLSearchParams(location.search).get('lesson') === k", arg=key)
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-testid=\"stHeading\"] h2')].some(h => h.innerText.endsWith(t))",
        arg=LESSONS[key].title,
    )
    wait_idle(page)


def test_back_after_next_lesson_returns_to_the_first_lesson_and_forward_comes_back(app_page, app_url):
    open_app(app_page, app_url, "lessons?lesson=wo")
    wait_for_charts(app_page)
    first_url = app_page.url
    app_page.evaluate(RECORD_URLS)
    app_page.get_by_role("link", name="next lesson →").click()
    wait_for_lesson(app_page, "causal")
    assert header(app_page).endswith(LESSONS["causal"].title)
    app_page.go_back()
    wait_for_lesson(app_page, "wo")
    assert app_page.url == first_url  # the first lesson's address, query string and all
    assert header(app_page).endswith(LESSONS["wo"].title)  # and its content, not the next lesson's
    app_page.go_forward()
    wait_for_lesson(app_page, "causal")
    assert header(app_page).endswith(LESSONS["causal"].title)
    urls = app_page.evaluate("window.__urls")
    assert not hybrids(urls), urls


def test_back_after_open_in_the_explorer_returns_to_the_lesson_and_the_url_is_never_a_hybrid(app_page, app_url):
    open_app(app_page, app_url, "lessons?lesson=causal")
    wait_for_charts(app_page)
    lesson_url = app_page.url
    app_page.evaluate(RECORD_URLS)
    panel = LESSONS["causal"].panels[1]  # the causal panel: mask=causal in its link
    app_page.get_by_role("link", name=panel.caption).click()
    app_page.wait_for_function("() => location.pathname === '/'")
    wait_idle(app_page)
    wait_for_charts(app_page)
    app_page.wait_for_timeout(1500)  # the page has written its own address by now, if it would
    explorer_url = app_page.url
    assert parse_qs(urlsplit(explorer_url).query)["mask"] == ["causal"]
    during_switch = app_page.evaluate("window.__urls")
    assert not hybrids(during_switch), during_switch
    app_page.go_back()  # one press: back on the lesson
    wait_for_lesson(app_page, "causal")
    assert app_page.url == lesson_url
    assert header(app_page).endswith(LESSONS["causal"].title)
    app_page.go_forward()
    wait_for_page_run(app_page, "/")
    assert parse_qs(urlsplit(app_page.url).query)["mask"] == ["causal"]
    urls = app_page.evaluate("window.__urls")
    assert not hybrids(urls), urls
    assert urls.count(urlsplit(explorer_url).path + "?" + urlsplit(explorer_url).query) >= 1, urls
