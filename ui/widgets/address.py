"""The address bar, written by one element at the end of every run (app.py), from the address the app keeps.

``ui.state.address`` says why the app no longer writes ``st.query_params``. This element carries the query string
as its data; its JavaScript (``address.js``, components v2: it runs in the page, no iframe) calls
``history.replaceState`` when the address bar says something else. So a Seed + changes the address bar without a
history entry (Back leaves the page, as after a link) and without Streamlit re-rendering the app for it. A link
followed on the page shown (``st.page_link`` to the next lesson) is the exception: Streamlit 1.67 makes no history
entry for it, so the element pushes one (``link`` in its data: the link's query, while the address bar lacks it). The element
draws nothing: its container in the sidebar is hidden.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui.state.address import address, followed_link
from ui.widgets.live import drop_state_presenter
from ui.widgets.page_menu import compact

KEY = "address_bar"
FRAGMENT_KEY = "address_bar_fragment"
# takes no place (no gap under the sidebar's last widget, none in a fragment)
_CSS = ".st-key-address_bar, .st-key-address_bar_fragment { display: none; }"
_JS = Path(__file__).with_name("address.js").read_text()

_component = st.components.v2.component("mha_address", html="<span></span>", css=_CSS, js=compact(_JS),
                                        isolate_styles=False)


def _draw(key: str) -> None:
    _component(key=key, data={"query": address().query(), "link": followed_link() or ""})
    drop_state_presenter(key)  # its state is never read (as the page menu's)


def send() -> None:
    """Draw the element that puts this run's address in the address bar (app.py, after the page)."""
    with st.sidebar:
        _draw(KEY)


def send_from_fragment() -> None:
    """The same at the end of a fragment that writes the address (the Real model's layer view): a fragment's
    rerun ends before app.py's ``send``. Drawn only then: in a full run, app.py's element has the last word."""
    ctx = get_script_run_ctx()
    if ctx is not None and ctx.fragment_ids_this_run:
        _draw(FRAGMENT_KEY)
