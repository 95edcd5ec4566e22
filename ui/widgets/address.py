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

from ui.state.address import address, followed_link
from ui.widgets.live import drop_state_presenter
from ui.widgets.page_menu import compact

KEY = "address_bar"
_CSS = ".st-key-address_bar { display: none; }"  # takes no place in the sidebar (no gap under its last widget)
_JS = Path(__file__).with_name("address.js").read_text()

_component = st.components.v2.component("mha_address", html="<span></span>", css=_CSS, js=compact(_JS),
                                        isolate_styles=False)


def send() -> None:
    """Draw the element that puts this run's address in the address bar (app.py, after the page)."""
    with st.sidebar:
        _component(key=KEY, data={"query": address().query(), "link": followed_link() or ""})
    drop_state_presenter(KEY)  # its state is never read (as the page menu's)
