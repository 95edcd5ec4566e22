"""Rows of step panels as ONE plotly figure: Step by step's steps that follow one another without prose between
their charts (issue 38: plotly's fixed cost per graph, 11-34 ms, is the cost of a redraw, so fewer graphs).

Each row's panels stand side by side on one colour bar (the row's range; signed rows centred on 0), rows one under
another, each panel under its title with its own axes, outlines, masked cells and, when numbers are on, its cell
text: what ``ui.pipeline.panels.panel_figure`` draws for each. A mask panel (two colours, no scale) keeps its own
colours. Pure: no streamlit.
"""

from __future__ import annotations

from dataclasses import replace

import plotly.graph_objects as go

from ui.charts.figures import MASKED_COLOUR, MODEBAR_PX, SIGNED_SCALE, VALUE, _domains, figure
from ui.charts.labels import said
from ui.pipeline.panels import masked_cover, panel_parts
from ui.pipeline.records import Panel, Step

ROW_LABELS_PX = 110  # what a row's y labels and its colour bar take from the width of the figure
PANEL_GAP_PX = 24  # between two panels of a row that share their row labels (only the first prints them)
COLOUR_KEYS = ("zmin", "zmax", "colorscale", "colorbar")
# Steps whose charts follow one another with only their own words between them: each run is one chart, under the
# words of all its steps. The softmax is never in a run (predict-then-reveal and its row sums stand beside it).
STEP_RUNS = (("input", "positional"), ("scores", "scale", "alibi", "mask"), ("mix", "concat"))


def step_runs(steps: list[Step]) -> list[list[tuple[int, Step]]]:
    """``steps`` numbered from 1, in runs: consecutive steps of one ``STEP_RUNS`` row together, every other alone."""
    runs: list[list[tuple[int, Step]]] = []
    for number, step in enumerate(steps, start=1):
        together = runs and any(step.slug in run and runs[-1][-1][1].slug in run for run in STEP_RUNS)
        if together:
            runs[-1].append((number, step))
        else:
            runs.append([(number, step)])
    return runs


def numbered(run: list[tuple[int, Step]]) -> list[tuple[int, Step]]:
    """A run of two or more steps with panels, each panel's title starting with its step's number ("5. S_0 = ..."):
    their chart stands under all the run's headings, a screen below the first one's, and the number links a panel
    back to its heading. A step drawn alone keeps its titles (its heading is right above its chart)."""
    if len(drawn_steps(run)) < 2:
        return run
    return [(number, replace(step, panels=tuple(replace(panel, title=f"{number}. {panel.title}")
                                                 for panel in step.panels))) for number, step in run]


def drawn_steps(run: list[tuple[int, Step]]) -> list[int]:
    """The numbers of a run's steps that have panels (a step can have none: the mask step without a mask)."""
    return [number for number, step in run if step.panels]


def combinable(rows: tuple[tuple[Panel, ...], ...]) -> bool:
    """True when every row's panels can share one colour bar: those that are not masks are all of one kind."""
    return all(len({panel.kind for panel in row if panel.kind != "mask"}) <= 1 for row in rows)


def _label_px(trace: dict, tick_font: int) -> int:
    """The height the x tick labels take under a panel, written at -45 degrees."""
    return int(0.55 * tick_font * max((len(str(x)) for x in trace["x"]), default=1)) + 12


def _laid_row(row: tuple[Panel, ...], font_size: int, width_px: float, numbers: bool) -> tuple[list, int, int]:
    """A row's panels as (trace, layout) parts, the height of their cells and of the labels under them, in pixels."""
    tick_font = max(font_size - 1, 11)
    cells_px = (width_px - ROW_LABELS_PX) / len(row)
    parts = [panel_parts(panel, font_size=font_size, width_px=cells_px, numbers=numbers) for panel in row]
    height = max(part["height"] - (150 if "title" in part["xaxis"] else 110) for _t, part in parts)
    below = max(_label_px(trace, tick_font) + (2 * font_size if "title" in part["xaxis"] else 0)
                for trace, part in parts)
    return parts, max(height, 110), below


def panel_rows_figure(rows: tuple[tuple[Panel, ...], ...], *, font_size: int = 12, width_px: float = 820,
                      numbers: bool = True) -> go.Figure:
    """``rows`` of panels (each row's panels have the same rows) as one figure ``width_px`` wide on the page.

    Annotations are the panels' titles, one per panel in order; panel ``i`` (0-based, row by row) is drawn on axes
    ``x{i+1}``/``y{i+1}`` (the first on ``x``/``y``), its outlines on the same axes. ``numbers``: print each cell's
    value where the panel is small enough to hold it (``panel_parts``)."""
    tick_font = max(font_size - 1, 11)
    title_px = 30 + 2 * font_size
    laid = [_laid_row(row, font_size, width_px, numbers) for row in rows]
    tops, top = [], 0
    for _parts, height, below in laid:
        tops.append(top)
        top += height + below + title_px
    plot_px = top - laid[-1][2] - title_px
    data, layout, shapes, annotations = [], {}, [], []
    index = 0
    for r, (row, (parts, height, _below)) in enumerate(zip(rows, laid, strict=True)):
        y_domain = (1 - (tops[r] + height) / plot_px, 1 - tops[r] / plot_px)
        shared = all(list(panel.row_labels) == list(row[0].row_labels) for panel in row)
        gap = PANEL_GAP_PX if shared else 0.6 * tick_font * max(len(str(y)) for p in row for y in p.row_labels) + 30
        x_domains = _domains(len(row), gap / width_px if len(row) > 1 else 0.0)
        axis = "coloraxis" if r == 0 else f"coloraxis{r + 1}"
        scaled = [trace for (trace, _part), panel in zip(parts, row, strict=True) if panel.kind != "mask"]  # (ranges)
        for c, ((trace, part), panel) in enumerate(zip(parts, row, strict=True)):
            suffix = "" if index == 0 else str(index + 1)
            trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}")
            if panel.kind != "mask":
                trace = {**{k: v for k, v in trace.items() if k not in COLOUR_KEYS}, "coloraxis": axis}
            data += [trace, *masked_cover(trace, panel)]
            layout[f"xaxis{suffix}"] = {**part["xaxis"], "domain": x_domains[c], "anchor": f"y{suffix}"}
            yaxis = {**part["yaxis"], "domain": y_domain, "anchor": f"x{suffix}"}
            if c > 0 and shared:
                yaxis.update(showticklabels=False)
                yaxis.pop("title", None)
            layout[f"yaxis{suffix}"] = yaxis
            shapes += [{**shape, "xref": f"x{suffix}", "yref": f"y{suffix}"} for shape in part.get("shapes", [])]
            annotations.append(dict(text=part["title"]["text"], font={**part["title"]["font"], "weight": "bold"},
                                    showarrow=False, xref="paper", yref="paper", x=sum(x_domains[c]) / 2,
                                    y=y_domain[1], xanchor="center", yanchor="bottom", yshift=4))
            index += 1
        if scaled:
            layout[axis] = _colour_axis(scaled, height, y_domain[1])
    layout.update(
        shapes=shapes, annotations=annotations,
        height=MODEBAR_PX + title_px + plot_px + laid[-1][2] + 10,
        margin=dict(l=10, r=10, t=MODEBAR_PX + title_px, b=laid[-1][2] + 10, pad=0),
        font=dict(size=font_size), plot_bgcolor=MASKED_COLOUR,
    )
    return figure(data, layout)


def _colour_axis(traces: list[dict], height: float, top: float) -> dict:
    """One colour axis for a row's panels (each trace still carries its own range): the widest range, centred on 0
    when signed; its colour bar beside the row, from its top down."""
    low, high = min(t["zmin"] for t in traces), max(t["zmax"] for t in traces)
    signed = traces[0]["colorscale"] is SIGNED_SCALE
    bar = dict(traces[0]["colorbar"], lenmode="pixels", len=min(height, 320), y=top, yanchor="top", thickness=12)
    if len({t["colorbar"]["title"]["text"] for t in traces}) > 1:  # the panels name their values differently
        bar["title"] = dict(text=said(VALUE), side="right")
    return dict(colorscale=traces[0]["colorscale"], cmin=low, cmax=high, colorbar=bar,
                **({"cmid": 0.0} if signed else {}))
