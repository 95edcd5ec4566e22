"""Decoding: generation one token at a time with a KV cache, checked live against full causal attention;
then the same heads under every positional scheme, and RoPE's score as a function of the offset alone."""

import numpy as np
import streamlit as st

from mha_core.config import MHAConfig, RunResult
from mha_core.decoder import assembled_weights, decode_run, decoder_config, max_difference, step_cost
from mha_core.offsets import diagonal_spread, rope_offset_scores
from ui.charts.kernels import weights_signed
from ui.charts.numbers import count
from ui.i18n import _
from ui.pages.decoding import CACHE_TABLE_NAMES, position_configs, qk_axes, shown_table
from ui.pages.decoding.cache_policy_section import cache_policy_section, capture_links
from ui.pages.decoding.lineage import lineage_section
from ui.pages.decoding.variant_stepper import variant_stepper
from ui.pages.decoding.variants import plain_kv_cache, variant_intro
from ui.pipeline.cache_table import cache_table
from ui.pipeline.records import Panel, dim_labels
from ui.run.compute import compute, result_later
from ui.state.settings import POSITION_LABELS
from ui.widgets import step_views as views
from ui.widgets.number_columns import number_columns
from ui.widgets.presentation import figure_font_size
from ui.widgets.sidebar import sidebar
from ui.widgets.state import KEEP, clamp_choice

MAX_OFFSET_POSITIONS = 8  # the RoPE offset matrix: positions 0..7


def move_step(delta: int, last: int) -> None:
    """The previous / next buttons: one step along, within 0..last."""
    st.session_state.w_dec_step = min(max(int(st.session_state.get("w_dec_step", 0)) + delta, 0), last)


@st.fragment
def stepper(config: MHAConfig) -> None:
    """The decoding stepper: only this part reruns while stepping.

    It takes the config, not the result: Streamlit keeps a fragment's arguments for the session's life
    (``ui.run.compute.result_later``).
    """
    result = result_later(config)
    steps = decode_run(result)
    trace, labels = result.trace, result.query_labels
    last = len(steps) - 1
    clamp_choice("w_dec_step", last + 1)
    clamp_choice("w_dec_head", trace.n_heads)
    left, back, forward, right = st.columns([6, 1, 1, 3], vertical_alignment="bottom")
    t = left.slider(_("Step t (the token being generated)"), 0, last, key="w_dec_step", persist_state=KEEP)
    back.button("◀", key="dec_back", on_click=move_step, args=(-1, last), disabled=t == 0, help=_("previous token"))
    forward.button("▶", key="dec_next", on_click=move_step, args=(1, last), disabled=t == last, help=_("next token"))
    head = right.selectbox(_("Head"), range(trace.n_heads), key="w_dec_head", persist_state=KEEP,
                           format_func=lambda h: _("head {h}").format(h=h))
    say_step(steps[t], step_cost(steps[t]), t, max_difference(steps, t, trace.weights), trace, labels)
    show_cache(steps[t], t, head, trace.kv_head_of(head), labels)
    left, right = st.columns(2)
    width = views.plot_px(1 / 2)
    with left:
        views.show_panel(Panel(_("Decoded rows 0..{t} (head {head})").format(t=t, head=head),
                               assembled_weights(steps, t)[head], labels, labels, _("weight"), kind="weights",
                               row_block=(t, t + 1), axis_titles=qk_axes(), allowed=result.mask),
                         "dec_assembled", width_px=width, font_size=figure_font_size())
    with right:
        views.show_panel(Panel(_("Full causal attention (head {head})").format(head=head), trace.weights[head],
                               labels, labels, _("weight"), kind="weights", row_block=(t, t + 1),
                               axis_titles=qk_axes(), allowed=result.mask),
                         "dec_full", width_px=width, font_size=figure_font_size())
    with st.expander(_("The cache step by step (numbers and bytes)")):
        st.dataframe(shown_table(cache_table(steps[: t + 1], labels, trace.n_heads), CACHE_TABLE_NAMES),
                     key="dec_table")
        st.caption(_("Every step reads the whole cache and computes only one row: the work per token is small, "
                     "the memory read grows with the sentence. That is why decoding is memory-bound, and why fewer "
                     "key/value heads (the last column: the same cache with one K/V head per query head) help."))


def say_step(step, cost, t: int, delta: float, trace, labels: list[str]) -> None:
    """The cache's size, the check against full attention, and what step ``t`` computes fresh and reuses."""
    metrics = st.columns(4)
    metrics[0].metric(_("Tokens in the cache"), step.cache.length)
    metrics[1].metric(_("Cache size (numbers)"), count(cost.cache_numbers))
    metrics[2].metric(_("Cache size (bytes, float64)"), count(cost.cache_bytes))
    metrics[3].metric(_("max |Δ| vs full causal"), f"{delta:.1e}", help=_("Over the rows decoded so far, all heads."))
    reused = (_("the keys and values of tokens 0..{last} from the cache, never recomputed").format(last=t - 1) if t
              else _("nothing yet, the cache starts empty"))
    st.markdown(_(
        "Step {t} generates **{token}**. Computed **fresh**: its query for all {heads} heads and its key and value "
        "for the {kv} key/value head(s) (outlined, the last row). **Reused**: {reused}. Its weights are one new row. "
        "Numbers computed fresh: **{fresh}**; read from the cache: **{read}**."
    ).format(t=t, token=labels[t], heads=trace.n_heads, kv=trace.kv_heads, reused=reused, fresh=count(cost.fresh),
             read=count(cost.reused)))


def show_cache(step, t: int, head: int, g: int, labels: list[str]) -> None:
    """Step ``t``'s new query and the K and V caches it reads, the new rows outlined."""
    hs, hv = step.cache.k.shape[-1], step.cache.v.shape[-1]
    panels = (
        Panel(_("q_{t} (head {head}, new query)").format(t=t, head=head), step.q[head], [labels[t]],
              dim_labels(hs, head * hs), "q"),
        Panel(_("K cache (K/V head {g})").format(g=g), step.cache.k[g], labels[: t + 1], dim_labels(hs, g * hs), "k",
              row_block=(t, t + 1)),
        Panel(_("V cache (K/V head {g})").format(g=g), step.cache.v[g], labels[: t + 1], dim_labels(hv, g * hv), "v",
              row_block=(t, t + 1)),
    )
    views.show_panels(panels, "dec_cache", font_size=figure_font_size())


def compare_positions(config) -> None:
    """The same heads' weights under every positional scheme, side by side."""
    st.header(_("Compare positions on the same sentence"), anchor="positions")
    clamp_choice("w_dec_head", config.n_heads)
    head = int(st.session_state.get("w_dec_head", 0))
    st.markdown(_("Head {head}, the same tokens and weights (causal mask); only the positional scheme changes.").format(
        head=head))
    schemes = list(position_configs(config).items())
    for start in range(0, len(schemes), 2):  # two across: four leave no room for the numbers
        for column, (pe, pe_config) in zip(st.columns(2), schemes[start : start + 2], strict=False):
            with column:
                position_panel(pe, pe_config, head)


def position_panel(pe: str, pe_config: MHAConfig, head: int) -> None:
    """Head ``head``'s weights under one positional scheme, or why the scheme cannot run here."""
    try:
        pe_config.validate()
    except ValueError as err:
        st.markdown(f"**{_(POSITION_LABELS[pe])}**")
        st.caption(_("Not available here: {reason}.").format(reason=_(err.args[0]) if err.args and isinstance(err.args[0], str) else err))
        return
    result = compute(pe_config)
    labels = result.query_labels
    kind = "signed" if weights_signed(result.trace) else "weights"  # a signed kernel's weights centred on 0
    views.show_panel(Panel(_(POSITION_LABELS[pe]), result.trace.weights[head], labels, labels, _("weight"),
                           kind=kind, axis_titles=qk_axes(), allowed=result.mask),
                     f"dec_pe_{pe}", width_px=views.plot_px(1 / 2), font_size=figure_font_size())


def rope_offsets(result: RunResult) -> None:
    """One query vector and one key vector moved along the sentence: RoPE's score depends on i − j only."""
    st.header(_("RoPE: the score depends only on the offset i − j"), anchor="rope-offset")
    config, trace = result.config, result.trace
    if config.head_size % 2:
        st.caption(_("RoPE needs an even head size (it is {hs} here).").format(hs=config.head_size))
        return
    head = int(st.session_state.get("w_dec_head", 0))
    q = (trace.q if trace.q_unrotated is None else trace.q_unrotated)[head, 0]  # (hs,) the first token's query, unturned
    k_all = trace.k if trace.k_unrotated is None else trace.k_unrotated  # (kv, Tk, hs)
    k = k_all[trace.kv_head_of(head), min(1, len(result.key_labels) - 1)]  # (hs,) the second token's key
    n = min(MAX_OFFSET_POSITIONS, len(config.tokens))
    scores = rope_offset_scores(q, k, n, config.rope_base)  # (P, P)
    spread = diagonal_spread(scores)
    st.markdown(_(
        "Take head {head}'s query of token 0 and key of token 1 (before rotation) and place them at positions "
        "p and p′ = 0..{last}. Each cell is the score after RoPE turns both: **every diagonal (one offset, "
        "shifted) holds a single number** (largest spread along a diagonal: {spread})."
    ).format(head=head, last=n - 1, spread=f"{spread:.1e}"))
    left, right = st.columns([2, 1])
    with left:
        views.show_panel(Panel(_("q at p · k at p′ after RoPE"), scores, [f"p={p}" for p in range(n)],
                               [f"p′={p}" for p in range(n)], _("score"),
                               axis_titles=(_("query position p"), _("key position p′"))),
                         "dec_rope_offsets", width_px=views.plot_px(2 / 3), font_size=figure_font_size())
    with right:
        offsets = np.arange(-(n - 1), n)
        score = _("score")
        st.dataframe({_("offset p − p′"): offsets, score: [scores.diagonal(-o)[0] for o in offsets]},
                     key="dec_rope_offset_table", hide_index=True, column_config=number_columns([score]))


def decoder_notes(config: MHAConfig) -> None:
    """Say what the page changed to make the sidebar's configuration a decoder's."""
    notes = []
    if config.is_cross:
        notes.append(_("a decoder attends to its own tokens: the key/value sentence is set aside"))
    if config.mask != "causal":
        notes.append(_("a decoder never sees the future: the causal mask replaces mask '{mask}'").format(
            mask=config.mask))
    if notes:
        st.info(_("This page decodes the sentence token by token, so {notes}.").format(notes=_("; ").join(notes)))


def main() -> None:
    cache_links = capture_links()  # before the sidebar rewrites the address bar
    config = sidebar()
    st.title(_("Decoding with a KV cache"))
    decoder = decoder_config(config)
    decoder_notes(config)
    result = compute(decoder)
    if result is None:
        return
    st.markdown(variant_intro(decoder) if not plain_kv_cache(decoder) else _(
        "A decoder generates one token per step. Attention at step t needs the keys and values of every earlier "
        "token: a **KV cache** keeps them, so each step computes one new query row and appends one key and value. "
        "The rows it assembles are exactly the rows of full causal attention, shown beside them."
    ))
    if decoder.scale_rule == "sqrt_t":
        st.caption(_("Scale 1/√T: every step uses T = {T}, the whole sentence's length, as full attention does. A "
                     "generator that does not know T yet would take 1/√(t+1) and get other rows.").format(
            T=len(decoder.tokens)))
    if plain_kv_cache(decoder):  # the cache policies evict from this kernel's KV cache (its record says so)
        stepper(result.config)
        cache_policy_section(result, cache_links)
    else:  # the layer's decoder record says what it keeps (issue 26, 33)
        variant_stepper(result.config)
    compare_positions(decoder)
    rope_offsets(result)
    lineage_section(result)


main()
