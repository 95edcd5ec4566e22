"""Several single heatmaps as one plotly figure (one graph on the page instead of several: the browser's fixed
cost per graph is the cost of a redraw), and Heads' concatenation beside its output after W_O built that way."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.charts.figures import (
    FULL_WIDTH_PX,
    MASKED_COLOUR,
    MODEBAR_PX,
    SIGNED_SCALE,
    VALUE,
    _domains,
    _grid_shape,
    concat_heatmap_parts,
    matrix_heatmap_parts,
)
from ui.charts.labels import said
from ui.charts.sent import figure

PANEL_GAP_PX = 24  # between two panels of a row that share their row labels (only the first prints them)


def _moved(item: dict, suffix: str) -> dict:
    """A shape or annotation drawn against a single heatmap's axes ("x", "y", "y domain"), moved to panel ``suffix``."""
    refs = {"x": f"x{suffix}", "y": f"y{suffix}", "y domain": f"y{suffix} domain", "x domain": f"x{suffix} domain"}
    return {**item, **{ref: refs.get(item[ref], item[ref]) for ref in ("xref", "yref") if ref in item}}


def heatmap_panels(parts: list[tuple[dict, dict]], *, max_cols: int = 2, font_size: int = 12,
                   width_px: float = FULL_WIDTH_PX) -> go.Figure:
    """Single heatmaps (each ``matrix_heatmap_parts``' trace and layout, its shapes and annotations on its own axes)
    as one figure: at most ``max_cols`` panels a row, each under its title, on one colour axis that spans every
    panel's range (one colour bar; signed panels stay centred on 0). Panels of a row that have the same row labels
    share them (printed once, on the left). Each panel keeps its cells, hover and tick labels; ``width_px`` is the
    figure's width on the page, for the gaps between panels."""
    rows, cols = _grid_shape(len(parts), max_cols)
    traces = [trace for trace, _layout in parts]
    low, high = min(t["zmin"] for t in traces), max(t["zmax"] for t in traces)
    signed = any(t["colorscale"] is SIGNED_SCALE for t in traces)
    title_px = [max(layout["margin"]["t"] for _t, layout in parts[r * cols:(r + 1) * cols]) for r in range(rows)]
    panel_px = [max(layout["height"] - 110 for _t, layout in parts[r * cols:(r + 1) * cols]) for r in range(rows)]
    tick_font = max(font_size - 1, 11)
    label_px = [max(int(0.55 * tick_font * max(map(len, trace["x"]))) + 12
                    for trace in traces[r * cols:(r + 1) * cols]) for r in range(rows)]
    # top to bottom, in pixels from the top of the first panel: each row's panel, then its labels and the next title
    tops = [sum(panel_px[:r]) + sum(label_px[:r]) + sum(title_px[1:r + 1]) for r in range(rows)]
    plot_px = tops[-1] + panel_px[-1]
    shared = all(trace["y"] == traces[r * cols]["y"] for r in range(rows) for trace in traces[r * cols:(r + 1) * cols])
    gap = (PANEL_GAP_PX if shared else 0.6 * tick_font * max(len(str(y)) for t in traces for y in t["y"]) + 30)
    col_domains = _domains(cols, gap / width_px if cols > 1 else 0.0)
    data, layout = [], {}
    shapes, annotations = [], []
    for i, (trace, panel) in enumerate(parts):
        r, c = divmod(i, cols)
        suffix = "" if i == 0 else str(i + 1)
        y_domain = (1 - (tops[r] + panel_px[r]) / plot_px, 1 - tops[r] / plot_px)
        data.append({**{k: v for k, v in trace.items() if k not in ("zmin", "zmax", "colorscale", "colorbar")},
                     "coloraxis": "coloraxis", "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"})
        layout[f"xaxis{suffix}"] = {**panel["xaxis"], "domain": col_domains[c], "anchor": f"y{suffix}"}
        y = {**panel["yaxis"], "domain": y_domain, "anchor": f"x{suffix}"}
        if c > 0 and shared:
            y.update(matches=f"y{'' if r == 0 else r * cols + 1}", showticklabels=False)
        layout[f"yaxis{suffix}"] = y
        shapes += [_moved(shape, suffix) for shape in panel.get("shapes", [])]
        annotations += [_moved(note, suffix) for note in panel.get("annotations", [])]
        if "title" in panel:  # the row's titles in line, over what a panel draws above itself (a concat's head names)
            annotations.append(dict(text=panel["title"]["text"], showarrow=False, xref="paper", yref="paper",
                                    xanchor="center", yanchor="bottom", x=sum(col_domains[c]) / 2, y=y_domain[1],
                                    yshift=title_px[r] - (30 + 2 * font_size) + 4, font=dict(size=font_size + 2)))
    bar = dict(traces[0]["colorbar"], lenmode="pixels", len=min(plot_px, 320), y=1.0, yanchor="top")
    if len({t["colorbar"]["title"]["text"] for t in traces}) > 1:  # the panels name their values differently
        bar["title"] = dict(text=said(VALUE), side="right")
    layout.update(
        coloraxis=dict(colorscale=traces[0]["colorscale"], cmin=low, cmax=high, colorbar=bar,
                       **({"cmid": 0.0} if signed else {})),
        shapes=shapes, annotations=annotations,
        height=MODEBAR_PX + title_px[0] + plot_px + label_px[-1] + 10,
        margin=dict(l=10, r=10, t=MODEBAR_PX + title_px[0], b=label_px[-1] + 10, pad=0),
        font=dict(size=font_size), plot_bgcolor=MASKED_COLOUR,
    )
    return figure(data, layout)


def concat_and_output(concat: np.ndarray, query_labels: list[str], n_heads: int, output: np.ndarray | None = None,
                      *, output_words: dict | None = None, max_cols: int = 2, width_px: float = FULL_WIDTH_PX,
                      font_size: int = 12) -> go.Figure:
    """The concatenation (``concat_heatmap``) and, when there is one, the output after W_O (``output`` (Tq, C),
    ``output_words`` the ``matrix_heatmap_parts`` words for it) beside it or under it (``max_cols`` 1): one figure,
    one colour bar (``heatmap_panels``). ``width_px``: the figure's width on the page."""
    cols = 1 if output is None else min(max_cols, 2)
    panel_px = width_px / cols
    parts = [concat_heatmap_parts(concat, query_labels, n_heads, font_size=font_size, width_px=panel_px)]
    if output is not None:
        columns = [str(c) for c in range(output.shape[1])]
        parts.append(matrix_heatmap_parts(output, query_labels, columns, font_size=font_size, width_px=panel_px,
                                          **(output_words or {})))
    return heatmap_panels(parts, max_cols=cols, font_size=font_size, width_px=width_px)
