"""The address bar's parameters as the app keeps them: one mapping per session, read and written during a run.

Writing ``st.query_params`` made Streamlit 1.67 send a message on every change, which its browser side answered
with ``history.pushState`` (a history entry per Seed +: Back stepped back through seeds) and a re-render of the
whole app. The app now keeps the address itself (``address()``, kept in session state) and one small element
drawn at the end of every run puts it in the address bar with ``history.replaceState`` (``ui.widgets.address``).

The price: Streamlit's own idea of the query is no longer told about the app's writes. A widget's rerun sends
the query of the last navigation (stale), so a run's incoming ``st.query_params`` is the truth only when it is
news: the session's first run, a link (a query that differs from the previous run's incoming one), the page
menu and Back/Forward (a history navigation); ``begin()`` decides that, first thing in every run (app.py). An
``st.page_link`` to another page is news too (``follow_arrival``, once app.py knows the page). This module is the only reader of ``st.query_params`` in the app.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from urllib.parse import urlencode

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

KEPT = "address"  # session state: the address as the app keeps it (a dict of str -> str)
INCOMING = "address_incoming"  # session state: the query the previous run came with
LINK = "address_link"  # session state: the query of the link this run followed on its page, else absent


class Address(MutableMapping[str, str]):
    """The subset of ``st.query_params``' interface the app uses, over the session's kept address.

    One value per name, as the app writes them (``st.query_params`` gives a repeated name's last value too).
    """

    def __init__(self, params: dict[str, str]) -> None:
        self._params = params

    def __getitem__(self, name: str) -> str:
        return self._params[name]

    def __setitem__(self, name: str, value: str) -> None:
        self._params[name] = str(value)

    def __delitem__(self, name: str) -> None:
        del self._params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def to_dict(self) -> dict[str, str]:
        """A copy of the parameters (changing it changes nothing)."""
        return dict(self._params)

    def from_dict(self, params: Mapping[str, str]) -> None:
        """Replace every parameter by ``params``."""
        self._params.clear()
        self._params.update({name: str(value) for name, value in params.items()})

    def query(self) -> str:
        """The query string, encoded as Streamlit encodes ``st.query_params`` (no leading ``?``)."""
        return urlencode(self._params, doseq=True)


def _incoming() -> dict[str, str]:
    return st.query_params.to_dict()


def history_navigation() -> bool:
    """True when the browser's Back or Forward started this run (Streamlit 1.67 says so in the run's context);
    here rather than in ``ui.state.navigation``, which reads the address (its page links) and re-exports it."""
    return bool(getattr(get_script_run_ctx(), "is_history_navigation", False))


def is_news(incoming: Mapping[str, str], before: Mapping[str, str] | None) -> bool:
    """True when this run's incoming query is the truth rather than a stale copy of the last navigation's:
    the session's first run (``before`` None), a query other than the previous run's, Back/Forward."""
    return before is None or dict(incoming) != dict(before) or history_navigation()


def begin() -> None:
    """Take the incoming query as the address when it is news (``is_news``), else keep the session's; app.py
    calls this first in every run, before anything reads the address (the language does)."""
    ss = st.session_state
    incoming, before = _incoming(), ss.get(INCOMING)
    ss.pop(LINK, None)
    if KEPT not in ss or is_news(incoming, before):
        ss[KEPT] = dict(incoming)
        if before is not None and not history_navigation():
            ss[LINK] = Address(dict(incoming)).query()
    ss[INCOMING] = incoming


def followed_link() -> str | None:
    """The query of the link this run followed (None: a widget's rerun, the first run, Back/Forward).

    Streamlit 1.67 makes no history entry for an ``st.page_link`` to the page shown (it made one when the app wrote
    ``st.query_params``): the address element does (``ui.widgets.address``) when the address bar does not say it
    yet. When it does (a page opened by a link, or a rerun whose stale query is the address bar's), it replaces.
    """
    return st.session_state.get(LINK)


def follow_arrival() -> None:
    """A page opened by an ``st.page_link`` (app.py, on an arrival): its query is the truth even when it equals
    the stale one of the previous run, which ``begin`` could not tell apart."""
    st.session_state[KEPT] = _incoming()


def address() -> Address:
    """The address bar's parameters for this run (reads and writes go to the session's kept address)."""
    return Address(st.session_state.setdefault(KEPT, {}))
