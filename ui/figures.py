"""Pure figure builders: arrays + labels in, a plotly Figure out. No streamlit in here.

Token labels carry their position ("0:the", "4:the") because plotly merges repeated
category labels. Matrices are sent as float32 (half the bytes of float64, the same picture).
Masked logits (-inf) are sent as NaN, which plotly leaves blank.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

# Colour scales that survive colour blindness: sequential for weights, diverging for signed values.
WEIGHT_SCALE = "Viridis"
SIGNED_SCALE = "RdBu_r"

KIND_LABELS = {"weights": "weight", "logits": "scaled, masked logit", "scores": "raw score q·k"}


def for_plotly(matrix: np.ndarray) -> np.ndarray:
    """float32 copy with +-inf turned into NaN (drawn blank)."""
    out = np.asarray(matrix, dtype=np.float32).copy()
    out[~np.isfinite(out)] = np.nan
    return out


def signed_range(matrix: np.ndarray) -> float:
    """Half-width of a colour range centred on 0 that covers every finite value (at least 1e-9)."""
    finite = np.asarray(matrix)[np.isfinite(matrix)]
    return float(max(np.abs(finite).max(), 1e-9)) if finite.size else 1.0


def _grid_shape(n_panels: int, max_cols: int) -> tuple[int, int]:
    cols = min(n_panels, max_cols)
    return -(-n_panels // cols), cols


def attention_grid(
    matrices: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    *,
    kind: str = "weights",
    titles: list[str] | None = None,
    max_cols: int = 4,
    panel_px: int = 260,
) -> go.Figure:
    """One heatmap per head, all on one shared colour axis. ``matrices`` has shape (nh, Tq, Tk).

    kind = "weights": fixed 0..1 sequential scale so heads are comparable; "logits"/"scores":
    a diverging scale centred on 0 over all heads, masked cells blank.
    """
    n = matrices.shape[0]
    rows, cols = _grid_shape(n, max_cols)
    titles = titles or [f"head {h}" for h in range(n)]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.1 / rows + 0.04)
    z_all = for_plotly(matrices)
    what = KIND_LABELS.get(kind, kind)
    for h in range(n):
        fig.add_trace(
            go.Heatmap(
                z=z_all[h],
                x=key_labels,
                y=query_labels,
                coloraxis="coloraxis",
                hovertemplate=f"query %{{y}}<br>key %{{x}}<br>{what} %{{z:.4f}}<extra>{titles[h]}</extra>",
            ),
            row=h // cols + 1,
            col=h % cols + 1,
        )
    if kind == "weights":
        coloraxis = dict(colorscale=WEIGHT_SCALE, cmin=0.0, cmax=1.0, colorbar=dict(title=dict(text=what)))
    else:
        bound = signed_range(matrices)
        coloraxis = dict(colorscale=SIGNED_SCALE, cmin=-bound, cmax=bound, cmid=0.0, colorbar=dict(title=dict(text=what)))
    fig.update_layout(
        coloraxis=coloraxis,
        height=rows * panel_px + 60,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    fig.update_yaxes(autorange="reversed", type="category", title_text=None)
    fig.update_xaxes(type="category", tickangle=-45, title_text=None)
    return fig


def matrix_heatmap(
    matrix: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    *,
    title: str = "",
    value_name: str = "value",
    signed: bool = True,
    zmin: float | None = None,
    zmax: float | None = None,
    height: int | None = None,
) -> go.Figure:
    """A single labelled heatmap of a (R, C) matrix; diverging and centred on 0 when ``signed``."""
    z = for_plotly(matrix)
    if signed:
        bound = signed_range(matrix)
        zmin, zmax, scale = -bound, bound, SIGNED_SCALE
    else:
        scale = WEIGHT_SCALE
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=col_labels,
            y=row_labels,
            zmin=zmin,
            zmax=zmax,
            colorscale=scale,
            hovertemplate=f"row %{{y}}<br>column %{{x}}<br>{value_name} %{{z:.4f}}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title),
        height=height or max(220, 28 * len(row_labels) + 120),
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", tickangle=-45)
    return fig
