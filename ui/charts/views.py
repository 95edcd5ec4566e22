"""The matrices a heatmap of attention can show, one record each: the Heads page's switch, its link
value (``view=``), its caption and the figure's colour scale and labels all read ``MATRIX_VIEWS``.

A new view is one row here: the switch offers it, a link carries it, and the figure names its
values and picks its scale from the row. Pure data: no streamlit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.attention import AttentionTrace
from ui.state.records import RecordLabels

SEQUENTIAL = "sequential"  # 0..top, viridis: weights
DIVERGING = "diverging"  # centred on 0, red above and blue below: signed values


@dataclass(frozen=True)
class MatrixView:
    """One kind of (n, Tq, Tk) attention matrix: how it is taken from a trace, named and coloured."""

    name: str  # the link's ``view=`` value
    label: str  # the switch's label on a wide screen
    short_label: str  # ... on a phone and in the presentation bar
    value_name: str  # what one cell is: the hover's and the colour bar's word for it
    scale: str  # SEQUENTIAL or DIVERGING
    caption: str = ""  # under the figure; ``{row_sums}`` is filled with what the rows sum to
    take: Callable[[AttentionTrace], np.ndarray] | None = None  # (nh, Tq, Tk); None: a page passes the matrices
    masked_is_neginf: bool = False  # masked cells are -inf in the matrix itself (they are drawn grey either way)
    hover_masked_value: bool = False  # a masked cell's hover still gives its value (it exists before the mask)
    top: float | None = None  # a sequential scale's fixed top (weights: 1); None: the largest value shown

    @property
    def sequential(self) -> bool:
        return self.scale == SEQUENTIAL


def _table(*views: MatrixView) -> dict[str, MatrixView]:
    return {view.name: view for view in views}


# The Heads page's switch, in its order (the default first, then back through the computation).
MATRIX_VIEWS: dict[str, MatrixView] = _table(
    MatrixView(
        "weights", "weights (softmax)", "weights", "weight", SEQUENTIAL,
        caption="Colour = attention weight: how much of each key's value goes into the query's output. "
        "{row_sums} {bright} Grey cells are masked: weight exactly 0.",
        take=lambda trace: trace.weights, top=1.0,
    ),
    MatrixView(
        "logits", "scaled + masked logits", "logits", "scaled, masked logit", DIVERGING,
        caption="Colour = the score after scaling and masking, centred on 0 (red above, blue below). "
        "Grey cells are masked (−∞): the softmax gives them weight 0.",
        take=lambda trace: trace.logits, masked_is_neginf=True,
    ),
    MatrixView(
        "scores", "raw scores q·k", "scores", "raw score q·k", DIVERGING,
        caption="Colour = the raw dot product q·k before any scaling or mask, centred on 0. Its size grows with "
        "the head size d_k — that is why it gets scaled. Grey cells are masked in the next step.",
        take=lambda trace: trace.scores, hover_masked_value=True,
    ),
)

# Matrices other pages draw with the same figure, which no switch offers.
OTHER_VIEWS: dict[str, MatrixView] = _table(
    MatrixView("difference", "B − A", "B − A", "Δ weight (B − A)", DIVERGING),  # Compare
    MatrixView("carried", "norm-weighted", "norm-weighted", "weight × ‖v W_O‖", SEQUENTIAL),  # Take it apart
    # Weights that can be negative (differential attention, A₁ − λA₂): centred on 0, as scores are.
    MatrixView("signed_weights", "weights (signed)", "weights", "weight", DIVERGING),
)


def matrix_view(name: str) -> MatrixView:
    """The record named ``name``, from the switch's table or the others; KeyError names the known ones."""
    found = MATRIX_VIEWS.get(name) or OTHER_VIEWS.get(name)
    if found is None:
        raise KeyError(f"no matrix view {name!r}; known: {', '.join([*MATRIX_VIEWS, *OTHER_VIEWS])}")
    return found


VIEW_LABELS = RecordLabels(MATRIX_VIEWS, "label")
SHORT_VIEW_LABELS = RecordLabels(MATRIX_VIEWS, "short_label")
