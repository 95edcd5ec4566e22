"""Heads: every head's attention at once, what each head does, and what comes out after W_O.

In presentation mode (toggle ``w_present``) the page shows one head large at a time, with
previous / next buttons, for a projector.

Four sections are drawn only while open: what each head does (the per-head table and the head similarity), and at the
end Take it apart, the quick check and every download (each element is a message every Seed + sends again; issue 38).
"""

import numpy as np
import streamlit as st

from mha_core.kernels import attention_kernel
from ui.charts import colour_ranges, describe, head_panels, tables
from ui.charts.head_panels import (
    map_averages,
    map_title,
    panel_titles,
    shown_matrices,
    shown_view,
    with_averages,
)
from ui.charts.kernels import view_kind
from ui.charts.markdown import literals
from ui.charts.views import MatrixView, kernel_views
from ui.i18n import N_, _, ngettext, sentences
from ui.pages.heads import quiz
from ui.pages.heads.apart_section import take_apart_section
from ui.pages.heads.diagnostics import head_diagnostics
from ui.pages.heads.downloads import downloads_section
from ui.pages.heads.kernel_sections import kernel_sections
from ui.run import cached_figures
from ui.run.compute import compute, result_later
from ui.state.device import chart_config, on_phone
from ui.state.settings import COLOUR_RANGE_LABELS
from ui.widgets.live import show_chart
from ui.widgets.mask_editor import mask_editor
from ui.widgets.phone import swipe_hint
from ui.widgets.presentation import presenting
from ui.widgets.sidebar import sidebar
from ui.widgets.state import KEEP


def view_caption(trace, view: str, colours: str = "fixed") -> str:
    """A view's caption (``head_panels.view_caption``), its hint naming this page's per-head colour range."""
    return head_panels.view_caption(trace, view, colours, _(COLOUR_RANGE_LABELS["head"]))


def presented() -> bool:
    """Presentation mode on a screen that has it (a phone is no projector: there the heads stay one under another)."""
    return presenting() and not on_phone()


def fallback_note(text: str) -> None:
    """Say why a link's choice fell back: in presentation mode as a toast, which takes no height from the figure
    sized to fill a 1280x720 projector under its bar (the caption beside it says what is shown); else on the page."""
    if presented():
        st.toast(text, duration="long")
    else:
        st.info(text)


def offered_view(kernel: str) -> dict[str, MatrixView]:
    """The views kernel ``kernel`` has; a chosen one it has not (a link's, or one kept from another kernel) falls
    back to the weights, with a message."""
    views = kernel_views(kernel)
    chosen = st.session_state.get("w_view", "weights")
    if chosen not in views:
        st.session_state.w_view = "weights"
        fallback_note(head_panels.missing_view(kernel, chosen))
    return views


def view_switch(where, labels: dict[str, str], **options) -> str:
    """The matrix switch (``w_view``): one option per view of ``labels`` (the kernel's, ``offered_view``)."""
    return where.segmented_control(
        _("Show"), list(labels), key="w_view", persist_state=KEEP, format_func=labels.get, required=True, **options
    )


def view_labels(kernel: str, short: bool = False) -> dict[str, str]:
    """The kernel's views by link name -> their labels (``short``: a phone's, the presentation bar's)."""
    return {name: _(view.short_label if short else view.label) for name, view in offered_view(kernel).items()}


def colour_ranges_offered(kernel: str, view: str) -> tuple[str, ...]:
    """The colour ranges the switch offers for ``view`` under ``kernel`` (its record says whether its weights are
    signed): the weights' ranges from 0 up, none for signed weights or another view. A range chosen earlier (a
    link's ``colours=``, or kept from another kernel) that is not offered falls back to the fixed one, with a
    message."""
    if view != "weights":
        return ()
    offered = colour_ranges.offered_ranges(attention_kernel(kernel).signed)
    chosen = st.session_state.get("w_colours", "fixed")
    if chosen != "fixed" and chosen not in offered:
        st.session_state.w_colours = "fixed"
        fallback_note(head_panels.unoffered_colours(kernel, chosen, _(COLOUR_RANGE_LABELS.get(chosen, chosen))))
    return offered


def colour_range_switch(where, kernel: str, view: str, **options) -> str:
    """The weights view's colour range (``w_colours``): fixed 0..1, the largest weight shown, or per head, as far
    as ``colour_ranges_offered``; "fixed" where it offers none (signed weights have one range)."""
    offered = colour_ranges_offered(kernel, view)
    if not offered:
        return "fixed"
    shown = {name: _(label) for name, label in COLOUR_RANGE_LABELS.items()}  # translated in the run
    return where.segmented_control(
        _("Colour range"),
        list(offered),
        key="w_colours",
        persist_state=KEEP,
        format_func=shown.get,
        required=True, **options,
        help=_("0..1 compares heads fairly. For a long sentence, where every weight is small, stretch the colours "
               "to the largest weight shown, or to each head's own largest (the colour bar says which is in force)."),
    )


def view_toolbar(average_help: str, kernel: str) -> tuple[str, bool, str]:
    """The matrix switch (w_view) of ``kernel``'s views, the average toggle (w_avg) and, for weights, the colour
    range (w_colours). The switch takes the width its labels need (a kernel's are long: linear's three take ~570 px
    of 1280x720's 820) and the toggle goes beside it where there is room, else under it; the options wrap rather
    than scroll out of sight."""
    labels = view_labels(kernel, short=on_phone())
    row = st.container(horizontal=True, vertical_alignment="bottom")
    view = view_switch(row, labels, wrap=True)
    average = row.toggle(_("Add the average of the heads"), key="w_avg", persist_state=KEEP, help=average_help)
    colours = colour_range_switch(st, kernel, view)
    return view, average, colours


def fully_masked_note(result) -> None:
    """Say which query rows have no key to attend to, and what our policy gives them."""
    rows = tables.fully_masked_queries(result.trace, result.query_labels)
    if rows:
        shown = literals(rows[:8])
        if len(rows) > 8:
            shown = _("{rows} and {n} more").format(rows=shown, n=len(rows) - 8)
        st.info(_("Fully masked rows: {rows}. No key to attend to, so by our policy their weights and outputs are 0.")
                .format(rows=shown))


def heads_phrase(n_heads: int) -> str:
    """'1 head', '4 heads'."""
    return ngettext("{n} head", "{n} heads", n_heads).format(n=n_heads)


def heads_section(result, view: str, average: bool, colours: str = "fixed", picture=None) -> None:
    """All heads in one figure (plus the average panel) and its caption; the figure in ``picture`` (a container
    drawn earlier, on a phone above the switches) or, None, in the flow before its caption. Its CSV is in the
    downloads section (``downloads_section``)."""
    trace, config = result.trace, result.config
    shown = shown_view(trace, view)
    matrices, titles = shown_matrices(trace, view), panel_titles(trace, view)
    if average:
        matrices, titles = with_averages(matrices, titles, shown.panel_names)
    cols = 1 if on_phone() else min(len(titles), 4)  # a phone shows the heads one under another (4: a head's maps stay in a row)
    panel_px = 220 if on_phone() else int(np.clip(700 / cols, 200, 360))  # about square in the width there is
    fig = cached_figures.attention_grid(
        matrices,
        result.query_labels,
        result.key_labels,
        kind=view_kind(trace, view),  # signed weights (differential) diverging; the kernel's own maps
        titles=titles,
        max_cols=cols,
        panel_px=panel_px,
        mask=result.mask,
        colour_range=colours,
        square=len(titles) == 1,  # one panel: square cells at a natural width, not stretched across the page
    )
    width = "content" if len(titles) == 1 else "stretch"
    words = dict(kind=view_kind(trace, view), titles=titles, mask=result.mask, null_key=trace.null_key)
    show_chart(fig, key="heads_grid", where=picture, config=chart_config(), width=width,
               alt=sentences(*describe.grid_lines(matrices, result.query_labels, result.key_labels, **words)))
    # One caption under the figure (each element is a message per run): what the view's colours mean, then how to
    # read the grid. Above it, it pushed the figure's bottom off a 1280x720 screen.
    st.caption(sentences(view_caption(trace, view, colours), _(
        "Rows = queries (the token that looks), columns = keys (the tokens looked at). "
        "{heads} of size d_k = {hs}; hover a cell for its numbers.").format(heads=heads_phrase(config.n_heads),
                                                                         hs=config.head_size)))
    # The same words for the eye, written only while open (at the caps the description takes ~4 ms).
    section = st.expander(_("Describe this chart"), key="heads_describe", on_change="rerun")
    if section.open:
        section.markdown("\n".join(f"- {line}" for line in describe.grid_lines(
            matrices, result.query_labels, result.key_labels, markdown=True, **words)))


DIAGNOSTICS_TITLE = N_("What each head does")
DIAGNOSTICS_TAIL = N_(": entropy, focus and which heads look alike")


def diagnostics_section(result) -> None:
    """Per-head numbers (entropy, max weight, diagonal / previous / first mass) and head similarity, drawn only
    while their section is open: its words, the table and the chart are four elements every Seed + sent again
    (issue 38). Its label says what is inside; their CSVs are in the downloads section, built on click."""
    section = st.expander(f"**{_(DIAGNOSTICS_TITLE)}**{_(DIAGNOSTICS_TAIL)}", key="diagnostics_open",
                          on_change="rerun")
    if section.open:
        with section:
            diagnostics(result)


def diagnostics(result) -> None:
    """What the numbers are (one element, not a paragraph and two captions), then the table beside the chart."""
    trace = result.trace
    words = tables.diagnostics_caption(trace)
    cosine = _("Cosine similarity of two heads' weight matrices: 1 = the same pattern.")
    st.markdown(sentences(words, cosine))
    left, right = st.columns([3, 2])
    shown = head_diagnostics(result)  # made once per configuration and language
    with left:
        st.dataframe(shown.table, column_config=dict(shown.column_config), key="head_table")
        if on_phone():  # wider than the screen, and a phone shows no scroll bar (below the table: its toolbar
            st.caption(swipe_hint(list(shown.headers)))  # takes the room above it, ui.widgets.phone)
    show_chart(cached_figures.similarity_heatmap(shown.similarity), key="similarity", where=right,
               config=chart_config(), alt=shown.similarity_alt)


def head_output_words(trace) -> str:
    """What one head puts into the concatenation, in words: weights × V, and a differential head's RMSNorm after it."""
    words = attention_kernel(trace.kernel).output_words  # the row's words, filled from its parts (gain, ...)
    return _(words).format(**vars(trace.kernel_parts)) if words else _("weights × V")


MAIN_COLUMN_PX = 820  # the page's column on a 1280-pixel screen beside the sidebar: the figures' width there
PHONE_COLUMN_PX = 350  # ... and on a phone


def outputs_section(result) -> None:
    """The concatenated head outputs with head boundaries and the output after W_O (or a note): one figure, the
    output beside the concatenation (under it on a phone), on one colour bar; the heading and what the figure shows
    above it in one element (their CSVs are in the downloads section)."""
    trace, config = result.trace, result.config
    text = _("Each head's output ({words}) is {size} numbers per token; the heads are laid side by side (black "
             "lines) into {columns} columns. Nothing mixes the heads yet.").format(
        words=head_output_words(trace), size=trace.heads.shape[-1], columns=trace.concat.shape[1])
    if config.output_projection:
        text = sentences(text, _("W_O is the only step that mixes the heads: each output feature is a weighted sum "
                                 "of every head's columns."))
    heading = _("After the heads: concatenate, then W_O")
    st.markdown(f"### {heading}\n\n{text}")
    out_cols = [str(c) for c in range(trace.output.shape[1])]
    output = (trace.output, result.query_labels, out_cols) if config.output_projection else None
    words = dict(title=_("Output = concat · W_O"), value_name=_("output"), row_name=_("query"), col_name=_("feature"))
    fig = cached_figures.concat_and_output(trace.concat, result.query_labels, trace.n_heads,
                                           None if output is None else trace.output, output_words=words,
                                           max_cols=1 if on_phone() else 2,
                                           width_px=PHONE_COLUMN_PX if on_phone() else MAIN_COLUMN_PX)
    alt = describe.describe_concat(trace.concat, result.query_labels, trace.n_heads)
    if output is not None:  # each panel in words, from the same arrays
        alt = sentences(alt, describe.describe_matrix(*output, **words))
    show_chart(fig, key="concat", config=chart_config(), alt=alt)
    if output is None:
        st.info(_("W_O is off (sidebar): the layer's output is the concatenation above, so the heads are never mixed."))


QUIZ_TITLE = N_("Quick check")


def quiz_section(config) -> None:
    """The quick checks, drawn only while their section is open (seven elements a run sends for nothing else)."""
    section = st.expander(f"**{_(QUIZ_TITLE)}**", key="quiz_open", on_change="rerun")
    if section.open:
        with section:
            quiz_questions(config)


@st.fragment
def quiz_questions(config) -> None:
    """Quick checks: a question from this run's own arrays, the answer computed; a score for the session.

    A fragment: "Next question" reruns only this part. It takes the config, not the result: Streamlit
    keeps a fragment's arguments for the session's life (``ui.run.compute.result_later``).
    """
    result = result_later(config)
    ss = st.session_state
    score = ss.setdefault("quiz_score", [0, 0])  # right, asked
    number = ss.setdefault("quiz_number", 0)
    question = quiz.question(result, number)
    st.markdown(question.text)
    if question.options:
        given = st.radio(_("Your answer"), question.options, key=f"quiz_answer_{number}", index=None, horizontal=True,
                         persist_state=KEEP)  # kept while the section is closed, as its question and score are
    else:
        given = st.number_input(_("Your answer"), key=f"quiz_answer_{number}", value=None, step=0.01, format="%.3f",
                                persist_state=KEEP)
    row = st.container(horizontal=True)
    if row.button(_("Check"), key="quiz_check", disabled=given is None or f"quiz_done_{number}" in ss):
        right = quiz.is_right(question, given)
        ss[f"quiz_done_{number}"] = right
        score[0] += int(right)
        score[1] += 1
    if f"quiz_done_{number}" in ss:
        verdict = _("Right") if ss[f"quiz_done_{number}"] else _("Not quite")
        st.markdown(_("**{verdict}**: the answer is **{answer}**. {why}").format(
            verdict=verdict, answer=question.answer_text, why=question.why))
    if row.button(_("Next question"), key="quiz_next"):
        ss.quiz_number = number + 1
        st.rerun(scope="fragment")
    st.caption(_("Score this session: {right} of {asked} (kept in this browser tab only).").format(
        right=score[0], asked=score[1]))


def step_head(delta: int, n_heads: int) -> None:
    """Button callback: move the shown head by ``delta``, wrapping around."""
    st.session_state.w_head = (int(st.session_state.get("w_head", 0)) + delta) % n_heads


PRESENT_FIGURE_PX = 520  # the presentation figure's height: what 1280x720 leaves under the header and two bars
COLOUR_ROW_PX = 56  # ... less the row of its own that the weights' colour-range switch takes on 1280 pixels


def presentation_toolbar(n_heads: int, kernel: str) -> tuple[int, str, bool, str]:
    """Previous / head (``w_head``) / next, the matrix switch (``kernel``'s views), the average toggle, the colour
    range (weights)."""
    labels = view_labels(kernel, short=True)
    row = st.container(horizontal=True, vertical_alignment="center", gap="small")
    # The arrow keys step too, as a presenter's clicker does (it sends Left / Right).
    row.button(_("◀ Previous"), key="head_prev", on_click=step_head, args=(-1, n_heads), shortcut="Left")
    heads = list(range(n_heads))
    common = dict(key="w_head", persist_state=KEEP, format_func=lambda h: _("head {h}").format(h=h),
                  label_visibility="collapsed")
    if n_heads <= 4:  # a few heads: one button each
        head = row.segmented_control(_("Head"), heads, required=True, **common)
    else:
        head = row.selectbox(_("Head"), heads, width=140, **common)
    row.button(_("Next ▶"), key="head_next", on_click=step_head, args=(1, n_heads), shortcut="Right")
    row.space("medium")
    view = view_switch(row, labels, label_visibility="collapsed")
    average = row.toggle(
        _("+ average of heads"),
        key="w_avg",
        persist_state=KEEP,
        help=_("The mean of all heads beside this one, same colours."),
    )
    colours = colour_range_switch(row, kernel, view, label_visibility="collapsed")
    return int(head), view, average, colours


def presentation(result) -> None:
    """One head large with square cells and its numbers beside it; with the average, or a head's several maps
    (differential's L₁, L₂), the panels and the caption below them (two panels leave no room for text beside
    them on 1280 pixels)."""
    trace = result.trace
    head, view, average, colours = presentation_toolbar(trace.n_heads, trace.kernel)
    shown = shown_view(trace, view)
    names = shown.panel_names
    every = shown_matrices(trace, view)  # (nh * maps, Tq, Tk)
    matrices = every[head * len(names) : (head + 1) * len(names)]
    titles = [map_title(_("head {head} of {n}").format(head=head, n=trace.n_heads), name) for name in names]
    if average:
        averages, _names = map_averages(every, names)
        matrices = np.concatenate([matrices, averages])
        titles += [_("average of all heads")] if len(names) == 1 else [map_title(_("average"), name) for name in names]
    several = len(titles) > 1
    n_tokens = max(len(result.query_labels), len(result.key_labels))
    fig = cached_figures.attention_grid(
        matrices,
        result.query_labels,
        result.key_labels,
        kind=view_kind(trace, view),
        titles=titles,
        max_cols=max(2, len(titles) // 2 * 2),  # one row: a head's maps and their averages side by side
        fit_height=PRESENT_FIGURE_PX - (80 if several else 0)
        - (COLOUR_ROW_PX if view == "weights" and colour_ranges.offered_ranges(attention_kernel(trace.kernel).signed)
           else 0),
        font_size=18 if n_tokens <= 24 else 15,
        square=True,
        mask=result.mask, colour_range=colours,
    )
    row = st.container(horizontal=True, gap="large")
    show_chart(fig, key="heads_grid", where=row, width="content", config=chart_config(),
               alt=_("Heatmap of {label}, head {head}: queries in rows, keys in columns").format(label=_(shown.label),
                                                                                           head=head))
    with row.container(width="stretch"):
        summary = tables.head_summary_frame(trace).iloc[head]
        for label, meaning in list(tables.diagnostic_columns(trace).values())[:2]:  # entropy (— for signed rows), max
            value = summary.get(label, np.nan)
            st.metric(_(label), "—" if np.isnan(value) else f"{value:.2f}", help=meaning)
        if not several:
            st.markdown(view_caption(trace, view, colours))  # body text, not a grey caption: read from the back row
            fully_masked_note(result)
    if several:
        note = _("The average is for the eye only: the model keeps every head separate.") if average else ""
        st.markdown(sentences(view_caption(trace, view, colours), note))
        fully_masked_note(result)


DESCRIPTION = N_("Every head of one attention layer, one panel each: which keys each query takes its information from.")


def main() -> None:
    config = sidebar()
    result = compute(config)
    if presented():
        if result is not None:
            presentation(result)
        return
    st.title(_("Heads"))
    # A phone's first screen shows the picture: the description and the switches come under it (issue 23).
    picture = st.container() if on_phone() else None
    st.caption(_(DESCRIPTION))
    if result is None:
        return
    fully_masked_note(result)
    mask_editor(config)
    view, average, colours = view_toolbar(
        _("One extra panel: the mean of the heads on the same colour scale. "
          "The model never uses it — each head's output is kept separate."), result.trace.kernel
    )
    heads_section(result, view, average, colours, picture)
    kernel_sections(result, attention_kernel(result.trace.kernel))  # a kernel's own sections (sparse: kept keys; a gate's opening, a sink's share)
    diagnostics_section(result)
    outputs_section(result)
    take_apart_section(result)
    quiz_section(result.config)
    downloads_section(result, view, average)


main()
