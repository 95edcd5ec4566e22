"""The Decoding page's cache policy section, drawn with Streamlit: full cache, sliding window, window + sinks.

``capture_links`` must run before the sidebar (which rewrites the address bar); ``cache_policy_section``
draws the section from the decoder's result. Builders: ``ui.pages.decoding.cache_policy``.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_core.cache_policy import POLICIES, POSITIONINGS, policy_run
from mha_core.config import RunResult
from ui.i18n import N_, _, sentences
from ui.pages.decoding import qk_axes, shown_table
from ui.pages.decoding.cache_policy import (
    CACHE_SETTINGS,
    SETTING,
    TABLE_NAMES,
    held_mask,
    held_table,
    placed_weights,
    positions_table,
    restricted_gap,
    spare_mass,
    spare_sentence,
)
from ui.pipeline.records import Panel
from ui.state import page_params
from ui.state.settings import values_of
from ui.widgets import step_views as views
from ui.widgets.presentation import figure_font_size
from ui.widgets.state import KEEP, clamp_choice

MESSAGES = "cache_link_messages"
NOT_HELD = N_("not in the cache at this step (evicted, or a later token) → weight 0")


def capture_links() -> dict[str, str] | None:
    """The link's cache settings, read before the sidebar rewrites the address bar."""
    return page_params.capture(CACHE_SETTINGS)


def _controls(values: dict) -> None:
    """The policy, W, S and the positioning; their values go into ``values``."""
    policy_row, rope_row = SETTING["cache"], SETTING["cache_rope"]
    left, middle, right, far = st.columns(4)
    values["cache"] = left.selectbox(_(policy_row.label), list(policy_row.choices), key=policy_row.key,
                                     persist_state=KEEP, format_func=lambda name: _(policy_row.choices[name]))
    for column, name in ((middle, "cache_window"), (right, "sinks")):
        row = SETTING[name]
        if row.applies(values):
            page_params.clamp(row, values)
            low, high = row.bounds(values)
            values[name] = int(column.number_input(_(row.label), low, high, step=1, key=row.key, persist_state=KEEP))
        else:
            values[name] = row.default_for(values)
    values["cache_rope"] = far.radio(_(rope_row.label), list(rope_row.choices), key=rope_row.key, persist_state=KEEP,
                                     format_func=lambda name: _(rope_row.choices[name]))


def cache_policy_section(result: RunResult, raw: dict[str, str] | None) -> None:
    """Which keys the cache keeps under a policy, the rows it gives, where RoPE puts the keys, and the spare mass."""
    config = result.config
    st.header(_("Bounding the cache: sliding window and attention sinks"), anchor="cache-policy")
    values = values_of(config)
    page_params.seed_and_report(CACHE_SETTINGS, raw, values, MESSAGES)
    _controls(values)
    page_params.write(CACHE_SETTINGS, values)
    policy, positioning = POLICIES[values["cache"]], POSITIONINGS[values["cache_rope"]]
    window, sinks = values["cache_window"], values["sinks"] if policy.sinks else 0
    named = _("**{name}**: {summary}")  # a record's name and its sentences
    st.markdown(sentences(named.format(name=_(policy.label), summary=_(policy.summary)),
                          named.format(name=_(positioning.label), summary=_(positioning.summary))))
    steps = policy_run(result, values["cache"], window, sinks, values["cache_rope"])
    full = policy_run(result, "full", window, 0, "original")
    labels = result.query_labels
    gap = restricted_gap(result, steps, values["cache_rope"])
    metrics = st.columns(3)
    metrics[0].metric(_("Largest cache (tokens)"), max(s.cache_size for s in steps))
    metrics[1].metric(_("Tokens evicted"), sum(s.evicted.size for s in steps))
    metrics[2].metric(_("max |Δ| vs attention over the kept keys"), f"{gap:.1e}",
                      help=_("Original positions: full causal attention masked to the held keys. Re-indexed: the "
                             "held tokens as keys at positions 0..n−1."))
    st.markdown(_("**What the cache holds after each step** (■ held, S a sink, ✗ evicted at this step)"))
    st.dataframe(shown_table(held_table(steps, labels, sinks), TABLE_NAMES), key="cache_held")
    clamp_choice("w_cache_head", config.n_heads)
    head = st.columns([1, 3])[0].selectbox(_("Head"), range(config.n_heads), key="w_cache_head", persist_state=KEEP,
                                           format_func=lambda h: _("head {h}").format(h=h))
    left, right = st.columns(2)
    width = views.plot_px(1 / 2)
    with left:
        views.show_panel(Panel(_("Under the policy (head {head})").format(head=head), placed_weights(steps)[head],
                               labels, labels, _("weight"), kind="weights", axis_titles=qk_axes(),
                               allowed=held_mask(steps), masked_hover=_(NOT_HELD)),
                         "cache_policy_weights", width_px=width, font_size=figure_font_size())
    with right:
        views.show_panel(Panel(_("Full cache (head {head})").format(head=head), placed_weights(full)[head], labels,
                               labels, _("weight"), kind="weights", axis_titles=qk_axes(), allowed=held_mask(full),
                               masked_hover=_(NOT_HELD)),
                         "cache_full_weights", width_px=width, font_size=figure_font_size())
    last = len(steps) - 1
    clamp_choice("w_cache_step", last + 1)
    st.session_state.setdefault("w_cache_step", last)  # the last step first: the one with the most evicted
    t = st.slider(_("Look at step t"), 0, last, key="w_cache_step", persist_state=KEEP) if last else 0
    st.markdown(_("{sentence} (head {head}, step {t})").format(
        sentence=spare_sentence(spare_mass(steps[t], full[t], head), config.null_key), head=head, t=t))
    st.markdown(_("**Keys in the cache at step {t} and their positions** (positions: {scheme})").format(
        t=t, scheme=_(config.positions.short_label)))
    st.dataframe(shown_table(positions_table(steps[t], labels), TABLE_NAMES), key="cache_positions")
    other = next(name for name in POSITIONINGS if name != values["cache_rope"])
    effect = float(np.max(np.abs(placed_weights(policy_run(result, values["cache"], window, sinks, other))
                                 - placed_weights(steps))))
    st.caption(_("The choice's effect: with {other} instead, the weights of every head and step would change by up "
                 "to max |Δ| = {effect}.").format(other=_(POSITIONINGS[other].label), effect=f"{effect:.1e}"))
    if not (config.positions.turns or config.positions.bias is not None):
        st.caption(_("With positions '{pe}' attention does not read positions inside the cache, so the choice "
                     "changes nothing here: try RoPE or ALiBi.").format(pe=config.pe))
