"""The Real model page's overview: every layer x head of a real model at a glance, block-maximum pooled
when the sentence is long (payload), as one figure. Pure builders; no streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha_core.inputs import token_labels
from ui.charts.describe import PATTERNS, head_pattern
from ui.charts.figures import WEIGHT_SCALE, figure
from ui.i18n import _, listing

OVERVIEW_MAX_CELLS = 32  # each overview panel shows at most this many rows and columns
GRID_MAX_CELLS = 64  # the all-heads grid is exact up to this many pieces; longer, 2x2 block maxima (payload)


# ---- the layers x heads overview -----------------------------------------------------------


def pool_block(n_tokens: int, max_cells: int = OVERVIEW_MAX_CELLS) -> int:
    """The side of the squares ``max_pool`` takes maxima over: 1 up to ``max_cells`` pieces, then just enough."""
    return max(1, -(-n_tokens // max_cells))


def max_pool(attentions: np.ndarray, max_cells: int = OVERVIEW_MAX_CELLS) -> tuple[np.ndarray, int]:
    """Shrink (L, nh, T, T) to at most ``max_cells`` rows and columns per head by block maxima.

    Each output cell is the largest weight of a ``block`` x ``block`` square (the last blocks may
    be cut short), so a sharp head stays sharp. Returns the pooled (L, nh, P, P) float32 and block.
    """
    n_layers, n_heads, t, _keys = attentions.shape
    block = pool_block(t, max_cells)
    cells = -(-t // block)  # P
    padded = np.zeros((n_layers, n_heads, cells * block, cells * block), dtype=np.float32)  # (L, nh, P*b, P*b)
    padded[:, :, :t, :t] = attentions  # weights are >= 0, so zero padding never wins a maximum
    blocks = padded.reshape(n_layers, n_heads, cells, block, cells, block)  # (L, nh, P, b, P, b)
    return blocks.max(axis=(3, 5)), block  # (L, nh, P, P)


def block_labels(tokens, block: int) -> list[str]:
    """One label per block of ``block`` pieces, its positions and pieces: ``['0-1:[CLS] the', ..., '6:[SEP]']``.

    With ``block`` = 1 these are the usual ``token_labels``; a last block cut short names what it holds.
    """
    labels = []
    for start in range(0, len(tokens), block):
        stop = min(start + block, len(tokens))
        span = f"{start}" if stop - start == 1 else f"{start}-{stop - 1}"
        labels.append(f"{span}:{' '.join(tokens[start:stop])}")
    return labels


def grid_matrices(weights: np.ndarray, tokens, max_cells: int = GRID_MAX_CELLS) -> tuple[np.ndarray, list[str], int]:
    """One layer's (nh, T, T) weights as the all-heads grid shows them, with their labels and the block size.

    Up to ``max_cells`` pieces the weights themselves (block 1, ``token_labels``); longer, each
    cell is the largest weight of a block x block square (``max_pool``), labelled by ``block_labels``.
    """
    if weights.shape[-1] <= max_cells:
        return weights, token_labels(tokens), 1
    pooled, block = max_pool(weights[None], max_cells)  # (1, nh, P, P)
    return pooled[0], block_labels(tokens, block), block  # (nh, P, P)


def overview_figure(
    attentions: np.ndarray, *, max_cells: int = OVERVIEW_MAX_CELLS, panel_px: int = 56, font_size: int = 12
) -> go.Figure:
    """Every head of every layer as a small heatmap, layers down and heads across, on one 0..1 colour scale.

    All panels sit on one pair of axes (one trace each, offset by its position), which keeps the
    figure light: no per-panel axes. Query 0 is at the top of each panel, key 0 on its left.
    """
    pooled, block = max_pool(attentions, max_cells)
    n_layers, n_heads, cells, _cells = pooled.shape
    gap = max(1.0, cells / 8)
    step = cells + gap
    what = _("weight") if block == 1 else _("largest weight of a {block}×{block} block").format(block=block)
    data = [
        dict(
            type="heatmap", z=pooled[layer, head], x0=head * step, dx=1, y0=layer * step, dy=1, coloraxis="coloraxis",
            hovertemplate=_("layer {layer}, head {head}").format(layer=layer, head=head)
            + f"<br>{what} %{{z:.2f}}<extra></extra>",
        )
        for layer in range(n_layers)
        for head in range(n_heads)
    ]
    centres_x = [h * step + (cells - 1) / 2 for h in range(n_heads)]
    centres_y = [layer * step + (cells - 1) / 2 for layer in range(n_layers)]
    axis = dict(showgrid=False, zeroline=False, tickmode="array", ticks="", tickfont=dict(size=font_size))
    layout = dict(
        xaxis=dict(
            axis,
            side="top",
            tickvals=centres_x,
            ticktext=[_("head {head}").format(head=h) for h in range(n_heads)],
            range=[-0.5 - gap / 2, n_heads * step - gap / 2 - 0.5],
            constrain="domain",
        ),
        yaxis=dict(
            axis,
            tickvals=centres_y,
            ticktext=[_("layer {layer}").format(layer=layer) for layer in range(n_layers)],
            range=[n_layers * step - gap / 2 - 0.5, -0.5 - gap / 2],  # reversed: layer 0 and query 0 on top
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
        ),
        coloraxis=dict(
            colorscale=WEIGHT_SCALE,
            cmin=0.0,
            cmax=1.0,
            colorbar=dict(title=dict(text=_("weight"), side="right"), thickness=14, tickfont=dict(size=font_size)),
        ),
        height=int(n_layers * panel_px * step / cells + 70),
        margin=dict(l=10, r=10, t=40, b=10, pad=0),
        font=dict(size=font_size),
        plot_bgcolor="rgba(0, 0, 0, 0)",
    )
    return figure(data, layout)


def overview_sentence(attentions: np.ndarray, *, max_cells: int = OVERVIEW_MAX_CELLS) -> str:
    """``overview_figure`` in words (its alt), from the pooled panels it draws: how many heads follow each
    pattern of ``ui.charts.describe.PATTERNS`` (most rows' strongest key), and how many follow none."""
    pooled, block = max_pool(attentions, max_cells)  # (L, nh, P, P)
    n_layers, n_heads, cells, _cells = pooled.shape
    n = n_layers * n_heads
    unmasked = np.zeros((cells, cells), dtype=bool)  # (P, P) a causal head's upper cells weigh 0: never the top
    found = [head_pattern(panel, unmasked, self_attention=True) for panel in pooled.reshape(n, cells, cells)]
    counts = {p.name: sum(f is not None and f.pattern is p for f in found) for p in PATTERNS}
    habits = [_("{place} {n}").format(place=_(p.place), n=counts[p.name]) for p in PATTERNS if counts[p.name]]
    cell = _("a piece") if block == 1 else _("the largest weight of {block}×{block} pieces").format(block=block)
    habits.append(_("no single place {n}").format(n=n - sum(counts.values())))
    return _("Every head of {layers} layers by {heads} heads as a small heatmap of {cells} by {cells} cells "
             "(a cell = {cell}), layers down and heads across. Heads by where most of their rows look: "
             "{habits}.").format(layers=n_layers, heads=n_heads, cells=cells, cell=cell, habits=listing(habits))
