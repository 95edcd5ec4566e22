"""The app's pages, defined once: ``app.py`` routes to them and pages link to them by name.

Each page is one row of ``PAGES``; its file is ``app_pages/<name>.py`` and its URL path is
``/<name>`` (Streamlit derives it from the file name), so deep links such as
``/step_by_step?tokens=...`` depend on these names staying as they are.

The pages live in ``app_pages/``, not ``pages/``: Streamlit 1.67 treats a top-level ``pages/``
folder as the old multipage layout and routes a first deep link to a page without running
``app.py`` (no page config, no server tuning, no navigation).

An ``st.Page`` can only be made while a script runs (it resolves its file against the running
app), so ``page`` and ``all_pages`` build the objects in a session's first run (and again when its
language changes) and keep them for its later runs; two objects made from one row are the same page
to ``st.switch_page`` and ``st.page_link``.

Links between pages are ``st.page_link`` with the target's parameters, never a button that calls
``st.switch_page``: a link makes one history entry with the new page's path and its own parameters at once
(so Back returns, Forward comes back), where ``switch_page`` first rewrites the old page's address (Streamlit
1.67 clears or sets the query while the address bar still shows the old path: a hybrid address) and then
adds the new page's. A run that opens a page, or that Back/Forward started, is an *arrival*
(``note_arrival``): there the address bar is the truth, and a page follows it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui.i18n import _, current_language
from ui.state.address import address, history_navigation
from ui.state.page_table import DEFAULT_PAGE, PAGE_INFO, PAGES, PAGES_DIR, PageInfo  # noqa: F401 (re-exported)


def page(name: str) -> st.Page:
    """The ``st.Page`` of one page, by name (a key of ``PAGE_INFO``)."""
    return session_pages()[name]


def all_pages() -> list[st.Page]:
    """Every page, in the sidebar's order (the default first)."""
    pages = session_pages()
    return [pages[info.name] for info in PAGES]


KEPT_SESSIONS = 256  # sessions whose page objects are kept (least recently used dropped first; a few KB each)
_session_pages: OrderedDict[tuple[str, str], dict[str, st.Page]] = OrderedDict()
_session_pages_lock = threading.Lock()


def session_pages() -> dict[str, st.Page]:
    """This session's ``st.Page`` of every page, by name, titled in the run's language.

    Made once per session and language, not twice per run: ``st.Page`` resolves its file on the disk (a
    ``realpath`` and a ``stat``), 18 times per run for the navigation and the links, ~2.5 ms of a ~30 ms
    Heads rerun (py-spy). A page object is used by one session's runs only, which run one at a time
    (``st.navigation`` marks the chosen one callable, and running it unmarks it)."""
    key = (getattr(get_script_run_ctx(), "session_id", ""), current_language())
    with _session_pages_lock:  # sessions run in threads of their own
        pages = _session_pages.get(key)
    if pages is None:
        pages = {info.name: st.Page(info.path, title=_(info.title), icon=info.icon, default=info.name == DEFAULT_PAGE)
                 for info in PAGES}
    with _session_pages_lock:
        _session_pages[key] = pages
        _session_pages.move_to_end(key)
        while len(_session_pages) > KEPT_SESSIONS:
            _session_pages.popitem(last=False)
    return pages


def unknown_page(requested: str | None) -> str | None:
    """The page a link asked for when no page has that name (Streamlit then runs the default page), else None.

    ``requested`` is the URL path's last part as Streamlit read it ("" or None for the app's root)."""
    name = (requested or "").strip("/")
    return name if name and name not in PAGE_INFO else None


def unknown_page_message(name: str) -> str:
    """What a link to a page that does not exist is told: which pages exist, and what is shown instead."""
    known = ", ".join(f"{_(info.title)} (`/{info.name}`)" for info in PAGES)
    return _("**There is no page `/{name}`.** This is {page}, with the link's settings. The pages are: {known}.").format(
        name=name, page=_(PAGE_INFO[DEFAULT_PAGE].title), known=known)


def report_unknown_page() -> None:
    """Say on the page that the link named a page that does not exist (app.py calls this before the page runs)."""
    ctx = get_script_run_ctx()
    name = unknown_page(getattr(getattr(ctx, "pages_manager", None), "intended_page_name", None))
    if name:
        st.warning(unknown_page_message(name), icon=":material/link_off:")


# Streamlit keeps the scroll position when a page or a lesson changes, so a page opened from a button
# at the bottom of another would open ~600 px down. A one-off script scrolls the main area back up.
SCROLL_TO_TOP = """<script>/* {nonce} */
for (const el of [document.querySelector('[data-testid="stMain"]'), document.scrollingElement]) {{
  if (el) el.scrollTo(0, 0);
}}
</script>"""


PAGE_NOW = "nav_page"  # session state: the URL path of the page the last run showed
ARRIVED = "nav_arrived"  # session state: this run opened a page, or Back/Forward started it


def note_arrival(current: st.Page) -> bool:
    """Remember whether this run arrived (a page opened, or Back/Forward), not a widget's rerun; app.py calls
    this once per run, before the page. A page then takes its settings from the address bar, not its widgets.

    Returns True when the run arrived from another view of this session (it should open at its top).
    """
    ss = st.session_state
    before = ss.get(PAGE_NOW)
    arrived = before != current.url_path or history_navigation()
    ss[PAGE_NOW], ss[ARRIVED] = current.url_path, arrived
    return arrived and before is not None  # a session's first page opens at its top anyway


def arrived() -> bool:
    """True in a run that opened its page or that the browser's Back/Forward started (see ``note_arrival``)."""
    return bool(st.session_state.get(ARRIVED, True))


def request_top() -> None:
    """Open the next run at the top of the page (call from a button's callback before it switches)."""
    st.session_state.scroll_to_top = st.session_state.get("scroll_to_top", 0) + 1


def scroll_if_requested() -> None:
    """Scroll to the top when a callback asked for it (app.py calls this on every run, before the page)."""
    if "scroll_to_top" in st.session_state:
        scroll_to_top()


def scroll_to_top() -> None:
    """Scroll the page to its top now (a page that follows a link to new content of its own calls this)."""
    nonce = st.session_state.pop("scroll_to_top", 0) + 1
    st.session_state.scrolled = st.session_state.get("scrolled", 0) + 1
    # a fresh script each time, so the browser runs it again
    st.html(SCROLL_TO_TOP.format(nonce=f"{nonce}.{st.session_state.scrolled}"), unsafe_allow_javascript=True)


def page_links(where) -> None:
    """The pages as links that carry the address bar's parameters along.

    Streamlit's own menu opens a page with an empty query; the page then writes its settings back, and that
    second address is a second history entry, so Back needed two presses. A link that already carries the
    parameters leaves the page nothing to write: one click, one entry. Drawn after the page has run (see
    app.py), so the parameters are this run's.
    """
    params = address().to_dict()
    with where:
        for info in PAGES:
            st.page_link(page(info.name), query_params=params)
