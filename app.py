"""MHA Explorer: the router. Configures the page and hands over to the chosen page."""

import streamlit as st

from ui.controls import keep_widget_state
from ui.server import tune_server

st.set_page_config(page_title="MHA Explorer", page_icon="🔍", layout="wide")
tune_server()
keep_widget_state()

pages = [
    st.Page("app_pages/heads.py", title="Heads", icon="🟪", default=True),
    st.Page("app_pages/step_by_step.py", title="Step by step", icon="🪜"),
    st.Page("app_pages/lessons.py", title="Lessons", icon="🎓"),
    st.Page("app_pages/seeds.py", title="Seed notebooks", icon="📓"),
    st.Page("app_pages/real_model.py", title="Real model", icon="🤖"),
    st.Page("app_pages/about.py", title="About", icon="ℹ️"),
]
st.navigation(pages).run()
