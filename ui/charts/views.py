"""The matrices a heatmap of attention can show, one record each: the Heads page's switch, its link
value (``view=``), its caption and the figure's colour scale and labels all read ``MATRIX_VIEWS``.

A new view is one row here: the switch offers it, a link carries it, and the figure names its
values and picks its scale from the row. A row's ``for_kernel`` says how an attention kernel's record
(``mha_core.kernels.Kernel``) rewrites it, so that every label, caption and CSV name says what the matrix
is under that kernel (``kernel_view``). Pure data: no streamlit. The words are marked with ``N_`` and translated
where they are shown (``_(view.label)``); the records stay in English, as the links and the CSV names need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from mha_core.attention import AttentionTrace
from mha_core.kernels import Kernel, attention_kernel
from ui.charts.record_labels import RecordLabels
from ui.i18n import N_

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
    # How a kernel's record rewrites this view (None: it does not); returning None: the kernel has no such matrix.
    for_kernel: Callable[[MatrixView, Kernel], MatrixView | None] | None = None
    panel_names: tuple[str, ...] = ("",)  # the maps ``take`` gives per head, heads outer: (nh * len, Tq, Tk)
    file_stem: str = ""  # the CSV's name without .csv; "" for the view's name

    @property
    def sequential(self) -> bool:
        return self.scale == SEQUENTIAL

    @property
    def file_name(self) -> str:
        return f"{self.file_stem or self.name.split('@')[0]}.csv"


def _stack_maps(maps: tuple[np.ndarray, ...]) -> np.ndarray:
    """(nh, Tq, Tk) per map -> (nh * maps, Tq, Tk), each head's maps together."""
    n, tq, tk = maps[0].shape
    return np.stack(maps, axis=1).reshape(n * len(maps), tq, tk)  # (nh * maps, Tq, Tk)


def _inputs_view(view: MatrixView, kernel: Kernel) -> MatrixView | None:
    """The maps the kernel makes its weights from (``Kernel.inputs``), in its words; None when it names none."""
    inputs = kernel.inputs
    if inputs is None:
        return None
    return replace(view, label=inputs.label, short_label=inputs.short_label, value_name=inputs.value_name,
                   scale=DIVERGING if inputs.signed else SEQUENTIAL, caption=inputs.caption,
                   take=lambda trace: _stack_maps(inputs.maps(trace.logits, trace.kernel_parts)),
                   masked_is_neginf=inputs.masked_is_neginf, panel_names=inputs.names, file_stem=inputs.file_stem)


def _table(*views: MatrixView) -> dict[str, MatrixView]:
    return {view.name: view for view in views}


# The Heads page's switch, in its order (the default first, then back through the computation).
MATRIX_VIEWS: dict[str, MatrixView] = _table(
    MatrixView(
        "weights", N_("weights (softmax)"), N_("weights"), N_("weight"), SEQUENTIAL,
        caption=N_("Colour = attention weight: how much of each key's value goes into the query's output. "
                   "{row_sums} {bright} Grey cells are masked: weight exactly 0."),
        take=lambda trace: trace.weights, top=1.0,
        for_kernel=lambda view, kernel: replace(view, label=kernel.weights_label),
    ),
    MatrixView(
        "logits", N_("scaled + masked logits"), N_("logits"), N_("scaled, masked logit"), DIVERGING,
        caption=N_("Colour = the score after scaling and masking, centred on 0 (red above, blue below). "
                   "Grey cells are masked (−∞): the softmax gives them weight 0."),
        take=lambda trace: trace.logits, masked_is_neginf=True, for_kernel=_inputs_view,
    ),
    MatrixView(
        "scores", N_("raw scores q·k"), N_("scores"), N_("raw score q·k"), DIVERGING,
        caption=N_("Colour = the raw dot product q·k before any scaling or mask, centred on 0. Its size grows with "
                   "the head size d_k — that is why it gets scaled. Grey cells are masked in the next step."),
        take=lambda trace: trace.scores, hover_masked_value=True,
        for_kernel=lambda view, kernel: replace(view, caption=kernel.scores_caption or view.caption),
    ),
)

# Matrices other pages draw with the same figure, which no switch offers.
OTHER_VIEWS: dict[str, MatrixView] = _table(
    MatrixView("difference", "B − A", "B − A", N_("Δ weight (B − A)"), DIVERGING),  # Compare
    MatrixView("carried", N_("norm-weighted"), N_("norm-weighted"), N_("weight × ‖v W_O‖"), SEQUENTIAL),  # Take it apart
    # The same where the kernel scales each row of A·V by c_i before the concatenation (Kernel.row_scale).
    MatrixView("carried_scaled", N_("norm-weighted"), N_("norm-weighted"), "‖c_i·w·v W_O‖", SEQUENTIAL),
    # Weights that can be negative (differential attention, A₁ − λA₂): centred on 0, as scores are.
    MatrixView("signed_weights", N_("weights (signed)"), N_("weights"), N_("weight"), DIVERGING),
)


FIGURE_FIELDS = ("scale", "value_name", "masked_is_neginf", "hover_masked_value", "top")  # what a figure reads


def kernel_view(name: str, kernel: str) -> MatrixView | None:
    """The switch's record ``name`` as kernel ``kernel`` makes that matrix, or None when it has no such matrix.

    A view that a kernel draws differently is named ``name@kernel``, so that a figure can find it by name
    (``matrix_view``); one it only names differently keeps its name.
    """
    view = MATRIX_VIEWS[name]
    made = view if view.for_kernel is None else view.for_kernel(view, attention_kernel(kernel))
    if made is None or all(getattr(made, field) == getattr(view, field) for field in FIGURE_FIELDS):
        return made
    return replace(made, name=f"{name}@{kernel}")


def kernel_views(kernel: str) -> dict[str, MatrixView]:
    """The switch's records that kernel ``kernel`` has, in the switch's order, by their link names."""
    views = {name: kernel_view(name, kernel) for name in MATRIX_VIEWS}
    return {name: view for name, view in views.items() if view is not None}


def matrix_view(name: str) -> MatrixView:
    """The record named ``name``, from the switch's table or the others, or ``view@kernel`` (``kernel_view``);
    KeyError names the known ones."""
    found = MATRIX_VIEWS.get(name) or OTHER_VIEWS.get(name)
    if found is None and "@" in name and name.split("@")[0] in MATRIX_VIEWS:
        found = kernel_view(*name.split("@", 1))
    if found is None:
        raise KeyError(f"no matrix view {name!r}; known: {', '.join([*MATRIX_VIEWS, *OTHER_VIEWS])}")
    return found


VIEW_LABELS = RecordLabels(MATRIX_VIEWS, "label")
SHORT_VIEW_LABELS = RecordLabels(MATRIX_VIEWS, "short_label")
