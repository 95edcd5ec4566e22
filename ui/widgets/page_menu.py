"""The sidebar's page menu: every page as a link, in one element (app.py draws it on every run, before the page).

Nine ``st.page_link`` elements made nine messages per run, and each carried the address bar's parameters, so all
nine changed with every run. One small component (components v2: its JavaScript runs in the page, no iframe) draws
the nine links instead, from data that changes only with the page and the language (``static/mha/page_menu.js``):

- each link is a real ``<a href>``: its address is the page's path plus the address bar's parameters, read at the
  moment it is pointed at, focused or clicked, so a new tab (Ctrl or middle click) gets the settings too;
- a plain left click opens the page inside the app as the browser's Back/Forward does in Streamlit 1.67: it
  pushes the new address (one history entry) and sends a ``popstate``, on which Streamlit runs the page the
  address names with the address's parameters, as a history navigation: the page arrives
  (``ui.state.navigation.note_arrival``) and follows the address bar, just as after Back;
- the current page is marked (``aria-current="page"``, and bold on a tinted row as in Streamlit's menu); the
  titles are in the run's language; the menu is a ``<nav>`` named for screen readers.

``MHA_PAGE_MENU=0`` draws Streamlit's ``st.page_link``s instead (after the page, as before): a way back, and the
"before" of a side-by-side measurement.
"""

from __future__ import annotations

import os

import streamlit as st

from ui.i18n import _
from ui.state.navigation import all_pages
from ui.state.page_table import PAGES
from ui.widgets.live import drop_state_presenter
from ui.widgets.served import loader

COMPONENT = os.environ.get("MHA_PAGE_MENU", "1") != "0"

_HTML = '<nav class="mha-pages" data-testid="mhaPageMenu"></nav>'
# Streamlit's sidebar page links, measured in Chromium: 28 px rows every 36 px, 8 px padding and gap, rounded 8 px,
# a 16 px icon and 14 px text; the current row tinted and bold, a row under the pointer tinted darker.
_CSS = """
.mha-pages { display: flex; flex-direction: column; margin: -0.5rem 0; }
.mha-pages a { display: flex; align-items: center; gap: 0.5rem; height: 1.75rem; margin: 0.25rem 0; padding: 0 0.5rem;
               border-radius: 0.5rem; color: var(--st-text-color, inherit); text-decoration: none; font-size: 0.875rem;
               line-height: 1.75rem; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.mha-pages a:hover { background: rgba(151, 166, 195, 0.25); }
.mha-pages a[aria-current="page"] { background: rgba(151, 166, 195, 0.15); font-weight: 600; }
.mha-pages a[aria-current="page"]:hover { background: rgba(151, 166, 195, 0.25); }
.mha-pages-icon { font-family: "Material Symbols Rounded"; font-size: 1rem; line-height: 1; width: 1rem; font-weight: 400;
                  font-feature-settings: "liga"; -webkit-font-smoothing: antialiased; user-select: none; flex: none; }
"""


def compact(text: str) -> str:
    """Code without its whole-line comments, indentation and blank lines: what an element carries inline travels
    with every run's message (a stylesheet, the address element's few lines; the larger modules are served instead,
    ui/widgets/served.py)."""
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))



_component = st.components.v2.component("mha_page_menu", html=_HTML, css=compact(_CSS), js=loader("page_menu.js"),
                                        isolate_styles=False)


def icon_name(icon: str) -> str:
    """A Material Symbol's name from Streamlit's spelling ``:material/<name>:``."""
    return icon.removeprefix(":material/").removesuffix(":")


def menu_data(current: st.Page) -> dict:
    """What the menu draws: each page's URL path, title (in the run's language) and icon, and the page shown."""
    pages = [{"path": page.url_path, "title": _(info.title), "icon": icon_name(info.icon)}
             for info, page in zip(PAGES, all_pages(), strict=True)]
    return {"pages": pages, "current": current.url_path, "label": _("Pages")}


def page_menu(current: st.Page):
    """Draw the page menu in the sidebar (one element; see the module's docstring).

    Returns None; with ``MHA_PAGE_MENU=0`` the sidebar container where app.py draws ``st.page_link``s after the page.
    """
    if not COMPONENT:
        return st.sidebar.container()
    with st.sidebar:
        _component(key="page_menu", data=menu_data(current))
    drop_state_presenter("page_menu")  # its state is never read; presenting it cost every selectbox (live.py)
    return None
