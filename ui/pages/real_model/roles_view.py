"""The SmolLM2 view's "Head roles, with honest scores" (Streamlit; builders ui/pages/real_model/roles.py, scores
mha_core/head_roles.py). Drawn only while its expander is open; the probe is the induction section's run."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_core import head_roles as hr
from mha_core import smollm2 as smol
from ui.charts import describe
from ui.i18n import _
from ui.pages.real_model import roles as rb
from ui.pages.real_model import smollm2 as sb
from ui.run import cached_figures
from ui.state.device import chart_config
from ui.widgets.live import show_chart
from ui.widgets.state import KEEP

PROBE_HALF, PROBE_SEED = 24, 0  # the induction section's sequence: 24 random tokens, repeated


def roles_section(model: smol.SmolLM2, cached_induction) -> None:
    """``cached_induction(half, seed, model)``: the view's cached run of the repeated random sequence."""
    box = st.expander(_("Head roles, with honest scores"), key="w_sm_roles", on_change="rerun")
    if not box.open:
        return
    with box:
        with st.spinner(_("Building a repeated random sequence and running it…")):
            probe = cached_induction(PROBE_HALF, PROBE_SEED, model)
        roles_body(model, probe)


def roles_body(model: smol.SmolLM2, probe) -> None:
    half = probe.half
    scores = hr.role_scores(probe.attentions, half)  # role -> (L, nh)
    roles = hr.assign_roles(scores)  # (L, nh)
    uniform = hr.uniform_scores(half)
    n_heads = roles.size
    st.markdown(_(
        "Every head of every layer is scored on the same probe: {n} random tokens, then the same {n} again, so no "
        "role can come from the meaning of a text. Each score is the mean weight a head puts on the keys its role "
        "names (0..1). A head gets the role of its highest score only when that score reaches **{threshold}**; "
        "otherwise it has **no clear role**. The reason for {threshold}: a head that spreads its weight evenly over "
        "the keys it may see scores at most {uniform} on any role here (the crosses below), so a role at "
        "{threshold} takes a large share of the head's weight, far more than chance."
    ).format(n=half, threshold=hr.THRESHOLD, uniform=f"{max(uniform.values()):.2f}"))
    st.markdown("\n".join(f"- **{_(role.name)}**: {_(role.definition)}" for role in hr.ROLES.values()))
    frame = rb.roles_frame(scores, roles)
    st.dataframe(frame, key="sm_roles_table", hide_index=True, column_config={
        "role": st.column_config.TextColumn(_("role")),
        "heads": st.column_config.NumberColumn(_("heads with this role")),
        "example": st.column_config.TextColumn(_("example head (layer.head)")),
        "its score": st.column_config.NumberColumn(_("its score"), format="%.3f"),
        "median over heads": st.column_config.NumberColumn(_("median over all heads"), format="%.3f")})
    clear = int((roles != "").sum())
    st.caption(_("{clear} of {n} heads have a clear role; {none} have none. A head can score high on two roles (a "
                 "previous-token head is also local); it is named after its highest, previous-token before the "
                 "window that contains it.").format(clear=clear, n=n_heads, none=n_heads - clear))
    figure, alt = rb.distribution_figure(scores, hr.THRESHOLD, uniform)
    show_chart(figure, key="sm_roles_distribution", config=chart_config(), alt=alt)
    example_body(model, probe, scores)


def example_body(model: smol.SmolLM2, probe, scores: dict) -> None:
    """One role's example head on the probe, with what to look for and the lesson that teaches it."""
    key = st.segmented_control(_("Example head of"), list(hr.ROLES), key="w_sm_role_example", persist_state=KEEP,
                               format_func=lambda k: _(hr.ROLES[k].name), required=True, default="induction")
    key = key if key in hr.ROLES else "induction"
    layer, head = rb.example_head(scores, key)
    role = hr.ROLES[key]
    lesson = rb.LESSONS.get(key)
    lesson_link = (" " + _("[The lesson that teaches it]({link}).").format(link=f"lessons?lesson={lesson}")
                   if lesson else "")
    st.markdown(_("**Layer {layer}, head {head}** ({role} score {score}). What to look for: {look_for}").format(
        layer=layer, head=head, role=_(role.name), score=f"{scores[key][layer, head]:.3f}", look_for=_(role.look_for))
        + lesson_link)
    labels = sb.axis_labels([label.text for label in model.token_labels(probe.token_ids)])
    pattern = probe.attentions[layer, head]  # (2n, 2n)
    title = _("layer {layer}, head {head}").format(layer=layer, head=head)
    causal = np.tri(len(labels), dtype=bool)  # (2n, 2n)
    show_chart(cached_figures.matrix_heatmap(pattern, labels, labels, title=title, value_name=_("weight"),
                                             signed=False, zmin=0.0, zmax=1.0, row_name=_("query"), col_name=_("key"),
                                             height=520, allowed=causal),
               key="sm_roles_pattern", config=chart_config(),
               alt=_("Attention weights of {description}").format(description=describe.panel_sentence(
                   pattern, labels, labels, kind="weights", title=title, mask=causal)))
