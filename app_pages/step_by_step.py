"""Step by step: one head from the embeddings to the output, every matrix on screen; a drill-down
into one cell; and predict-then-reveal for the attention weights."""

from dataclasses import replace

import streamlit as st

from ui.charts.markdown import markdown_table
from ui.i18n import _
from ui.pipeline.drill_down import drill_down
from ui.pipeline.panel_rows import step_runs
from ui.pipeline.predict import check_prediction, prediction_message
from ui.pipeline.records import Step, StepInputs, step_inputs
from ui.pipeline.steps import (
    FULLY_MASKED_POLICY,
    build_steps,
    row_sums_heading,
    row_sums_table,
)
from ui.run.compute import compute
from ui.state import navigation
from ui.state.device import on_phone
from ui.state.settings import NUMBERS_MAX_TOKENS, numbers_shown, view_setting
from ui.widgets import step_views as views
from ui.widgets.controls import STEP_KEY, Controls
from ui.widgets.notebook_button import notebook_button
from ui.widgets.presentation import figure_font_size
from ui.widgets.sidebar import sidebar
from ui.widgets.state import KEEP, clamp_choice

KEY_PREFIX = "sbs"
ROW_SUM_FORMAT = "%.6f"  # a row's sum beside the weights: 1.000000, or what the null key leaves


def reveal(question: tuple) -> None:
    """Remember which question was revealed: any change of row, guess, head or settings hides it again."""
    st.session_state.sbs_revealed = question


def predict_then_reveal(result, head: int) -> tuple[int, int] | None:
    """Ask for the largest cell of a row; return (row, guess) once revealed, None while hidden."""
    labels_q, labels_k = result.query_labels, result.key_labels
    clamp_choice("w_guess_q", len(labels_q))
    clamp_choice("w_guess_k", len(labels_k))
    st.markdown(_("**Predict, then reveal.** Looking at the logits above, which key will get the **largest weight** "
                  "in this row?"))
    left, middle, right = st.columns([2, 2, 1], vertical_alignment="bottom")
    row = left.selectbox(_("Row (query)"), range(len(labels_q)), key="w_guess_q", persist_state=KEEP, format_func=labels_q.__getitem__)
    guess = middle.selectbox(_("Your guess (key)"), range(len(labels_k)), key="w_guess_k", persist_state=KEEP, format_func=labels_k.__getitem__)
    question = (result.config, head, row, guess)
    revealed = st.session_state.get("sbs_revealed") == question
    right.button(_("Reveal"), key="sbs_reveal", type="primary", disabled=revealed, on_click=reveal, args=(question,))
    if not revealed:
        st.info(_("The weights of head {head} are hidden until you press **Reveal**. Changing the row or the guess "
                  "hides them again.").format(head=head))
        return None
    trace = result.trace
    check = check_prediction(trace.weights[head, row], guess, fully_masked=bool(trace.fully_masked[head, row]))
    (st.success if check.correct else st.warning)(prediction_message(check, labels_q[row], labels_k))
    return row, guess


def show_softmax(number: int, step: Step, result, inputs: StepInputs, head: int, as_table: bool, predict: bool,
                 font_size: int, numbers: bool) -> bool:
    """The softmax step, maybe hidden behind a prediction; returns True when the weights are on screen."""
    views.show_step(number, step, KEY_PREFIX, panels=False)
    shown = step.panels[0]
    if predict:
        answer = predict_then_reveal(result, head)
        if answer is None:
            return False
        shown = replace(shown, cell=answer)
    left, right = st.columns([3, 1])
    with left:
        views.show_panel(shown, f"{KEY_PREFIX}_softmax_0", as_table=as_table, width_px=views.plot_px(3 / 4),
                         font_size=font_size, numbers=numbers)
    with right:
        # the heading and the table as ONE markdown: a table the browser draws at once, and that presentation mode
        # enlarges (a dataframe is a canvas grid in a fixed font; issue 38)
        table = markdown_table(row_sums_table(inputs, head), ROW_SUM_FORMAT, yes=_("yes"), no=_("no"))
        st.markdown(f"{row_sums_heading(inputs.trace)}\n\n{table}")
    if inputs.trace.fully_masked[head].any():
        st.warning(_(FULLY_MASKED_POLICY))
    else:  # drawn only while open: a paragraph every run would send for the few who ask
        box = st.expander(_("What if a row had every key masked?"), key="sbs_masked_policy", on_change="rerun")
        if box.open:
            box.markdown(_(FULLY_MASKED_POLICY))
    return True


def step_controls(config) -> tuple[int, bool, bool, bool]:
    """The head to follow, the numbers in the cells (``nums``), numbers instead of heatmaps, predict-then-reveal."""
    # One row that wraps (each control as wide as it needs), drawn as ONE element (``Controls``: four widgets and
    # their row were five messages of every Seed +)
    top = Controls(STEP_KEY, row=True)
    head = top.selectbox(_("Head to follow"), range(config.n_heads), key="w_head", persist_state=KEEP,
                         format_func=lambda h: _("head {h}").format(h=h))
    row = view_setting("nums")
    choice = top.selectbox(row.short_name, tuple(row.choices), key=row.key, persist_state=KEEP,
                           format_func=row.choice_label,
                           help=_("Each cell's value printed in it. Auto: for sentences of up to {n} tokens, not "
                                  "on a phone.").format(n=NUMBERS_MAX_TOKENS))
    tokens = max(len(config.tokens), len(config.key_tokens))
    numbers = numbers_shown(choice, tokens, on_phone())
    as_table = top.toggle(_("Numbers instead of heatmaps"), key="w_sbs_table", persist_state=KEEP)
    predict = top.toggle(_("Predict, then reveal"), key="w_sbs_predict", persist_state=KEEP,
                         help=_("Hide the attention weights and let the class guess the largest cell of a row."))
    top.draw()
    return int(head), numbers, as_table, predict


def chosen_cell() -> tuple[int, int]:
    """The drill-down's (query, key), as the link or an earlier pick left them."""
    return int(st.session_state.get("w_qi", 0)), int(st.session_state.get("w_kj", 0))


def show_steps(steps: list[Step], result, inputs: StepInputs, head: int, as_table: bool, predict: bool,
               numbers: bool) -> bool:
    """Every step in order, with a "Jump to" line; returns True when the weights are on screen."""
    font_size = figure_font_size()
    jumps = [f"[{number}.\u00a0{_(step.kind.short_name)}](#{step.slug})" for number, step in enumerate(steps, start=1)]
    drill = _("Drill-down")
    st.markdown(_("**Jump to:** {steps}").format(steps=" · ".join(jumps + [f"[{drill}](#drill-down)"])))
    notebook_button(result.config, "step_by_step")
    downloads = st.container()  # filled after the steps: a prediction still open keeps its answer out of the files
    weights_shown = True
    for run in step_runs(steps):  # steps whose charts follow one another: one chart (issue 38)
        number, step = run[0]
        if step.slug == "softmax":
            weights_shown = show_softmax(number, step, result, inputs, head, as_table, predict, font_size, numbers)
        else:
            views.show_step_run(run, KEY_PREFIX, as_table=as_table, font_size=font_size, numbers=numbers)
    with downloads:
        views.step_downloads(steps, KEY_PREFIX, result.config, head, chosen_cell(), weights_shown=weights_shown)
    return weights_shown


def drill_down_section(result, inputs: StepInputs, head: int, weights_shown: bool) -> None:
    """One cell, number by number: drawn only while its expander is open."""
    st.header(_("Drill-down: one cell, number by number"), anchor="drill-down")
    kernel = result.config.attention_kernel
    if not kernel.drill_down:  # the drill-down re-derives one softmax row (issue 26)
        st.caption(_("The drill-down follows a softmax head; the {kernel} kernel's numbers are in its steps above.").format(
            kernel=_(kernel.name)))
        return
    # Drawn only while open: three tables and three formulas, about a sixth of a rerun's server time
    # (py-spy). A link that names a cell (qi=, kj=) opens it; so does a cell picked earlier in the session.
    # Whether it starts open is decided once per session: a changed ``expanded`` makes a new expander, and the
    # keyboard's focus, on the query box that changed it, was lost (issue 23, item 13).
    # A link that arrives (a page link, Back/Forward) decides it again: its qi=/kj= open the section.
    if navigation.arrived():
        st.session_state.pop("sbs_drill_starts_open", None)
    starts_open = st.session_state.setdefault("sbs_drill_starts_open", chosen_cell() != (0, 0))
    section = st.expander(_("**Open the drill-down**: pick a cell, see its products, score, logit and softmax"),
                          expanded=starts_open, key="sbs_drill_open", on_change="rerun")
    if section.open:
        with section:
            i, j = views.cell_picker(result.query_labels, result.key_labels, ("w_qi", "w_kj"))
            views.show_drill_down(drill_down(inputs, head, i, j), KEY_PREFIX, weights_shown=weights_shown)


def main() -> None:
    config = sidebar()
    st.title(_("Step by step"))
    result = compute(config)
    if result is None:
        return
    if config.is_cross:
        st.markdown(_("Cross-attention: queries from **{queries}**, keys and values from **{keys}**.").format(
            queries=" ".join(config.tokens), keys=" ".join(config.key_tokens)))
    head, numbers, as_table, predict = step_controls(config)
    inputs = step_inputs(result)
    steps = build_steps(inputs, head, chosen_cell())
    weights_shown = show_steps(steps, result, inputs, head, as_table, predict, numbers)
    drill_down_section(result, inputs, head, weights_shown)


main()
