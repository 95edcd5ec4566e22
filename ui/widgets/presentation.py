"""Presentation mode (``present=1``): big text, no sidebar, a one-line summary of the settings."""

from __future__ import annotations

import streamlit as st

from mha_core.config import MHAConfig
from ui.charts.markdown import literal
from ui.i18n import _, ngettext
from ui.state.address import address
from ui.state.settings import VIEW_SETTINGS, model_setting
from ui.state.urlstate import read_settings
from ui.widgets.state import KEEP

FONT_SIZE = 12  # the figures' base font size (plotly's default)
PRESENT_FONT_SIZE = 16  # ... in presentation mode
PRESENT = tuple(row for row in VIEW_SETTINGS if row.name == "present")  # the link's ``present``, read as the sidebar does
PRESENT_MESSAGES = "present_link_messages"  # session state: a bad ``present`` in the link that opened a switch page


def presenting() -> bool:
    """True while presentation mode (toggle ``w_present``, ``present=1`` in the URL) is on."""
    return bool(st.session_state.get("w_present", False))


def figure_font_size() -> int:
    """The figures' base font size: larger in presentation mode, whose CSS makes the page's text ~1.3x larger."""
    return PRESENT_FONT_SIZE if presenting() else FONT_SIZE


def _short(tokens: tuple[str, ...], words: int = 6) -> str:
    """A sentence cut to its first ``words`` words, saying how long it is when cut (keeps the bar one line)."""
    if len(tokens) <= words:
        return " ".join(tokens)
    return " ".join(tokens[:words]) + " … " + _("({n} tokens)").format(n=len(tokens))


def _choice(name: str, value: str) -> str:
    """A setting's value as a summary names it: the short label on its row of the settings table."""
    return model_setting(name).short_choice(value)


def summary_line(config: MHAConfig) -> str:
    """The settings in one line of Markdown, for the compact bar of presentation mode."""
    sentence = f"**{literal(_short(config.tokens))}**"  # as typed: no emoji, maths or italics from the words
    if config.kv_tokens is not None:
        sentence += f" → **{literal(_short(config.kv_tokens))}**"
    parts = [sentence, ngettext("{n} head", "{n} heads", config.n_heads).format(n=config.n_heads),
             _("mask: {mask}").format(mask=_choice("mask", config.mask))]
    if config.key_value_heads != config.n_heads:
        parts.append(ngettext("{n} K/V head", "{n} K/V heads", config.key_value_heads).format(n=config.key_value_heads))
    if config.positions.acts:  # a scheme that changes nothing (none) is not worth a word
        parts.append(_("positions: {scheme}").format(scheme=_choice("pe", config.pe)))
    if config.null_key:
        parts.append(_("null key"))
    if config.init != "xavier":
        parts.append(_("weights: {init}").format(init=_choice("init", config.init)))
    if config.scale_rule != "sqrt_dk":
        parts.append(_("scale: {scale}").format(scale=_choice("scale", config.scale_rule)))
    if not config.output_projection:
        parts.append(_("no W_O"))
    return " · ".join(parts)


# Presentation mode: bigger text, no sidebar (its controls move behind the compact bar).
# Injected only while the mode is on, so it never touches the normal layout.
PRESENTATION_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"] {
  display: none !important;
}
[data-testid="stMainBlockContainer"] { padding: 3.6rem 2rem 1rem 2rem; max-width: 100%; }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.3rem; line-height: 1.4; }
[data-testid="stMain"] [data-testid="stCaptionContainer"] p { font-size: 1.15rem; }
[data-testid="stMain"] h1 { font-size: 2.2rem; padding: 0.2rem 0; }
[data-testid="stMain"] [data-testid="stWidgetLabel"] p { font-size: 1.15rem; }
[data-testid="stMain"] button p { font-size: 1.2rem; }
[data-testid="stMain"] [data-testid="stMetricValue"] p { font-size: 2.6rem; line-height: 1.2; }
[data-testid="stMain"] [data-testid="stMetricLabel"] p { font-size: 1.15rem; }
[data-testid="stMain"] [data-testid="stSelectbox"] input { font-size: 1.2rem; }
/* Tables: st.dataframe draws its cells on a canvas in a fixed ~13 px font that CSS cannot reach, so the whole
   grid is zoomed (layout and hit-testing follow). A percentage width of a zoomed box is of its column as it is
   (standardised CSS zoom, Chromium 128+): 100% fills the column, the grid laying its columns out in 1/1.35 of it.
   (100% / 1.35 left a quarter of the column empty, half the width on a phone.) st.table is HTML and takes a font
   size. */
[data-testid="stMain"] [data-testid="stDataFrame"] { zoom: 1.35; width: 100% !important; }
[data-testid="stMain"] [data-testid="stDataFrame"] div[style*="max-width"][style*="position: relative"] {
  width: 100% !important; max-width: 100% !important;
}
[data-testid="stMain"] [data-testid="stTable"] table { font-size: 1.2rem; }
</style>
"""


def presentation_bar():
    """The compact bar of presentation mode: a summary slot, a "Show controls" popover, the mode toggle."""
    st.html(PRESENTATION_CSS)
    bar = st.container(horizontal=True, vertical_alignment="center", gap="medium", key="present_bar")
    summary = bar.empty()
    controls = bar.popover(_("Show controls"), icon=":material/tune:")
    bar.toggle(_("Presenting"), key="w_present", persist_state=KEEP, help=_("Off: the controls go back to the sidebar."))
    return summary, controls


def presentation_switch() -> bool:
    """Presentation mode on a page without the model's sidebar (Lessons, Seed notebooks, Real model).

    The link's ``present=1`` turns it on when the session starts here; the toggle sits in the sidebar, or
    at the top of the page while presenting (the sidebar is hidden then); the link follows the toggle.
    """
    ss = st.session_state
    if "w_present" not in ss:  # a bad value gets the sidebar's message and falls back to off, as on every page
        messages: list[str] = []
        ss.w_present = read_settings(address().to_dict(), PRESENT, {}, messages)["present"]
        ss[PRESENT_MESSAGES] = messages
    if presenting():
        st.html(PRESENTATION_CSS)
        st.toggle(_("Presenting"), key="w_present", persist_state=KEEP, help=_("Off: back to the normal layout."))
        for message in ss.pop(PRESENT_MESSAGES, []):  # once, not on every rerun in front of the class
            st.warning(_("Link: {message}").format(message=message))
    else:
        st.sidebar.toggle(
            _("Presentation mode"), key="w_present", persist_state=KEEP, help=_("For a projector: big text, no sidebar.")
        )
        for message in ss.get(PRESENT_MESSAGES, []):
            st.sidebar.warning(_("Link: {message}").format(message=message))
    if presenting():
        address()["present"] = "1"
    elif "present" in address():
        del address()["present"]
    return presenting()

