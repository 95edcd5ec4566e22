"""Longer than trained (issue 36) on the Real model page's what-ifs: SmolLM2 on a long repeated text with its RoPE as
trained, scaled (position interpolation, NTK-aware, dynamic NTK, YaRN), partial, or off in every fourth layer. The
numbers are ``mha_core.smollm2_long``'s; the link builders and the figures are pure, the section below them draws.

Link: ``rm_long=1`` the experiment on; ``rm_long_method`` one of ``CHOSEN_METHODS`` (default yarn);
``rm_long_factor`` s, one of ``FACTORS``; ``rm_long_fraction`` the share of pairs partial RoPE turns, one of
``FRACTIONS``; ``rm_long_tokens`` T, one of ``TOKEN_CHOICES``; ``rm_long_text`` ``builtin`` or ``whatif`` (the
what-ifs' text, repeated). A bad value gets a message and the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from mha_core import smollm2 as smol
from mha_core import smollm2_long as lg
from ui.charts.numbers import count
from ui.i18n import N_, _
from ui.state.address import address
from ui.state.device import chart_config
from ui.widgets.live import show_chart
from ui.widgets.state import KEEP

ON_PARAM, METHOD_PARAM, FACTOR_PARAM, FRACTION_PARAM, TOKENS_PARAM, TEXT_PARAM = (
    "rm_long", "rm_long_method", "rm_long_factor", "rm_long_fraction", "rm_long_tokens", "rm_long_text")
PARAMS = (ON_PARAM, METHOD_PARAM, FACTOR_PARAM, FRACTION_PARAM, TOKENS_PARAM, TEXT_PARAM)
CHOSEN_METHODS = tuple(name for name in lg.METHODS if name not in ("inside", "trained"))
FACTORS = (1.0, 1.5, 2.0, 4.0, 8.0)
FRACTIONS = (0.25, 0.5, 0.75)
TOKEN_CHOICES = (256, 512, 1024, 2048)
TEXTS = {"builtin": N_("the built-in text"), "whatif": N_("the what-ifs' text")}
COLOURS = ("#0072b2", "#d55e00", "#009e73")  # inside, as trained, the chosen method (Okabe-Ito: colour-blind safe)
LONG_CACHE_ENTRIES = 12  # a run keeps (T, C) + (T,) + 3 x (L, nh): 1.2 MB at T = 512


@dataclass(frozen=True)
class LongLink:
    """What a link asks for: on, the method compared, s, the partial fraction, T, which text."""

    on: bool = False
    method: str = "yarn"
    factor: float = 2.0
    fraction: float = 0.5
    n_tokens: int = lg.DEFAULT_LONG_TOKENS
    text: str = "builtin"


def _number(raw: str | None) -> float | None:
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def read_link(params: Mapping[str, str], messages: list[str]) -> LongLink:
    """The experiment's settings in a link; each bad value reported in ``messages`` and replaced by its default."""
    default = LongLink()
    on = params.get(ON_PARAM, "0")
    if on not in ("0", "1"):
        messages.append(_("`{param}={value}` is not 0 or 1; using 0.").format(param=ON_PARAM, value=on))
    method = params.get(METHOD_PARAM, default.method)
    if method not in CHOSEN_METHODS:
        messages.append(_("`{param}={value}` is not one of {choices}; using {default}.").format(
            param=METHOD_PARAM, value=method, choices=", ".join(CHOSEN_METHODS), default=default.method))
        method = default.method
    chosen = {}
    for param, choices, fallback in ((FACTOR_PARAM, FACTORS, default.factor),
                                     (FRACTION_PARAM, FRACTIONS, default.fraction),
                                     (TOKENS_PARAM, TOKEN_CHOICES, default.n_tokens)):
        value = _number(params.get(param, str(fallback)))
        if value not in choices:
            messages.append(_("`{param}={value}` is not one of {choices}; using {default}.").format(
                param=param, value=params.get(param), choices=", ".join(f"{c:g}" for c in choices),
                default=f"{fallback:g}"))
            value = fallback
        chosen[param] = value
    text = params.get(TEXT_PARAM, default.text)
    if text not in TEXTS:
        messages.append(_("`{param}={value}` is not one of {choices}; using {default}.").format(
            param=TEXT_PARAM, value=text, choices=", ".join(TEXTS), default=default.text))
        text = default.text
    return LongLink(on == "1", method, float(chosen[FACTOR_PARAM]), float(chosen[FRACTION_PARAM]),
                    int(chosen[TOKENS_PARAM]), text)


def link_params(link: LongLink) -> dict[str, str]:
    """The query parameters that reopen the experiment (defaults left out; nothing when it is off)."""
    if not link.on:
        return {}
    default, params = LongLink(), {ON_PARAM: "1"}
    for param, value, fallback in ((METHOD_PARAM, link.method, default.method),
                                   (FACTOR_PARAM, f"{link.factor:g}", f"{default.factor:g}"),
                                   (FRACTION_PARAM, f"{link.fraction:g}", f"{default.fraction:g}"),
                                   (TOKENS_PARAM, str(link.n_tokens), str(default.n_tokens)),
                                   (TEXT_PARAM, link.text, default.text)):
        if value != fallback:
            params[param] = value
    return params


def compared_settings(link: LongLink) -> tuple[lg.LongSetting, ...]:
    """The runs shown: inside the trained length, RoPE as trained past it, and the chosen method past it."""
    return tuple(lg.LongSetting(method, link.factor, link.fraction, link.n_tokens)
                 for method in ("inside", "trained", link.method))


def summary_frame(runs: tuple[lg.LongRun, ...]) -> pd.DataFrame:
    """One row per run: its method key, the mean loss after the first copy and over all positions, and the layers'
    mean entropy, first-token mass and best induction score (over the sampled rows)."""
    return pd.DataFrame({
        "method": [run.setting.method for run in runs],
        "label": [_(lg.METHODS[run.setting.method]) for run in runs],
        "loss_after": [run.mean_loss(run.period) for run in runs],
        "loss": [run.mean_loss() for run in runs],
        "entropy": [float(run.entropy.mean()) for run in runs],
        "first": [float(run.first.mean()) for run in runs],
        "induction": [float(run.induction.max()) for run in runs],
    })


def layers_figure(runs: tuple[lg.LongRun, ...]) -> go.Figure:
    """Per layer, one line per run: mean entropy over heads, mean first-token mass, the best head's induction score."""
    titles = (_("entropy (nats)"), _("first-token weight"), _("induction score"))
    fig = make_subplots(rows=3, cols=1, subplot_titles=titles, shared_xaxes=True, vertical_spacing=0.09)
    for run, colour in zip(runs, COLOURS, strict=False):
        name = _(lg.METHODS[run.setting.method])
        layers = list(range(run.entropy.shape[0]))
        for panel, values in enumerate((run.entropy.mean(axis=1), run.first.mean(axis=1),
                                        run.induction.max(axis=1)), start=1):
            fig.add_scatter(x=layers, y=values.tolist(), mode="lines+markers", name=name, legendgroup=name,
                            showlegend=panel == 1, line={"color": colour}, row=panel, col=1,
                            hovertemplate=_("layer %{x}") + "<br>%{y:.4f}<extra>" + name + "</extra>")
    fig.update_xaxes(title_text=_("layer"), row=3, col=1)
    fig.update_annotations(font_size=13)
    fig.update_layout(height=560, margin={"l": 40, "r": 10, "t": 60, "b": 40}, legend={"orientation": "h", "y": -0.12})
    return fig


def loss_figure(runs: tuple[lg.LongRun, ...]) -> go.Figure:
    """The loss on each next token against its position in the text (0..T-2), one line per run."""
    fig = go.Figure()
    for run, colour in zip(runs, COLOURS, strict=False):
        name = _(lg.METHODS[run.setting.method])
        fig.add_scatter(x=list(range(run.losses.size)), y=run.losses.tolist(), mode="lines", name=name,
                        line={"color": colour, "width": 1},
                        hovertemplate=_("token %{x}") + "<br>%{y:.3f}<extra>" + name + "</extra>")
    fig.update_layout(title=_("Loss on each next token"), height=340, margin={"l": 50, "r": 10, "t": 50, "b": 40},
                      xaxis={"title": _("token i (predicting i + 1)")}, yaxis={"title": _("loss (nats)")},
                      legend={"orientation": "h", "y": -0.3})
    return fig


# ---- the section ----


@st.cache_resource(show_spinner=False)
def long_run_store() -> dict:
    """This server's long runs, (text, setting) -> LongRun, oldest first, at most ``LONG_CACHE_ENTRIES``. A plain dict
    and not a cached function: the run ticks a progress bar made outside it, which a cache could not replay."""
    return {}


def long_run(model: smol.SmolLM2, text: str, setting: lg.LongSetting, progress) -> lg.LongRun:
    """One long run of ``text`` repeated to T tokens, from the store or computed now (``progress(done, total)``)."""
    store, key = long_run_store(), (text, setting)
    if key not in store:
        ids, period = lg.long_token_ids(model, text, setting.n_tokens)
        found = lg.long_forward(model, ids, period, setting, progress)
        while len(store) >= LONG_CACHE_ENTRIES:
            store.pop(next(iter(store)), None)
        store[key] = found
    return store[key]


def read_long_link() -> None:
    """First visit in a session: the link fills the widgets."""
    ss = st.session_state
    if "sm_long_link_read" in ss:
        return
    messages = []
    link = read_link(address().to_dict(), messages)
    ss.w_sm_long_on, ss.w_sm_long_method, ss.w_sm_long_factor = link.on, link.method, link.factor
    ss.w_sm_long_fraction, ss.w_sm_long_tokens, ss.w_sm_long_text = link.fraction, link.n_tokens, link.text
    ss.sm_long_messages, ss.sm_long_link_read = messages, True


def write_long_link(link: LongLink) -> None:
    params = link_params(link)
    for name in PARAMS:
        if name in address() and name not in params:
            del address()[name]
    changed = {name: value for name, value in params.items() if address().get(name) != value}
    if changed:
        address().update(changed)


def long_section(model: smol.SmolLM2, whatif_text: str) -> None:
    """The toggle, the settings, three runs (cached, with a progress bar) and what they measured."""
    read_long_link()
    for message in st.session_state.get("sm_long_messages", []):
        st.warning(_("Link: {message}").format(message=message))
    on = st.toggle(_("Longer than trained: RoPE past the trained length"), key="w_sm_long_on", persist_state=KEEP)
    if not on:
        write_long_link(LongLink())
        return
    trained = model.config.context
    st.markdown(_("SmolLM2 was trained on {trained} positions. One core cannot run a text that long here, so T is "
                  "capped at {cap} tokens and the text is read **as if a long stretch had been cut out of it**: the "
                  "first copy of the repeated text keeps positions 0, 1, 2, …; every later token moves G positions on, "
                  "so the last one sits at position s × {trained} − 1. The farthest pairs (a later token and the first "
                  "copy, the first token among them) are then about s times the trained length apart, while "
                  "neighbours stay 1 apart. The G tokens in between are not run: this measures what RoPE does to "
                  "distances past the trained length, not what a real text of s × {trained} tokens would "
                  "do.").format(trained=count(trained), cap=count(lg.MAX_LONG_TOKENS)))
    left, middle, right = st.columns(3)
    method = left.selectbox(_("RoPE past the trained length"), CHOSEN_METHODS, key="w_sm_long_method",
                            persist_state=KEEP, format_func=lambda name: _(lg.METHODS[name]))
    factor = middle.select_slider(_("s: times the trained length"), FACTORS, key="w_sm_long_factor",
                                  persist_state=KEEP, format_func=lambda s: f"{s:g}×")
    n_tokens = right.select_slider(_("T: tokens run"), TOKEN_CHOICES, key="w_sm_long_tokens", persist_state=KEEP)
    fraction = st.session_state.get("w_sm_long_fraction", 0.5)
    if method == "partial":
        fraction = st.select_slider(_("Share of each head's pairs that turn (the fastest ones)"), FRACTIONS,
                                    key="w_sm_long_fraction", persist_state=KEEP)
    which = st.segmented_control(_("Repeated text"), list(TEXTS), key="w_sm_long_text", persist_state=KEEP,
                                 format_func=lambda name: _(TEXTS[name]), required=True) or "builtin"
    link = LongLink(True, method, float(factor), float(fraction), int(n_tokens), which)
    write_long_link(link)
    text = lg.LONG_TEXT if which == "builtin" else whatif_text
    try:
        lg.long_token_ids(model, text, link.n_tokens)
    except ValueError:
        st.warning(_("This text cannot be repeated at T = {t}: it needs at least 2 tokens and at most T/2; using "
                     "the built-in text.").format(t=link.n_tokens))
        text = lg.LONG_TEXT
    st.caption(_("Repeated text: “{text}”").format(text=text))
    settings = compared_settings(link)
    bar = st.progress(0.0, text=_("Running {n} long runs…").format(n=len(settings)))
    runs = []
    for done, setting in enumerate(settings):
        def tick(layer, total, done=done):
            bar.progress((done + layer / total) / len(settings), text=_("Run {run} of {n}: layer {layer} of {total}")
                         .format(run=done + 1, n=len(settings), layer=layer, total=total))
        runs.append(long_run(model, text, setting, tick))
    bar.empty()
    show_results(model, link, runs)


def show_results(model: smol.SmolLM2, link: LongLink, runs: list[lg.LongRun]) -> None:
    runs = tuple(runs)
    inside, past = runs[0], runs[1]
    frame = summary_frame(runs)
    st.dataframe(frame, key="sm_long_rows", hide_index=True, column_config={
        "method": None, "label": st.column_config.TextColumn(_("RoPE")),
        "loss_after": st.column_config.NumberColumn(_("loss after the first copy"), format="%.3f"),
        "loss": st.column_config.NumberColumn(_("loss, all tokens"), format="%.3f"),
        "entropy": st.column_config.NumberColumn(_("entropy"), format="%.3f"),
        "first": st.column_config.NumberColumn(_("first-token weight"), format="%.3f"),
        "induction": st.column_config.NumberColumn(_("best induction score"), format="%.3f")})
    st.caption(_("T = {t} tokens, the text's {n} tokens repeated; positions past the first copy moved by G = {gap} "
                 "(last position {last}; trained length {trained}). Loss: mean cross-entropy of each next token, in "
                 "nats; after the first copy the model can copy what came before. Entropy, first-token weight and "
                 "induction score read {rows} query rows spread evenly over the copies after the first, not every "
                 "row.").format(t=link.n_tokens, n=past.period, gap=count(lg.gap(past.setting, model.config.context)),
                                last=count(int(past.positions[-1])), trained=count(model.config.context),
                                rows=past.rows.size))
    show_chart(layers_figure(runs), key="sm_long_layers", config=chart_config())
    st.caption(_("Per layer: the attention entropy and the weight on the first token are means over the heads; the "
                 "induction score is the layer's best head's."))
    show_chart(loss_figure(runs), key="sm_long_loss", config=chart_config())
    chosen = runs[-1]
    st.markdown(_("Past the trained length the loss after the first copy goes from {inside} (inside) to {past} with "
                  "RoPE as trained and {chosen} with {method}.").format(
        inside=f"{inside.mean_loss(inside.period):.3f}", past=f"{past.mean_loss(past.period):.3f}",
        chosen=f"{chosen.mean_loss(chosen.period):.3f}", method=_(lg.METHODS[chosen.setting.method])))
