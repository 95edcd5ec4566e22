"""The SmolLM2 view's what-ifs (issue 36; builders ui/pages/real_model/whatif.py, numbers mha_core/smollm2_whatif.py).

Read the link once per session (``rm_sparse``, ``rm_sparse_k``, ``rm_sparse_at``, ``rm_sinks``, ``rm_whatif_text``) into
the widgets -> each k of the sweep cached on its own (a progress bar outside the cache) -> the loss against k and the
keys each query kept; the first token dropped: the fitted sinks (cached) and the four losses, one at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import streamlit as st

from mha_core import smollm2 as smol
from mha_core import smollm2_runs as runs
from mha_core import smollm2_shipped as shipped
from mha_core import smollm2_whatif as wi
from ui.i18n import _
from ui.pages.real_model import qknorm as qv
from ui.pages.real_model import section_links as sl
from ui.pages.real_model import whatif as wv
from ui.pages.real_model.long_view import long_section
from ui.pages.real_model.qknorm_view import qknorm_section
from ui.pages.real_model.smollm2 import axis_labels
from ui.run import cached_figures
from ui.state.address import address
from ui.state.device import chart_config
from ui.widgets.live import show_chart
from ui.widgets.state import KEEP

WHATIF_CACHE_ENTRIES = 64  # one float per (text, layers, k) or (text, variant): tiny


@st.cache_resource(max_entries=WHATIF_CACHE_ENTRIES, show_spinner=False)
def cached_sparse_loss(text: str, layers: tuple, k: int, _model: smol.SmolLM2, _run: runs.SmolRun) -> float:
    """Mean loss on ``text`` with top-k attention in ``layers``."""
    return float(wi.sparse_losses(_model, _run, layers, k).mean())


@st.cache_resource(max_entries=WHATIF_CACHE_ENTRIES, show_spinner=False)
def cached_moba_loss(text: str, layers: tuple, blocks: int, _model: smol.SmolLM2, _run: runs.SmolRun) -> float:
    """Mean loss on ``text`` with MoBA (``blocks`` blocks of ``MOBA_BLOCK``) in ``layers``."""
    return float(wi.moba_losses(_model, _run, layers, blocks).mean())


@st.cache_resource(max_entries=8, show_spinner=False)
def cached_kept(text: str, layer: int, k: int, layers: tuple, _model: smol.SmolLM2, _run: runs.SmolRun):
    """The keys each query of each head keeps in ``layer``, (nh, T, T)."""
    return wi.kept_keys(_model, _run, layer, k, layers)


@st.cache_resource(max_entries=8, show_spinner=False)
def cached_head_change(text: str, k: int, _model: smol.SmolLM2, _run: runs.SmolRun):
    """Each head's output change (L, nh) made top-k alone."""
    return wi.head_output_change(_model, _run, k)


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_sinks(text: str, _model: smol.SmolLM2, _run: runs.SmolRun):
    """The fitted sinks (L, nh) and each head's first-token mass (L, nh) on ``text``."""
    return wi.fit_sinks(_model, _run), wi.first_token_mass(_run)


@st.cache_resource(max_entries=WHATIF_CACHE_ENTRIES, show_spinner=False)
def cached_sink_loss(text: str, variant: str, _model: smol.SmolLM2, _run: runs.SmolRun, _sinks) -> float:
    return wi.sink_loss(_model, _run, variant, _sinks)


def read_link(n_layers: int, n_heads: int) -> None:
    """First visit in a session: the link fills the what-if widgets."""
    ss = st.session_state
    if "sm_whatif_link_read" in ss:
        return
    messages = []
    link = wv.read_link(address().to_dict(), n_layers, n_heads, messages)
    ss.w_sm_sparse_on = link.layers is not None
    ss.w_sm_sparse_layers = list(link.layers or ())
    ss.w_sm_sparse_k = link.k
    if link.at is not None:
        ss.w_sm_sparse_layer, ss.w_sm_sparse_head = link.at
    ss.w_sm_sinks_on = link.sinks
    ss.w_sm_whatif_text = link.text
    ss.sm_whatif_messages = messages
    ss.sm_whatif_link_read = True


def write_link(link: wv.WhatIfLink, qknorm: qv.QKNormLink) -> None:
    """The section's settings into the address bar: the what-ifs' and QK-norm's (defaults left out)."""
    sl.sync_params(address(), wv.PARAMS + qv.PARAMS, wv.link_params(link) | qv.link_params(qknorm))


def whatif_section(model: smol.SmolLM2, text: str, run: runs.SmolRun,
                   forward: Callable[[str, smol.SmolLM2], runs.SmolRun]) -> None:
    """Sparse selection, sinks without the sink token and QK-norm after the fact, on the prompt or the calibration
    text."""
    config = model.config
    st.subheader(_("What if: change SmolLM2's attention after training"))
    read_link(config.n_layers, config.n_heads)
    for message in st.session_state.get("sm_whatif_messages", []):
        st.warning(_("Link: {message}").format(message=message))
    st.markdown(_("SmolLM2 was trained with dense attention and a first token that soaks up attention. Each "
                  "experiment below changes one of those choices at inference time and reads the loss: the mean "
                  "cross-entropy of each next token, in nats."))
    which = st.segmented_control(_("Text"), list(wv.TEXTS), key="w_sm_whatif_text", persist_state=KEEP,
                                 format_func=lambda name: _(wv.TEXTS[name]), required=True) or "prompt"
    if which == "calibration":
        st.caption(_("Calibration text: “{text}”").format(text=wi.CALIBRATION_TEXT))
        text, run = wi.CALIBRATION_TEXT, forward(wi.CALIBRATION_TEXT, model)
    sparse_on = st.toggle(_("Sparse selection: keep only the top-k keys per query"), key="w_sm_sparse_on",
                          persist_state=KEEP)
    layers, k, at = None, wv.DEFAULT_K, None
    if sparse_on:
        layers, k, at = sparse_part(model, text, run)
    sinks_on = st.toggle(_("Sinks without the sink token"), key="w_sm_sinks_on", persist_state=KEEP)
    if sinks_on:
        sinks_part(model, text, run, report=not sparse_on)
    qknorm = qknorm_section(model, text, run)
    long_section(model, text)
    write_link(wv.WhatIfLink(layers, k, at, sinks_on, which, qknorm.layers is not None), qknorm)


def sparse_part(model: smol.SmolLM2, text: str, run: runs.SmolRun):
    config = model.config
    st.markdown(_("In the chosen layers each query keeps only its k keys of highest logit (SmolLM2's own q·k after "
                  "RoPE, scaled) and the softmax runs over those alone; the other layers stay dense. The layers "
                  "before the first chosen one are taken from the run above."))
    chosen = st.multiselect(_("Sparse layers (none chosen: all 30)"), range(config.n_layers), key="w_sm_sparse_layers",
                            persist_state=KEEP, format_func=lambda n: _("layer {layer}").format(layer=n))
    layers = tuple(sorted(int(n) for n in chosen))
    used = layers or tuple(range(config.n_layers))
    shipped = shipped_sweep(model, text) if len(used) == config.n_layers else None
    if shipped is not None:
        losses, moba_losses = list(shipped.topk), list(shipped.moba)
        st.caption(_("Read from the sweep shipped with the app (made for this model file, this text and these "
                     "settings; `python -m ui.pages.real_model.whatif_sweep` makes it again)."))
    else:
        losses, moba_losses = sweep_now(model, text, run, used)
    dense = cached_sink_loss(text, "with", model, run, None)
    sweep = wi.SparseSweep(used, wi.SWEEP_K, np.array(losses), dense)
    moba = wi.SparseSweep(used, tuple(b * wi.MOBA_BLOCK for b in wi.SWEEP_BLOCKS), np.array(moba_losses), dense)
    show_chart(wv.sweep_figure(sweep, title=_("Loss against k (sparse layers: {n}; tokens: {t})").format(
        n=len(used), t=run.n_tokens), x_title=_("k: keys kept per query"), y_title=_("mean loss (nats)"),
        sparse_name=_("top-k"), dense_name=_("dense"), moba=moba,
        moba_name=_("MoBA, blocks of {b} (x: keys at most)").format(b=wi.MOBA_BLOCK)),
        key="sm_sparse_sweep", config=chart_config())
    st.dataframe(wv.sweep_frame(sweep), key="sm_sparse_rows", hide_index=True, column_config={
        "k": st.column_config.NumberColumn(_("k")),
        "loss": st.column_config.NumberColumn(_("loss (nats)"), format="%.4f"),
        "rise": st.column_config.NumberColumn(_("rise over dense"), format="%+.4f")})
    st.caption(_("Dense loss {dense} nats. A query that sees fewer than k keys keeps them all, so k ≥ {t} is the "
                 "dense model exactly.").format(dense=f"{sweep.dense:.4f}", t=run.n_tokens))
    st.dataframe(wv.moba_frame(moba, wi.MOBA_BLOCK), key="sm_moba_rows", hide_index=True, column_config={
        "blocks": st.column_config.NumberColumn(_("MoBA blocks kept")),
        "keys": st.column_config.NumberColumn(_("keys at most")),
        "loss": st.column_config.NumberColumn(_("loss (nats)"), format="%.4f"),
        "rise": st.column_config.NumberColumn(_("rise over dense"), format="%+.4f")})
    st.caption(_("MoBA (no parameters, so it runs on the trained weights as they are): keys in blocks of {b}; each "
                 "query keeps its own block and its best earlier blocks by q · mean(K of the block).").format(
        b=wi.MOBA_BLOCK))
    left, middle, right = st.columns(3)
    k = left.select_slider(_("k shown"), list(wi.SWEEP_K), key="w_sm_sparse_k", persist_state=KEEP)
    if st.session_state.get("w_sm_sparse_layer") not in used:
        st.session_state.w_sm_sparse_layer = used[0]
    layer = middle.selectbox(_("Layer"), used, key="w_sm_sparse_layer", persist_state=KEEP,
                             format_func=lambda n: _("layer {layer}").format(layer=n))
    head = right.selectbox(_("Head"), range(config.n_heads), key="w_sm_sparse_head", persist_state=KEEP,
                           format_func=lambda h: _("head {head}").format(head=h))
    kept = cached_kept(text, int(layer), int(k), used, model, run)[int(head)].astype(np.float32)  # (T, T)
    labels = axis_labels(run.tokens)
    show_chart(cached_figures.matrix_heatmap(
        kept, labels, labels, title=_("Keys kept: layer {layer}, head {head}, k = {k}").format(
            layer=layer, head=head, k=k), value_name=_("kept"), signed=False, zmin=0.0, zmax=1.0,
        row_name=_("query"), col_name=_("key"), allowed=np.tri(run.n_tokens, dtype=bool)),
        key="sm_sparse_kept", config=chart_config())
    st.caption(_("1 = the query reads this key, 0 = dropped by top-k; crossed cells are the future (causal mask)."))
    head_tolerance(model, text, run, int(k))
    return layers, int(k), (int(layer), int(head))


def head_tolerance(model: smol.SmolLM2, text: str, run: runs.SmolRun, k: int) -> None:
    """The layers x heads grid of each head's output change made top-k alone."""
    config, change = model.config, cached_head_change(text, k, model, run)  # (L, nh)
    show_chart(cached_figures.matrix_heatmap(
        change.astype(np.float32), [_("layer {layer}").format(layer=n) for n in range(config.n_layers)],
        [str(h) for h in range(config.n_heads)], title=_("Which heads tolerate top-{k}").format(k=k),
        value_name=_("output change"), signed=False, zmin=0.0, zmax=max(1.0, float(change.max())), height=620,
        row_name="", col_name=_("head")), key="sm_sparse_heads", config=chart_config())
    st.caption(_("Each head made top-{k} alone, on the clean run's input to its layer: the change of its output "
                 "‖o_k − o‖ / ‖o‖ over the text (o = A·V). Near 0: the head already read only a few keys; near 1 or "
                 "more: it breaks. Only that head changes; no later layer runs again.").format(k=k))


def sweep_now(model: smol.SmolLM2, text: str, run: runs.SmolRun, used: tuple) -> tuple[list, list]:
    """The top-k and MoBA losses of the sweep, each cached, with a progress bar."""
    bar = st.progress(0.0, text=_("Sweeping k…"))
    losses, moba_losses, total = [], [], len(wi.SWEEP_K) + len(wi.SWEEP_BLOCKS)
    for done, k in enumerate(wi.SWEEP_K, start=1):
        losses.append(cached_sparse_loss(text, used, k, model, run))
        bar.progress(done / total, text=_("k = {k}: {done} of {total}").format(k=k, done=done, total=total))
    for done, blocks in enumerate(wi.SWEEP_BLOCKS, start=len(wi.SWEEP_K) + 1):
        moba_losses.append(cached_moba_loss(text, used, blocks, model, run))
        bar.progress(done / total, text=_("MoBA, {blocks} blocks: {done} of {total}").format(
            blocks=blocks, done=done, total=total))
    bar.empty()
    return losses, moba_losses


@st.cache_resource(max_entries=1, show_spinner=False)
def cached_shipped_file(path: str) -> list[dict]:
    """The shipped sweep's records, read once per server."""
    return shipped.read_shipped(Path(path))


def shipped_sweep(model: smol.SmolLM2, text: str, report: bool = True) -> shipped.ShippedRecord | None:
    """The shipped record for ``text`` (all layers), or None; a stale one is reported (the caller recomputes)."""
    record, stale = shipped.shipped_record(cached_shipped_file(str(shipped.SHIPPED_FILE)), model, text)
    if stale and report:
        st.info(_("The sweep shipped with the app for this text was made with other settings ({names}): computing "
                  "it again.").format(names=", ".join(stale)))
    return record


def sinks_part(model: smol.SmolLM2, text: str, run: runs.SmolRun, report: bool = True) -> None:
    if run.n_tokens < 2:
        st.info(_("A sink is fitted on at least 2 tokens: lengthen the prompt."))
        return
    st.markdown(_("In every layer and head the first token's column is dropped and each row renormalised over the "
                  "other keys. A fitted sink (gpt-oss form) adds one logit s_h per head with no value: "
                  "exp(L_ij) / (exp(s_h) + Σ_j exp(L_ij)). Its s_h gives back the head's mean weight m_h on the first "
                  "token over this text: the sink's share of row i is σ(s_h − log Σ_j exp(L_ij)), and the mean of "
                  "those shares equals m_h at one s_h only, found by bisection. s_h = 0 is the null key."))
    with st.spinner(_("Fitting one sink per head…")):
        sinks, mass = cached_sinks(text, model, run)
    record = shipped_sweep(model, text, report)
    losses = dict(record.sinks) if record is not None else {}
    bar = None if losses else st.progress(0.0, text=_("Running the four variants…"))
    for done, variant in enumerate(() if losses else wi.SINK_VARIANTS, start=1):
        losses[variant] = cached_sink_loss(text, variant, model, run, sinks)
        bar.progress(done / len(wi.SINK_VARIANTS))
    if bar is not None:
        bar.empty()
    st.dataframe(wv.sink_frame(losses), key="sm_sink_losses", hide_index=True, column_config={
        "variant": None, "label": st.column_config.TextColumn(_("attention")),
        "loss": st.column_config.NumberColumn(_("loss (nats)"), format="%.4f"),
        "change": st.column_config.NumberColumn(_("change"), format="%+.4f")})
    layers = [_("layer {layer}").format(layer=n) for n in range(model.config.n_layers)]
    heads = [str(h) for h in range(model.config.n_heads)]
    show_chart(cached_figures.matrix_heatmap(sinks, layers, heads, title=_("fitted sink logit s_h"),
                                             value_name=_("s_h"), signed=True, height=620, row_name="",
                                             col_name=_("head")), key="sm_sink_fit", config=chart_config())
    needy = wv.needy_heads(mass, sinks)
    st.markdown(_("{n} of {total} heads put at least {share} of their attention on the first token: they needed a "
                  "sink.").format(n=len(needy), total=mass.size, share=wv.NEEDED_SINK))
    st.dataframe(needy, key="sm_sink_needy", hide_index=True, column_config={
        "layer": st.column_config.NumberColumn(_("layer")), "head": st.column_config.NumberColumn(_("head")),
        "mass": st.column_config.NumberColumn(_("m_h: weight on token 0"), format="%.3f"),
        "sink": st.column_config.NumberColumn(_("s_h"), format="%.3f")})
