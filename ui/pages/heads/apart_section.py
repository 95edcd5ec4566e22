"""Heads' "Take it apart" section: each head's contribution to the output (checked live), a knock-out per head,
and what each key carries (the norm-weighted weights). The arrays come from ``ui/pages/heads/apart.py``."""

import numpy as np
import streamlit as st

from mha_core.kernels import attention_kernel
from ui.charts import describe, figures, numbers, tables
from ui.charts.figures import MAX_DRAWN_CELLS
from ui.charts.views import matrix_view
from ui.i18n import N_, _, sentences
from ui.pages.heads import apart
from ui.pages.heads.downloads import download_csv
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.number_columns import number_columns
from ui.widgets.state import KEEP

SINK_NOTE = N_(
    "**Why is all the attention on the first token?** Softmax must give every row weights that sum to 1, so a "
    "query with nothing useful to read still has to put its weight somewhere; trained models learn to park it "
    "on the first token (in BERT on [CLS] and [SEP]: Clark et al. 2019), whose value vector is short, so the "
    "output barely changes (an *attention sink*). Try it: Weights → *hand-built: first-token (sink) head*, then "
    "compare the weights with the norm-weighted view, and switch on **Null key (softmax₁)** under Scores: a row "
    "may then put weight on an implicit key of score 0 and value 0, and its weights sum to less than 1. "
    "In the hand-built head the first key's score (about 150) dwarfs the null key's 0, so the sink stays; with the "
    "seeded random weights, where scores are small, every row visibly gives part of its weight to nothing."
)


APART_TITLE = N_("Take it apart: each head's contribution, and knocking heads out")


def take_apart_section(result) -> None:
    """The take-apart section, drawn only while it is open: it is the heaviest part of the page.

    A closed section costs nothing on a rerun (measured: about a quarter of a Heads rerun's server
    time, three figures and a table). It opens by itself when the link knocks heads out.
    """
    section = st.expander(f"**{_(APART_TITLE)}**", expanded=bool(st.session_state.get("w_knock")),
                          key="apart_open", on_change="rerun")
    if section.open:
        with section:
            take_apart(result)


def take_apart(result) -> None:
    """Output = sum of the heads' contributions (checked live), a knock-out per head, and what each key carries."""
    off = knock_out_switch(result.trace.n_heads)
    parts = apart.take_apart(result, off)
    w_o_name = _("W_O[rows of h]") if result.config.output_projection else _("its own columns (W_O is off)")
    st.markdown(
        f"output = Σ_h head_h · {w_o_name}" + (" + b_O" if result.weights.b_o is not None else "")
        + _(" — checked now: max |output − Σ contributions| = **{gap:.1e}**").format(gap=parts.identity_gap)
    )
    left, right = st.columns(2)
    with left:
        head = contribution_panel(result, parts, off)
    with right:
        knock_out_panel(result, parts, off)
    carried_panel(result, parts, head, off)
    st.markdown(_(SINK_NOTE))


def knock_out_switch(n_heads: int) -> list[int]:
    """The heads to knock out (``w_knock``, ``knock=`` in a link), kept inside the current head count."""
    ss = st.session_state
    ss.w_knock = [h for h in ss.get("w_knock", ()) if h < n_heads]  # the head count may have shrunk
    return st.pills(
        _("Knock out heads (zero their contribution)"),
        list(range(n_heads)),
        selection_mode="multi",
        key="w_knock",
        persist_state=KEEP,
        format_func=lambda h: _("head {h}").format(h=h),
        help=_("Head ablation: the output is rebuilt without these heads' terms; b_O stays."),
    )


def contribution_panel(result, parts, off) -> int:
    """One head's contribution to the output (the head chosen here, returned) and the CSV of all heads'."""
    head = st.selectbox(_("Contribution of"), list(range(result.trace.n_heads)), key="apart_head",
                        format_func=lambda h: _("head {h}").format(h=h))
    c_out = parts.contributions.shape[-1]
    show_chart(
        figures.matrix_heatmap(parts.contributions[head], result.query_labels, apart.feature_labels(c_out),
                               title=_("head {head}'s contribution").format(head=head),
                               value_name=_("contribution"), row_name=_("query"), col_name=_("feature"),
                               width_px=560),
        key="apart_contribution",
        config=chart_config(),
        alt=_("Head {head}'s contribution to the output, one row per token").format(head=head),
    )
    download_csv(_("Contributions, all heads (CSV)"), result.config,
                 lambda r: apart.contributions_frame(apart.take_apart(r, off), r.query_labels),
                 "contributions.csv", "dl_contributions")
    return head


def knock_out_panel(result, parts, off) -> None:
    """How much each token's output changes with the heads ``off``: bars, a table and two CSVs."""
    change = apart.change_frame(parts, result.query_labels)
    heads_off = ", ".join(map(str, parts.knocked.heads_off)) or _("none")
    show_chart(apart.change_bars(change[_("‖change‖")].to_numpy(), result.query_labels,
                                 title=_("‖change in output‖ per token, heads off: {heads}").format(heads=heads_off),
                                 value_name=_("‖change‖")),
               key="apart_change", config=chart_config(), alt=_("Change in the output per token, heads off: {heads}").format(heads=heads_off))
    st.dataframe(numbers.table_values(change), key="apart_change_table", height=min(38 + 35 * len(change), 300),
                 column_config=number_columns(numbers.float_columns(change)))
    download_csv(_("Output change per token (CSV)"), result.config,
                 lambda r: apart.change_frame(apart.take_apart(r, off), r.query_labels),
                 "knock_out_change.csv", "dl_knock_change")
    download_csv(_("Output after knock-out (CSV)"), result.config, lambda r: knocked_output_frame(r, off),
                 "knocked_output.csv", "dl_knock_output")


def carried_panel(result, parts, head: int, off) -> None:
    """‖key j's share of row i of head h's contribution‖ per head (only ``head`` when the stack is too big to draw),
    and its CSV."""
    kind, scale = apart.carried_kind(result.trace.kernel), attention_kernel(result.trace.kernel).row_scale
    formula = matrix_view(kind).value_name
    st.markdown(_("**Where the mass goes, and what it carries.** Beside the weights (the first figure on this page): "
                  "{formula}, the size of what key j adds to query i's row of head h's contribution (v_j measured "
                  "*after* W_O(h), head h's rows of W_O; Kobayashi et al. 2020). A key can take much weight and add "
                  "little.").format(formula=formula))
    if scale is not None:
        st.caption(_("This kernel multiplies row i of each head's A·V by one number before the concatenation, "
                     "c_i = {formula}, so row i is still Σ_j c_i·w_ij·v_j: key j's exact share of it is "
                     "c_i·w_ij·v_j W_O(h), and the map shows its norm (|weight|: a weight here can be negative).")
                   .format(formula=scale.formula))
    if getattr(result.trace.kernel_parts, "gate", None) is not None:
        st.caption(_("A gated head multiplies row i of A·V by its gate g_i = σ(x_i W_θ), feature by feature, so row i "
                     "is Σ_j w_ij·(g_i ⊙ v_j): key j's exact share of it is w_ij·(g_i ⊙ v_j) W_O(h), and the map shows "
                     "its norm."))
    n_heads = result.trace.n_heads
    shown_heads = list(range(n_heads)) if parts.carried.size <= MAX_DRAWN_CELLS else [head]
    titles = [_("head {h}: {formula}").format(h=h, formula=formula) for h in shown_heads]
    show_chart(figures.attention_grid(parts.carried[shown_heads], result.query_labels, result.key_labels,
                                      kind=kind, titles=titles,
                                      max_cols=1 if on_phone() else min(len(shown_heads), 4), panel_px=170,
                                      mask=result.mask),
               key="apart_carried", config=chart_config(),
               alt=sentences(*describe.grid_lines(parts.carried[shown_heads], result.query_labels, result.key_labels,
                                                kind=kind, titles=titles, mask=result.mask)))
    if len(shown_heads) < n_heads:
        st.caption(_("At this size only head {head} (chosen above) is drawn, to keep the page light; the CSV has all.")
                   .format(head=head))
    download_csv(_("Weights and norm-weighted weights (CSV)"), result.config, lambda r: carried_frame(r, off),
                 "norm_weighted.csv", "dl_carried")


def knocked_output_frame(result, off):
    """The output with heads ``off`` knocked out, as a table (built on a download's click)."""
    output = apart.take_apart(result, off).knocked.output  # (Tq, C_out)
    return tables.matrix_frame(output, result.query_labels, apart.feature_labels(output.shape[1]))


def carried_frame(result, off):
    """Every head's weights, then its norm-weighted map, as one long table (built on a download's click)."""
    n_heads = result.trace.n_heads
    shown = np.concatenate([result.trace.weights, apart.take_apart(result, off).carried])  # (2 nh, Tq, Tk)
    formula = matrix_view(apart.carried_kind(result.trace.kernel)).value_name.replace("×", "x").replace("‖", "|")
    titles = [f"head {h} weight" for h in range(n_heads)] + [f"head {h} {formula}" for h in range(n_heads)]
    return tables.stacked_frame(shown, titles, result.query_labels, result.key_labels)
