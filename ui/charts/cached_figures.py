"""The figure builders behind a cache: one built figure per configuration, shared by every session.

The builders in ``ui.charts.figures`` and ``ui.pipeline.steps`` stay pure; the pages call these wrappers. A rerun whose
configuration did not change gets the very figure object it got before, so ``st.plotly_chart``
serialises byte-identical JSON; Streamlit hashes each element message (``populate_hash_if_needed``
in ``streamlit/runtime/forward_msg_cache.py``) and, for one the browser already holds, sends only a
reference to its hash instead of the figure.

Why ``st.cache_resource`` and not ``st.cache_data``: ``cache_data`` returns an unpickled copy on every
hit, and unpickling a plotly Figure re-validates it (measured: 14 ms against 4 ms to build a small
step panel), so it would cost more than it saves. The cached figures are read-only by contract:
``st.plotly_chart`` sends the dictionary a figure hands out (``ui.charts.sent.SentFigure.to_dict``, made
once and not copied), and no page changes a figure after it is returned.
"""

from __future__ import annotations

import streamlit as st

from ui.charts import figures
from ui.pipeline import panels as panel_figures
from ui.pipeline.records import Panel

# Bounds: Step by step draws ~17 panels per configuration (as 11 charts) and Heads 4 figures; 256 panels keep
# ~15 configurations of each page warm. A panel at the caps (64 tokens x 512 features, float32) is
# about 0.2 MB as a figure, an attention grid at the caps (16 heads of 64 x 64) about 0.4 MB, so the
# worst case stays near 50 MB + 13 MB on a 690 MB host.
MAX_PANELS = 256
MAX_FIGURES = 32


@st.cache_resource(max_entries=MAX_PANELS, show_spinner=False)
def panel_figure(panel: Panel, *, font_size: int, width_px: float):
    """``ui.pipeline.panels.panel_figure``, cached per panel, font size and width."""
    return panel_figures.panel_figure(panel, font_size=font_size, width_px=width_px)


@st.cache_resource(max_entries=MAX_PANELS // 3, show_spinner=False)
def panels_figure(panels: tuple[Panel, ...], *, font_size: int, width_px: float):
    """``ui.pipeline.panels.panels_figure`` (a row of panels as one chart), cached per panels, font size and width."""
    return panel_figures.panels_figure(panels, font_size=font_size, width_px=width_px)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def attention_grid(matrices, query_labels, key_labels, **options):
    """``ui.charts.figures.attention_grid``, cached per matrices, labels and options."""
    return figures.attention_grid(matrices, query_labels, key_labels, **options)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def matrix_heatmap(matrix, row_labels, col_labels, **options):
    """``ui.charts.figures.matrix_heatmap``, cached."""
    return figures.matrix_heatmap(matrix, row_labels, col_labels, **options)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def concat_heatmap(concat, query_labels, n_heads: int):
    """``ui.charts.figures.concat_heatmap``, cached."""
    return figures.concat_heatmap(concat, query_labels, n_heads)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def similarity_heatmap(similarity):
    """``ui.charts.figures.similarity_heatmap``, cached."""
    return figures.similarity_heatmap(similarity)
