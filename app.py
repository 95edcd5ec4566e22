"""MHA Explorer: the router. Configures the page and hands over to the chosen page."""

import streamlit as st

from ui.controls import keep_widget_state
from ui.navigation import all_pages
from ui.server import tune_server

st.set_page_config(page_title="MHA Explorer", page_icon="🔍", layout="wide")
tune_server()
keep_widget_state()

st.navigation(all_pages()).run()
