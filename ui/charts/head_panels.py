"""The Heads figure's panels as the trace's kernel makes them (``ui.charts.views.kernel_view``): the matrices, their
titles, the heads' average of each map, and the caption. Pure (arrays and strings), shared by the Heads page and the
static pack (``deploy.static_pack``), so that both show the same maps under the same words."""

from __future__ import annotations

import numpy as np

from mha_core.attention import AttentionTrace
from mha_core.kernels import attention_kernel
from ui.charts import colour_ranges, tables
from ui.charts.figures import head_average
from ui.charts.labels import said
from ui.charts.views import MATRIX_VIEWS, MatrixView, kernel_view
from ui.i18n import _, sentences


def shown_view(trace: AttentionTrace, view: str) -> MatrixView:
    """The switch's ``view`` as the trace's kernel makes it: its maps, its label, its caption, its CSV name."""
    return kernel_view(view, trace.kernel)


def missing_view(kernel: str, view: str) -> str:
    """What the page says when a link asks for a view the kernel does not make (it shows the weights instead)."""
    return _("The {kernel} kernel has no {view}: showing its weights.").format(
        kernel=_(attention_kernel(kernel).label), view=_(MATRIX_VIEWS[view].label))


def unoffered_colours(kernel: str, colours: str, colours_label: str) -> str:
    """What the page says when a link asks for a colour range (named ``colours_label``) that the kernel's signed
    weights do not have (it shows their one range instead)."""
    refused = _("The {kernel} kernel's weights can be negative, so there is no colour range to choose ('{label}' was "
                "asked for).").format(kernel=_(attention_kernel(kernel).label), label=colours_label)
    return sentences(refused, _(colour_ranges.SIGNED_COLOURS))


def view_caption(trace: AttentionTrace, view: str, colours: str, per_head_label: str | None) -> str:
    """A view's caption; the weights' says what rows sum to (below 1 with a null key), what a bright cell is
    (``per_head_label``: the per-head colour range's name, for the hint; None where the page has no colour-range
    switch to name), or for signed weights what red and blue are."""
    bright = colour_ranges.bright_cells(colours, trace.weights, per_head_label,
                                        signed=attention_kernel(trace.kernel).signed)
    return said(shown_view(trace, view).caption).format(row_sums=tables.row_sums_sentence(trace), bright=bright)


def shown_matrices(trace: AttentionTrace, view: str) -> np.ndarray:
    """The matrices the view switch asks for, (nh * maps, Tq, Tk): each head's maps together (most views: one)."""
    return shown_view(trace, view).take(trace)


def map_title(prefix: str, name: str) -> str:
    """'head 0', or 'head 0 · L₁' for one of a head's several maps."""
    return f"{prefix} · {name}" if name else prefix


def panel_titles(trace: AttentionTrace, view: str) -> list[str]:
    """One title per panel of ``shown_matrices``."""
    names = shown_view(trace, view).panel_names
    return [map_title(_("head {h}").format(h=h), name) for h in range(trace.n_heads) for name in names]


def map_averages(matrices: np.ndarray, names: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """The mean over the heads of each of a head's maps: (nh * maps, Tq, Tk) -> (maps, Tq, Tk), with titles."""
    averages = [head_average(matrices[p :: len(names)]) for p in range(len(names))]  # (Tq, Tk) each
    return np.stack(averages), [map_title(_("average of heads"), name) for name in names]


def with_averages(matrices: np.ndarray, titles: list[str], names: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """The panels and, after them, ``map_averages``."""
    averages, average_titles = map_averages(matrices, names)
    return np.concatenate([matrices, averages]), [*titles, *average_titles]
