"""Real-browser fixtures: one Streamlit server and one Debian chromium per test session.

Use them from any browser test:

    def test_something(app_page, app_url):
        open_app(app_page, app_url, "?heads=2")
        wait_for_charts(app_page)
        assert chart_trace_count(app_page) == 2

Every test here is marked ``browser`` and skipped, with the reason, when /usr/bin/chromium or
the playwright package is missing. Screenshots go to test-artifacts/ (gitignored).
Fixture names avoid pytest-playwright's own (``page``, ``browser``, ``context``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

# The server and Chromium are started as the benchmarks and bench/smallest_host.py start them.
from tools.launch import chromium_context, missing_browser, streamlit_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def pytest_collection_modifyitems(config, items):
    """Mark every test in this folder 'browser' and skip them all when chromium or playwright is missing."""
    reason = missing_browser()
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.browser)
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"browser test skipped: {reason}"))


@pytest.fixture(scope="session")
def app_url(tmp_path_factory) -> str:
    """Base URL of a Streamlit server running app.py on a free port (stopped at the end of the session)."""
    with streamlit_server(tmp_path_factory.mktemp("streamlit")) as server:
        yield server.url


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    """One chromium with a temporary profile, 1280x720, shared by the session's tests."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        context = chromium_context(playwright, tmp_path_factory.mktemp("chromium"))
        context.set_default_timeout(30_000)
        yield context
        context.close()


@pytest.fixture
def app_page(browser_context):
    """A fresh tab, closed after the test."""
    page = browser_context.new_page()
    yield page
    page.close()


def wait_idle(page, timeout: float = 30_000) -> None:
    """Wait until the app's script has finished its run (docs/TESTING.md: then wait for the content too)."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


CURRENT_PAGE_JS = """path => {
  const a = document.querySelector('[data-testid="stSidebar"] [data-testid="mhaPageMenu"] a[aria-current="page"]');
  return a !== null && new URL(a.href).pathname === path;
}"""


def wait_for_page_run(page, path: str, timeout: float = 30_000) -> None:
    """After Back/Forward to ``path``: wait until that page's run has drawn its menu (so it has started), then until
    it has ended. ``wait_idle`` alone can pass before the run starts; a second Back pressed during the run makes
    Streamlit push the run's page back into the history (its page info arrives late), dropping the Forward entry."""
    page.wait_for_function("p => location.pathname === p", arg=path, timeout=timeout)
    page.wait_for_function(CURRENT_PAGE_JS, arg=path, timeout=timeout)
    wait_idle(page, timeout)


# The app's own elements have drawn: their code is fetched once per page (static/mha/, ui/widgets/served.py), so on a
# first load an element's controls or links appear a moment after the run that sent it.
ELEMENTS_DRAWN_JS = """() => [...document.querySelectorAll('[data-testid="mhaControls"], [data-testid="mhaPageMenu"]')]
  .every(element => element.childElementCount > 0)"""


def open_app(page, app_url: str, query: str = "") -> None:
    """Load the app (``query`` starts with '?' or '/page?...') and wait for its first run to end and its elements to
    be drawn."""
    page.goto(f"{app_url}/{query.lstrip('/')}")
    wait_idle(page)
    page.wait_for_function(ELEMENTS_DRAWN_JS, timeout=30_000)


# True once the run is over, the main area shows something and nothing has changed for ``quiet`` ms: the script's
# state, the number of elements, each live chart's drawn figures (state kept on window between polls).
SETTLED_JS = """quiet => {
  const app = document.querySelector('[data-testid="stApp"]');
  const shown = document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]').length;
  const sig = [app?.dataset.testScriptState, shown, document.querySelectorAll('[data-testid="stElementContainer"]').length,
               ...[...document.querySelectorAll('.mha-live')].map(c => `${c.dataset.mhaShown}|${c.dataset.mhaPlotly}`)]
              .join(',');
  const now = performance.now();
  if (!window.__mhaSettled || window.__mhaSettled.sig !== sig) { window.__mhaSettled = {sig, since: now}; return false; }
  return app.dataset.testScriptState === 'notRunning' && shown > 0 && now - window.__mhaSettled.since >= quiet;
}"""


def wait_settled(page, quiet: float = 500, timeout: float = 60_000) -> None:
    """Wait until the run has ended and the page has stayed the same for ``quiet`` ms (every element of the run
    mounted, no chart still being drawn): a condition in place of a fixed pause after the run."""
    page.wait_for_function(SETTLED_JS, arg=quiet, timeout=timeout)


# True once every chart is drawn by plotly (a live chart shows its cells on a canvas first and plotly draws it after
# the run: its titles and axes are text only then), no element waits for its code (Streamlit shows a skeleton until
# an element's module has loaded: st.table's ~0.5 s after the run on a first use) and the app's node count has
# stayed the same for ``quiet`` ms.
DRAWN_JS = """quiet => {
  const app = document.querySelector('[data-testid="stApp"]');
  const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  const drawn = charts.every(c => c.querySelector('.main-svg')) && !app.querySelector('[data-testid="stSkeleton"]')
    && [...document.querySelectorAll('.mha-live')].every(c => c.dataset.mhaPlotly && c.dataset.mhaPlotly === c.dataset.mhaShown);
  const sig = [app?.dataset.testScriptState, drawn, charts.length, app?.getElementsByTagName('*').length].join(',');
  const now = performance.now();
  if (!window.__mhaDrawn || window.__mhaDrawn.sig !== sig) { window.__mhaDrawn = {sig, since: now}; return false; }
  return drawn && app.dataset.testScriptState === 'notRunning' && now - window.__mhaDrawn.since >= quiet;
}"""


def wait_drawn(page, quiet: float = 300, timeout: float = 60_000) -> None:
    """Wait until the page shows all it will: the run ended, every chart drawn by plotly, every element's module
    loaded, nothing added or removed for ``quiet`` ms counted from this call (checked every 50 ms; a call after a
    change that left the same count would otherwise find the last call's quiet time already served)."""
    page.evaluate("() => { delete window.__mhaDrawn; }")
    page.wait_for_function(DRAWN_JS, arg=quiet, timeout=timeout, polling=50)


# The page menu's way to another page (static/mha/page_menu.js): a new history entry and a popstate, on which
# Streamlit runs the page the address names with the address's parameters, in the same session and tab.
NAVIGATE_JS = """url => { window.history.pushState({}, '', url); window.dispatchEvent(new PopStateEvent('popstate', {state: {}})); }"""


def run_finished(payload) -> bool:
    """A websocket frame from the server is the end of a script run that finished without error."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    if isinstance(payload, str):
        return False
    message = ForwardMsg.FromString(payload)
    return message.WhichOneof("type") == "script_finished" and message.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY


def open_in_app(page, socket, query: str, timeout: float = 60_000) -> None:
    """Open ``query`` ('/page?...') as the sidebar's page menu does, without loading the app again (a page load
    costs Chromium ~1.5 s of CPU); returns when the server has finished that run (``socket``: the page's websocket,
    from ``page.on("websocket", ...)``). Wait for what it draws with ``wait_drawn``."""
    with socket.expect_event("framereceived", predicate=run_finished, timeout=timeout):
        page.evaluate(NAVIGATE_JS, f"/{query.lstrip('/')}")


def wait_for_charts(page, count: int = 1, timeout: float = 30_000) -> None:
    """Wait until at least ``count`` plotly figures have been drawn (each has a .js-plotly-plot with data)."""
    page.wait_for_function(
        """n => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')]
                  .filter(el => el.data && el.data.length > 0).length >= n""",
        arg=count,
        timeout=timeout,
    )


def chart_trace_count(page, index: int = 0) -> int:
    """Number of traces of the ``index``-th live plotly figure on the page (waits while a rerun swaps it)."""
    handle = page.wait_for_function(
        """i => { const el = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[i];
                  return el && el.data ? el.data.length : null; }""",
        arg=index,
    )
    return handle.json_value()


def exceptions_on_page(page) -> list[str]:
    """Text of every Streamlit exception box on the page (empty when none)."""
    return page.locator('[data-testid="stException"]').all_inner_texts()


def screenshot(page, name: str) -> Path:
    """Save a screenshot of the viewport to test-artifacts/<name>.png and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


# The settings' controls are ONE element (ui/widgets/controls.py, key "controls"; its root mhaControls): each
# control a ``.mha-ctl-item[data-key="w_…"]`` holding real HTML controls (controls.js). Every browser test reaches
# them through ``control_selector`` / ``setting`` below, so a change of that DOM is made here alone. (Page widgets,
# the language select box and the mask grid are Streamlit widgets, reached by their ``.st-key-<key>`` as before.)
CONTROLS = '.st-key-controls [data-testid="mhaControls"]'
CONTROL_PARTS = {
    "item": "",  # the control's whole box: label, control(s), the lines under it
    "label": " .mha-ctl-label",  # its label row (the label, and the "?" of its help)
    "number": " input[type=number]",
    "up": ' [data-testid="mhaStepUp"]',  # a number's "+"
    "down": ' [data-testid="mhaStepDown"]',  # a number's "−"
    "select": " select",
    "text": " input[type=text]",
    "switch": " input[type=checkbox][role=switch]",
    "slider": " input[type=range]",
    "radio": " input[type=radio]",  # a segmented control's choices (each inside a label.mha-ctl-segment)
    "segment": " label.mha-ctl-segment",
    "notes": " .mha-ctl-notes p",  # the lines under the control (caption, info, warning, error)
    "value": " :is(input[type=number], input[type=text], select)",  # what a box shows as its value
}


def control_selector(key: str, part: str = "item") -> str:
    """CSS selector of a settings control (``key``: its session-state key, ``w_seed``) or one ``part`` of it."""
    return f'{CONTROLS} .mha-ctl-item[data-key="{key}"]{CONTROL_PARTS[part]}'


def setting(page, key: str, part: str = "item"):
    """Playwright locator of a settings control or one ``part`` of it (see ``CONTROL_PARTS``)."""
    return page.locator(control_selector(key, part))


def press_seed_plus(page) -> None:
    """Click the Seed's "+" in the controls element (one change: seed + 1)."""
    setting(page, "w_seed", "up").click()


def choose_setting(page, key: str, option: str) -> None:
    """Pick the option shown as ``option`` in a settings select box (a native <select>: one change)."""
    setting(page, key, "select").select_option(label=option)


def setting_value(page, key: str) -> str:
    """What a settings box shows: a number's or text's value, a select box's chosen option's text."""
    return page.evaluate("""sel => { const e = document.querySelector(sel);
        return !e ? null : e.tagName === 'SELECT' ? e.selectedOptions[0]?.text ?? '' : e.value; }""",
                         control_selector(key, "value"))


# JavaScript: the key (``w_seed``) of the settings control an element belongs to, or null (for reading the focus).
CONTROL_KEY_OF_JS = "e => e.closest('[data-testid=\"mhaControls\"] .mha-ctl-item')?.dataset.key ?? null"
# JavaScript: each settings control's box inside a container (the sidebar, the popover), in page order.
CONTROL_ITEMS_JS = "root => [...root.querySelectorAll('[data-testid=\"mhaControls\"] .mha-ctl-item')]"
