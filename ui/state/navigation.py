"""The app's pages, defined once: ``app.py`` routes to them and pages link to them by name.

Each page is one row of ``PAGES``; its file is ``app_pages/<name>.py`` and its URL path is
``/<name>`` (Streamlit derives it from the file name), so deep links such as
``/step_by_step?tokens=...`` depend on these names staying as they are.

The pages live in ``app_pages/``, not ``pages/``: Streamlit 1.67 treats a top-level ``pages/``
folder as the old multipage layout and routes a first deep link to a page without running
``app.py`` (no page config, no server tuning, no navigation).

An ``st.Page`` can only be made while a script runs (it resolves its file against the running
app), so ``page`` and ``all_pages`` build the objects on each call; two objects made from one
row are the same page to ``st.switch_page`` and ``st.page_link``.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

PAGES_DIR = "app_pages"


@dataclass(frozen=True)
class PageInfo:
    """One page: its file name (without .py), title, icon, and a line saying what it shows."""

    name: str
    title: str
    icon: str
    summary: str

    @property
    def path(self) -> str:
        """The page's file, relative to app.py: the one place this path is spelled."""
        return f"{PAGES_DIR}/{self.name}.py"

    @property
    def label(self) -> str:
        """A link text: the title and what the page shows."""
        return f"{self.title}: {self.summary}"


PAGES = (
    PageInfo("heads", "Heads", "🟪", "every head's attention at once"),
    PageInfo("step_by_step", "Step by step", "🪜", "one head from embeddings to output, and a drill-down"),
    PageInfo("decoding", "Decoding", "⏩", "generation token by token with a KV cache; positions compared"),
    PageInfo("flash", "FlashAttention", "⚡", "attention tile by tile with the online softmax; the weights never stored"),
    PageInfo("lessons", "Lessons", "🎓", "classic confusions and modern attention, one link each"),
    PageInfo("seeds", "Seed notebooks", "📓", "the five seed documents, recomputed"),
    PageInfo("compare", "Compare A/B", "⚖️", "two settings side by side, and their difference, in one link"),
    PageInfo("real_model", "Real model", "🤖", "attention in a small pretrained model"),
    PageInfo("about", "About", "ℹ️", "what the app computes and why"),
)
PAGE_INFO = {info.name: info for info in PAGES}
DEFAULT_PAGE = "heads"


def page(name: str) -> st.Page:
    """The ``st.Page`` of one page, by name (a key of ``PAGE_INFO``)."""
    info = PAGE_INFO[name]
    return st.Page(info.path, title=info.title, icon=info.icon, default=name == DEFAULT_PAGE)


def all_pages() -> list[st.Page]:
    """Every page, in the sidebar's order (the default first)."""
    return [page(info.name) for info in PAGES]


# Streamlit keeps the scroll position when a page or a lesson changes, so a page opened from a button
# at the bottom of another would open ~600 px down. A one-off script scrolls the main area back up.
SCROLL_TO_TOP = """<script>/* {nonce} */
for (const el of [document.querySelector('[data-testid="stMain"]'), document.scrollingElement]) {{
  if (el) el.scrollTo(0, 0);
}}
</script>"""


def go_to(name: str) -> None:
    """Switch to page ``name`` and open it at its top (ends this run)."""
    request_top()
    st.switch_page(page(name))


def request_top() -> None:
    """Open the next run at the top of the page (call from a button's callback before it switches)."""
    st.session_state.scroll_to_top = st.session_state.get("scroll_to_top", 0) + 1


def scroll_if_requested() -> None:
    """Scroll to the top when a callback asked for it (app.py calls this on every run, before the page)."""
    nonce = st.session_state.pop("scroll_to_top", None)
    if nonce is not None:  # a fresh script each time, so the browser runs it again
        st.html(SCROLL_TO_TOP.format(nonce=nonce), unsafe_allow_javascript=True)


def page_links(where) -> None:
    """The pages as links that carry the address bar's parameters along.

    Streamlit's own menu opens a page with an empty query; the page then writes its settings back, and that
    second address is a second history entry, so Back needed two presses. A link that already carries the
    parameters leaves the page nothing to write: one click, one entry. Drawn after the page has run (see
    app.py), so the parameters are this run's.
    """
    params = st.query_params.to_dict()
    with where:
        for info in PAGES:
            st.page_link(page(info.name), query_params=params)
