"""MHA Explorer: the router. Configures the page and hands over to the chosen page."""

import streamlit as st

from ui.run.server import collect_garbage, tune_server
from ui.state.navigation import all_pages, page_links, scroll_if_requested
from ui.widgets.focus import focus_ring
from ui.widgets.phone import phone_page
from ui.widgets.state import keep_widget_state

st.set_page_config(page_title="MHA Explorer", page_icon="🔍", layout="wide")
tune_server()
keep_widget_state()
scroll_if_requested()
focus_ring()  # a visible ring on the control the keyboard is on

menu = st.sidebar.container()  # the page links, above everything a page puts in the sidebar
phone_page()  # a phone: the sidebar closes after a change or a page link
try:
    st.navigation(all_pages(), position="hidden").run()
    page_links(menu)  # after the page: its links carry the parameters the page has just written
finally:  # also when a page stops or reruns early
    collect_garbage()
