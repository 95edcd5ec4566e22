"""What a phone's page needs on every run (app.py calls :func:`phone_page`): the sidebar closes after each
change, a formula wider than the screen says that it scrolls, and a table leaves room above it for its toolbar.

On a phone the sidebar covers about three quarters of the screen and Streamlit leaves it open after a
control changes or a page link is followed, so the student never sees the figure change (issue 23). A
tiny component (components v2: its JavaScript runs in the page, no iframe) clicks Streamlit's own
"Collapse sidebar" button whenever the app runs again; every run of the whole app starts from the
sidebar (a control or a page link there) or from the main area, where the sidebar is closed already.
Fragment reruns (a quiz's "Next question") do not run app.py and leave the sidebar as it is.
Desktops never get the component: there the sidebar stays open.
"""

from __future__ import annotations

import streamlit as st

from ui.i18n import _
from ui.state.device import on_phone

RUNS = "phone_runs"  # session state: how many times the app has run in this session (not a w_ widget key)

# Called on mount and whenever ``data`` changes, i.e. on every run of the app (the run number is the data).
_CLOSE_SIDEBAR_JS = """
export default function () {
  const sidebar = document.querySelector('[data-testid="stSidebar"]');
  if (!sidebar || sidebar.getAttribute("data-collapsed") !== "false") return;  // closed already
  const button = document.querySelector('[data-testid="stSidebarCollapseButton"] button');
  if (button) button.click();
}
"""

_close_sidebar = st.components.v2.component("mha_phone_sidebar", html="<span></span>", js=_CLOSE_SIDEBAR_JS)

# A formula wider than a phone scrolls sideways in its own box (KaTeX's display box, overflow-x: auto),
# which a phone shows with no scroll bar: the formula looked cut off. Where the box can scroll, its
# far edge fades out, and the near edge once scrolled; a box that fits keeps no fade. The fade follows
# the box's own scroll position (a scroll-driven animation: Chromium 115+, Safari 26+; elsewhere no fade).
PHONE_CSS = """
<style>
@keyframes mha-formula-fade {
  from { mask-image: linear-gradient(to right, #000 calc(100% - 2.5rem), transparent); }
  2%, 98% { mask-image: linear-gradient(to right, transparent, #000 2.5rem, #000 calc(100% - 2.5rem), transparent); }
  to { mask-image: linear-gradient(to right, transparent, #000 2.5rem); }
}
/* KaTeX draws its last subscript or fraction 2 px past the end of the formula's box (a negative margin):
   without room for it every formula would scroll by 2 px, and fade. */
[data-testid="stMain"] .katex-display > .katex { padding-right: 2px; }
/* The sidebar-closing component draws nothing: no gap for it among the sidebar's controls. */
[data-testid="stSidebar"] .st-key-phone_sidebar { display: none; }
/* A touch screen shows a table's toolbar (columns, download, search, full screen) at all times, in the 2.75rem above
   the table's top edge: room for it there, or it covers the end of the words above the table. */
[data-testid="stMain"] [data-testid="stElementContainer"]:has(> [data-testid="stFullScreenFrame"] > .stDataFrame) {
  margin-top: 2.75rem;
}
[data-testid="stMain"] .katex-display {
  overflow-x: auto;
  animation: mha-formula-fade linear both;
  animation-timeline: scroll(self x);
}
</style>
"""


def swipe_hint(columns) -> str:
    """What a table wider than a phone says above it: a table scrolls sideways on a phone with no scroll bar, so
    its far columns looked cut off. Names every column (the index first), so the reader knows what is there."""
    names = [str(name) for name in columns]
    return "↔ " + _("Swipe the table sideways for all its {n} columns: {names}.").format(
        n=len(names), names=", ".join(names))


def phone_page() -> None:
    """On a phone: close the sidebar on this run (after a change or a page link) and style wide formulas."""
    if not on_phone():
        return
    ss = st.session_state
    ss[RUNS] = ss.get(RUNS, 0) + 1
    st.html(PHONE_CSS)
    with st.sidebar:
        _close_sidebar(key="phone_sidebar", data=ss[RUNS], height=0)
