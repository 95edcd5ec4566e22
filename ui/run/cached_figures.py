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

A figure's words (axis titles, colour bars, hover words) are written in the language of the run that built it, so
the language is part of every key (``digest``): a figure built in Spanish is never served to a reader in Chinese.
"""

from __future__ import annotations

import hashlib
import pickle

import streamlit as st

from ui.charts import figure_rows, figures
from ui.i18n import current_language
from ui.pipeline import panel_rows
from ui.pipeline import panels as panel_figures
from ui.pipeline.records import Panel
from ui.run.compute import MAX_RESULTS

# Bounds, in configurations: the figures of as many configurations as ui/run/compute.py keeps results for.
# Per configuration Step by step draws 8 single panels and 3 rows of panels (11 charts), Decoding 9 and 1,
# Heads one figure of each kind below. A cached figure holds its float32 arrays and its JSON
# (ui/widgets/live.py). At the caps (64 tokens, d_model 512, 16 heads) a panel is up to 0.3 MB, a row of
# panels 0.9 MB, an attention grid 0.6 MB; Heads and Step by step together 3.9 MB per configuration, 47 MB
# for 12; every entry of all six caches at its largest, 77 MB (tests/test_memory_bounded.py measures both).
# Issue 38: 256 panels, 85 rows and 32 of each figure, each holding a third copy of its arrays, let 48 Step by
# step pages at the caps keep ~140 MB of figures, the server growing 4.3 MB per page until page ~35.
CONFIGURATIONS_KEPT = MAX_RESULTS
MAX_PANELS = 8 * CONFIGURATIONS_KEPT
MAX_PANEL_ROWS = 3 * CONFIGURATIONS_KEPT
MAX_FIGURES = CONFIGURATIONS_KEPT
# Issue 38: Step by step draws a step, or a run of steps, as one figure of rows of panels: 5 per configuration with
# the default options (Q, K, V; heads; scores to mask; A·V and concat; W_O), a 6th and 7th with positions or a
# kernel's own steps (those evict older configurations' figures). Its embeddings and weights stay single panels.
MAX_STEP_ROWS = 5 * CONFIGURATIONS_KEPT


def digest(*parts) -> str:
    """A cache key for figure inputs and the run's language: the md5 of their pickle (numpy arrays, labels,
    dataclasses; made in C). The builders write their words in the current language, so it is part of the key.

    Streamlit's own argument hasher walks every list, label and dataclass field in Python: on Step by step it
    took ~6 ms of a ~50 ms rerun (py-spy, ``_make_value_key``) for ~17 panels, all of them misses after a
    Seed +. Equal inputs pickle to equal bytes (a false miss at worst, never a wrong hit). The run's language is
    part of the key: a builder that translates its titles (``_()``) must not answer one language with another's."""
    keyed = (current_language(), *parts)
    return hashlib.md5(pickle.dumps(keyed, protocol=pickle.HIGHEST_PROTOCOL), usedforsecurity=False).hexdigest()


def panel_figure(panel: Panel, *, font_size: int, width_px: float, numbers: bool = True):
    """``ui.pipeline.panels.panel_figure``, cached per panel, font size, width and numbers."""
    return _panel_figure(digest(panel, font_size, width_px, numbers), panel, font_size=font_size, width_px=width_px,
                         numbers=numbers)


def panels_figure(panels: tuple[Panel, ...], *, font_size: int, width_px: float, numbers: bool = True):
    """``ui.pipeline.panels.panels_figure`` (a row of panels as one chart), cached per panels, font size, width and
    numbers."""
    return _panels_figure(digest(panels, font_size, width_px, numbers), panels, font_size=font_size,
                          width_px=width_px, numbers=numbers)


def panel_rows_figure(rows: tuple[tuple[Panel, ...], ...], *, font_size: int, width_px: float, numbers: bool):
    """``ui.pipeline.panel_rows.panel_rows_figure`` (rows of step panels as one chart), cached per rows, font size,
    width and numbers."""
    return _panel_rows_figure(digest(rows, font_size, width_px, numbers), rows, font_size=font_size,
                              width_px=width_px, numbers=numbers)


def attention_grid(matrices, query_labels, key_labels, **options):
    """``ui.charts.figures.attention_grid``, cached per matrices, labels and options."""
    return _attention_grid(digest(matrices, query_labels, key_labels, options), matrices, query_labels, key_labels,
                           options)


def matrix_heatmap(matrix, row_labels, col_labels, **options):
    """``ui.charts.figures.matrix_heatmap``, cached."""
    return _matrix_heatmap(digest(matrix, row_labels, col_labels, options), matrix, row_labels, col_labels, options)


def concat_and_output(concat, query_labels, n_heads: int, output=None, **options):
    """``ui.charts.figure_rows.concat_and_output`` (the concatenation and the output after W_O, one figure), cached."""
    return _concat_and_output(digest(concat, query_labels, n_heads, output, options), concat, query_labels, n_heads,
                              output, options)


def similarity_heatmap(similarity):
    """``ui.charts.figures.similarity_heatmap``, cached."""
    return _similarity_heatmap(digest(similarity), similarity)


# The caches themselves, keyed on the digest alone (Streamlit does not hash arguments whose name starts with "_").


@st.cache_resource(max_entries=MAX_PANELS, show_spinner=False)
def _panel_figure(key: str, _panel: Panel, *, font_size: int, width_px: float, numbers: bool):
    return panel_figures.panel_figure(_panel, font_size=font_size, width_px=width_px, numbers=numbers)


@st.cache_resource(max_entries=MAX_PANEL_ROWS, show_spinner=False)
def _panels_figure(key: str, _panels: tuple[Panel, ...], *, font_size: int, width_px: float, numbers: bool):
    return panel_figures.panels_figure(_panels, font_size=font_size, width_px=width_px, numbers=numbers)


@st.cache_resource(max_entries=MAX_STEP_ROWS, show_spinner=False)
def _panel_rows_figure(key: str, _rows, *, font_size: int, width_px: float, numbers: bool):
    return panel_rows.panel_rows_figure(_rows, font_size=font_size, width_px=width_px, numbers=numbers)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def _attention_grid(key: str, _matrices, _query_labels, _key_labels, _options: dict):
    return figures.attention_grid(_matrices, _query_labels, _key_labels, **_options)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def _matrix_heatmap(key: str, _matrix, _row_labels, _col_labels, _options: dict):
    return figures.matrix_heatmap(_matrix, _row_labels, _col_labels, **_options)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def _concat_and_output(key: str, _concat, _query_labels, _n_heads: int, _output, _options: dict):
    return figure_rows.concat_and_output(_concat, _query_labels, _n_heads, _output, **_options)


@st.cache_resource(max_entries=MAX_FIGURES, show_spinner=False)
def _similarity_heatmap(key: str, _similarity):
    return figures.similarity_heatmap(_similarity)
