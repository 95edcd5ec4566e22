"""The Step-by-step views, drawn with Streamlit: shared by the Step-by-step and Real model pages.

``ui.pipeline.steps`` builds the steps and their matrices, ``ui.pipeline.drill_down`` the drill-down of one cell
(pure, tested without a server); the functions here only put that output on screen. ``key_prefix`` keeps the
element keys of the two pages apart ("sbs", "rm"). Each heatmap prints as many column labels as
fit the width of the column it is drawn in.
"""

from __future__ import annotations

import html
import re
from itertools import cycle

import numpy as np
import streamlit as st

from ui.charts.export import csv_bytes, npz_bytes
from ui.charts.markdown import literal
from ui.charts.numbers import EMPTY_CELL, column_format, table_values
from ui.i18n import _
from ui.pipeline.drill_down import (
    NULL_KEY_LABEL,
    DrillDown,
    dot_product_latex,
    drill_notes,
    highlight_key,
    logit_latex,
    null_key_latex,
    products_table,
    score_table,
    softmax_latex,
    softmax_row_table,
)
from ui.pipeline.latex_lines import phone_lines
from ui.pipeline.panel_rows import combinable, drawn_steps, numbered
from ui.pipeline.panels import panel_table
from ui.pipeline.records import Panel, Step
from ui.pipeline.step_export import run_step_frame, step_file_name
from ui.run import cached_figures
from ui.run.compute import result_later
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.number_columns import number_columns
from ui.widgets.presentation import FONT_SIZE
from ui.widgets.state import KEEP

MAIN_COLUMN_PX = 820  # the main column of a 1280 px screen with the sidebar open
LABELS_PX = 190  # what a heatmap's row labels and colour bar take from the width of its column


def plot_px(share: float) -> float:
    """How wide a heatmap's cells are drawn in a column that takes ``share`` of the main column."""
    return MAIN_COLUMN_PX * share - LABELS_PX


def show_formula(latex: str) -> None:
    """A displayed formula; on a phone its side-by-side parts one under another (``latex_lines``)."""
    st.latex(phone_lines(latex) if on_phone() else latex)


def show_panel(panel: Panel, key: str, *, as_table: bool = False, width_px: float, font_size: int = FONT_SIZE,
               chart_width: int | str = "stretch", numbers: bool = True) -> None:
    """One matrix: a heatmap whose cells are ``width_px`` wide in all (the chart ``chart_width`` wide: pixels or
    "stretch", its column's width), with its numbers in the cells when ``numbers``, or its table of numbers."""
    if not as_table:
        show_chart(cached_figures.panel_figure(panel, font_size=font_size, width_px=width_px, numbers=numbers),
                   key=key, config=chart_config(), alt=panel.title, width=chart_width)
        return
    frame = panel_table(panel)
    st.markdown(f"**{panel.title}**")
    if panel.kind != "mask":
        frame = table_values(frame)  # no -0.0000
    st.dataframe(frame, column_config=None if panel.kind == "mask" else number_columns(frame.columns), key=key,
                 placeholder=EMPTY_CELL)
    if np.isneginf(panel.matrix).any():
        st.caption(_("Cells that read {empty} are masked: their logit is −∞.").format(empty=EMPTY_CELL))


def panels_per_row(n: int) -> int:
    """How many of ``n`` panels stand in one row: at most three, and the rows as even as they can be (four are
    two and two: three and one would draw the last alone, its cells squeezed to a third of the width)."""
    rows = max(-(-n // 3), 1)
    return max(-(-n // rows), 1)


def show_panels(panels: tuple[Panel, ...], key_prefix: str, *, as_table: bool = False,
                font_size: int = FONT_SIZE, numbers: bool = True) -> None:
    """Up to three matrices side by side (one alone takes two thirds of the width); keys ``<key_prefix>_<i>``."""
    per_row = panels_per_row(len(panels))
    width_px = plot_px(2 / 3 if len(panels) == 1 else 1 / per_row)
    for start in range(0, len(panels), per_row):
        row = panels[start : start + per_row]
        if not as_table and not on_phone() and len(row) > 1 and len({panel.matrix.shape[0] for panel in row}) == 1:
            # one chart for the row (the browser redraws each chart on its own); key of its first panel.
            # Not on a phone: there the columns stack, one matrix under the other.
            figure = cached_figures.panels_figure(tuple(row), font_size=font_size, width_px=width_px, numbers=numbers)
            show_chart(figure, key=f"{key_prefix}_{start}", config=chart_config(),
                       alt=", ".join(panel.title for panel in row))
            continue
        if len(panels) == 1 and not as_table and not on_phone():
            # two thirds of the main column as the chart's own width, not a column beside an empty one: a row of
            # columns is three more elements every run sends (a phone stacks columns: there the chart stretches)
            show_panel(row[0], f"{key_prefix}_0", width_px=width_px, font_size=font_size,
                       chart_width=round(MAIN_COLUMN_PX * 2 / 3), numbers=numbers)
            continue
        columns = st.columns([2, 1] if len(panels) == 1 else per_row)
        for offset, panel in enumerate(row):
            with columns[offset]:
                show_panel(panel, f"{key_prefix}_{start + offset}", as_table=as_table, width_px=width_px,
                           font_size=font_size, numbers=numbers)


# Outside code spans and formulas a "<" starts raw HTML in a markdown element that allows it (a step's, for its
# heading): there it is written as an entity, so no token or word can become a tag.
LITERAL_PARTS = re.compile(r"(`[^`]*`|\$\$.*?\$\$|\$[^$\n]*\$)", re.DOTALL)


def without_html(text: str) -> str:
    """``text`` with every "<" outside its code spans and formulas written as ``&lt;`` (shown as "<")."""
    parts = LITERAL_PARTS.split(text)
    return "".join(part if odd else part.replace("<", "&lt;") for odd, part in zip(cycle((False, True)), parts))


def step_markdown(number: int, step: Step) -> str:
    """A step's heading, why it exists, its formula, its shapes and its note as ONE markdown text (one element a
    run instead of up to five, issue 38). The heading is an h3 with the step's anchor (``#softmax`` in every
    language), as ``st.subheader`` draws one; the formula a displayed one, as ``st.latex`` sends it."""
    parts = [f'<h3 data-anchor="{step.slug}">{html.escape(f"{number}. {_(step.title)}", quote=False)}</h3>']
    if step.why:
        parts.append(without_html(_(step.why)))
    if step.formula:
        parts.append(f"$$\n{phone_lines(step.formula) if on_phone() else step.formula}\n$$")
    if step.shapes:
        parts.append(without_html(_("Shapes: `{shapes}`").format(shapes=step.shapes)))
    if step.note:
        parts.append(without_html(step.note))
    return "\n\n".join(parts)


def show_step(number: int, step: Step, key_prefix: str, *, as_table: bool = False, panels: bool = True,
              font_size: int = FONT_SIZE, level: int = 3, numbers: bool = True) -> None:
    """A step's numbered heading (``level`` 3: with the step's anchor, all its words one element, ``step_markdown``;
    4: inside a page section), why it exists, its formula, its shapes, its note and its matrices (keys
    ``<key_prefix>_<slug>_<i>``)."""
    if level == 3:
        st.markdown(step_markdown(number, step), unsafe_allow_html=True)
    else:
        st.markdown(f"{'#' * level} {number}. {_(step.title)}")
        if step.why:
            st.markdown(_(step.why))
        if step.formula:
            show_formula(step.formula)
        if step.shapes:
            st.markdown(_("Shapes: `{shapes}`").format(shapes=step.shapes))
        if step.note:
            st.markdown(step.note)
    if panels:
        show_panels(step.panels, f"{key_prefix}_{step.slug}", as_table=as_table, font_size=font_size,
                    numbers=numbers)


def panel_rows(run: list[tuple[int, Step]]) -> tuple[tuple[Panel, ...], ...]:
    """A run of steps' panels in rows of at most three (``panels_per_row``): all of them flowing on when they have
    the same rows (tokens), else step by step."""
    def rows_of(panels: tuple[Panel, ...]) -> list[tuple[Panel, ...]]:
        per_row = panels_per_row(len(panels))
        return [panels[start : start + per_row] for start in range(0, len(panels), per_row)]

    panels = tuple(panel for _number, step in run for panel in step.panels)
    if len({panel.matrix.shape[0] for panel in panels}) == 1:
        return tuple(rows_of(panels))
    return tuple(row for _number, step in run for row in rows_of(step.panels))


CAPTION_LINE = '<p style="font-size: 0.875rem; opacity: 0.75">{}</p>'  # a caption's small grey line in a markdown


def show_step_run(run: list[tuple[int, Step]], key_prefix: str, *, as_table: bool = False,
                  font_size: int = FONT_SIZE, numbers: bool = True) -> None:
    """Steps whose charts follow one another (``ui.pipeline.panel_rows.step_runs``): each step's heading and words,
    then ONE chart of all their panels (key ``<key_prefix>_<slugs>_rows``). As tables, on a phone (one matrix under
    another) or for a single panel, each step on its own as ``show_step`` draws it."""
    rows = panel_rows(numbered(run))
    if as_table or on_phone() or sum(map(len, rows)) <= 1 or not combinable(rows):
        for number, step in run:
            show_step(number, step, key_prefix, as_table=as_table, font_size=font_size, numbers=numbers)
        return
    texts = [step_markdown(number, step) for number, step in run]  # every step's words: ONE element (issue 38)
    drawn = drawn_steps(run)
    if len(drawn) > 1:  # the chart stands under every heading of the run: say how a panel finds its step
        texts.append(CAPTION_LINE.format(html.escape(_(
            "The chart below holds steps {first} to {last}: each panel's title starts with its step's number.").format(
            first=drawn[0], last=drawn[-1]), quote=False)))
    st.markdown("\n\n".join(texts), unsafe_allow_html=True)
    figure = cached_figures.panel_rows_figure(rows, font_size=font_size, width_px=MAIN_COLUMN_PX, numbers=numbers)
    slugs = "_".join(step.slug for _number, step in run)
    show_chart(figure, key=f"{key_prefix}_{slugs}_rows", config=chart_config(),
               alt=", ".join(panel.title for row in rows for panel in row))


def step_downloads(steps: list[Step], key_prefix: str, config, head: int, cell: tuple[int, int], *,
                   weights_shown: bool = True) -> None:
    """Each step's matrices as CSV and the whole run as .npz (keys ``<prefix>_dl_<slug>``, ``<prefix>_dl_npz``), in
    an expander whose buttons are sent only while it is open: eleven elements every run sends for a reader who
    rarely opens them (issue 38). While a prediction hides the weights (``weights_shown`` False), the files that
    hold them (the softmax step's CSV, the .npz) are left out, and a line says so.

    The buttons' callables keep the frozen configuration and the head, never the arrays
    (``ui.run.compute.result_later``): a session outlives its tab; a file is built on a click only.
    """
    box = st.expander(_("Downloads: each step's matrices (CSV), the whole run (.npz)"), key=f"{key_prefix}_downloads",
                      on_change="rerun", icon=":material/download:")
    if not box.open:
        return
    if not weights_shown:
        box.caption(_("The attention weights' CSV and the whole run (.npz) are left out until the prediction is "
                      "revealed."))
    row = box.container(horizontal=True, gap="small")
    if weights_shown:
        row.download_button(
            _("The whole run, every intermediate (.npz)"), data=lambda: npz_bytes(result_later(config)),
            file_name="mha_trace.npz", mime="application/octet-stream", key=f"{key_prefix}_dl_npz",
            on_click="ignore", icon=":material/download:",
        )
    for number, step in enumerate(steps, start=1):
        if step.panels and (weights_shown or step.slug != "softmax"):
            step_csv_button(row, number, step, key_prefix, config, head, cell)


def step_csv_button(row, number: int, step: Step, key_prefix: str, config, head: int, cell: tuple[int, int]) -> None:
    """Step ``number``'s matrices as one CSV (``ui.pipeline.step_export``), built on a click only."""
    slug = step.slug  # the callable must not hold ``step``
    row.download_button(
        _("Step {number}'s matrices (CSV)").format(number=number),
        data=lambda: csv_bytes(run_step_frame(result_later(config), head, slug, cell)),
        file_name=step_file_name(number, step), mime="text/csv", key=f"{key_prefix}_dl_{slug}",
        on_click="ignore", icon=":material/download:",
    )


def cell_picker(query_labels: list[str], key_labels: list[str], keys: tuple[str, str]) -> tuple[int, int]:
    """The drill-down's query (row) and key (column) selectors side by side; widget keys ``keys``."""
    left, right = st.columns(2)
    i = left.selectbox(_("Query i (row)"), range(len(query_labels)), key=keys[0], persist_state=KEEP,
                       format_func=query_labels.__getitem__)
    j = right.selectbox(_("Key j (column)"), range(len(key_labels)), key=keys[1], persist_state=KEEP,
                        format_func=key_labels.__getitem__)
    return i, j


def show_drill_down(drill: DrillDown, key_prefix: str, *,
                    outlined: str | None = None,
                    mask_line: bool = True, weights_shown: bool = True) -> None:
    """One cell number by number: the products, the score, the logit, then (when ``weights_shown``) the row's softmax.

    ``outlined`` names where the cell is outlined on the page (None: the score, logit and weight matrices above), in
    the run's language; ``mask_line`` says whether the mask allows the cell.
    """
    query, key = literal(drill.query_label), literal(drill.key_label)
    if outlined is None:
        outlined = _("in the score, logit and weight matrices above")
    st.markdown(_("Head **{head}**, query {query}, key {key} (outlined in magenta {outlined}).").format(
        head=drill.head, query=query, key=key, outlined=outlined))
    for note in drill_notes(drill):
        st.markdown(note)
    left, right = st.columns(2)
    with left:
        st.markdown(_("**q_i, k_j and their elementwise product**"))
        frame = table_values(products_table(drill))
        st.dataframe(frame, column_config=number_columns(frame.columns), key=f"{key_prefix}_drill_products")
    with right:
        st.markdown(_("**From the products to the logit**"))
        st.dataframe(table_values(score_table(drill), 6), column_config=number_columns([_("value")], column_format(6)),
                     key=f"{key_prefix}_drill_score")
    narrow = on_phone()  # one product a line, and the mask's note in parts
    show_formula(dot_product_latex(drill, per_line=1 if narrow else 2))
    show_formula(logit_latex(drill, narrow=narrow))
    if mask_line and drill.allowed:
        st.markdown(_("Mask: **allowed**, query {query} may attend to key {key}.").format(query=query, key=key))
    elif mask_line:
        st.markdown(_("Mask: **masked**, query {query} may not attend to key {key}, so its logit is −∞ and its weight "
                      "is exactly 0.").format(query=query, key=key))
    if not weights_shown:
        st.info(_("The softmax of this row is hidden until the prediction above is revealed."))
        return
    show_formula(softmax_latex(drill))
    if drill.null_key:
        show_formula(null_key_latex(drill))
    if drill.null_key:
        heading = _("**Softmax of row {query}** (key j highlighted; the last row, {null}, is the null key)").format(
            query=query, null=literal(_(NULL_KEY_LABEL)))
    else:
        heading = _("**Softmax of row {query}** (key j highlighted)").format(query=query)
    st.markdown(heading)
    st.dataframe(highlight_key(softmax_row_table(drill), drill.key_label), key=f"{key_prefix}_drill_softmax")
