"""The SmolLM2 view's "Which heads make it say this?" section (Streamlit; builders ui/pages/real_model/targeted.py,
numbers mha_core/targeted_ablation.py).

Read the alternative token (widgets ``w_sm_alt``, ``w_sm_alt_text``; on the session's first visit the link's
``rm_alt``) and whether to rank (``w_sm_target_rank``; the link's ``rm_rank``) -> the exact ranking of all 270 heads and the
greedy search, with a progress bar, kept per prompt, tokens and mode -> render: a sentence, two tables.
The replacement (zero or mean) is the one chosen in "Turn heads off" above.
"""

from __future__ import annotations

from collections import OrderedDict

import streamlit as st

from mha_core import smollm2 as smol
from mha_core import smollm2_runs as runs
from mha_core import targeted_ablation as ta
from ui.i18n import _
from ui.pages.real_model import targeted as tv
from ui.pages.real_model.ablation import MODE_LABELS
from ui.pages.real_model.ablation_view import cached_means
from ui.pages.real_model.smollm2 import shown_token
from ui.state.address import address
from ui.widgets.state import KEEP

RESULTS_KEPT = 4  # ~10 kB each: the ranking's numbers, never a stream


@st.cache_resource(max_entries=1, show_spinner=False)
def results() -> OrderedDict:
    """Rankings already computed on this server, by (prompt, top, alternative, mode); the oldest dropped first."""
    return OrderedDict()


def ranked(model: smol.SmolLM2, text: str, run: runs.SmolRun, top: int, alternative: int, mode: str) -> ta.Targeted:
    """The ranking for these tokens and mode: from this server's store, or computed now with a progress bar."""
    store, key = results(), (text, top, alternative, mode)
    if key not in store:
        bar = st.progress(0.0, text=_("Running the prompt again with each of the {n} heads off…").format(
            n=model.config.n_layers * model.config.n_heads))
        means = cached_means(model) if mode == "mean" else None
        store[key] = ta.rank_heads(model, run, top, alternative, mode, means, progress=lambda share: bar.progress(share))
        bar.empty()
        while len(store) > RESULTS_KEPT:
            store.popitem(last=False)
    return store[key]


def read_link(model: smol.SmolLM2, options: list[int]) -> None:
    """First visit in a session: the link's rm_alt fills the choice (or the typed text) and rm_rank the switch."""
    ss = st.session_state
    if "sm_alt_link_read" in ss:
        return
    text, rank = tv.link_alternative(address().to_dict())
    by_text = {model.token_text(i): i for i in options}
    ss.w_sm_alt = by_text.get(text, options[0])
    ss.w_sm_alt_text = "" if text is None or text in by_text else text
    ss.w_sm_target_rank = rank
    ss.sm_alt_link_read = True


def write_link(params: dict[str, str]) -> None:
    for name in (tv.ALT_PARAM, tv.RANK_PARAM):
        if name in address() and name not in params:
            del address()[name]
    changed = {name: value for name, value in params.items() if address().get(name) != value}
    if changed:
        address().update(changed)


def targeted_section(model: smol.SmolLM2, text: str, run: runs.SmolRun) -> None:
    st.subheader(_("Which heads make it say this?"))
    options = tv.alternative_options(run.next_logits)
    top = int(run.next_logits.argmax())
    read_link(model, options)
    if st.session_state.get("w_sm_alt") not in options:  # a new prompt: its own runner-up
        st.session_state.w_sm_alt = options[0]
    st.markdown(_(
        "Pick another token the model could have said. d = logit(top token) − logit(alternative): how strongly it "
        "prefers its answer. Each head is turned off alone, and the prompt runs again from its layer (exact, not an "
        "estimate); the heads are ranked by how far that pulls d towards the alternative. Then the heads are turned "
        "off together in that order, each set run again, until the alternative wins (d < 0)."))
    left, right = st.columns(2, vertical_alignment="bottom")
    chosen = left.selectbox(_("Alternative next token"), options, key="w_sm_alt", persist_state=KEEP,
                            format_func=lambda i: shown_token(model.token_label(i)))
    typed = right.text_input(_("…or type one token"), key="w_sm_alt_text", persist_state=KEEP,
                             help=_("Text that is exactly one token, with its leading space if it has one "
                                    "(' Paris'). Empty: the choice on the left."))
    messages: list[str] = []
    alternative = tv.alternative_from_text(model, typed, top, int(chosen), messages) if typed else int(chosen)
    for message in messages:
        st.warning(message)
    mode = st.session_state.get("w_sm_off_mode") or "zero"
    on = st.toggle(_("Rank all {n} heads (each one a partial run of the model)").format(
        n=model.config.n_layers * model.config.n_heads), key="w_sm_target_rank", persist_state=KEEP)
    write_link(tv.targeted_params(model, alternative, options[0], on))
    if not on:
        return
    result = ranked(model, text, run, top, alternative, mode)
    st.markdown(tv.summary_sentence(model, result))
    columns = st.columns(2)
    number = st.column_config.NumberColumn
    columns[0].markdown("**" + _("Single heads, ranked") + "**")
    columns[0].dataframe(tv.ranking_frame(result), key="sm_rank_table", column_config={
        "_index": number(_("rank"), width="small"), "head": st.column_config.TextColumn(_("head off")),
        "d": number(_("d with it off"), format="%.3f"),
        "move": number(_("move"), format="%+.3f")})  # "small" cut its numbers in presentation mode
    columns[1].markdown("**" + _("Turned off together, in that order") + "**")
    columns[1].dataframe(tv.greedy_frame(result), key="sm_greedy_table", column_config={
        "_index": number(_("heads off"), width="small"), "head": st.column_config.TextColumn(_("head added")),
        "d": number(_("d with all of them off"), format="%.3f")})
    st.caption(_("Replacement: {mode} (the choice in “Turn heads off” above). move = d with every head − d with "
                 "the head off: positive when the head helps the top token against the alternative. The search "
                 "stops at d < 0 or after {cap} heads. d < 0 means the alternative beats the top token; another "
                 "token may still beat both.").format(mode=_(MODE_LABELS[mode]), cap=ta.MAX_GREEDY))
