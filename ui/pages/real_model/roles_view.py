"""The Real model page's "Head roles, with honest scores" for either model (Streamlit; builders
ui/pages/real_model/roles.py, scores mha_core/head_roles.py). Drawn only while its expander is open; SmolLM2's probe
is the induction section's run, MiniLM's the same kind of sequence between [CLS] and [SEP]
(mha_core/minilm_roles.py). The link's ``rm_roles`` opens it with that role's example head (``section_links``)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_core import head_roles as hr
from mha_core import minilm_roles as mr
from mha_core import smollm2 as smol
from mha_core.pretrained import MiniLM
from ui.charts import describe
from ui.charts.numbers import EMPTY_CELL
from ui.i18n import _, sentences
from ui.pages.real_model import roles as rb
from ui.pages.real_model import section_links as sl
from ui.pages.real_model import smollm2 as sb
from ui.run import cached_figures
from ui.state.address import address
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.phone import swipe_hint
from ui.widgets.state import KEEP

PROBE_HALF, PROBE_SEED = 24, 0  # the induction section's sequence: 24 random tokens, repeated
DEFAULT_ROLE = {"sm": "induction", "rm": "previous"}  # the example shown first, per model (prefix)


@st.cache_resource(max_entries=1, show_spinner=False)
def cached_minilm_probe(_model: MiniLM) -> mr.EncoderProbe:
    """MiniLM's repeated random probe, run once per server (the model is one per server)."""
    return mr.run_probe(_model, PROBE_HALF, PROBE_SEED)


def read_link(prefix: str, table: dict[str, hr.Role]) -> None:
    """First visit of a model's view in a session: the link's rm_roles opens the section on that role."""
    ss = st.session_state
    if f"{prefix}_roles_link_read" in ss:
        return
    messages: list[str] = []
    role = sl.role_from_link(address().to_dict(), table, DEFAULT_ROLE[prefix], messages)
    ss[f"w_{prefix}_roles"] = role is not None or bool(ss.get(f"w_{prefix}_roles"))
    ss[f"w_{prefix}_role_example"] = role or ss.get(f"w_{prefix}_role_example") or DEFAULT_ROLE[prefix]
    ss[f"{prefix}_roles_messages"] = messages
    ss[f"{prefix}_roles_link_read"] = True


def write_link(role: str | None) -> None:
    sl.sync_params(address(), (sl.ROLES_PARAM,), {} if role is None else {sl.ROLES_PARAM: role})


def opened(prefix: str, table: dict[str, hr.Role]):
    """The section's expander when it is open (its link messages shown in it), else None (the link cleared)."""
    read_link(prefix, table)
    box = st.expander(_("Head roles, with honest scores"), key=f"w_{prefix}_roles", on_change="rerun")
    if not box.open:
        write_link(None)
        return None
    for message in st.session_state.get(f"{prefix}_roles_messages", []):
        box.warning(_("Link: {message}").format(message=message))
    return box


def roles_section(model: smol.SmolLM2, cached_induction) -> None:
    """SmolLM2's. ``cached_induction(half, seed, model)``: the view's cached run of the repeated random sequence."""
    box = opened("sm", hr.ROLES)
    if box is None:
        return
    with box:
        with st.spinner(_("Building a repeated random sequence and running it…")):
            probe = cached_induction(PROBE_HALF, PROBE_SEED, model)
        labels = sb.axis_labels([label.text for label in model.token_labels(probe.token_ids)])
        roles_body("sm", probe.attentions, probe.half, labels, hr.ROLES, causal=True)


def minilm_roles_section(model: MiniLM) -> None:
    """MiniLM's: the encoder's roles on its own probe, induction left out (the page says why)."""
    box = opened("rm", hr.ENCODER_ROLES)
    if box is None:
        return
    with box:
        with st.spinner(_("Building a repeated random sequence and running it…")):
            probe = cached_minilm_probe(model)
        st.markdown(sentences(_(
            "This encoder's probe sits between [CLS] and [SEP]: T = 2n + 2 = {t} positions, the copies at 1..{n} and "
            "{second}..{last}. Every query sees every key, so a head spreading its weight evenly puts 1/{t} on each."
        ).format(t=len(probe.tokens), n=probe.half, second=probe.half + 1, last=2 * probe.half),
            _(hr.ENCODER_NO_INDUCTION)))
        roles_body("rm", probe.attentions, probe.half, sb.axis_labels(list(probe.tokens)), hr.ENCODER_ROLES,
                   causal=False)


def roles_body(prefix: str, attentions: np.ndarray, half: int, labels: list[str], table: dict[str, hr.Role],
               causal: bool) -> None:
    """``attentions`` (L, nh, T, T) on the probe of ``half`` tokens repeated; ``table`` the model's roles."""
    t = attentions.shape[-1]
    scores = hr.role_scores(attentions, half, table)  # role -> (L, nh)
    roles = hr.assign_roles(scores, roles=table)  # (L, nh)
    uniform = hr.uniform_scores(half, table, t, causal)
    n_heads = roles.size
    st.markdown(_(
        "Every head of every layer is scored on the same probe: {n} random tokens, then the same {n} again, so no "
        "role can come from the meaning of a text. Each score is the mean weight a head puts on the keys its role "
        "names (0..1). A head gets the role of its highest score only when that score reaches **{threshold}**; "
        "otherwise it has **no clear role**. The reason for {threshold}: a head that spreads its weight evenly over "
        "the keys it may see scores at most {uniform} on any role here (the crosses below), so a role at "
        "{threshold} takes a large share of the head's weight, far more than chance."
    ).format(n=half, threshold=hr.THRESHOLD, uniform=f"{max(uniform.values()):.2f}"))
    st.markdown("\n".join(f"- **{_(role.name)}**: {_(role.definition)}" for role in table.values()))
    frame = rb.roles_frame(scores, roles, table)
    headers = {"role": _("role"), "heads": _("heads with this role"), "example": _("example head (layer.head)"),
               "its score": _("its score"), "median over heads": _("median over all heads")}
    if on_phone():  # five columns are wider than a phone: it scrolls sideways, with no scroll bar
        st.caption(swipe_hint(headers.values()))
    st.dataframe(frame, key=f"{prefix}_roles_table", hide_index=True, placeholder=EMPTY_CELL, column_config={
        "role": st.column_config.TextColumn(headers["role"]),
        "heads": st.column_config.NumberColumn(headers["heads"]),
        "example": st.column_config.TextColumn(headers["example"]),
        "its score": st.column_config.NumberColumn(headers["its score"], format="%.3f"),
        "median over heads": st.column_config.NumberColumn(headers["median over heads"], format="%.3f")})
    clear = int((roles != "").sum())
    st.caption(sentences(_(
        "{clear} of {n} heads have a clear role; {none} have none. A head can score high on two roles (a "
        "previous-token head is also local); it is named after its highest, previous-token before the "
        "window that contains it.").format(clear=clear, n=n_heads, none=n_heads - clear), _(
        "{empty}: the heads with no clear role have no example head and no score of their own.").format(
        empty=EMPTY_CELL)))
    figure, alt = rb.distribution_figure(scores, hr.THRESHOLD, uniform, table)
    show_chart(figure, key=f"{prefix}_roles_distribution", config=chart_config(), alt=alt)
    example_body(prefix, attentions, labels, scores, table, causal)


def example_body(prefix: str, attentions: np.ndarray, labels: list[str], scores: dict, table: dict[str, hr.Role],
                 causal: bool) -> None:
    """One role's example head on the probe, with what to look for and the lesson that teaches it."""
    ss, key = st.session_state, f"w_{prefix}_role_example"
    if ss.get(key) not in table:
        ss[key] = DEFAULT_ROLE[prefix]
    role_key = st.segmented_control(_("Example head of"), list(table), key=key, persist_state=KEEP,
                                    format_func=lambda k: _(table[k].name), required=True) or DEFAULT_ROLE[prefix]
    write_link(role_key)
    layer, head = rb.example_head(scores, role_key)
    role = table[role_key]
    lesson = rb.LESSONS.get(role_key)
    lesson_link = (_("[The lesson that teaches it]({link}).").format(link=f"lessons?lesson={lesson}")
                   if lesson else "")
    example = _("**Layer {layer}, head {head}** ({role} score {score}). What to look for: {look_for}").format(
        layer=layer, head=head, role=_(role.name), score=f"{scores[role_key][layer, head]:.3f}",
        look_for=_(role.look_for))
    st.markdown(sentences(example, lesson_link))
    pattern = attentions[layer, head]  # (T, T)
    title = _("layer {layer}, head {head}").format(layer=layer, head=head)
    allowed = np.tri(len(labels), dtype=bool) if causal else None  # (T, T)
    show_chart(cached_figures.matrix_heatmap(pattern, labels, labels, title=title, value_name=_("weight"),
                                             signed=False, zmin=0.0, zmax=1.0, row_name=_("query"), col_name=_("key"),
                                             height=520, allowed=allowed),
               key=f"{prefix}_roles_pattern", config=chart_config(),
               alt=_("Attention weights of {description}").format(description=describe.panel_sentence(
                   pattern, labels, labels, kind="weights", title=title, mask=allowed)))
