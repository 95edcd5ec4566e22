"""The SmolLM2 view's "Turn heads off" section (Streamlit; the builders are ui/pages/real_model/ablation.py,
the numbers mha_core/smollm2_ablation.py).

Read the heads and the replacement (widgets ``w_sm_off``, ``w_sm_off_mode``; on the session's first visit the
link's ``rm_off`` and ``rm_off_mode``) -> the ablated run, cached per prompt, heads and mode (only the layers
from the first changed one run again) -> render: one sentence of numbers, the top tokens before and after.
"""

from __future__ import annotations

import streamlit as st

from mha_core import minilm_ablation as mab
from mha_core import smollm2 as smol
from mha_core import smollm2_ablation as ab
from mha_core import smollm2_runs as runs
from mha_core.pretrained import MiniLM, MiniLMRun
from ui.i18n import _, sentences
from ui.pages.real_model import ablation as abv
from ui.state.address import address
from ui.widgets.state import KEEP

ABLATION_CACHE_ENTRIES = 8  # ~0.4 MB each (two logit vectors and the losses)


@st.cache_resource(max_entries=1, show_spinner=False)
def cached_means(_model: smol.SmolLM2) -> object:
    """Each head's mean output over the reference text, (L, nh, hs): computed once per server."""
    return ab.head_means(_model)


@st.cache_resource(max_entries=2, show_spinner=False)
def cached_clean_losses(text: str, _model: smol.SmolLM2, _run: runs.SmolRun):
    """The clean run's loss on each next token of the prompt ``text``, (T-1,)."""
    return _model.prompt_losses(_run)


@st.cache_resource(max_entries=ABLATION_CACHE_ENTRIES, show_spinner=False)
def cached_ablation(text: str, heads: tuple, mode: str, _model: smol.SmolLM2, _run: runs.SmolRun) -> ab.Ablation:
    """The prompt ``text`` with ``heads`` off, run again from the first changed layer (the earlier ones cached)."""
    means = cached_means(_model) if mode == "mean" else None
    return ab.ablate(_model, _run, heads, mode, means=means, clean_losses=cached_clean_losses(text, _model, _run))


def read_link(prefix: str, n_layers: int, n_heads: int) -> None:
    """First visit of a model's view in a session: the link's rm_off and rm_off_mode fill its widgets
    (``w_<prefix>_off``, ``w_<prefix>_off_mode``; ``prefix`` "sm" for SmolLM2, "rm" for MiniLM)."""
    ss = st.session_state
    if f"{prefix}_off_link_read" in ss:
        return
    params, messages = address().to_dict(), []
    heads = abv.heads_from_link(params, n_layers, n_heads, messages)
    ss[f"w_{prefix}_off"] = [abv.head_index(head, n_heads) for head in heads]
    ss[f"w_{prefix}_off_mode"] = abv.mode_from_link(params, messages)
    ss[f"{prefix}_off_link_messages"] = messages
    ss[f"{prefix}_off_link_read"] = True


def write_link(heads: tuple, mode: str) -> None:
    """The address bar carries the heads off and the mode (and nothing of them when no head is off)."""
    params = abv.ablation_params(heads, mode)
    for name in (abv.OFF_PARAM, abv.MODE_ROW.param):
        if name in address() and name not in params:
            del address()[name]
    changed = {name: value for name, value in params.items() if address().get(name) != value}
    if changed:
        address().update(changed)


def head_picker(prefix: str, n_layers: int, n_heads: int, head_size: int, what: str) -> tuple[tuple, str]:
    """The section's heading, words, heads and replacement widgets (link read and written): (heads off, mode).

    ``what`` says, in the reader's language, what the section compares before and after.
    """
    st.subheader(_("Turn heads off"))
    read_link(prefix, n_layers, n_heads)
    for message in st.session_state.get(f"{prefix}_off_link_messages", []):
        st.warning(_("Link: {message}").format(message=message))
    st.markdown(sentences(what, _(
        "A head is turned off after its attention and before W_O: its {hs} numbers per token in the concatenation "
        "of the heads are replaced, so nothing it read from this input reaches the residual stream."
    ).format(hs=head_size)))
    left, right = st.columns([3, 2], vertical_alignment="bottom")
    chosen = left.multiselect(
        _("Heads to turn off"), range(n_layers * n_heads), key=f"w_{prefix}_off", persist_state=KEEP,
        format_func=lambda i: _("layer {layer}, head {head}").format(layer=i // n_heads, head=i % n_heads),
        placeholder=_("Choose heads (type a layer number to filter)"))
    mode = right.segmented_control(_(abv.MODE_ROW.label), list(ab.ABLATIONS), key=f"w_{prefix}_off_mode",
                                   persist_state=KEEP, format_func=lambda name: _(abv.MODE_LABELS[name]),
                                   required=True) or "zero"
    heads = tuple(sorted(abv.head_of(i, n_heads) for i in chosen))
    write_link(heads, mode)
    st.caption(sentences(_(ab.ABLATIONS[mode]), _(
        "Zero removes the head entirely; the mean keeps its average contribution and removes only what it read from "
        "this input, so it is the milder and usually the fairer test. The reference text: “{text}”"
    ).format(text=ab.REFERENCE_TEXT) if mode == "mean" else _(
        "Zero removes everything the head adds, including the constant part it adds to every token, so it can "
        "change more than the head's reading of this input; try the mean as well.")))
    if not heads:
        st.info(_("No head is off: choose one or more heads above. Each choice runs the model again from the first "
                  "layer that has a head off; the layers before it are taken from the run above."))
    return heads, mode


def ablation_section(model: smol.SmolLM2, text: str, run: runs.SmolRun, top_k: int) -> None:
    config = model.config
    heads, mode = head_picker("sm", config.n_layers, config.n_heads, config.head_size, _(
        "What does a head contribute to this prediction? Turn off any heads in any layers and compare the "
        "next-token distribution before and after."))
    if not heads:
        return
    first = heads[0][0]
    with st.spinner(_("Running layers {first}..{last} again…").format(first=first, last=config.n_layers - 1)):
        result = cached_ablation(text, heads, mode, model, run)
    st.markdown(abv.summary_sentence(model, result, config.n_layers))
    columns = st.columns(2)
    for where, by, title in ((columns[0], "before", _("Top tokens with every head")),
                             (columns[1], "after", _("Top tokens with the heads off"))):
        where.markdown(f"**{title}**")
        where.dataframe(abv.top_frame(model, result, top_k, by=by), key=f"sm_off_{by}", column_config={
            "_index": st.column_config.NumberColumn(_("rank")),
            "token": st.column_config.TextColumn(_("token")),
            "before": st.column_config.ProgressColumn(_("before"), format="%.3f", min_value=0.0, max_value=1.0,
                                                    width="small"),
            "after": st.column_config.ProgressColumn(_("after"), format="%.3f", min_value=0.0, max_value=1.0,
                                                    width="small"),
            "change": st.column_config.NumberColumn(_("change"), format="%+.3f", width="small"),
            "id": None})  # the token's id stays in the data (the tests read it), off the narrow table
    st.caption(_("Probabilities at temperature 1, before (every head) and after (the chosen heads off); the number "
                 "of rows is the 'Tokens shown' setting above. KL(before ‖ after) = Σ p_before · log(p_before / "
                 "p_after) over all 49,152 tokens: 0 when nothing changed. The loss is the mean cross-entropy of "
                 "each next token of the prompt, in nats: how surprised the model is by the text it was given."))


@st.cache_resource(max_entries=1, show_spinner=False)
def cached_minilm_means(_model: MiniLM) -> object:
    """Each MiniLM head's mean output over the reference text, (L, nh, hs): once per server."""
    return mab.head_means(_model)


@st.cache_resource(max_entries=ABLATION_CACHE_ENTRIES, show_spinner=False)
def cached_minilm_ablation(text: str, heads: tuple, mode: str, _model: MiniLM, _run: MiniLMRun) -> mab.EncoderAblation:
    """The sentence ``text`` with ``heads`` off, run again from the first changed layer."""
    return mab.ablate(_model, _run, heads, mode, means=cached_minilm_means(_model) if mode == "mean" else None)


def minilm_ablation_section(model: MiniLM, text: str, run: MiniLMRun) -> None:
    config = model.config
    heads, mode = head_picker("rm", config.n_layers, config.n_heads, config.head_size, _(
        "What does a head contribute to what this encoder outputs? It predicts no next token: turn off any heads "
        "in any layers and see how far each piece's final vector and the sentence embedding move."))
    if not heads:
        return
    result = cached_minilm_ablation(text, heads, mode, model, run)
    st.markdown(abv.encoder_summary(result, run.tokens, config.n_layers))
    st.dataframe(abv.token_cosine_frame(run.tokens, result.token_cosine), key="rm_off_tokens", column_config={
        "_index": st.column_config.NumberColumn(_("position")),
        "piece": st.column_config.TextColumn(_("piece")),
        "cosine": st.column_config.NumberColumn(_("cosine with the clean run"), format="%.4f"),
        "1 − cosine": st.column_config.ProgressColumn(_("1 − cosine"), format="%.4f", min_value=0.0,
                                                        max_value=1.0)})
    st.caption(_("Cosine similarity of each piece's output of the last layer with and without the heads: 1 = the "
                 "same direction. The sentence embedding is the mean of those vectors scaled to length 1, as "
                 "sentence-transformers makes it."))
