"""Pure builders for the Real model page (all-MiniLM-L6-v2). No streamlit in here.

- the page's link state (sentence, layer, head) <-> URL query parameters ``rm_text``, ``rm_layer``, ``rm_head``;
- the word pieces as chips;
- per-head pattern measures over every layer, and the strongest head of each pattern in words;
- the all-heads grid of one layer: exact up to ``GRID_MAX_CELLS`` pieces, block maxima beyond;
- the layers x heads overview: every head of every layer in one figure, block-max-pooled when long;
- one real layer as ``StepInputs`` so the Step-by-step builders of ``ui.pipeline.steps`` show it, with a
  real-model first step (the layer's input) and last step (add & norm).

Shapes: L layers, nh heads, T word pieces, C = d_model, hs head size (glossary of ``mha_core``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_core.attention import AttentionTrace, AttentionWeights
from mha_core.diagnostics import encoder_patterns
from mha_core.inputs import token_labels
from mha_core.pretrained import MiniLMRun
from ui.charts.figures import WEIGHT_SCALE, figure
from ui.charts.tables import head_summary_frame
from ui.pipeline.records import Panel, Step, StepInputs, dim_labels, shape_text
from ui.pipeline.steps import build_steps

DEFAULT_SENTENCE = "The snowboarder was unbelievably fast, so the photographers missed her jump."
MAX_TEXT_CHARS = 2000  # a link's sentence is cut here; 128 word pieces need far fewer characters
OVERVIEW_MAX_CELLS = 32  # each overview panel shows at most this many rows and columns
GRID_MAX_CELLS = 64  # the all-heads grid is exact up to this many pieces; longer, 2x2 block maxima (payload)
MAX_PANEL_CELLS = 20_000  # a step's matrix above this is cut to the chosen head's block, or left out (payload)
STRONG = 0.5  # a head "shows" a weight pattern when its mean mass on the pattern's keys is at least this
BROAD = 0.8  # ... and is "broad" when its normalised entropy is at least this

# ---- the link: sentence, layer and head <-> query parameters -------------------------------


@dataclass(frozen=True)
class RealView:
    """What the Real model page shows: a sentence, a layer and a head (both counted from 0)."""

    text: str = DEFAULT_SENTENCE
    layer: int = 0
    head: int = 0


def _index(params: Mapping[str, str], name: str, size: int, messages: list[str]) -> int:
    """A whole number 0..size-1 from ``params[name]``; 0 when missing, 0 and a message when unusable."""
    raw = params.get(name)
    if raw is None or raw == "":
        return 0
    try:
        value = int(raw)
    except ValueError:
        messages.append(f"`{name}={raw}` is not a whole number: using 0 (choose 0 to {size - 1}).")
        return 0
    if not 0 <= value < size:
        messages.append(f"`{name}={raw}` is outside 0..{size - 1}: using 0.")
        return 0
    return value


def view_from_params(params: Mapping[str, str], n_layers: int, n_heads: int) -> tuple[RealView, list[str]]:
    """The view a link asks for, and a message for every value that could not be used as given."""
    messages: list[str] = []
    text = params.get("rm_text")
    if text is None:
        text = DEFAULT_SENTENCE
    elif not text.strip():
        messages.append(f"`rm_text` is empty: using the example sentence '{DEFAULT_SENTENCE}'.")
        text = DEFAULT_SENTENCE
    elif len(text) > MAX_TEXT_CHARS:
        messages.append(f"`rm_text` has {len(text):,} characters; keeping the first {MAX_TEXT_CHARS:,}.")
        text = text[:MAX_TEXT_CHARS]
    layer = _index(params, "rm_layer", n_layers, messages)
    head = _index(params, "rm_head", n_heads, messages)
    return RealView(text=text, layer=layer, head=head), messages


def params_from_view(view: RealView) -> dict[str, str]:
    """The query parameters that reopen ``view``."""
    return {"rm_text": view.text, "rm_layer": str(view.layer), "rm_head": str(view.head)}


# ---- the word pieces -----------------------------------------------------------------------

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")
CHIP_STYLES = {
    "special": "background: rgba(128, 128, 128, 0.25); border: 1px dashed rgba(128, 128, 128, 0.9);",
    "start": "background: rgba(68, 1, 84, 0.12); border: 1px solid rgba(68, 1, 84, 0.55);",
    "piece": "background: rgba(253, 231, 37, 0.35); border: 1px solid rgba(180, 160, 0, 0.9);",
}


def piece_kind(token: str) -> str:
    """'special' ([CLS], [SEP], ...), 'piece' (continues the word before it: '##...') or 'start'."""
    if token in SPECIAL_TOKENS:
        return "special"
    return "piece" if token.startswith("##") else "start"


def piece_chips_html(tokens: list[str] | tuple[str, ...]) -> str:
    """The word pieces as chips, each with its position above it; continuation pieces in yellow."""
    chips = []
    for position, token in enumerate(tokens):
        style = CHIP_STYLES[piece_kind(token)]
        chips.append(
            '<span style="display: inline-flex; flex-direction: column; align-items: center; margin: 0 4px 6px 0; '
            f'padding: 2px 8px; border-radius: 8px; {style}">'
            f'<span style="font-size: 0.75em; opacity: 0.7;">{position}</span>'
            f'<span style="font-family: monospace; font-size: 1.1em;">{html.escape(token)}</span></span>'
        )
    return f'<div style="display: flex; flex-wrap: wrap; line-height: 1.2;">{"".join(chips)}</div>'


def split_words(tokens, word_ids) -> list[str]:
    """The words the tokenizer cut into two or more pieces, each written as its pieces ('un ##bel ##ie'), once each."""
    groups: dict[int, list[str]] = {}
    for token, word in zip(tokens, word_ids, strict=True):
        if word is not None:
            groups.setdefault(word, []).append(token)
    split = [" ".join(pieces) for pieces in groups.values() if len(pieces) > 1]
    return list(dict.fromkeys(split))  # a word split twice is listed once


# ---- what each head does, over every layer -------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """A pattern worth looking for: how to measure it and how to recognise it in a heatmap."""

    slug: str
    name: str
    phrase: str  # completes "layer 2 head 5 ..." with {value}
    look_for: str  # what the heatmap looks like (markdown)
    threshold: float


PATTERNS = (
    Pattern(
        "previous",
        "Previous token",
        "puts {value:.2f} of its weight on the previous token",
        "a bright line one step left of the diagonal: every piece reads the piece just before it. "
        "Word order reaches the next layers through heads like this.",
        STRONG,
    ),
    Pattern(
        "next",
        "Next token",
        "puts {value:.2f} of its weight on the next token",
        "the mirror image: a line one step right of the diagonal. An encoder sees both directions at once.",
        STRONG,
    ),
    Pattern(
        "cls",
        "[CLS]",
        "puts {value:.2f} of its weight on [CLS]",
        "a bright first column. When a head finds nothing it is built for, it parks its weight on a "
        "token that carries little information, and [CLS] is always there.",
        STRONG,
    ),
    Pattern(
        "sep",
        "[SEP]",
        "puts {value:.2f} of its weight on [SEP]",
        "a bright last column: the same parking habit, on the closing token. Some models prefer [SEP], "
        "some [CLS]; compare the two numbers.",
        STRONG,
    ),
    Pattern(
        "word",
        "Pieces of one word",
        "puts {value:.2f} of its weight on the other pieces of the same word",
        "small bright squares where a split word's pieces (un, ##bel, ...) look at each other: the head "
        "glues the pieces back into one word. A previous-token head scores here too, since a word's pieces "
        "sit side by side; look for one that also looks *forward* inside the word.",
        STRONG,
    ),
    Pattern(
        "broad",
        "Broad",
        "spreads its weight most evenly: entropy {value:.2f}, where 1 is perfectly even",
        "no bright cell at all, an even wash of colour. The output is close to the average of the sentence: "
        "a summary of the context rather than a link between two tokens.",
        BROAD,
    ),
)
PATTERN_BY_SLUG = {p.slug: p for p in PATTERNS}


# The engine's name of each pattern's measure (``encoder_patterns``): key 0 is [CLS], the last key [SEP].
ENGINE_MEASURE = {
    "previous": "previous",
    "next": "next",
    "cls": "first",
    "sep": "last",
    "word": "same_word",
    "broad": "entropy",
}


def layer_measures(trace: AttentionTrace, word_ids) -> dict[str, np.ndarray]:
    """Every pattern's measure for the heads of one layer, each of shape (nh,), by pattern slug."""
    measures = encoder_patterns(trace.weights, trace.fully_masked, np.isfinite(trace.logits), word_ids)
    return {slug: measures[ENGINE_MEASURE[slug]] for slug in PATTERN_BY_SLUG}


def model_measures(run: MiniLMRun) -> dict[str, np.ndarray]:
    """Every pattern's measure for every head of every layer, each of shape (L, nh)."""
    per_layer = [layer_measures(trace, run.word_ids) for trace in run.traces]
    return {slug: np.stack([m[slug] for m in per_layer]) for slug in PATTERN_BY_SLUG}  # (L, nh) each


@dataclass(frozen=True)
class Finding:
    """The strongest head of one pattern for one sentence, and how many heads pass the threshold."""

    pattern: Pattern
    layer: int | None  # None: the pattern cannot be measured on this sentence
    head: int | None
    value: float
    n_strong: int
    n_heads: int

    def sentence(self) -> str:
        """E.g. 'layer 0 head 2 puts 1.00 of its weight on the previous token (1 of 72 heads reach 0.5).'"""
        if self.layer is None:
            return (
                "No word of this sentence is split into pieces; try one with a long or rare word (e.g. 'unbelievably')."
            )
        strong = (
            f"{self.n_strong} of {self.n_heads} heads reach {self.pattern.threshold:g}"
            if self.n_strong
            else f"no head reaches {self.pattern.threshold:g}"
        )
        return f"Layer {self.layer} head {self.head} {self.pattern.phrase.format(value=self.value)} ({strong})."


def findings(measures: Mapping[str, np.ndarray]) -> list[Finding]:
    """For each pattern, the head with the largest measure (ties: the first in layer order)."""
    out = []
    for pattern in PATTERNS:
        values = measures[pattern.slug]  # (L, nh)
        if np.all(np.isnan(values)):
            out.append(Finding(pattern, None, None, math.nan, 0, values.size))
            continue
        layer, head = np.unravel_index(np.nanargmax(values), values.shape)
        n_strong = int(np.sum(np.nan_to_num(values, nan=-1.0) >= pattern.threshold))
        out.append(Finding(pattern, int(layer), int(head), float(values[layer, head]), n_strong, values.size))
    return out


# Extra columns of the diagnostics table that only a real sentence has (with help texts).
REAL_COLUMNS = {
    "sep": ("on [SEP]", "mean weight on the last key, [SEP]"),
    "word": ("on its word", "mean weight a piece of a split word puts on the other pieces of that word"),
    "next": ("on next", "mean weight of token i on key i+1"),
}


def real_head_frame(trace: AttentionTrace, word_ids) -> pd.DataFrame:
    """The toy pages' head-diagnostics table, plus the real-sentence columns of ``REAL_COLUMNS``.

    Key 0 is [CLS], so the toy table's 'on first token' column is the mass on [CLS].
    """
    frame = head_summary_frame(trace)
    measures = layer_measures(trace, word_ids)
    for slug, (label, _) in REAL_COLUMNS.items():
        frame[label] = measures[slug]
    return frame


# ---- the layers x heads overview -----------------------------------------------------------


def pool_block(n_tokens: int, max_cells: int = OVERVIEW_MAX_CELLS) -> int:
    """The side of the squares ``max_pool`` takes maxima over: 1 up to ``max_cells`` pieces, then just enough."""
    return max(1, -(-n_tokens // max_cells))


def max_pool(attentions: np.ndarray, max_cells: int = OVERVIEW_MAX_CELLS) -> tuple[np.ndarray, int]:
    """Shrink (L, nh, T, T) to at most ``max_cells`` rows and columns per head by block maxima.

    Each output cell is the largest weight of a ``block`` x ``block`` square (the last blocks may
    be cut short), so a sharp head stays sharp. Returns the pooled (L, nh, P, P) float32 and block.
    """
    n_layers, n_heads, t, _ = attentions.shape
    block = pool_block(t, max_cells)
    cells = -(-t // block)  # P
    padded = np.zeros((n_layers, n_heads, cells * block, cells * block), dtype=np.float32)  # (L, nh, P*b, P*b)
    padded[:, :, :t, :t] = attentions  # weights are >= 0, so zero padding never wins a maximum
    blocks = padded.reshape(n_layers, n_heads, cells, block, cells, block)  # (L, nh, P, b, P, b)
    return blocks.max(axis=(3, 5)), block  # (L, nh, P, P)


def block_labels(tokens, block: int) -> list[str]:
    """One label per block of ``block`` pieces, its positions and pieces: ``['0-1:[CLS] the', ..., '6:[SEP]']``.

    With ``block`` = 1 these are the usual ``token_labels``; a last block cut short names what it holds.
    """
    labels = []
    for start in range(0, len(tokens), block):
        stop = min(start + block, len(tokens))
        span = f"{start}" if stop - start == 1 else f"{start}-{stop - 1}"
        labels.append(f"{span}:{' '.join(tokens[start:stop])}")
    return labels


def grid_matrices(weights: np.ndarray, tokens, max_cells: int = GRID_MAX_CELLS) -> tuple[np.ndarray, list[str], int]:
    """One layer's (nh, T, T) weights as the all-heads grid shows them, with their labels and the block size.

    Up to ``max_cells`` pieces the weights themselves (block 1, ``token_labels``); longer, each
    cell is the largest weight of a block x block square (``max_pool``), labelled by ``block_labels``.
    """
    if weights.shape[-1] <= max_cells:
        return weights, token_labels(tokens), 1
    pooled, block = max_pool(weights[None], max_cells)  # (1, nh, P, P)
    return pooled[0], block_labels(tokens, block), block  # (nh, P, P)


def overview_figure(
    attentions: np.ndarray, *, max_cells: int = OVERVIEW_MAX_CELLS, panel_px: int = 56, font_size: int = 12
) -> go.Figure:
    """Every head of every layer as a small heatmap, layers down and heads across, on one 0..1 colour scale.

    All panels sit on one pair of axes (one trace each, offset by its position), which keeps the
    figure light: no per-panel axes. Query 0 is at the top of each panel, key 0 on its left.
    """
    pooled, block = max_pool(attentions, max_cells)
    n_layers, n_heads, cells, _ = pooled.shape
    gap = max(1.0, cells / 8)
    step = cells + gap
    what = "weight" if block == 1 else f"largest weight of a {block}×{block} block"
    data = [
        dict(
            type="heatmap",
            z=pooled[layer, head],
            x0=head * step,
            dx=1,
            y0=layer * step,
            dy=1,
            coloraxis="coloraxis",
            hovertemplate=f"layer {layer}, head {head}<br>{what} %{{z:.2f}}<extra></extra>",
        )
        for layer in range(n_layers)
        for head in range(n_heads)
    ]
    centres_x = [h * step + (cells - 1) / 2 for h in range(n_heads)]
    centres_y = [layer * step + (cells - 1) / 2 for layer in range(n_layers)]
    axis = dict(showgrid=False, zeroline=False, tickmode="array", ticks="", tickfont=dict(size=font_size))
    layout = dict(
        xaxis=dict(
            axis,
            side="top",
            tickvals=centres_x,
            ticktext=[f"head {h}" for h in range(n_heads)],
            range=[-0.5 - gap / 2, n_heads * step - gap / 2 - 0.5],
            constrain="domain",
        ),
        yaxis=dict(
            axis,
            tickvals=centres_y,
            ticktext=[f"layer {layer}" for layer in range(n_layers)],
            range=[n_layers * step - gap / 2 - 0.5, -0.5 - gap / 2],  # reversed: layer 0 and query 0 on top
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
        ),
        coloraxis=dict(
            colorscale=WEIGHT_SCALE,
            cmin=0.0,
            cmax=1.0,
            colorbar=dict(title=dict(text="weight", side="right"), thickness=14, tickfont=dict(size=font_size)),
        ),
        height=int(n_layers * panel_px * step / cells + 70),
        margin=dict(l=10, r=10, t=40, b=10, pad=0),
        font=dict(size=font_size),
        plot_bgcolor="rgba(0, 0, 0, 0)",
    )
    return figure(data, layout)


# ---- one real layer through the Step-by-step builders --------------------------------------


def layer_inputs(run: MiniLMRun, layer: int, weights: AttentionWeights) -> StepInputs:
    """Layer ``layer`` of a real run as the inputs of the Step-by-step builders.

    ``weights`` is that layer's ``AttentionWeights`` (``model.layers[layer].attention``). What the
    layer did, said as it is: X is the layer's input (positions are inside it, learned), no mask
    (one unpadded sentence may attend everywhere), scores scaled by 1/sqrt(hs).
    """
    if not 0 <= layer < len(run.layers):
        raise ValueError(f"layer {layer} does not exist: choose 0 to {len(run.layers) - 1}")
    x = run.layers[layer].input  # (T, C)
    labels = token_labels(run.tokens)
    return StepInputs(
        trace=run.layers[layer].attention,
        weights=weights,
        query_labels=labels,
        key_labels=labels,
        embeddings=x,
        key_embeddings=x,
        positional=None,
        x_q=x,
        x_kv=x,
        mask=None,
        mask_name="none",
        scale_rule="sqrt_dk",
    )


TOY_ONLY_STEPS = ("input", "positional")  # replaced by the real layer's own input step
ONE_SENTENCE_MASK = (
    "**Nothing is masked here.** BERT's only mask hides padding, the filler added when sentences of "
    "different lengths share a batch. One sentence has no padding, so every piece may attend to every piece, "
    "in both directions (no causal mask: an encoder reads the whole sentence at once)."
)


def real_steps(run: MiniLMRun, inputs: StepInputs, layer: int, head: int, cell=None) -> list[Step]:
    """The Step-by-step page's steps for one real head: the layer's input, Q/K/V ... W_O, then add & norm.

    The toy pages' first two steps (embeddings, sinusoidal encoding) do not describe BERT: here the
    position is already inside X, learned, so they are replaced by one step showing X itself.
    Matrices too large to send are cut to the chosen head's block (``slim_panel``).
    """
    steps = [_input_step(inputs, layer)]
    for step in build_steps(inputs, head, cell):
        if step.slug == "mask":
            step = replace(step, note=ONE_SENTENCE_MASK)
        if step.slug not in TOY_ONLY_STEPS:
            steps.append(step)
    steps.append(_add_norm_step(run, inputs, layer))
    return [slim_step(s) for s in steps]


def _input_step(inputs: StepInputs, layer: int) -> Step:
    x = inputs.x_q
    if layer == 0:
        why = (
            "Each word piece's row is its word vector **plus a learned position vector** (and a segment vector), "
            "normalised by a LayerNorm. The position is inside X already: no separate positional-encoding step."
        )
        title = "Layer 0's input X: embeddings"
    else:
        why = (
            f"Layer {layer} reads what layer {layer - 1} wrote: one row of {x.shape[1]} numbers per word piece, "
            "already mixed with the other tokens by the layers below."
        )
        title = f"Layer {layer}'s input X = layer {layer - 1}'s output"
    panel = Panel("X", x, inputs.query_labels, dim_labels(x.shape[1]), "x")
    return Step(
        "input",
        title,
        why,
        rf"X = h^{{({layer})}} \in \mathbb{{R}}^{{T \times C}}",
        f"X {shape_text(x)}: (T pieces, C = d_model)",
        (panel,),
    )


def _add_norm_step(run: MiniLMRun, inputs: StepInputs, layer: int) -> Step:
    layer_run = run.layers[layer]
    labels = inputs.query_labels
    c = layer_run.output.shape[1]
    panels = (
        Panel("LayerNorm(X + Y)", layer_run.after_attention, labels, dim_labels(c), "value"),
        Panel("layer output (next layer's X)", layer_run.output, labels, dim_labels(c), "value"),
    )
    t, d_ff = layer_run.ffn_hidden.shape
    why = (
        "BERT does not stop at Y. It **adds Y back to X** (the residual path: the layer only has to learn a "
        f"change) and normalises each row; then a feed-forward network ({c} → {d_ff} → {c}, GELU) works on each "
        "piece alone, again with add & norm. Only the attention step lets the pieces exchange information."
    )
    formula = (
        r"X' = \mathrm{LayerNorm}(X + Y),\qquad "
        r"\mathrm{out} = \mathrm{LayerNorm}\big(X' + \mathrm{GELU}(X' W_1 + b_1) W_2 + b_2\big)"
    )
    shapes = f"X + Y: {shape_text(layer_run.after_attention)}; feed-forward: ({t}, {c}) -> ({t}, {d_ff}) -> ({t}, {c})"
    return Step("add_norm", "Add & norm, feed-forward: the rest of the layer", why, formula, shapes, panels)


def slim_panel(panel: Panel, max_cells: int = MAX_PANEL_CELLS) -> Panel:
    """A panel too large to send (a 384 x 384 weight matrix) cut to the outlined block of the chosen head."""
    rows, cols = panel.matrix.shape
    if rows * cols <= max_cells:
        return panel
    if panel.block is not None:
        start, stop = panel.block
        return replace(
            panel,
            title=f"{panel.title}, columns {start}..{stop - 1} (this head's)",
            matrix=panel.matrix[:, start:stop],
            col_labels=panel.col_labels[start:stop],
            block=None,
        )
    if panel.row_block is not None:
        start, stop = panel.row_block
        return replace(
            panel,
            title=f"{panel.title}, rows {start}..{stop - 1} (those that read this head)",
            matrix=panel.matrix[start:stop],
            row_labels=panel.row_labels[start:stop],
            row_block=None,
        )
    return panel


def slim_step(step: Step, max_cells: int = MAX_PANEL_CELLS) -> Step:
    """``step`` with every panel slimmed; a panel still too large (a long sentence's T x C matrix) is left out, and
    the step's note says so."""
    slimmed = [slim_panel(p, max_cells) for p in step.panels]
    kept = tuple(p for p in slimmed if p.matrix.size <= max_cells)
    if len(kept) == len(slimmed):
        return replace(step, panels=kept)
    left_out = ", ".join(f"{p.title} {shape_text(p.matrix)}" for p in slimmed if p.matrix.size > max_cells)
    note = f"Not drawn for a sentence this long, to keep the page light: {left_out}. Shorten the sentence to see it."
    return replace(step, panels=kept, note=f"{step.note}  \n{note}" if step.note else note)
