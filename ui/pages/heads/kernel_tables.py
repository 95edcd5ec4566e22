"""The tables of a kernel's own views on Heads (``kernel_views.py``) and of the static pack's copies of them: pure
builders from the engine's ``trace.kernel_parts``, no streamlit, so the pack and the tests read them too."""

from __future__ import annotations

import pandas as pd

from mha_core.gated import first_token_delivery
from ui.charts import tables
from ui.i18n import _


def head_index(n_heads: int) -> pd.Index:
    return pd.Index([_("head {h}").format(h=h) for h in range(n_heads)], name="head")


def gate_frame(result) -> pd.DataFrame:
    """Per head: the mean gate, the mean weight on the first token, and the mean ‖w_i0 v_0‖ with the gate off and on."""
    trace = result.trace
    share, off, on = first_token_delivery(trace.weights, trace.values_per_query_head(), trace.kernel_parts.gate)
    return pd.DataFrame({_("mean gate"): trace.kernel_parts.opening.mean(axis=-1), _("weight on first token"): share,
                         _("first token hands on, gate off"): off, _("first token hands on, gate on"): on},
                        index=head_index(trace.n_heads))


def opening_frame(result) -> pd.DataFrame:
    """How far each head's gate opens for each query token (heads × queries)."""
    opening = result.trace.kernel_parts.opening  # (nh, Tq)
    return tables.matrix_frame(opening, list(head_index(opening.shape[0])), result.query_labels)


def sink_frame(result) -> pd.DataFrame:
    """Per head: its sink logit s_h and the share of a row its sink takes (mean, smallest, largest)."""
    parts = result.trace.kernel_parts
    share = parts.sink_share  # (nh, Tq)
    return pd.DataFrame({"s_h": parts.sinks, _("mean sink share"): share.mean(axis=-1),
                         _("smallest"): share.min(axis=-1), _("largest"): share.max(axis=-1)},
                        index=head_index(share.shape[0]))


def share_frame(result) -> pd.DataFrame:
    """The sink's share of every row (heads × queries): 1 − Σ_j A_ij."""
    share = result.trace.kernel_parts.sink_share  # (nh, Tq)
    return tables.matrix_frame(share, list(head_index(share.shape[0])), result.query_labels)
