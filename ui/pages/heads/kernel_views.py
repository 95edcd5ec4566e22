"""A kernel's own views on Heads, under the weights, drawn by ``ui.pages.heads.kernel_sections`` for the slugs its record names (``Kernel.heads_sections``):

- ``gate_opening`` (gated attention): how far each head's gate opens per token (the mean of its gates), and per
  head the first token's weight and what it hands on with the gate off and on;
- ``sink_share`` (learned sinks): each head's sink logit and the share of every row its sink takes (1 − row sum).

Every number is the engine's (``trace.kernel_parts``); tables are built by pure functions a test reads
(``kernel_tables.py``).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from ui.i18n import _
from ui.pages.heads.downloads import download_csv
from ui.pages.heads.kernel_tables import gate_frame, head_index, opening_frame, share_frame, sink_frame
from ui.run import cached_figures
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.phone import swipe_hint


def heads_by_queries(result, matrix: np.ndarray, title: str, value_name: str, key: str) -> None:
    """A (nh, Tq) matrix of the run as a 0..1 heatmap, heads down, queries across."""
    show_chart(cached_figures.matrix_heatmap(matrix, list(head_index(matrix.shape[0])), result.query_labels,
                                             title=title, value_name=value_name, signed=False, zmin=0.0, zmax=1.0,
                                             row_name=_("head"), col_name=_("query")),
               key=key, config=chart_config())


def gate_opening_view(result) -> None:
    st.subheader(_("How far each head's gate opens"))
    parts = result.trace.kernel_parts
    heads_by_queries(result, parts.opening, _("Mean gate σ(X W_θ) per head and token"), _("mean gate"), "gate_opening")
    st.caption(_("Qwen3-Next's gate is elementwise: each head has {hv} gates per token, one per value feature; the "
                 "colour is their mean, 0 = the head hands on nothing for this token, 1 = all of A·V.").format(
        hv=parts.gate.shape[-1]))
    table = gate_frame(result)
    st.dataframe(table, key="gate_table")
    if on_phone():  # wider than the screen, and a phone shows no scroll bar
        st.caption(swipe_hint([table.index.name, *table.columns]))
    st.caption(_("The first token's weight is the same with the gate on and off: the gate acts after A·V, so the "
                 "weights never change. What changes is what the first token hands on (the mean ‖w_i0·v_0‖ over the "
                 "queries, before and after the gate). In trained models the paper finds that a head which can close "
                 "its gate no longer needs to park its weight on the first token: the attention sink goes away."))
    download_csv(_("Gate opening per head and token (CSV)"), result.config, opening_frame, "gate_opening.csv",
                 "dl_gate_opening")


def sink_share_view(result) -> None:
    st.subheader(_("What each head's sink takes"))
    heads_by_queries(result, result.trace.kernel_parts.sink_share, _("Sink share 1 − Σ_j A_ij per head and token"),
                     _("sink share"), "sink_share")
    st.caption(_("Each head has one learned logit s_h, appended to every row before the softmax and dropped after "
                 "it: the share it takes is what the row's keys do not get. A larger s_h, or a row whose logits are "
                 "all low, gives the sink more. s_h = 0 for every head is the null key."))
    st.dataframe(sink_frame(result), key="sink_table")
    download_csv(_("Sink share per head and token (CSV)"), result.config, share_frame, "sink_share.csv",
                 "dl_sink_share")
