"""What kind of screen a page is drawn for. Streamlit cannot read the viewport's width, so a phone
is told by its browser's User-Agent (every phone browser names itself "Mobi…", "Android" or "iPhone")."""

from __future__ import annotations

from urllib.parse import urlsplit

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui.charts.chart_image import svg_button_options
from ui.state.address import address
from ui.state.navigation import DEFAULT_PAGE, PAGE_INFO

PHONE_MARKERS = ("Mobi", "Android", "iPhone")


def is_phone(user_agent: str | None) -> bool:
    """True for a phone's browser, from its User-Agent header."""
    return bool(user_agent) and any(marker in user_agent for marker in PHONE_MARKERS)


def on_phone() -> bool:
    """True when this session's browser is a phone's.

    Read once per script runner (one session's connection: its User-Agent cannot change) and kept on its run
    context: ``st.context.headers`` builds the whole header mapping on every read, and a Heads run asks ~15 times."""
    ctx = get_script_run_ctx()
    known = getattr(ctx, "_mha_on_phone", None)
    if known is None:
        known = is_phone(st.context.headers.get("User-Agent"))
        if ctx is not None:
            ctx._mha_on_phone = known
    return known


def current_page(url: str | None, pages, default: str) -> str:
    """The page a URL opens, one of ``pages`` (``default`` for the app's root or an unknown path)."""
    path = urlsplit(url or "").path.rstrip("/")
    last = path.rsplit("/", 1)[-1] if path else ""
    return last if last in pages else default


def chart_config(view: str | None = None) -> dict:
    """plotly's settings for a chart: no mode bar on a phone (there it stays on and covers the titles); the
    camera button saves an SVG named after the page and the view (``view``, else the link's ``view=``)."""
    config = {"displayModeBar": False} if on_phone() else {"displayModeBar": "hover"}
    view = view or address().get("view") or "chart"
    page = current_page(st.context.url, PAGE_INFO, DEFAULT_PAGE)
    return {**config, "toImageButtonOptions": svg_button_options(page, view)}
