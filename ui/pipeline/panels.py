"""A step's panel drawn: a heatmap (alone, or a row of panels as one figure) or a table of its numbers.
Pure builders on ``ui.charts.figures.matrix_heatmap_parts``; no streamlit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.charts.figures import (
    FULL_WIDTH_PX,
    MASKED_HOVER,
    MASKED_SOLID,
    MAX_DRAWN_CELLS,
    cover_masked,
    figure,
    matrix_heatmap_parts,
)
from ui.charts.numbers import CELL_DECIMALS, fixed
from ui.i18n import _
from ui.pipeline.records import MAX_TEXT_COLS, MAX_TEXT_ROWS, OUTLINE, Panel, Step, shape_text

# A mask panel has two colours, not a weight scale: purple (viridis' 0) would mean "masked" there and "a weight
# near 0" everywhere else. Masked is the grey every attention figure gives a masked cell; allowed is near white.
ALLOWED_COLOUR = "rgb(248, 248, 248)"
MASK_SCALE = [[0.0, MASKED_SOLID], [0.5, MASKED_SOLID], [0.5, ALLOWED_COLOUR], [1.0, ALLOWED_COLOUR]]


def panel_figure(panel: Panel, *, height: int | None = None, font_size: int = 12,
                 width_px: float = FULL_WIDTH_PX, numbers: bool = True) -> go.Figure:
    """A heatmap of ``panel`` (via ``matrix_heatmap``), with its outlines and, when small and ``numbers``, its numbers.

    ``font_size`` scales every text (presentation mode makes it larger); ``width_px`` is how wide the
    cells are drawn on the page, which decides how many column labels are printed.
    """
    trace, layout = panel_parts(panel, height=height, font_size=font_size, width_px=width_px, numbers=numbers)
    return figure([trace, *masked_cover(trace, panel)], layout)


def masked_cover(trace: dict, panel: Panel) -> list[dict]:
    """The panel's cells it cannot see (``panel.allowed`` False) blanked in ``trace``, and their grey layer."""
    return cover_masked(trace, panel.matrix, panel.allowed, panel.masked_hover or MASKED_HOVER)


def panel_parts(panel: Panel, *, height: int | None = None, font_size: int = 12,
                width_px: float = FULL_WIDTH_PX, numbers: bool = True) -> tuple[dict, dict]:
    """The trace and layout of ``panel_figure``, as dictionaries (``panels_figure`` puts several side by side).
    ``numbers``: each cell's value printed in it (when the panel is at most MAX_TEXT_ROWS x MAX_TEXT_COLS)."""
    rows, cols = panel.matrix.shape
    if height is None and panel.axis_titles is not None:
        height = int(np.clip(22 * rows + 150, 260, 600))  # matrix_heatmap's height plus room for axis titles
    colour_range = {"signed": True} if panel.kind == "signed" else {"signed": False, "zmin": 0.0, "zmax": 1.0}
    trace, layout = matrix_heatmap_parts(panel.matrix, panel.row_labels, panel.col_labels, title=panel.title,
                                         value_name=panel.value_name, height=height, font_size=font_size,
                                         width_px=width_px, **colour_range)
    if panel.kind == "mask":
        trace["showscale"] = False  # two values, written in the cells: no colour bar needed
        trace["colorscale"] = MASK_SCALE
    if (numbers or panel.kind == "mask") and rows <= MAX_TEXT_ROWS and cols <= MAX_TEXT_COLS:  # a mask: ✓/✗ is its key
        trace.update(text=cell_text(panel.matrix, panel.kind), texttemplate="%{text}", textfont=dict(size=font_size + 2))
    layout["margin"]["pad"] = 0  # the cells meet the axes, no grey frame
    if panel.axis_titles is not None:
        layout["yaxis"]["title"] = dict(text=panel.axis_titles[0])
        layout["xaxis"]["title"] = dict(text=panel.axis_titles[1])
    shapes = []
    if panel.block is not None:
        start, stop = panel.block
        shapes.append(dict(type="rect", x0=start - 0.5, x1=stop - 0.5, y0=-0.5, y1=rows - 0.5, line=OUTLINE))
    if panel.row_block is not None:
        start, stop = panel.row_block
        shapes.append(dict(type="rect", x0=-0.5, x1=cols - 0.5, y0=start - 0.5, y1=stop - 0.5, line=OUTLINE))
    if panel.cell is not None:
        i, j = panel.cell
        shapes.append(dict(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                           line=dict(color="magenta", width=4)))
    if shapes:
        layout["shapes"] = shapes
    return trace, layout


PANEL_GAP = 0.1  # of the figure's width between two panels of a row: the first one's colour bar and the next's labels


def panels_figure(panels: tuple[Panel, ...], *, font_size: int = 12, width_px: float = FULL_WIDTH_PX,
                  numbers: bool = True) -> go.Figure:
    """Panels with the same number of rows side by side in ONE figure, each on its own axes with its own
    colour bar, outlines, numbers and title: what ``panel_figure`` draws for each, as one chart.

    One chart instead of three: the browser lays out and redraws each chart on its own, so a row of
    three matrices costs it a third (``python -m bench --only browser``). ``width_px``: how wide each
    panel's cells are drawn. Row labels are printed on the first panel, and on any other whose rows
    are different tokens (cross-attention's K and V beside Q).
    """
    n = len(panels)
    size = (1.0 - PANEL_GAP * (n - 1)) / n
    data, layout, annotations, shapes = [], {}, [], []
    for index, panel in enumerate(panels):
        trace, part = panel_parts(panel, font_size=font_size, width_px=width_px, numbers=numbers)
        suffix = "" if index == 0 else str(index + 1)
        left = index * (size + PANEL_GAP)
        trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}")
        trace["colorbar"] = {**trace["colorbar"], "x": left + size + 0.005, "xanchor": "left", "thickness": 12,
                             "len": 0.9}
        data += [trace, *masked_cover(trace, panel)]
        layout[f"xaxis{suffix}"] = {**part["xaxis"], "domain": [left, left + size], "anchor": f"y{suffix}"}
        same_rows = index > 0 and list(panel.row_labels) == list(panels[0].row_labels)
        yaxis = {**part["yaxis"], "anchor": f"x{suffix}", "showticklabels": not same_rows}
        if same_rows:  # the rows are named once, on the first panel: here the title would sit on its colour bar's
            yaxis.pop("title", None)
        layout[f"yaxis{suffix}"] = yaxis
        shapes += [{**shape, "xref": f"x{suffix}", "yref": f"y{suffix}"} for shape in part.get("shapes", [])]
        annotations.append(dict(text=part["title"]["text"], font={**part["title"]["font"], "weight": "bold"},
                                showarrow=False,
                                xref="paper", yref="paper", x=left + size / 2, y=1.0, xanchor="center",
                                yanchor="bottom"))
        layout["height"] = max(layout.get("height", 0), part["height"])
        layout.update(margin=part["margin"], font=part["font"], plot_bgcolor=part["plot_bgcolor"])
    layout["annotations"] = annotations
    if shapes:
        layout["shapes"] = shapes
    return figure(data, layout)


def cell_text(matrix: np.ndarray, kind: str = "signed") -> list[list[str]]:
    """The number to print in each cell: 2 decimals (never -0.00), blank for a masked (-inf) logit, ✓/✗ for a mask."""
    if kind == "mask":
        return [["✓" if v else "✗" for v in row] for row in matrix]
    return [["" if not np.isfinite(v) else fixed(v, CELL_DECIMALS) for v in row] for row in matrix]


def panel_table(panel: Panel) -> pd.DataFrame:
    """The panel's numbers with its row and column labels; masked logits (-inf) become blank (NaN)."""
    if panel.kind == "mask":
        return pd.DataFrame(panel.matrix.astype(bool), index=panel.row_labels, columns=panel.col_labels)
    values = np.where(np.isneginf(panel.matrix), np.nan, panel.matrix)  # (R, K)
    return pd.DataFrame(values, index=panel.row_labels, columns=panel.col_labels)


# ---- what can be sent ------------------------------------------------------------------------


def slim_panel(panel: Panel, max_cells: int = MAX_DRAWN_CELLS) -> Panel:
    """A panel too large to send (a 384 x 384 weight matrix) cut to the outlined block of the chosen head."""
    rows, cols = panel.matrix.shape
    if rows * cols <= max_cells:
        return panel
    if panel.block is not None:
        start, stop = panel.block
        return replace(
            panel,
            title=_("{title}, columns {start}..{last} (this head's)").format(title=panel.title, start=start, last=stop - 1),
            matrix=panel.matrix[:, start:stop],
            col_labels=panel.col_labels[start:stop],
            block=None,
        )
    if panel.row_block is not None:
        start, stop = panel.row_block
        return replace(
            panel,
            title=_("{title}, rows {start}..{last} (those that read this head)").format(title=panel.title, start=start,
                                                                                       last=stop - 1),
            matrix=panel.matrix[start:stop],
            row_labels=panel.row_labels[start:stop],
            row_block=None,
        )
    return panel


def slim_step(step: Step, max_cells: int = MAX_DRAWN_CELLS) -> Step:
    """``step`` with every panel slimmed; a panel still too large (a long sentence's T x C matrix) is left out, and
    the step's note says so."""
    slimmed = [slim_panel(p, max_cells) for p in step.panels]
    kept = tuple(p for p in slimmed if p.matrix.size <= max_cells)
    if len(kept) == len(slimmed):
        return replace(step, panels=kept)
    left_out = ", ".join(f"{p.title} {shape_text(p.matrix)}" for p in slimmed if p.matrix.size > max_cells)
    note = _("Not drawn for a sentence this long, to keep the page light: {left_out}. Shorten the sentence to see "
             "it.").format(left_out=left_out)
    return replace(step, panels=kept, note=f"{step.note}  \n{note}" if step.note else note)
