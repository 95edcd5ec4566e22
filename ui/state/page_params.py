"""A page's own link parameters (rows of ``ui.state.settings.Setting``), beside the sidebar's model settings.

The sidebar rewrites the address bar with the model's settings on every run (``ui.controls._write_url``),
which drops any other parameter. A page with settings of its own therefore reads them from the link
*before* the sidebar runs (``capture``), fills its widgets from them once (``seed``: the link's bad values
become messages and fall back, as the sidebar's do), and puts them back after the sidebar (``write``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from ui.i18n import _
from ui.state.address import address
from ui.state.settings import Setting
from ui.state.urlstate import read_settings, write_settings


def capture(rows: Sequence[Setting]) -> dict[str, str] | None:
    """The link's raw values for ``rows`` on the run that first meets them (their widgets not seeded yet), else None."""
    if all(row.key in st.session_state for row in rows):
        return None
    params = address().to_dict()
    return {row.param: params[row.param] for row in rows if row.param in params}


def seed(rows: Sequence[Setting], raw: Mapping[str, str] | None, base: Mapping[str, object]) -> list[str]:
    """Fill the widgets of ``rows`` from the link (``raw`` from ``capture``); the messages for values not used.

    ``base``: the values the rows' limits read (the model's settings, ``ui.state.settings.values_of``).
    """
    if raw is None:
        return []
    messages: list[str] = []
    values = read_settings(raw, rows, dict(base), messages)
    for row in rows:
        if row.key not in st.session_state:
            st.session_state[row.key] = values[row.name]
    return messages


def seed_and_report(rows: Sequence[Setting], raw: Mapping[str, str] | None, base: Mapping[str, object],
                    messages_key: str) -> None:
    """``seed``, and the link's messages under the page's parameters: kept for the session (``messages_key``)
    and shown on every run, as the sidebar shows its own."""
    if raw is not None:
        st.session_state[messages_key] = seed(rows, raw, base)
    for message in st.session_state.get(messages_key, []):
        st.warning(_("Link: {message}").format(message=message))


def clamp(row: Setting, values: Mapping[str, object]) -> int:
    """The widget's stored whole number moved inside the row's current limits (a shorter sentence, fewer tiles)."""
    low, high = row.bounds(values)
    stored = st.session_state.get(row.key, row.default_for(values))
    value = min(max(int(stored), low), high)
    st.session_state[row.key] = value
    return value


def write(rows: Sequence[Setting], values: Mapping[str, object]) -> None:
    """Add the rows' parameters to the address bar (after the sidebar has written the model's)."""
    params = write_settings(rows, values)
    current = address().to_dict()
    stale = [row.param for row in rows if row.param in current and row.param not in params]
    for name in stale:
        del address()[name]
    if any(current.get(name) != value for name, value in params.items()):
        address().update(params)
