"""Pure builders for "Head roles, with honest scores" on either model's view (the scores: mha_core/head_roles.py).

A table of the roles (definition, how many heads have each, the example head), the distribution of every role's
score over all heads with the threshold, and the sentence that says how many heads have no clear role. A model's
roles are its table (``ROLES`` for SmolLM2, ``ENCODER_ROLES`` for MiniLM): ``scores`` are keyed like it.
No streamlit in here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_core.head_roles import NO_ROLE, ROLES, Role
from ui.charts.figures import plot_texts
from ui.charts.sent import figure
from ui.i18n import _

POINT_COLOUR = "#3b528b"  # viridis' blue, as the app's line and bar charts
THRESHOLD_COLOUR = "#b5367a"
LESSONS = {"first": "sinks", "cls": "sinks", "sep": "sinks", "induction": "induction_ablation"}  # role -> lesson


def roles_frame(scores: dict[str, np.ndarray], roles: np.ndarray, table: dict[str, Role] = ROLES) -> pd.DataFrame:
    """One row per role: its name, how many heads have it, its example head (highest score) and that score; a last
    row for the heads with no clear role, which has no example head and no score (None/NaN: the page prints ``ui.charts.numbers.EMPTY_CELL``)."""
    rows = []
    for key, role in table.items():
        table = scores[key]  # (L, nh)
        layer, head = np.unravel_index(int(np.argmax(table)), table.shape)
        rows.append({"role": _(role.name), "heads": int((roles == key).sum()), "example": f"{layer}.{head}",
                     "its score": float(table[layer, head]), "median over heads": float(np.median(table))})
    rows.append({"role": _(NO_ROLE), "heads": int((roles == "").sum()), "example": None, "its score": np.nan,
                 "median over heads": np.nan})  # no example head, no score
    return pd.DataFrame(rows)


def example_head(scores: dict[str, np.ndarray], key: str) -> tuple[int, int]:
    """The head with the highest score for role ``key``: (layer, head)."""
    layer, head = np.unravel_index(int(np.argmax(scores[key])), scores[key].shape)
    return int(layer), int(head)


def distribution_figure(scores: dict[str, np.ndarray], threshold: float, uniform: dict[str, float],
                        table: dict[str, Role] = ROLES):
    """Every head's score for every role as points (one column per role, hover: layer and head), the threshold as
    a line and a spread-evenly head's score as a cross; and the same in words (its alt)."""
    names = plot_texts([_(role.name) for role in table.values()])
    traces = []
    for name, key in zip(names, table, strict=True):
        values = scores[key]  # (L, nh)
        layers, heads = np.indices(values.shape)
        traces.append(dict(type="box", y=values.ravel().astype(np.float32), name=name, boxpoints="all", jitter=0.6,
                           pointpos=0, fillcolor="rgba(0,0,0,0)", line=dict(color="rgba(0,0,0,0.35)"),
                           marker=dict(color=POINT_COLOUR, size=4, opacity=0.6), showlegend=False,
                           customdata=np.stack([layers.ravel(), heads.ravel()], axis=1),
                           hovertemplate=_("layer {layer}, head {head}").format(layer="%{customdata[0]}",
                                                                                head="%{customdata[1]}")
                           + "<br>%{y:.3f}<extra></extra>"))
    traces.append(dict(type="scatter", mode="markers", x=names, y=[uniform[key] for key in table],
                       marker=dict(symbol="x", size=10, color="black"), name=_("a head spreading its weight evenly"),
                       hovertemplate="%{y:.3f}<extra></extra>"))
    layout = dict(height=380, margin=dict(l=60, r=10, t=20, b=40),
                  yaxis=dict(title=dict(text=_("score")), range=[0, 1.02]),
                  legend=dict(orientation="h", y=-0.15),
                  shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=threshold, y1=threshold,
                               line=dict(color=THRESHOLD_COLOUR, dash="dash"))],
                  annotations=[dict(xref="paper", x=1, y=threshold, xanchor="right", yanchor="bottom", showarrow=False,
                                    text=_("threshold {threshold}").format(threshold=threshold),
                                    font=dict(color=THRESHOLD_COLOUR))])
    counts = [int((scores[key] >= threshold).sum()) for key in table]
    alt = _("Points: every head's score for each of {n} roles, 0 to 1, with a dashed line at the threshold "
            "{threshold}. Heads at or above it: {counts}.").format(
        n=len(table), threshold=threshold,
        counts="; ".join(f"{_(role.name)} {count}" for role, count in zip(table.values(), counts, strict=True)))
    return figure(traces, layout), alt
