"""The Real model page's model switch, and its SmolLM2 view (Streamlit; the builders are ui/pages/real_model/smollm2.py).

Read the prompt, layer, head, temperature and top-k (widgets ``w_sm_*``; on the first visit the
link's ``rm_*`` parameters) -> SmolLM2 (loaded once per server) and its forward pass (cached per
prompt; only the attention weights of every layer are kept, a layer's full trace is recomputed
when it is shown) -> render: tokens, next-token prediction, one layer's heads grouped by K/V head,
the KV cache, logit lens, induction heads, attention sinks.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import streamlit as st

from mha_core import _smollm2_files as smol_files
from mha_core import smollm2 as smol
from mha_core import smollm2_runs as runs
from ui.charts import describe, tables
from ui.i18n import N_, _, current_language, sentences
from ui.pages.real_model import smollm2 as sb
from ui.pages.real_model.ablation_view import ablation_section
from ui.pages.real_model.flow_view import flow_section
from ui.pages.real_model.long_view import PARAMS as LONG_PARAMS
from ui.pages.real_model.qknorm import PARAMS as QKNORM_PARAMS
from ui.pages.real_model.roles_view import roles_section
from ui.pages.real_model.section_links import per_model_params, sync_params
from ui.pages.real_model.smollm2_fetch import BackgroundFetch
from ui.pages.real_model.smollm2_intro import about_the_model, show_tokens
from ui.pages.real_model.targeted import ALT_PARAM, RANK_PARAM
from ui.pages.real_model.targeted_view import targeted_section
from ui.pages.real_model.token_sets_view import token_sets_section
from ui.pages.real_model.whatif import PARAMS as WHATIF_PARAMS
from ui.pages.real_model.whatif_view import whatif_section
from ui.pipeline.drill_down import drill_down
from ui.run import cached_figures
from ui.run.models import cached_model
from ui.state.address import address
from ui.state.device import chart_config, on_phone
from ui.widgets import step_views as views
from ui.widgets.live import show_chart
from ui.widgets.number_columns import in_language, number_columns
from ui.widgets.state import KEEP, clamp_choice

# A run holds ~43 MB at the 128-token cap (30 layers' attention, residuals, keys and values), ~2 MB at 12
# tokens; one cached run keeps a server with both real models near 600 MB at the cap (bench/bench_smollm2.py).
FORWARD_CACHE_ENTRIES = 1
GRID_PANEL_PX = 200
CACHE_COLUMNS = (N_("position"), N_("cache tokens"), N_("cache KiB"), N_("max |Δ weight|"))
PROGRESS_EVERY_S = 0.25  # how often the page redraws the download's progress bar
MISSING_PACKAGE = N_(
    "SmolLM2 could not be loaded on this server, so this view cannot run it (MiniLM and the other pages do not "
    "need it). What to do:"
)


# ---- the switch ----


def model_switch() -> str:
    """The real model to show: the link's ``model`` on the session's first visit, then the switch's choice."""
    ss = st.session_state
    if "rm_model_read" not in ss:
        ss.w_rm_model, ss.rm_model_messages = sb.model_from_params(address().to_dict())
        ss.rm_model_read = True
    for message in ss.get("rm_model_messages", []):
        st.warning(_("Link: {message}").format(message=message))
    choice = st.segmented_control(_("Model"), list(sb.REAL_MODELS), key="w_rm_model", persist_state=KEEP,
                                  format_func=lambda name: _(sb.REAL_MODELS[name].label), required=True,
                                  on_change=leave_the_other_models_settings)
    choice = choice if choice in sb.REAL_MODELS else sb.DEFAULT_MODEL
    if choice == sb.DEFAULT_MODEL and "model" in address():
        del address()["model"]  # MiniLM links carry no model parameter, as before the switch
    elif choice != sb.DEFAULT_MODEL and address().get("model") != choice:
        address().update(sb.model_params(choice))
    return choice


def smollm2_only_params() -> tuple[str, ...]:
    """Every parameter only SmolLM2's view reads: its temperature and top-k, and its sections' (the what-ifs, QK-norm,
    longer than trained, which heads make it say this). A switch to MiniLM drops them; SmolLM2's widgets keep their
    values, and its view writes them back when the switch returns to it."""
    own = [row.param for row in sb.SMOL_ROWS if row.param not in ("rm_layer", "rm_head")]  # MiniLM has its own two
    return (*own, *WHATIF_PARAMS, *QKNORM_PARAMS, *LONG_PARAMS, ALT_PARAM, RANK_PARAM)


def leave_the_other_models_settings() -> None:
    """Switch callback: the prompt travels to the other model, SmolLM2's own settings do not travel to MiniLM.

    MiniLM's view reads the link on its first visit; a SmolLM2 layer (0..29) in it would be
    reported there as a bad link value, though nobody typed a link.
    """
    names = list(per_model_params())  # each model's sections keep their own (no MiniLM head 5.11 in SmolLM2)
    if st.session_state.get("w_rm_model") == sb.DEFAULT_MODEL:
        names += smollm2_only_params()
        if "rm_link_read" not in st.session_state:  # else MiniLM's view writes its own layer and head
            names += ["rm_layer", "rm_head"]
    sync_params(address(), names, {})


# ---- loading and running ----


@st.cache_resource(max_entries=2, show_spinner=False)
def shared_fetch(target: str, index: str) -> BackgroundFetch:
    """The one download of the model file into ``target`` on this server, whichever session asks."""
    return BackgroundFetch(Path(target), index)


def fetch_with_progress(target: Path) -> None:
    """Download the model file into the cache (or watch the download under way) with a progress bar.

    Raises the download's error (ModelUnavailableError, ModelIntegrityError) when it failed.
    """
    fetch = shared_fetch(str(target), smol_files.index_url())
    fetch.start()
    bar = st.progress(0.0, text=_("SmolLM2 is not on this server yet: fetching it once ({progress})").format(
        progress=fetch.text()))
    while not fetch.wait(PROGRESS_EVERY_S):
        bar.progress(fetch.fraction(), text=_("First use on this server: {progress}").format(progress=fetch.text()))
    bar.empty()
    fetch.raise_failure()


def load_or_fetch(model_file: str | None) -> smol.SmolLM2:
    """The model; a first use on a server without the file downloads it first, showing the progress."""
    loading = _("Loading SmolLM2-135M (98 MB, 4-bit, once per server)…")  # a spinner shows after 0.5 s only
    try:
        with st.spinner(loading):
            return cached_model(model_file)
    except smol.ModelNotFetchedError as missing:
        fetch_with_progress(missing.target)
    with st.spinner(loading):
        return cached_model(model_file)


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES, show_spinner=False)
def cached_forward(text: str, _model: smol.SmolLM2) -> runs.SmolRun:
    """One prompt through the model, keeping every layer's attention weights, keys and values (no full traces)."""
    return _model.forward(text, traces=())


@st.cache_resource(max_entries=2, show_spinner=False)  # 6 MB each: 31 x 49,152 logits
def cached_lens(text: str, _model: smol.SmolLM2, _run: runs.SmolRun) -> runs.LogitLens:
    return _model.logit_lens(_run)


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_induction(half: int, seed: int, _model: smol.SmolLM2) -> runs.InductionScores:
    return _model.induction(half=half, seed=seed)


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES, show_spinner=False)
def cached_cache_check(text: str, _model: smol.SmolLM2, _run: runs.SmolRun) -> dict:
    """Decode the prompt's tokens after the first with the KV cache; the largest gaps to the full forward."""
    ids = _run.token_ids
    caches = _model.forward(ids[:1], traces=()).caches()
    worst_weight, worst_logit, rows = 0.0, 0.0, []
    for position in range(1, len(ids)):
        step = _model.decode_next(ids[position], caches)
        gap = max(float(np.abs(s.weights[:, 0] - _run.layers[n].weights[:, position, : position + 1]).max())
                  for n, s in enumerate(step.layers))
        worst_weight = max(worst_weight, gap)
        rows.append({"position": position, "cache tokens": step.caches[0].length, "cache KiB": step.cache_nbytes / 1024,
                     "max |Δ weight|": gap})  # keys: CACHE_COLUMNS, translated where shown
        caches = step.caches
    full_next = _run.next_logits
    worst_logit = float(np.abs(step.logits - full_next).max()) if len(ids) > 1 else 0.0
    return {"rows": rows, "weights": worst_weight, "logits": worst_logit}


def model_or_message() -> smol.SmolLM2 | None:
    """The model, or None after showing how to get it (no traceback); a failure is remembered for the session."""
    model_file = os.environ.get(smol.ENV_VAR)
    failed = st.session_state.get("sm_model_error")
    if failed is None or failed[0] != model_file:
        try:
            return load_or_fetch(model_file)
        except RuntimeError as error:  # ModelUnavailableError, ModelIntegrityError: the message says what to do
            failed = (model_file, error.args[0] if error.args else str(error))  # a Message: translated when shown
            st.session_state.sm_model_error = failed
    st.error(_(MISSING_PACKAGE))
    st.code(_(failed[1]), language=None, wrap_lines=True)
    st.button(_("Try again"), key="sm_retry", on_click=st.session_state.pop, args=("sm_model_error", None))
    return None


# ---- the link ----


def read_link() -> None:
    """First visit of the SmolLM2 view in a session: the URL's parameters fill the widgets (messages kept)."""
    ss = st.session_state
    if "sm_link_read" in ss:
        return
    view, messages = sb.smol_view_from_params(address().to_dict())
    ss.w_sm_text, ss.w_sm_layer, ss.w_sm_head = view.text, view.layer, view.head
    ss.w_sm_temp, ss.w_sm_topk = max(round(view.temperature, 2), sb.MIN_TEMPERATURE), view.top_k
    ss.sm_link_messages = messages
    ss.sm_link_read = True


def write_link(view: sb.SmolView) -> None:
    changed = {name: value for name, value in sb.smol_params(view).items() if address().get(name) != value}
    for row in sb.SMOL_ROWS:  # a setting back at its default leaves the link
        if row.param in address() and row.param not in sb.smol_params(view):
            del address()[row.param]
    if changed:
        address().update(changed)


# ---- sections ----


def append_token(text: str) -> None:
    """Button callback: the prompt with the predicted token written after it."""
    st.session_state.w_sm_text = st.session_state.w_sm_text + text


def show_head(layer: int, head: int) -> None:
    """Button callback: open this layer and head."""
    st.session_state.w_sm_layer, st.session_state.w_sm_head = layer, head


def prediction_section(model: smol.SmolLM2, run: runs.SmolRun) -> None:
    st.subheader(_("Next token"))
    left, right = st.columns(2)
    temperature = left.slider(_("Temperature"), sb.MIN_TEMPERATURE, sb.TEMPERATURE[1], key="w_sm_temp",
                              persist_state=KEEP, step=0.01, help=_(sb.SMOL_ROWS[2].help))
    top_k = right.slider(_("Tokens shown"), *sb.TOP_K, key="w_sm_topk", persist_state=KEEP)
    frame = sb.prediction_frame(model, run.next_logits, temperature, top_k)
    st.dataframe(frame, key="sm_prediction", column_config={
        "_index": st.column_config.NumberColumn(_("rank")),
        "token": st.column_config.TextColumn(_("token")),
        "probability": st.column_config.ProgressColumn(_("probability"), format="%.3f", min_value=0.0, max_value=1.0),
        "logit": st.column_config.NumberColumn(_("logit"), format="%.2f"),
        "id": st.column_config.NumberColumn(_("id"))})
    top_id = int(frame["id"].iloc[0])
    top = model.token_text(top_id)
    st.button(_("Append the top token '{token}'").format(token=sb.shown_token(model.token_label(top_id))),
              key="sm_append", on_click=append_token, args=(top,),
              help=_("Writes the most likely token after the prompt and runs the model again: generation, one step."))
    st.caption(_("Probabilities = softmax(logits / temperature) over all 49,152 tokens. The temperature changes the "
                 "probabilities, never their order, so the top token is the same at every temperature. Appending "
                 "writes the token's text after the prompt, which is then tokenized again."))


def heads_section(model: smol.SmolLM2, run: runs.SmolRun, layer: int, head: int) -> None:
    config = model.config
    st.subheader(_("Layer {layer}: all {n} heads, grouped by the K/V head they read").format(layer=layer,
                                                                                          n=config.n_heads))
    order = sb.grouped_heads(config.n_heads, config.kv_heads)
    weights = run.layers[layer].weights[order]  # (nh, T, T) in K/V order
    labels = sb.axis_labels(run.tokens)
    mask = np.tri(run.n_tokens, dtype=bool)  # (T, T), True on and below the diagonal
    titles = sb.head_titles(config.n_heads, config.kv_heads, head)
    fig = cached_figures.attention_grid(weights, labels, labels, kind="weights", titles=titles,
                                        max_cols=1 if on_phone() else config.group_size,
                                        panel_px=GRID_PANEL_PX, mask=mask, colorbar_below=on_phone())
    show_chart(fig, key="sm_grid", config=chart_config(),
               alt=sentences(*describe.grid_lines(weights, labels, labels, kind="weights", titles=titles, mask=mask)))
    st.caption(_(
        "Each row of panels is one K/V head: its {group} query heads read the same keys and values "
        "(grouped-query attention, {nh} query heads over {kv} K/V heads). Rows = queries, "
        "columns = keys; grey cells are the causal mask (a token never sees the tokens after it). Each row sums to 1."
    ).format(group=config.group_size, nh=config.n_heads, kv=config.kv_heads))


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES * 4, show_spinner=False)
def layer_diagnostics(text: str, layer: int, language: str, _model: smol.SmolLM2, _run: runs.SmolRun):
    """The diagnostics table of one layer's heads (the toy pages' columns), from the engine's trace of that layer;
    its rows named in ``language`` ("head 0")."""
    _normed, trace, _weights = _model.layer_trace(_run, layer)
    return tables.head_summary_frame(trace)


def diagnostics_section(model: smol.SmolLM2, text: str, run: runs.SmolRun, layer: int) -> None:
    st.subheader(_("What each head of layer {layer} does").format(layer=layer))
    frame = layer_diagnostics(text, layer, current_language(), model, run)
    help_texts = {label: _(meaning) for label, meaning in tables.DIAGNOSTIC_COLUMNS.values()}
    frame, help_texts = in_language(frame, help_texts)  # headers in the reader's language, numbers as they are
    config = number_columns(frame.columns, "%.3f", help_texts)
    st.dataframe(frame, column_config=config, key="sm_head_table")
    st.caption(_("Means over the query rows, each row counting only the keys the causal mask lets it see; hover a "
                 "column name for its meaning."))


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES, show_spinner=False)
def overview_chart(text: str, language: str, _run: runs.SmolRun):
    """All 30 x 9 heads of the prompt ``text`` as small heatmaps (the MiniLM page's builder), and in words (its alt)."""
    from ui.pages.real_model.overview import overview_figure, overview_sentence

    return overview_figure(_run.attentions, panel_px=40), overview_sentence(_run.attentions)


def overview_section(text: str, run: runs.SmolRun) -> None:
    """Every layer x head, drawn only while its expander is open (270 heatmaps)."""
    box = st.expander(_("All {layers} layers × {heads} heads at a glance").format(
        layers=len(run.layers), heads=run.layers[0].weights.shape[0]),
                      key="w_sm_overview", on_change="rerun")
    if not box.open:
        return
    with box:
        figure, alt = overview_chart(text, current_language(), run)  # the figure's words are the language's
        show_chart(figure, key="sm_overview", config=chart_config(), alt=alt)
        st.caption(_("Each small square is one head (rows = queries, columns = keys, query 0 at the top); the empty "
                     "upper triangle is the causal mask. Long prompts show the largest weight of each block."))


def kv_cache_section(model: smol.SmolLM2, text: str, run: runs.SmolRun) -> None:
    per_token = model.cache_bytes_per_token()
    st.subheader(_("The KV cache on real weights"))
    st.markdown(_(
        "Generating token t reuses the keys and values of tokens 0..t−1. Per token the cache grows by "
        "**{per_token} KiB** (30 layers × {kv} K/V heads × (64 + 64) numbers × 4 bytes, {per_layer} KiB per "
        "layer); without grouped-query attention ({nh} K/V heads) it would be **{without} KiB**. This prompt: "
        "{n} tokens, {total} KiB."
    ).format(per_token=f"{per_token['gqa'] / 1024:.1f}", kv=model.config.kv_heads,
             per_layer=f"{per_token['gqa'] / model.config.n_layers / 1024:.1f}", nh=model.config.n_heads,
             without=f"{per_token['without_gqa'] / 1024:.1f}", n=run.n_tokens,
             total=f"{run.n_tokens * per_token['gqa'] / 1024:.0f}"))
    box = st.expander(_("Decode this prompt again with the cache and compare with the full forward"),
                      key="w_sm_cache", on_change="rerun")
    if not box.open:
        return
    with box:
        with st.spinner(_("Decoding the prompt again, one token at a time…")):
            check = cached_cache_check(text, model, run)
        st.dataframe(check["rows"], key="sm_cache_rows", hide_index=True, column_config={
            name: st.column_config.Column(_(name)) for name in CACHE_COLUMNS})
        st.caption(_("Largest difference of an attention weight: {weights}; of a next-token logit after the last "
                     "token: {logits} (float32 rounding: each step computes one new query row).").format(
            weights=f"{check['weights']:.1e}", logits=f"{check['logits']:.1e}"))


def lens_section(model: smol.SmolLM2, text: str, run: runs.SmolRun) -> None:
    st.subheader(_("Logit lens: what the model would say after each layer"))
    lens = cached_lens(text, model, run)
    frame = sb.lens_frame(model, lens)
    target = sb.shown_token(model.token_label(lens.target))
    figure, alt = sb.lens_figure(frame, target)
    show_chart(figure, key="sm_lens_line", config=chart_config(), alt=alt)
    st.dataframe(frame, key="sm_lens", column_config={
        "_index": st.column_config.TextColumn(_("read from")),
        "top token": st.column_config.TextColumn(_("top token")),
        "its probability": st.column_config.NumberColumn(_("its probability"), format="%.3f"),
        "rank of the final prediction": st.column_config.NumberColumn(_("rank of the final prediction")),
        "probability of the final prediction": st.column_config.NumberColumn(_("probability of the final prediction"),
                                                                             format="%.3f")})
    st.caption(_("Each row applies the final RMSNorm and the tied unembedding (the embedding table) to the residual "
                 "stream of the last token after that layer. The model's own prediction is '{target}'; rank 0 = "
                 "top.").format(target=target))
    st.caption(sb.embedding_row_note(model, lens, run.token_ids))


def induction_section(model: smol.SmolLM2) -> None:
    st.subheader(_("Induction heads, found live"))
    st.markdown(_("An **induction head** completes patterns: having seen `A B` before, at the next `A` it looks at "
                  "the token after the earlier `A` (that is, `B`) and copies it. A random sequence repeated twice "
                  "shows it: nothing in the first copy is predictable, everything in the second is."))
    ss = st.session_state
    if st.button(_("Find the induction heads"), key="sm_induction_run"):
        ss.sm_induction = True
    if not ss.get("sm_induction"):
        return
    with st.spinner(_("Building a repeated random sequence and running it…")):
        scores = cached_induction(24, 0, model)
    first, second = sb.loss_halves(scores)
    st.markdown(_("Loss predicting the next token: **{first}** nats in the first copy, **{second}** in the second "
                  "({half} random tokens, repeated).").format(first=f"{first:.2f}", second=f"{second:.2f}",
                                                             half=scores.half))
    figure, alt = sb.loss_figure(scores)
    show_chart(figure, key="sm_induction_loss", config=chart_config(), alt=alt)
    by = st.segmented_control(_("Rank the heads by"), list(sb.RANKINGS), key="w_sm_rank", persist_state=KEEP,
                              format_func=lambda name: _(sb.RANKINGS[name]), required=True,
                              default="induction") or "induction"
    frame = sb.induction_frame(scores, by=by)
    st.dataframe(frame, key="sm_induction_table", column_config={
        "_index": st.column_config.NumberColumn(_("rank")),
        "layer": st.column_config.NumberColumn(_("layer")),
        "head": st.column_config.NumberColumn(_("head")),
        "induction score": st.column_config.ProgressColumn(_("induction score"), format="%.3f", min_value=0.0,
                                                           max_value=1.0),
        "previous-token score": st.column_config.ProgressColumn(_("previous-token score"), format="%.3f",
                                                                min_value=0.0, max_value=1.0)})
    choices = [_("layer {layer}, head {head}").format(layer=row.layer, head=row.head) for row in frame.itertuples()]
    picked = st.selectbox(_("Pattern of"), range(len(choices)), key="w_sm_induction_head", format_func=choices.__getitem__)
    layer, head = int(frame["layer"].iloc[picked]), int(frame["head"].iloc[picked])
    tokens = [label.text for label in model.token_labels(scores.token_ids)]
    labels = sb.axis_labels(tokens)
    pattern = scores.attentions[layer, head]  # (2n, 2n)
    title = _("layer {layer}, head {head}").format(layer=layer, head=head)
    causal = np.tri(len(labels), dtype=bool)  # (2n, 2n) later keys are masked: drawn grey, as on every grid
    show_chart(cached_figures.matrix_heatmap(pattern, labels, labels, title=title, value_name=_("weight"),
                                             signed=False, zmin=0.0, zmax=1.0, row_name=_("query"), col_name=_("key"),
                                             height=520, allowed=causal),
               key="sm_induction_pattern", config=chart_config(),
               alt=_("Attention weights of {description}").format(description=describe.panel_sentence(
                   pattern, labels, labels, kind="weights", title=title, mask=causal)))
    st.button(_("Open this head above"), key="sm_induction_show", on_click=show_head, args=(layer, head))
    st.caption(_("Induction score: mean weight from a token of the second copy to the token after its first "
                 "occurrence (the stripe one right of the off-diagonal). Previous-token score: mean weight on the "
                 "token just before; induction heads rely on such heads in earlier layers (Olsson et al. 2022)."))


def sink_section(model: smol.SmolLM2, run: runs.SmolRun) -> None:
    st.subheader(_("Attention sinks: weight on the first token"))
    sink = model.sink_mass(run)  # (L, nh)
    layers = [_("layer {layer}").format(layer=n) for n in range(model.config.n_layers)]
    heads = [str(h) for h in range(model.config.n_heads)]
    show_chart(cached_figures.matrix_heatmap(sink, layers, heads, title=_("mean weight on token 0"),
                                             value_name=_("weight on token 0"), signed=False, zmin=0.0, zmax=1.0,
                                             height=620, row_name="", col_name=_("head")), key="sm_sink",
               config=chart_config(),
               alt=describe.describe_matrix(sink, [str(n) for n in range(model.config.n_layers)], heads,
                                            title=_("Mean weight on token 0"), value_name=_("weight on token 0"),
                                            row_name=_("layer"), col_name=_("head")))
    st.caption(_("Mean over the queries 1..T−1 of the weight on token 0 (query 0 can only see itself). Many heads of "
                 "later layers park most of their weight on the first token whatever it is, an 'attention sink' "
                 "(Xiao et al. 2023)."))


def steps_section(model: smol.SmolLM2, run: runs.SmolRun, layer: int, head: int) -> None:
    st.subheader(_("Step by step: layer {layer}, head {head}").format(layer=layer, head=head))
    shown = st.toggle(_("Show every matrix from this layer's input to its output, RoPE's turn of q and k, and one "
                        "cell number by number"), key="w_sm_steps", persist_state=KEEP,
                      help=_("The same steps as the Step-by-step page, on the real (dequantized) weights."))
    if not shown:
        st.caption(_("Off: turn it on to follow the chosen head through the maths (the same views as the toy "
                     "pages)."))
        return
    inputs = sb.smol_step_inputs(model, run, layer)
    labels = inputs.query_labels
    clamp_choice("w_sm_qi", len(labels))
    clamp_choice("w_sm_kj", len(labels))
    cell = (int(st.session_state.get("w_sm_qi", len(labels) - 1)), int(st.session_state.get("w_sm_kj", 0)))
    for number, step in enumerate(sb.smol_steps(inputs, layer, head, cell), start=1):
        views.show_step(number, step, "sm", level=4)
    st.markdown("#### " + _("Drill-down: one cell, number by number"))
    i, j = views.cell_picker(labels, labels, ("w_sm_qi", "w_sm_kj"))
    views.show_drill_down(drill_down(inputs, head, i, j), "sm", outlined="above")


def main_body() -> None:
    """The SmolLM2 view of the Real model page."""
    st.title(_("Real model: SmolLM2-135M-Instruct"))
    model = model_or_message()
    if model is None:
        return
    read_link()
    for message in st.session_state.get("sm_link_messages", []):
        st.warning(_("Link: {message}").format(message=message))
    about_the_model(model)
    text = st.text_input(_("Prompt"), key="w_sm_text", persist_state=KEEP, max_chars=sb.MAX_PROMPT_CHARS,
                         help=_("Any text; the model predicts the token after it. Press Enter to run it."))
    if not text.strip():
        st.warning(_("The prompt is empty: showing the example '{example}'.").format(example=sb.DEFAULT_PROMPT))
        text = sb.DEFAULT_PROMPT
    n_tokens = model.encode(text).size
    if n_tokens > model.max_tokens:
        st.error(_("The prompt has {n} tokens, more than the limit of {limit}. Shorten it by about {cut} tokens (a "
                   "word is 1 to 3 tokens).").format(n=n_tokens, limit=model.max_tokens, cut=n_tokens - model.max_tokens))
        return
    with st.spinner(_("Running the prompt through 30 layers…")):
        run = cached_forward(text, model)
    show_tokens(model, text, run)
    prediction_section(model, run)
    ablation_section(model, text, run, int(st.session_state.w_sm_topk))
    targeted_section(model, text, run)
    config = model.config
    clamp_choice("w_sm_layer", config.n_layers)
    clamp_choice("w_sm_head", config.n_heads)
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    layer = left.selectbox(_("Layer"), range(config.n_layers), key="w_sm_layer", persist_state=KEEP,
                           format_func=lambda n: _("layer {layer}").format(layer=n))
    head = right.selectbox(_("Head"), range(config.n_heads), key="w_sm_head", persist_state=KEEP,
                           format_func=lambda h: _("head {head} (K/V {kv})").format(head=h, kv=h // config.group_size))
    write_link(sb.SmolView(text, int(layer), int(head), float(st.session_state.w_sm_temp),
                           int(st.session_state.w_sm_topk)))
    heads_section(model, run, int(layer), int(head))
    diagnostics_section(model, text, run, int(layer))
    overview_section(text, run)
    kv_cache_section(model, text, run)
    lens_section(model, text, run)
    induction_section(model)
    roles_section(model, cached_induction)
    flow_section("sm", text, lambda: run.attentions, sb.axis_labels(run.tokens), True, config.n_layers)
    token_sets_section("sm", lambda: run.attentions, sb.axis_labels(run.tokens))
    sink_section(model, run)
    whatif_section(model, text, run, cached_forward)
    steps_section(model, run, int(layer), int(head))
