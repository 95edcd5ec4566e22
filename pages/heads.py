"""Heads: every head's attention at once."""

import streamlit as st

from ui.compute import compute
from ui.controls import sidebar
from ui.figures import attention_grid

config = sidebar()
st.title("Heads")
result = compute(config)
if result is not None:
    trace = result.trace
    st.plotly_chart(attention_grid(trace.weights, result.query_labels, result.key_labels), key="heads_grid")
