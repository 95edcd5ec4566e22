"""MHA Explorer: the router. Configures the page and hands over to the chosen page."""

import streamlit as st

from ui.run.server import collect_garbage, tune_server
from ui.state.address import begin as begin_address
from ui.state.address import follow_arrival
from ui.state.navigation import (
    all_pages,
    note_arrival,
    page_links,
    report_unknown_page,
    request_top,
    scroll_if_requested,
)
from ui.widgets.address import send as send_address
from ui.widgets.focus import focus_ring
from ui.widgets.language import choose_language, keep_language_in_link, language_switch
from ui.widgets.page_menu import page_menu
from ui.widgets.phone import phone_page
from ui.widgets.state import keep_widget_state

st.set_page_config(page_title="MHA Explorer", page_icon=":material/search:", layout="wide")
tune_server()
focus_ring()  # a visible ring on the control the keyboard is on

try:
    begin_address()  # the address this run reads and writes: the incoming query when it is news, else the session's
    choose_language()  # first: every _() of this run (page titles too) reads the language chosen
    current = st.navigation(all_pages(), position="hidden")
    keep_widget_state(current.url_path)  # before any widget is drawn: the values Streamlit would drop
    menu = page_menu(current)  # the page links, at the top of the sidebar, above everything a page puts there
    language_switch()  # under the links, on every page
    phone_page()  # a phone: the sidebar closes after a change or a page link
    if note_arrival(current):  # a page opened (or Back/Forward): at its top, as a browser opens a page
        follow_arrival()  # an st.page_link's query is news even when it equals the last one
        request_top()
    scroll_if_requested()
    report_unknown_page()  # a link to a page that does not exist: Streamlit shows the first page, silently
    current.run()
    keep_language_in_link()  # the page may have rewritten the address bar without it
    send_address()  # the address bar follows the address (history.replaceState: no new history entry)
    if menu is not None:  # MHA_PAGE_MENU=0: Streamlit's page links, after the page, with the parameters it wrote
        page_links(menu)
finally:  # also when a page stops or reruns early
    collect_garbage()
