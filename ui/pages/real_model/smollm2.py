"""Pure builders for SmolLM2 on the Real model page. No streamlit in here.

- which real model the page shows (the link's ``model``) and SmolLM2's own link settings
  (``rm_text``, ``rm_layer``, ``rm_head``, ``rm_temp``, ``rm_topk``) as ``ui.state.settings.Setting``
  rows read by ``ui.state.urlstate.read_settings``, the reader of every other page's settings;
- next-token probabilities at a temperature, the logit lens and the induction ranking as tables, the lens and
  the loss on a repeated sequence as line figures (with their alt text);
- the heads of a layer ordered by the K/V head they read, with their titles.

Shapes: L layers, nh query heads, kv K/V heads, T tokens, V vocabulary (glossary of ``mha_core``).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from mha_core.smollm2 import SmolLM2
from mha_core.smollm2_runs import InductionScores, LogitLens, softmax_1d
from ui.charts.figures import figure, plot_texts
from ui.charts.labels import axis_labels, shown_token  # noqa: F401  (re-exported: the page's old imports)
from ui.i18n import N_, _, sentences
from ui.pages.real_model import link_text
from ui.pipeline.panels import slim_step
from ui.pipeline.records import Panel, Step, StepInputs, dim_labels, shape_text
from ui.pipeline.steps import build_steps
from ui.state.settings import Setting
from ui.state.urlstate import read_settings, write_settings

# ---- which model: a table of records ----


@dataclass(frozen=True)
class RealModelChoice:
    """One real model the page can show: the link's value, the switch's label, what it is."""

    name: str
    label: str
    summary: str


REAL_MODELS: dict[str, RealModelChoice] = {
    choice.name: choice
    for choice in (
        RealModelChoice("minilm", N_("all-MiniLM-L6-v2 (encoder)"),
                        N_("a BERT sentence encoder: 6 layers × 12 heads, every token sees every token")),
        RealModelChoice("smollm2", N_("SmolLM2-135M (decoder, 4-bit)"),
                        N_("a Llama language model: 30 layers × 9 query heads sharing 3 K/V heads, RoPE, causal")),
    )
}
DEFAULT_MODEL = "minilm"

MODEL_ROW = Setting("model", "choice", label=N_("Model"), default=DEFAULT_MODEL, written="changed",
                    choices={name: choice.label for name, choice in REAL_MODELS.items()})

DEFAULT_PROMPT = "The Eiffel Tower is a famous landmark in the city of"
MAX_PROMPT_CHARS = 1000  # a link's prompt is cut here; 128 tokens need fewer characters
TOP_K = (1, 30)
TEMPERATURE = (0.0, 3.0)  # above 0, at most 3
MIN_TEMPERATURE = 0.01  # the slider's lowest step; a link's smaller temperature is shown as this

SMOL_ROWS = (
    Setting("sm_layer", "int", url="rm_layer", label=N_("Layer"), default=0, limits=(0, 29)),
    Setting("sm_head", "int", url="rm_head", label=N_("Head"), default=0, limits=(0, 8)),
    Setting("sm_temp", "float", url="rm_temp", label=N_("Temperature"), default=1.0, limits=TEMPERATURE,
            written="changed",
            help=N_("Logits are divided by it before the softmax: below 1 sharpens, above 1 flattens.")),
    Setting("sm_topk", "int", url="rm_topk", label=N_("Tokens shown"), default=10, limits=TOP_K, written="changed"),
)


def model_from_params(params: Mapping[str, str]) -> tuple[str, list[str]]:
    """The real model a link asks for (``model``; MiniLM when absent), and a message for a bad value."""
    messages: list[str] = []
    values = read_settings(params, (MODEL_ROW,), {}, messages)
    return values["model"], messages


def model_params(model: str) -> dict[str, str]:
    """The ``model`` parameter that reopens it (none for the default, so MiniLM links stay as they were)."""
    return write_settings((MODEL_ROW,), {"model": model})


@dataclass(frozen=True)
class SmolView:
    """What the SmolLM2 view shows: a prompt, a layer and head, the temperature and how many tokens to list."""

    text: str = DEFAULT_PROMPT
    layer: int = 0
    head: int = 0
    temperature: float = 1.0
    top_k: int = 10


def smol_view_from_params(params: Mapping[str, str]) -> tuple[SmolView, list[str]]:
    """The SmolLM2 view a link asks for, and a message for every value that could not be used as given."""
    messages: list[str] = []
    text = link_text(params, DEFAULT_PROMPT, MAX_PROMPT_CHARS, N_("prompt"), messages)
    values = read_settings(params, SMOL_ROWS, {}, messages)
    return SmolView(text, values["sm_layer"], values["sm_head"], values["sm_temp"], values["sm_topk"]), messages


def smol_params(view: SmolView) -> dict[str, str]:
    """The query parameters that reopen ``view`` (with ``model=smollm2``)."""
    values = {"sm_layer": view.layer, "sm_head": view.head, "sm_temp": view.temperature, "sm_topk": view.top_k}
    return {"model": "smollm2", "rm_text": view.text, **write_settings(SMOL_ROWS, values)}


# ---- tokens ---- (their labels: ui.charts.labels.shown_token, axis_labels)


def token_chips_html(tokens, hovers=None) -> str:
    """The tokens as chips, each with its position above it; ``hovers`` (one text per token) as the chip's tooltip."""
    chips = []
    for position, token in enumerate(tokens):
        hover = f' title="{html.escape(hovers[position])}"' if hovers else ""
        chips.append(
            f'<span{hover} style="display: inline-flex; flex-direction: column; align-items: center; '
            'margin: 0 4px 6px 0; padding: 2px 8px; border-radius: 8px; background: rgba(68, 1, 84, 0.12); '
            'border: 1px solid rgba(68, 1, 84, 0.55);">'
            f'<span style="font-size: 0.75em; opacity: 0.7;">{position}</span>'
            f'<span style="font-family: monospace; font-size: 1.1em;">{html.escape(shown_token(token))}</span></span>'
        )
    return f'<div style="display: flex; flex-wrap: wrap; line-height: 1.2;">{"".join(chips)}</div>'


def token_hovers(labels) -> list[str]:
    """Each token's tooltip: its bytes in hex, and what its label's mark means when it holds part of a character."""
    hovers = []
    for label in labels:
        words = _("bytes {hex}").format(hex=label.hex)
        if not label.whole:
            words += " · " + _("holds part of a character: ¹⁄₂ = the first of the 2 tokens that share it")
        hovers.append(words)
    return hovers


# ---- next token ----


def prediction_frame(model: SmolLM2, logits: np.ndarray, temperature: float, top_k: int) -> pd.DataFrame:
    """The ``top_k`` most likely next tokens at ``temperature``: token, probability, logit; most likely first."""
    probs = softmax_1d(logits, temperature)  # (V,)
    top = np.argsort(-probs, kind="stable")[:top_k]  # (k,)
    return pd.DataFrame({
        "token": [shown_token(model.token_label(i)) for i in top],
        "probability": probs[top],
        "logit": np.asarray(logits, dtype=np.float64)[top],
        "id": top,
    }, index=pd.RangeIndex(1, len(top) + 1, name="rank"))


# ---- logit lens ----


def lens_frame(model: SmolLM2, lens: LogitLens) -> pd.DataFrame:
    """One row per depth: the top token there, and the rank and probability of the model's final prediction."""
    n = len(lens.top_ids)
    depths = [_("embeddings")] + [_("after layer {layer}").format(layer=layer) for layer in range(n - 1)]
    top_probs = [softmax_1d(row)[i] for row, i in zip(lens.logits, lens.top_ids, strict=True)]
    return pd.DataFrame({
        "top token": [shown_token(model.token_label(i)) for i in lens.top_ids],
        "its probability": top_probs,
        "rank of the final prediction": lens.target_rank,
        "probability of the final prediction": lens.target_prob,
    }, index=pd.Index(depths, name="read from"))


def embedding_row_note(model: SmolLM2, lens: LogitLens, token_ids: np.ndarray) -> str:
    """What the lens's "embeddings" row is: the read token's own row of the embedding table, before any layer,
    through the final RMSNorm and the tied unembedding (the same table), so each token's row is scored against it."""
    own = int(token_ids[lens.position])
    scores = lens.logits[0]  # (V,) the embeddings row's logits
    top = int(lens.top_ids[0])
    prob = softmax_1d(scores)[top]
    token = shown_token(model.token_label(own))
    head = _("The **embeddings** row reads '{token}' before any layer: its own row of the embedding table, put "
             "through the final RMSNorm and the tied unembedding (that same table), so every token's row is scored "
             "against it.").format(token=token)
    if top == own:
        what = _("Here no row scores higher than its own, so the top token is '{token}' itself, at probability "
                 "{prob}.").format(token=token, prob=f"{prob:.3f}")
    else:
        rank = int((scores > scores[own]).sum())
        what = _("Here the row of '{top}' scores highest (probability {prob}); '{token}' itself comes at rank "
                 "{rank}.").format(top=shown_token(model.token_label(top)), prob=f"{prob:.3f}", token=token, rank=rank)
    return sentences(head, what, _("It is no guess at the next token yet: the layers' rows are."))


# ---- heads grouped by the K/V head they read ----


def grouped_heads(n_heads: int, kv_heads: int) -> list[int]:
    """Query heads in K/V order: the nh/kv heads that read K/V head 0, then those of K/V head 1, ..."""
    group = n_heads // kv_heads
    return sorted(range(n_heads), key=lambda h: (h // group, h))


def head_titles(n_heads: int, kv_heads: int, chosen: int) -> list[str]:
    """One title per query head: its number, the K/V head it reads, and a mark on the chosen one."""
    group = n_heads // kv_heads
    return [_("head {head} · K/V {kv}").format(head=h, kv=h // group) + (" ◀" if h == chosen else "")
            for h in grouped_heads(n_heads, kv_heads)]


# ---- one layer through the Step-by-step builders ----

SMOL_TOY_ONLY_STEPS = ("input", "positional")  # X is the RMS-normed residual; positions come by RoPE, inside
CAUSAL_NOTE = N_("**The causal mask.** A decoder predicts each next token from the tokens before it, so token i may "
                 "attend to tokens 0..i only: the logits above the diagonal are set to −∞ before the softmax.")


def smol_step_inputs(model: SmolLM2, run, layer: int) -> StepInputs:
    """Layer ``layer`` of a SmolLM2 run as the inputs of the Step-by-step builders.

    X is what the layer's attention reads: RMSNorm of the residual stream. The trace is the engine's
    own for that layer (recomputed: the run keeps only the weights), with RoPE and 9 over 3 heads.
    """
    if not 0 <= layer < len(run.layers):
        raise ValueError(f"layer {layer} does not exist: choose 0 to {len(run.layers) - 1}")
    x, trace, weights = model.layer_trace(run, layer)  # (T, C), trace, dequantized weights
    labels = axis_labels(run.tokens)
    return StepInputs(trace=trace, weights=weights, query_labels=labels, key_labels=labels, embeddings=x,
                      key_embeddings=x, positional=None, x_q=x, x_kv=x, mask=np.tri(len(labels), dtype=bool),
                      mask_name="causal", scale_rule="sqrt_dk", rope_base=model.config.rope_base)


def smol_steps(inputs: StepInputs, layer: int, head: int, cell=None) -> list[Step]:
    """The Step-by-step page's steps for one SmolLM2 head (large matrices cut to the head's block)."""
    first = Step("input", _("Layer {layer}'s input X = RMSNorm(residual stream)").format(layer=layer),
                 _("Attention reads the residual stream after an RMSNorm: each row divided by its root mean square, "
                   "times a learned gain. No position is added to X: RoPE turns q and k inside attention."),
                 r"X = \mathrm{RMSNorm}(h^{(" + str(layer) + r")})",
                 _("X {shape}: (T tokens, C = d_model)").format(shape=shape_text(inputs.x_q)),
                 (Panel("X", inputs.x_q, inputs.query_labels, dim_labels(inputs.x_q.shape[1]), "x"),))
    steps = [first]
    for step in build_steps(inputs, head, cell):
        if step.slug == "mask":
            step = replace(step, note=_(CAUSAL_NOTE))
        if step.slug not in SMOL_TOY_ONLY_STEPS:
            steps.append(step)
    return [slim_step(s) for s in steps]


# ---- induction heads ----


RANKINGS = {"induction": N_("induction score"), "previous": N_("previous-token score")}  # InductionScores field -> column


def induction_frame(scores: InductionScores, top: int = 12, by: str = "induction") -> pd.DataFrame:
    """The ``top`` heads by induction (or previous-token) score, with both scores."""
    rows = scores.ranking(by)[:top]
    return pd.DataFrame({
        "layer": [layer for layer, _head, _score in rows],
        "head": [head for _layer, head, _score in rows],
        "induction score": [float(scores.induction[layer, head]) for layer, head, _score in rows],
        "previous-token score": [float(scores.previous[layer, head]) for layer, head, _score in rows],
    }, index=pd.RangeIndex(1, len(rows) + 1, name="rank"))


def loss_halves(scores: InductionScores) -> tuple[float, float]:
    """Mean loss predicting tokens 1..n-1 of the first copy, and tokens n+1..2n-1 of the second (the first
    token of the second copy follows nothing it could be copied from)."""
    n = scores.half
    return float(scores.loss[: n - 1].mean()), float(scores.loss[n:].mean())


# ---- line charts: the logit lens and the loss on the repeated sequence ----

LINE_COLOUR = "#3b528b"  # viridis' blue, as the app's bar charts


def line_figure(x, y: np.ndarray, *, x_title: str, y_title: str, categories: bool = False):
    """One line with a marker per point: ``y`` (n,) over ``x`` (n values; labels kept in order when ``categories``)."""
    line = dict(type="scatter", mode="lines+markers", x=plot_texts(x) if categories else np.asarray(x),
                y=np.asarray(y, dtype=np.float64), line=dict(color=LINE_COLOUR), marker=dict(size=5),
                hovertemplate=f"%{{x}}<br>{y_title} %{{y:.3f}}<extra></extra>")
    x_axis = dict(title=dict(text=x_title), **(dict(type="category", tickangle=-45, showgrid=False) if categories else {}))
    layout = dict(height=300, margin=dict(l=60, r=10, t=20, b=90 if categories else 50), xaxis=x_axis,
                  yaxis=dict(title=dict(text=y_title), rangemode="tozero"))
    return figure([line], layout)


def lens_figure(frame: pd.DataFrame, target: str) -> tuple:
    """The probability of the final prediction read from each depth (``lens_frame``) as a line, and in words."""
    probs = frame["probability of the final prediction"].to_numpy()  # (L + 1,)
    depths = list(frame.index)
    top = int(probs.argmax())
    fig = line_figure(depths, probs, x_title=_("read from"), y_title=f"p('{target}')", categories=True)
    alt = _("Line chart of the probability of the final prediction '{target}' read from each of {n} depths: "
            "{first} from the {first_depth}, {last} {last_depth}; highest {top} {top_depth}.").format(
        target=target, n=len(depths), first=f"{probs[0]:.3f}", first_depth=depths[0], last=f"{probs[-1]:.3f}",
        last_depth=depths[-1], top=f"{probs[top]:.3f}", top_depth=depths[top])
    return fig, alt


def loss_figure(scores: InductionScores) -> tuple:
    """The loss predicting the next token at each position of the repeated sequence as a line, and in words."""
    first, second = loss_halves(scores)
    fig = line_figure(np.arange(scores.loss.size), scores.loss, x_title=_("position predicting the next token"),
                      y_title=_("loss (nats)"))
    alt = _("Line chart of the loss predicting the next token at each of {n} positions: mean {first} nats in the "
            "first copy, {second} in the second (from position {half}).").format(
        n=scores.loss.size, first=f"{first:.2f}", second=f"{second:.2f}", half=scores.half)
    return fig, alt
