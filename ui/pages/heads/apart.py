"""Taking a run apart for the page: per-head contributions, a knock-out, norm-weighted attention.

Pure: a ``RunResult`` in, arrays and tables out (no streamlit). The maths is in
``mha_core/contributions.py``; this module names what a page shows and builds its CSV tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_core.attention import split_heads
from mha_core.config import RunResult
from mha_core.contributions import KnockOut, contribution_identity, knock_out, output_norm_weights
from mha_core.gated import gated_output_norm_weights
from mha_core.kernels import attention_kernel
from ui.charts import figures, tables
from ui.i18n import _


@dataclass(frozen=True)
class TakenApart:
    """What the 'Take it apart' section shows for one run and one set of knocked-out heads."""

    contributions: np.ndarray  # (nh, Tq, C_out) head_h @ W_O[rows of h]
    identity_gap: float  # max |output - (sum of contributions + b_O)|
    knocked: KnockOut  # output without the knocked-out heads, and its change
    carried: np.ndarray  # (nh, Tq, Tk) ||c_i weight x v_j W_O(h)||: key j's share of row i of head h's contribution


def take_apart(result: RunResult, heads_off) -> TakenApart:
    """Contributions, the identity's gap, the knock-out of ``heads_off`` and the norm-weighted weights."""
    trace, w = result.trace, result.weights
    w_o = w.w_o if result.config.output_projection else None
    b_o = w.b_o if result.config.output_projection else None
    # Each head's block of the concatenation: its output as W_O reads it (a differential head's after its RMSNorm;
    # trace.heads is before it, and Σ contributions would miss the output by ~1).
    heads = split_heads(trace.concat, trace.n_heads)  # (nh, Tq, hv)
    contributions, gap = contribution_identity(heads, w_o, b_o, trace.output)  # (nh, Tq, C_out)
    knocked = knock_out(heads, w_o, b_o, heads_off)
    gate = getattr(trace.kernel_parts, "gate", None)  # a gated head's σ(X W_θ) (nh, Tq, hv), feature by feature
    if gate is None:
        carried = output_norm_weights(trace.weights, trace.values_per_query_head(), w_o, row_scale(trace))  # (nh, Tq, Tk)
    else:
        carried = gated_output_norm_weights(trace.weights, trace.values_per_query_head(), w_o, gate)  # (nh, Tq, Tk)
    return TakenApart(contributions, gap, knocked, carried)


def row_scale(trace) -> np.ndarray | None:
    """c (nh, Tq): what the trace's kernel multiplies each row of A·V by before the concatenation; None: 1."""
    scale = attention_kernel(trace.kernel).row_scale
    return None if scale is None else scale.of(trace.kernel_parts, trace.heads)  # (nh, Tq)


def carried_kind(kernel: str) -> str:
    """The ``ui.charts.views`` record of the norm-weighted map for kernel ``kernel``: with c_i when it scales rows."""
    return "carried" if attention_kernel(kernel).row_scale is None else "carried_scaled"


def feature_labels(n: int) -> list[str]:
    """Output column names: '0', '1', ..."""
    return [str(c) for c in range(n)]


def contributions_frame(parts: TakenApart, query_labels: list[str]) -> pd.DataFrame:
    """Every head's contribution as one long table: index (head, query), one column per output feature."""
    nh, _tq, c_out = parts.contributions.shape
    titles = [f"head {h}" for h in range(nh)]
    return tables.stacked_frame(parts.contributions, titles, query_labels, feature_labels(c_out))


def change_frame(parts: TakenApart, query_labels: list[str]) -> pd.DataFrame:
    """Per token: the norm of the full output, of the knocked-out output and of the change."""
    full = parts.knocked.output - parts.knocked.change  # (Tq, C_out): the output before the knock-out
    return pd.DataFrame(
        {
            _("‖output‖"): np.linalg.norm(full, axis=-1),
            _("‖output after knock-out‖"): np.linalg.norm(parts.knocked.output, axis=-1),
            _("‖change‖"): parts.knocked.change_norm,
        },
        index=pd.Index(query_labels, name=_("query")),
    )


def change_bars(values: np.ndarray, labels: list[str], *, title: str, value_name: str) -> go.Figure:
    """One bar per token (``values`` shape (Tq,)), labelled with its position so repeated words stay apart."""
    bars = dict(
        type="bar",
        x=figures.plot_texts(labels),
        y=np.asarray(values, dtype=np.float64),
        marker=dict(color="#3b528b"),
        hovertemplate=f"{_('query')} %{{x}}<br>{value_name} %{{y:.4f}}<extra></extra>",
    )
    layout = dict(
        title=dict(text=title, font=dict(size=14)),
        height=300,
        margin=dict(l=50, r=10, t=50, b=60),
        xaxis=dict(type="category", tickangle=-45),
        yaxis=dict(title=dict(text=value_name), rangemode="tozero"),
    )
    return figures.figure([bars], layout)


# ---- a real model: how much each head puts on [CLS] and [SEP] (mha_core.sinks.special_mass) -----


def special_mass_frame(masses: dict[str, np.ndarray]) -> pd.DataFrame:
    """The (L, nh) arrays by name as one long table: one row per (layer, head)."""
    first = next(iter(masses.values()))
    index = pd.MultiIndex.from_product([range(first.shape[0]), range(first.shape[1])], names=["layer", "head"])
    return pd.DataFrame({name: m.reshape(-1) for name, m in masses.items()}, index=index)
