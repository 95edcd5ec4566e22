"""Real model: the heads of all-MiniLM-L6-v2 on your sentence, with the same views as the toy pages.

Read the sentence, layer and head (widgets ``w_rm_*``; the URL's ``rm_text``, ``rm_layer`` and
``rm_head`` on a session's first visit) -> the model (loaded once per server) and its forward
pass (cached per sentence) -> render: word pieces, one layer's heads, their diagnostics, the
patterns worth looking for, all 72 heads at a glance, and one head step by step.

What a rerun costs (issue 11): everything below the sentence is one fragment (``layer_view``), so
a layer, head, "Show" or section click reruns only that part, not the page and its sidebar. What
depends on the sentence alone (patterns, overview, [CLS]/[SEP] maps) is cached per sentence, and
the two sections that are neither on screen nor needed to read the page (all heads at a glance,
the [CLS]/[SEP] maps) are expanders that compute nothing while closed, like the step-by-step
toggle. Measured in bench/bench_app.py (AppTest) and with bench/st_client.py on a server.
"""

import os

import numpy as np
import pandas as pd
import streamlit as st

from mha_core.pretrained import ENV_VAR, HUB_REPO, MODEL_LICENSE, MiniLM, MiniLMRun, load_minilm
from ui.charts import describe, tables
from ui.charts.markdown import literals
from ui.charts.numbers import EMPTY_CELL
from ui.i18n import N_, _, current_language, sentences
from ui.pages import real_model as rm
from ui.pages.real_model import layer_steps as rm_steps
from ui.pages.real_model import overview as rm_overview
from ui.pages.real_model import smollm2_view
from ui.pages.real_model.ablation_view import minilm_ablation_section
from ui.pages.real_model.flow_view import flow_section
from ui.pages.real_model.roles_view import minilm_roles_section
from ui.pages.real_model.smollm2 import axis_labels
from ui.pages.real_model.token_sets_view import token_sets_section
from ui.pipeline.drill_down import drill_down
from ui.run import cached_figures
from ui.state.address import address
from ui.state.device import chart_config, on_phone
from ui.widgets import step_views as views
from ui.widgets.address import send_from_fragment as send_address
from ui.widgets.live import show_chart
from ui.widgets.number_columns import in_language, number_columns
from ui.widgets.presentation import presentation_switch
from ui.widgets.state import KEEP, clamp_choice

FORWARD_CACHE_ENTRIES = 4  # a run holds 29 MB at 128 pieces (3 MB at 21): at most ~115 MB cached
LAYER_CACHE_ENTRIES = FORWARD_CACHE_ENTRIES * 6  # one entry per cached sentence and layer (6 layers)
NUMBER = "%.3f"
KEY_PREFIX = "rm"
GRID_PANEL_PX = 170  # about square panels, 4 across the ~820 px main column of a 1280 px screen


@st.cache_resource(max_entries=2, show_spinner=False)  # the spinner is the caller's, in the page's language
def cached_model(model_dir: str | None) -> MiniLM:
    """The verified model. ``model_dir`` ($MHA_MINILM_DIR) is only the cache key: load_minilm reads it itself."""
    return load_minilm()


# The caches below are keyed on the sentence alone: the model is one per server, and a run is
# read-only (its arrays are frozen). st.cache_resource hands every session the same object;
# st.cache_data would unpickle a copy on every hit: 3 MB at 21 pieces, 29 MB and ~23 ms at 128.


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES, show_spinner=False)  # spinner: the caller's
def cached_forward(text: str, _model: MiniLM) -> MiniLMRun:
    """One sentence through the model, every intermediate kept; keyed on the text (the model is one per server)."""
    return _model.forward(text)


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES, show_spinner=False)
def sentence_findings(text: str, _run: MiniLMRun) -> list[rm.Finding]:
    """The strongest head of each pattern over all layers, for the sentence ``text`` (whose run is ``_run``)."""
    return rm.findings(rm.model_measures(_run))


@st.cache_resource(max_entries=LAYER_CACHE_ENTRIES, show_spinner=False)
def layer_tables(text: str, layer: int, language: str, _run: MiniLMRun) -> tuple[pd.DataFrame, np.ndarray]:
    """One layer's diagnostics table and its heads' similarity matrix (nh, nh), for the sentence ``text``; its rows
    are named in ``language`` ("head 0"), so the language is part of the key."""
    trace = _run.traces[layer]
    return rm.real_head_frame(trace, _run.word_ids), tables.similarity_frame(trace).to_numpy()


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES, show_spinner=False)
def overview_chart(text: str, language: str, _run: MiniLMRun):
    """The layers x heads overview figure of the sentence ``text`` (72 small heatmaps: built once, then reused)
    and the same in words (its alt)."""
    return rm_overview.overview_figure(_run.attentions), rm_overview.overview_sentence(_run.attentions)


def model_or_message() -> MiniLM | None:
    """The model, or None after showing exactly how to get it (no traceback).

    A failure is remembered for this session, so changing a widget does not retry a download;
    the "Try again" button forgets it.
    """
    model_dir = os.environ.get(ENV_VAR)
    failed = st.session_state.get("rm_model_error")
    if failed is None or failed[0] != model_dir:
        try:
            with st.spinner(_("Loading all-MiniLM-L6-v2 (90 MB, once per server)…")):  # shown after 0.5 s only
                return cached_model(model_dir)
        except RuntimeError as error:  # ModelUnavailableError, ModelIntegrityError: their message says what to do
            failed = (model_dir, error.args[0] if error.args else str(error))  # a Message: translated when shown
            st.session_state.rm_model_error = failed
    st.error(_(
        "The real model could not be loaded on this server, so this page cannot run it "
        "(the other pages do not need it). What to do:"
    ))
    st.code(_(failed[1]), language=None, wrap_lines=True)
    st.button(_("Try again"), key="rm_retry", on_click=st.session_state.pop, args=("rm_model_error", None))
    return None


def read_link(n_layers: int, n_heads: int) -> None:
    """First visit of this page in a session: the URL's rm_* parameters fill the widgets (messages kept)."""
    ss = st.session_state
    if "rm_link_read" in ss:
        return
    view, messages = rm.view_from_params(address().to_dict(), n_layers, n_heads)
    ss.w_rm_text, ss.w_rm_layer, ss.w_rm_head = view.text, view.layer, view.head
    ss.rm_link_messages = messages
    ss.rm_link_read = True


def write_link(view: rm.RealView) -> None:
    """Keep the address bar in step with the view (only the rm_* parameters; the others are left alone)."""
    changed = {name: value for name, value in rm.params_from_view(view).items() if address().get(name) != value}
    if changed:
        address().update(changed)  # one message, so one history entry, however many changed


def jump_to(layer: int, head: int) -> None:
    """Button callback: show this layer and head."""
    st.session_state.w_rm_layer = layer
    st.session_state.w_rm_head = head


def sentence_input() -> str:
    """The sentence box; an empty box falls back to the example with a message."""
    text = st.text_input(
        _("Sentence"),
        key="w_rm_text",
        persist_state=KEEP,
        max_chars=rm.MAX_TEXT_CHARS,
        help=_("Any English text; the model cuts it into word pieces. Press Enter to run it."),
    )
    if not text.strip():
        st.warning(_("The sentence is empty: showing the example '{example}'.").format(example=rm.DEFAULT_SENTENCE))
        return rm.DEFAULT_SENTENCE
    return text


def pieces_section(model: MiniLM, text: str, run: MiniLMRun) -> None:
    st.html(rm.piece_chips_html(run.tokens, model.piece_sources(text)))
    split = rm.split_words(run.tokens, run.word_ids)
    note = (_("Split words: {words}.").format(words=literals(split, "; ")) if split
            else _("No word is split into pieces."))
    st.caption(sentences(_(
        "{n} word pieces of at most {limit}. [CLS] (start) and [SEP] (end) are added by the tokenizer; a yellow "
        "piece starting with ## continues the word before it."
    ).format(n=run.n_tokens, limit=model.max_tokens), note))
    if "[UNK]" in run.tokens:
        st.caption(_("[UNK] stands for a character MiniLM's vocabulary of word pieces does not have (many Chinese "
                     "characters, every emoji): hover it for the text it replaced."))


def heads_section(run: MiniLMRun, layer: int, head: int) -> None:
    trace = run.traces[layer]
    matrices, labels, block = rm_overview.grid_matrices(trace.weights, run.tokens)  # (nh, P, P)
    st.subheader(_("Layer {layer}: all {n} heads").format(layer=layer, n=trace.n_heads))
    titles = [_("head {head} ◀ chosen").format(head=h) if h == head else _("head {head}").format(head=h)
              for h in range(trace.n_heads)]
    fig = cached_figures.attention_grid(
        matrices, labels, labels, kind="weights", titles=titles, max_cols=1 if on_phone() else 4,
        panel_px=GRID_PANEL_PX, colorbar_below=on_phone(),
    )
    show_chart(fig, key="rm_grid", config=chart_config(),
               alt=sentences(*describe.grid_lines(matrices, labels, labels, kind="weights", titles=titles)))
    rows = _("each row sums to 1") if block == 1 else _("a row of the full matrix sums to 1")
    shrink = (
        _("At {n} pieces each cell shows the largest weight of a {block}×{block} block of pieces (its "
          "labels name them), so the page stays light and sharp lines stay visible; the exact numbers of the "
          "chosen head are in the step-by-step section below.").format(n=run.n_tokens, block=block)
        if block > 1
        else ""
    )
    st.caption(sentences(_(
        "Rows = queries (the piece that looks), columns = keys (the pieces looked at); colour = attention weight, "
        "{rows}. Hover a cell for its numbers. Layers and heads are counted from 0."
    ).format(rows=rows), shrink))


def diagnostics_section(text: str, run: MiniLMRun, layer: int) -> None:
    st.subheader(_("What each head of layer {layer} does").format(layer=layer))
    frame, similarity = layer_tables(text, layer, current_language(), run)
    help_texts = {label: _(meaning) for label, meaning in (*tables.DIAGNOSTIC_COLUMNS.values(), *rm.REAL_COLUMNS.values())}
    frame, help_texts = in_language(frame, help_texts)  # headers in the reader's language, numbers as they are
    config = number_columns(frame.columns, NUMBER, help_texts)
    st.dataframe(frame, column_config=config, height="content", key="rm_head_table", placeholder=EMPTY_CELL)
    notes = [_("Means over the query rows; hover a column name for its meaning. Key 0 is [CLS], so 'on first token' "
               "is the weight on [CLS].")]
    label, _meaning = rm.REAL_COLUMNS["word"]
    word = _(label)  # the column's name as in_language shows it
    if frame[word].isna().all():
        notes.append(_("{empty} under '{column}': no word of this sentence is split into pieces, so there is nothing "
                       "to measure.").format(empty=EMPTY_CELL, column=word))
    st.caption(sentences(*notes))
    left, right = st.columns([3, 2], vertical_alignment="center")
    show_chart(cached_figures.similarity_heatmap(similarity), key="rm_similarity", where=left, config=chart_config(),
               alt=describe.describe_similarity(similarity, title=_("Layer {layer}").format(layer=layer)))
    right.markdown(_(
        "**Which heads look alike?** Cosine similarity of two heads' weight matrices on this sentence: "
        "1 = the same pattern, 0 = no overlap. A bright block off the diagonal is a group of heads doing "
        "much the same job."
    ))


def patterns_section(text: str, run: MiniLMRun) -> None:
    st.subheader(_("Patterns worth looking for"))
    st.markdown(_(
        "Trained heads are not random: many do one recognisable job. Each pattern below has a look in the heatmap "
        "and a number that measures it; the sentence after it is **computed for your sentence** over all "
        "{n} layers. Press *Show* to open that head above."
    ).format(n=len(run.layers)))
    for finding in sentence_findings(text, run):
        pattern = finding.pattern
        text, button = st.columns([6, 1], vertical_alignment="center")
        text.markdown(f"**{_(pattern.name)}**: {_(pattern.look_for)}  \n→ {finding.sentence()}")
        if finding.layer is not None:
            button.button(
                _("Show"),
                key=f"rm_show_{pattern.slug}",
                on_click=jump_to,
                args=(finding.layer, finding.head),
                help=_("Open layer {layer}, head {head}").format(layer=finding.layer, head=finding.head),
            )


def overview_section(text: str, run: MiniLMRun) -> None:
    """All heads of all layers, drawn only while its expander is open (72 heatmaps: the page's heaviest figure)."""
    n_layers, n_heads, t = len(run.layers), run.traces[0].n_heads, run.n_tokens
    box = st.expander(_("All {layers} layers × {heads} heads at a glance").format(layers=n_layers, heads=n_heads),
                      key="w_rm_overview", on_change="rerun")
    if not box.open:
        return
    with box:
        overview_body(text, run, t)


def overview_body(text: str, run: MiniLMRun, t: int) -> None:
    figure, alt = overview_chart(text, current_language(), run)  # the figure's words are the language's
    show_chart(figure, key="rm_overview", config=chart_config(), alt=alt)
    block = rm_overview.pool_block(t)
    shrink = (
        _("With {n} pieces each small square shows the largest weight of a {block}×{block} block, so sharp "
          "lines stay visible.").format(n=t, block=block)
        if block > 1
        else ""
    )
    st.caption(sentences(
        _("Each small square is one head (rows = queries, columns = keys, query 0 at the top), same colours as above."),
        shrink))


def steps_section(model: MiniLM, run: MiniLMRun, layer: int, head: int) -> None:
    st.subheader(_("Step by step: layer {layer}, head {head}").format(layer=layer, head=head))
    shown = st.toggle(
        _("Show every matrix from this layer's input to its output, and one cell number by number"),
        key="w_rm_steps",
        persist_state=KEEP,
        help=_("The same steps as the Step-by-step page, with the real weights. About 1 MB more to draw."),
    )
    if not shown:
        st.caption(_("Off: turn it on to follow the chosen head through the maths (the same views as the toy "
                     "pages)."))
        return
    inputs = rm_steps.layer_inputs(run, layer, model.layers[layer].attention)
    labels = inputs.query_labels
    clamp_choice("w_rm_qi", len(labels))
    clamp_choice("w_rm_kj", len(labels))
    cell = (int(st.session_state.get("w_rm_qi", 0)), int(st.session_state.get("w_rm_kj", 0)))
    for number, step in enumerate(rm_steps.real_steps(run, inputs, layer, head, cell), start=1):
        views.show_step(number, step, KEY_PREFIX, level=4)
    st.markdown("#### " + _("Drill-down: one cell, number by number"))
    i, j = views.cell_picker(labels, labels, ("w_rm_qi", "w_rm_kj"))
    views.show_drill_down(drill_down(inputs, head, i, j), KEY_PREFIX, outlined="above", mask_line=False)


SINK_CITATION = N_(
    "Many BERT-style heads put most of their weight on [CLS] or [SEP] (Clark et al. 2019, *What does BERT look "
    "at?*): a head with nothing useful to read parks its weight there. Weighting by what the key carries, "
    "weight × ‖v_j W_O(h)‖ (Kobayashi et al. 2020, *Attention is not only a weight*), shows how little of it reaches "
    "the output: the right-hand maps are the share of that norm-weighted total, averaged over the queries."
)


@st.cache_resource(max_entries=FORWARD_CACHE_ENTRIES, show_spinner=False)
def sentence_masses(text: str, _model: MiniLM, _run: MiniLMRun) -> tuple[dict[str, np.ndarray], bytes]:
    """Mass on [CLS] and [SEP] per layer and head (each (L, nh)) and the same as CSV, for the sentence ``text``."""
    from mha_core.sinks import special_mass
    from ui.pages.heads import apart

    traces = [layer.attention for layer in _run.layers]
    w_os = [layer.attention.w_o for layer in _model.layers]
    masses = {}
    for name, position in (("[CLS]", 0), ("[SEP]", _run.n_tokens - 1)):
        masses[f"weight on {name}"], masses[f"norm-weighted share on {name}"] = special_mass(traces, w_os, position)
    return masses, apart.special_mass_frame(masses).to_csv().encode()


def sink_section(text: str, model: MiniLM, run: MiniLMRun) -> None:
    """Mass on [CLS] and [SEP] per layer and head, beside the norm-weighted share (mha_core/sinks.py); drawn while open."""
    box = st.expander(_("Where the mass goes: [CLS] and [SEP]"), key="w_rm_sink", on_change="rerun")
    if not box.open:
        return
    with box:
        sink_body(text, model, run)


def mass_name(key: str) -> str:
    """A mass's title in the page's language ("weight on [CLS]" -> "[CLS] 上的权重"); the key stays the CSV's column."""
    for kind in (N_("weight on {token}"), N_("norm-weighted share on {token}")):
        for token in ("[CLS]", "[SEP]"):
            if key == kind.format(token=token):
                return _(kind).format(token=token)
    return key


def sink_body(text: str, model: MiniLM, run: MiniLMRun) -> None:
    masses, csv = sentence_masses(text, model, run)
    layers = [_("layer {layer}").format(layer=n) for n in range(len(run.layers))]
    heads = [str(h) for h in range(run.traces[0].n_heads)]
    columns = st.columns(2)
    for n, (key, matrix) in enumerate(masses.items()):
        name = mass_name(key)
        show_chart(
            cached_figures.matrix_heatmap(matrix, layers, heads, title=name, value_name=name, signed=False, zmin=0.0,
                                          zmax=1.0, height=260, row_name="", col_name=_("head"), width_px=420),
            key=f"rm_sink_{n}", where=columns[n % 2], config=chart_config(),
            alt=describe.describe_matrix(matrix, [str(i) for i in range(len(layers))], heads, title=name,
                                         value_name=name, row_name=_("layer"), col_name=_("head")),
        )
    st.markdown(_(SINK_CITATION))
    st.download_button(_("Mass on [CLS] / [SEP] (CSV)"), data=csv, file_name="cls_sep_mass.csv",
                       mime="text/csv", key="dl_rm_sink", on_click="ignore", icon=":material/download:")


def main() -> None:
    presentation_switch()
    if smollm2_view.model_switch() == "smollm2":
        smollm2_view.main_body()
        return
    st.title(_("Real model: all-MiniLM-L6-v2"))
    model = model_or_message()
    if model is None:
        return
    config = model.config
    read_link(config.n_layers, config.n_heads)
    for message in st.session_state.get("rm_link_messages", []):
        st.warning(_("Link: {message}").format(message=message))
    st.caption(_(
        "A real, trained sentence encoder: {layers} layers of {heads} heads, d_model {d_model}, head size {hs}, run "
        "here in NumPy through the same attention function as the toy pages. Type a sentence and look at what its "
        "heads learned to do."
    ).format(layers=config.n_layers, heads=config.n_heads, d_model=config.d_model, hs=config.head_size))
    with st.expander(_("Where the model comes from")):
        st.markdown(_(
            "**{repo}** (sentence-transformers, licence {licence}), loaded from {source}. Its files are checked "
            "against known SHA-256 hashes before use; another copy can be named with the environment variable "
            "`{env}`."
        ).format(repo=HUB_REPO, licence=MODEL_LICENSE, source=_(model.source.describe()), env=ENV_VAR))
    text = sentence_input()
    try:
        with st.spinner(_("Running the sentence through the model…")):
            run = cached_forward(text, model)
    except ValueError:  # more word pieces than the cap: say how much to cut
        n = len(model.tokenize(text))
        st.error(_("The text has {n} word pieces ([CLS] and [SEP] included), more than the limit of {limit}. Shorten "
                   "it by about {cut} pieces (a word is 1 to 3 pieces).").format(n=n, limit=model.max_tokens,
                                                                                cut=n - model.max_tokens))
        write_link(rm.RealView(text, int(st.session_state.w_rm_layer), int(st.session_state.w_rm_head)))
        return
    pieces_section(model, text, run)
    layer_view(text, model)


@st.fragment
def layer_view(text: str, model: MiniLM) -> None:
    """Everything that a layer, head, "Show" or section click changes: only this reruns then, not the page.

    ``text`` is the sentence of the page's last full run (a new sentence reruns the page).
    """
    config = model.config
    run = cached_forward(text, model)
    clamp_choice("w_rm_layer", config.n_layers)
    clamp_choice("w_rm_head", config.n_heads)
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    layer = left.radio(
        _("Layer"),
        range(config.n_layers),
        key="w_rm_layer",
        persist_state=KEEP,
        horizontal=True,
        format_func=lambda n: _("layer {layer}").format(layer=n),
    )
    head = right.selectbox(
        _("Head (for the step-by-step)"),
        range(config.n_heads),
        key="w_rm_head",
        persist_state=KEEP,
        format_func=lambda h: _("head {head}").format(head=h),
    )
    write_link(rm.RealView(text, int(layer), int(head)))
    heads_section(run, layer, head)
    diagnostics_section(text, run, layer)
    patterns_section(text, run)
    minilm_ablation_section(model, text, run)
    overview_section(text, run)
    minilm_roles_section(model)
    flow_section("rm", text, lambda: run.attentions, axis_labels(run.tokens), False, config.n_layers)
    token_sets_section("rm", lambda: run.attentions, axis_labels(run.tokens))
    sink_section(text, model, run)
    steps_section(model, run, layer, head)
    send_address()  # a layer or head change reruns only this fragment: the address bar follows it here


main()
