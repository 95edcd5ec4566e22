"""Step by step: one head from the embeddings to the output, every matrix on screen; a drill-down
into one cell; and predict-then-reveal for the attention weights."""

from dataclasses import replace

import numpy as np
import streamlit as st

from ui.compute import compute
from ui.controls import KEEP, sidebar
from ui.steps import (
    FULLY_MASKED_POLICY,
    Panel,
    Step,
    build_steps,
    check_prediction,
    dot_product_latex,
    drill_down,
    highlight_key,
    logit_latex,
    panel_figure,
    panel_table,
    prediction_message,
    products_table,
    row_sums_table,
    score_table,
    softmax_latex,
    softmax_row_table,
)

NUMBER_FORMAT = "%.4f"
SHORT_NAMES = {  # for the "Jump to" line
    "input": "E", "positional": "+\u00a0P", "qkv": "Q,\u00a0K,\u00a0V", "split": "heads", "scores": "QKᵀ",
    "scale": "scale", "mask": "mask", "softmax": "softmax", "mix": "A·V", "concat": "concat", "output": "W\\_O",
}


def clamp(key: str, size: int) -> None:
    """Reset a selector to 0 when the sentence got shorter than its stored choice."""
    if not 0 <= int(st.session_state.get(key, 0)) < size:
        st.session_state[key] = 0


def show_panels(panels: tuple[Panel, ...], as_table: bool, slug: str) -> None:
    """Up to three matrices side by side, as heatmaps or as tables of numbers."""
    per_row = 3 if len(panels) > 2 else 2
    for start in range(0, len(panels), per_row):
        columns = st.columns([2, 1] if len(panels) == 1 else per_row)
        for offset, panel in enumerate(panels[start : start + per_row]):
            with columns[offset]:
                show_panel(panel, as_table, f"sbs_{slug}_{start + offset}")


def show_panel(panel: Panel, as_table: bool, key: str) -> None:
    if as_table:
        frame = panel_table(panel)
        st.markdown(f"**{panel.title}**")
        number = {c: st.column_config.NumberColumn(format=NUMBER_FORMAT) for c in frame.columns}
        st.dataframe(frame, column_config=None if panel.kind == "mask" else number, key=key)
        if np.isneginf(panel.matrix).any():
            st.caption("Empty (None) cells are masked: their logit is −∞.")
    else:
        st.plotly_chart(panel_figure(panel), key=key)


def show_step(number: int, step: Step, as_table: bool, panels: bool = True) -> None:
    st.subheader(f"{number}. {step.title}", anchor=step.slug)
    if step.why:
        st.markdown(step.why)
    if step.formula:
        st.latex(step.formula)
    if step.shapes:
        st.markdown(f"Shapes: `{step.shapes}`")
    if step.note:
        st.markdown(step.note)
    if panels:
        show_panels(step.panels, as_table, step.slug)


def reveal(question: tuple) -> None:
    """Remember which question was revealed: any change of row, guess, head or settings hides it again."""
    st.session_state.sbs_revealed = question


def predict_then_reveal(result, head: int) -> tuple[int, int] | None:
    """Ask for the largest cell of a row; return (row, guess) once revealed, None while hidden."""
    labels_q, labels_k = result.query_labels, result.key_labels
    clamp("w_guess_q", len(labels_q))
    clamp("w_guess_k", len(labels_k))
    st.markdown("**Predict, then reveal.** Looking at the logits above, which key will get the **largest weight** "
                "in this row?")
    left, middle, right = st.columns([2, 2, 1], vertical_alignment="bottom")
    row = left.selectbox("Row (query)", range(len(labels_q)), key="w_guess_q", persist_state=KEEP, format_func=labels_q.__getitem__)
    guess = middle.selectbox("Your guess (key)", range(len(labels_k)), key="w_guess_k", persist_state=KEEP, format_func=labels_k.__getitem__)
    question = (result.config, head, row, guess)
    revealed = st.session_state.get("sbs_revealed") == question
    right.button("Reveal", key="sbs_reveal", type="primary", disabled=revealed, on_click=reveal, args=(question,))
    if not revealed:
        st.info(f"The weights of head {head} are hidden until you press **Reveal**. "
                "Changing the row or the guess hides them again.")
        return None
    trace = result.trace
    check = check_prediction(trace.weights[head, row], guess, fully_masked=bool(trace.fully_masked[head, row]))
    (st.success if check.correct else st.warning)(prediction_message(check, labels_q[row], labels_k))
    return row, guess


def show_softmax(number: int, step: Step, result, head: int, as_table: bool, predict: bool) -> bool:
    """The softmax step, maybe hidden behind a prediction; returns True when the weights are on screen."""
    show_step(number, step, as_table, panels=False)
    shown = step.panels
    if predict:
        answer = predict_then_reveal(result, head)
        if answer is None:
            return False
        shown = (replace(step.panels[0], cell=answer),)
    left, right = st.columns([3, 1])
    with left:
        show_panel(shown[0], as_table, "sbs_softmax_0")
    with right:
        st.markdown("**Row sums** (1, or 0 for a fully masked row)")
        st.dataframe(row_sums_table(result, head), column_config={"sum": st.column_config.NumberColumn(format="%.6f")},
                     key="sbs_row_sums")
    if result.trace.fully_masked[head].any():
        st.warning(FULLY_MASKED_POLICY)
    else:
        with st.expander("What if a row had every key masked?"):
            st.markdown(FULLY_MASKED_POLICY)
    return True


def show_drill_down(result, head: int, weights_shown: bool) -> None:
    st.header("Drill-down: one cell, number by number", anchor="drill-down")
    left, right = st.columns(2)
    i = left.selectbox("Query i (row)", range(len(result.query_labels)), key="w_qi", persist_state=KEEP,
                       format_func=result.query_labels.__getitem__)
    j = right.selectbox("Key j (column)", range(len(result.key_labels)), key="w_kj", persist_state=KEEP,
                        format_func=result.key_labels.__getitem__)
    drill = drill_down(result, head, i, j)
    st.markdown(f"Head **{head}**, query `{drill.query_label}`, key `{drill.key_label}` "
                "(outlined in magenta in the score, logit and weight matrices above).")
    left, right = st.columns(2)
    with left:
        st.markdown("**q_i, k_j and their elementwise product**")
        frame = products_table(drill)
        st.dataframe(frame, column_config={c: st.column_config.NumberColumn(format=NUMBER_FORMAT) for c in frame.columns},
                     key="sbs_drill_products")
    with right:
        st.markdown("**From the products to the logit**")
        st.dataframe(score_table(drill), column_config={"value": st.column_config.NumberColumn(format="%.6f")},
                     key="sbs_drill_score")
    st.latex(dot_product_latex(drill))
    st.latex(logit_latex(drill))
    if drill.allowed:
        st.markdown(f"Mask: **allowed**, query `{drill.query_label}` may attend to key `{drill.key_label}`.")
    else:
        st.markdown(f"Mask: **masked**, query `{drill.query_label}` may not attend to key `{drill.key_label}`, "
                    "so its logit is −∞ and its weight is exactly 0.")
    if not weights_shown:
        st.info("The softmax of this row is hidden until the prediction above is revealed.")
        return
    st.latex(softmax_latex(drill))
    st.markdown(f"**Softmax of row `{drill.query_label}`** (key j highlighted)")
    st.dataframe(highlight_key(softmax_row_table(drill), drill.key_label), key="sbs_drill_softmax")


config = sidebar()
st.title("Step by step")
result = compute(config)
if result is not None:
    if config.is_cross:
        st.markdown(f"Cross-attention: queries from **{' '.join(config.tokens)}**, keys and values from "
                    f"**{' '.join(config.key_tokens)}**.")
    top = st.columns(3, vertical_alignment="bottom")
    head = top[0].selectbox("Head to follow", range(config.n_heads), key="w_head", persist_state=KEEP, format_func=lambda h: f"head {h}")
    as_table = top[1].toggle("Numbers instead of heatmaps", key="w_sbs_table", persist_state=KEEP)
    predict = top[2].toggle("Predict, then reveal", key="w_sbs_predict", persist_state=KEEP,
                            help="Hide the attention weights and let the class guess the largest cell of a row.")
    cell = (int(st.session_state.get("w_qi", 0)), int(st.session_state.get("w_kj", 0)))
    steps = build_steps(result, head, cell)
    jumps = [f"[{number}.\u00a0{SHORT_NAMES[step.slug]}](#{step.slug})" for number, step in enumerate(steps, start=1)]
    st.markdown("**Jump to:** " + " · ".join(jumps + ["[Drill-down](#drill-down)"]))
    weights_shown = True
    for number, step in enumerate(steps, start=1):
        if step.slug == "softmax":
            weights_shown = show_softmax(number, step, result, head, as_table, predict)
        else:
            show_step(number, step, as_table)
    show_drill_down(result, head, weights_shown)
