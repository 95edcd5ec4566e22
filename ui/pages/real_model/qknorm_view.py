"""The SmolLM2 view's "QK-norm after the fact" (issue 36; builders ui/pages/real_model/qknorm.py, numbers
mha_core/smollm2_qknorm.py).

Read the link once per session (``rm_qknorm``, ``rm_qknorm_gain``) into the widgets -> both gains' runs cached (a
progress bar outside the cache) -> the loss table, each layer's logit range before and after, why the gains must be
learned.
"""

from __future__ import annotations

import streamlit as st

from mha_core import smollm2 as smol
from mha_core import smollm2_qknorm as qn
from mha_core import smollm2_runs as runs
from ui.i18n import _
from ui.pages.real_model import qknorm as qv
from ui.state.address import address
from ui.state.device import chart_config
from ui.widgets.live import show_chart
from ui.widgets.state import KEEP


@st.cache_resource(max_entries=16, show_spinner=False)
def cached_qk_norm_run(text: str, layers: tuple, gain: str, _model: smol.SmolLM2, _run: runs.SmolRun) -> qn.QKNormRun:
    """The run of ``text`` with QK-norm (``gain``) in ``layers``."""
    return qn.qk_norm_run(_model, _run, layers, gain)


def read_link(n_layers: int) -> None:
    """First visit in a session: the link fills the QK-norm widgets."""
    ss = st.session_state
    if "sm_qknorm_link_read" in ss:
        return
    messages = []
    link = qv.read_link(address().to_dict(), n_layers, messages)
    ss.w_sm_qknorm_on = link.layers is not None
    ss.w_sm_qknorm_layers = list(link.layers or ())
    ss.w_sm_qknorm_gain = link.gain
    ss.sm_qknorm_messages = messages
    ss.sm_qknorm_link_read = True


def qknorm_section(model: smol.SmolLM2, text: str, run: runs.SmolRun) -> qv.QKNormLink:
    """The toggle and, when on, the experiment on ``text``; its settings for the section's link."""
    read_link(model.config.n_layers)
    for message in st.session_state.get("sm_qknorm_messages", []):
        st.warning(_("Link: {message}").format(message=message))
    on = st.toggle(_("QK-norm after the fact"), key="w_sm_qknorm_on", persist_state=KEEP)
    if not on:
        return qv.QKNormLink()
    config = model.config
    bound = config.head_size / config.head_size**0.5  # scale · hs with gains 1
    st.markdown(_("SmolLM2 never had QK-norm. In the chosen layers each head's q and k are RMS-normalised over "
                  "their {hs} features before RoPE, as Qwen3's q_norm and k_norm do: q̂ = g · q / RMS(q), "
                  "k̂ = k / RMS(k). With gains 1 no logit can pass scale · hs = {bound}. The matched gain g_l makes "
                  "the RMS of layer l's logits over the text's visible pairs equal to the trained layer's: "
                  "g_l = RMS(trained logits) / RMS(logits with g = 1).").format(hs=config.head_size,
                                                                                 bound=f"{bound:g}"))
    left, right = st.columns(2)
    chosen = left.multiselect(_("QK-norm layers (none chosen: all 30)"), range(config.n_layers),
                              key="w_sm_qknorm_layers", persist_state=KEEP,
                              format_func=lambda n: _("layer {layer}").format(layer=n))
    gain = right.segmented_control(_("Gain charted"), list(qn.GAINS), key="w_sm_qknorm_gain", persist_state=KEEP,
                                   format_func=lambda name: _(qv.GAIN_LABELS[name]), required=True) or "one"
    layers = tuple(sorted(int(n) for n in chosen))
    used = layers or tuple(range(config.n_layers))
    bar = st.progress(0.0, text=_("Running the layers with QK-norm…"))
    results = {}
    for done, name in enumerate(qn.GAINS, start=1):
        results[name] = cached_qk_norm_run(text, used, name, model, run)
        bar.progress(done / len(qn.GAINS), text=_("{gain}: {done} of {total}").format(
            gain=_(qv.GAIN_LABELS[name]), done=done, total=len(qn.GAINS)))
    bar.empty()
    st.dataframe(qv.loss_frame(results), key="sm_qknorm_losses", hide_index=True, column_config={
        "gain": None, "label": st.column_config.TextColumn(_("attention")),
        "loss": st.column_config.NumberColumn(_("loss (nats)"), format="%.4f"),
        "change": st.column_config.NumberColumn(_("change"), format="%+.4f")})
    shown = results[gain]
    show_chart(qv.range_figure(shown, title=_("Logits' range per layer: {gain}").format(gain=qv.GAIN_SYMBOLS[gain]),
                               x_title=_("layer"), y_title=_("logit (visible pairs, all heads)"),
                               names=(_("trained"), _("with QK-norm")), bound=bound if gain == "one" else None,
                               bound_name=_("±scale · hs")), key="sm_qknorm_range", config=chart_config())
    st.dataframe(qv.range_frame(shown), key="sm_qknorm_rows", hide_index=True, column_config={
        "layer": st.column_config.NumberColumn(_("layer")),
        "before_min": st.column_config.NumberColumn(_("trained min"), format="%.3f"),
        "before_max": st.column_config.NumberColumn(_("trained max"), format="%.3f"),
        "after_min": st.column_config.NumberColumn(_("QK-norm min"), format="%.3f"),
        "after_max": st.column_config.NumberColumn(_("QK-norm max"), format="%.3f"),
        "gain": st.column_config.NumberColumn(_("gain g"), format="%.3f")})
    widest = int(shown.before[:, 1].argmax())
    st.caption(_("Why the gains must be learned: the norm throws away each q's and k's length, which the trained "
                 "weights used to make some keys stand out (layer {layer}'s largest trained logit is {top}; with "
                 "gains 1 nothing passes {bound}). One gain per layer gives back the overall spread but not which "
                 "tokens had long q or k: the loss is {matched} nats against {dense} as trained. A model trained "
                 "with QK-norm learns its gains together with W_Q and W_K.").format(
        layer=widest, top=f"{shown.before[widest, 1]:.3f}", bound=f"{bound:g}",
        matched=f"{results['matched'].loss:.4f}", dense=f"{shown.dense:.4f}"))
    return qv.QKNormLink(layers, gain)
