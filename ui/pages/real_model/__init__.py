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
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_core.attention import AttentionTrace
from mha_core.diagnostics import encoder_patterns
from mha_core.pretrained import MiniLMRun
from ui.charts.numbers import count
from ui.charts.tables import head_summary_frame
from ui.i18n import N_, _
from ui.state.settings import Setting
from ui.state.urlstate import read_settings

DEFAULT_SENTENCE = "The snowboarder was unbelievably fast, so the photographers missed her jump."
MAX_TEXT_CHARS = 2000  # a link's sentence is cut here; 128 word pieces need far fewer characters
STRONG = 0.5  # a head "shows" a weight pattern when its mean mass on the pattern's keys is at least this
BROAD = 0.8  # ... and is "broad" when its normalised entropy is at least this

# ---- the link: sentence, layer and head <-> query parameters -------------------------------


@dataclass(frozen=True)
class RealView:
    """What the Real model page shows: a sentence, a layer and a head (both counted from 0)."""

    text: str = DEFAULT_SENTENCE
    layer: int = 0
    head: int = 0


def view_rows(n_layers: int, n_heads: int) -> tuple[Setting, Setting]:
    """The layer and head as settings rows, read and written by the link reader every other page uses."""
    return (
        Setting("rm_layer", "int", label=N_("Layer"), default=0, limits=(0, n_layers - 1)),
        Setting("rm_head", "int", label=N_("Head"), default=0, limits=(0, n_heads - 1)),
    )


def link_text(params: Mapping[str, str], default: str, max_chars: int, what: str, messages: list[str]) -> str:
    """The link's ``rm_text`` (either model's): the example ``what`` when missing or empty, cut at ``max_chars``."""
    text = params.get("rm_text")
    if text is None:
        return default
    if not text.strip():
        messages.append(_("`rm_text` is empty: using the example {what} '{example}'.").format(what=_(what), example=default))
        return default
    if len(text) > max_chars:
        messages.append(_("`rm_text` has {n} characters; keeping the first {limit}.").format(
            n=count(len(text)), limit=count(max_chars)))
        return text[:max_chars]
    return text


def view_from_params(params: Mapping[str, str], n_layers: int, n_heads: int) -> tuple[RealView, list[str]]:
    """The view a link asks for, and a message for every value that could not be used as given."""
    messages: list[str] = []
    text = link_text(params, DEFAULT_SENTENCE, MAX_TEXT_CHARS, N_("sentence"), messages)
    values = read_settings(params, view_rows(n_layers, n_heads), {}, messages)
    return RealView(text=text, layer=values["rm_layer"], head=values["rm_head"]), messages


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


def piece_chips_html(tokens: list[str] | tuple[str, ...], sources: list[str] | tuple[str, ...] | None = None) -> str:
    """The word pieces as chips, each with its position above it; continuation pieces in yellow.

    ``sources`` (one per piece, ``MiniLM.piece_sources``): the text each piece stands for, shown on hover, so an
    [UNK] names the character it replaced.
    """
    chips = []
    for position, token in enumerate(tokens):
        style = CHIP_STYLES[piece_kind(token)]
        source = sources[position] if sources else ""
        hover = f' title="{html.escape(_("from the text: {text}").format(text=source))}"' if source else ""
        chips.append(
            f'<span{hover} style="display: inline-flex; flex-direction: column; align-items: center; '
            f'margin: 0 4px 6px 0; padding: 2px 8px; border-radius: 8px; {style}">'
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
    phrase: str  # completes "layer 2 head 5 ..." with {value} (two decimals)
    look_for: str  # what the heatmap looks like (markdown)
    threshold: float


PATTERNS = (
    Pattern(
        "previous",
        N_("Previous token"),
        N_("puts {value} of its weight on the previous token"),
        N_("a bright line one step left of the diagonal: every piece reads the piece just before it. "
          "Word order reaches the next layers through heads like this."),
        STRONG,
    ),
    Pattern(
        "next",
        N_("Next token"),
        N_("puts {value} of its weight on the next token"),
        N_("the mirror image: a line one step right of the diagonal. An encoder sees both directions at once."),
        STRONG,
    ),
    Pattern(
        "cls",
        N_("[CLS]"),
        N_("puts {value} of its weight on [CLS]"),
        N_("a bright first column. When a head finds nothing it is built for, it parks its weight on a "
          "token that carries little information, and [CLS] is always there."),
        STRONG,
    ),
    Pattern(
        "sep",
        N_("[SEP]"),
        N_("puts {value} of its weight on [SEP]"),
        N_("a bright last column: the same parking habit, on the closing token. Some models prefer [SEP], "
          "some [CLS]; compare the two numbers."),
        STRONG,
    ),
    Pattern(
        "word",
        N_("Pieces of one word"),
        N_("puts {value} of its weight on the other pieces of the same word"),
        N_("small bright squares where a split word's pieces (un, ##bel, ...) look at each other: the head "
          "glues the pieces back into one word. A previous-token head scores here too, since a word's pieces "
          "sit side by side; look for one that also looks *forward* inside the word."),
        STRONG,
    ),
    Pattern(
        "broad",
        N_("Broad"),
        N_("spreads its weight most evenly: entropy {value}, where 1 is perfectly even"),
        N_("no bright cell at all, an even wash of colour. The output is close to the average of the sentence: "
          "a summary of the context rather than a link between two tokens."),
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
            return _(
                "No word of this sentence is split into pieces; try one with a long or rare word (e.g. 'unbelievably')."
            )
        threshold = f"{self.pattern.threshold:g}"
        strong = (
            _("{n} of {total} heads reach {threshold}").format(n=self.n_strong, total=self.n_heads, threshold=threshold)
            if self.n_strong
            else _("no head reaches {threshold}").format(threshold=threshold)
        )
        does = _(self.pattern.phrase).format(value=f"{self.value:.2f}")
        return _("Layer {layer} head {head} {does} ({strong}).").format(layer=self.layer, head=self.head, does=does,
                                                                       strong=strong)


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
    "sep": (N_("on [SEP]"), N_("mean weight on the last key, [SEP]")),
    "word": (N_("on its word"), N_("mean weight a piece of a split word puts on the other pieces of that word")),
    "next": (N_("on next"), N_("mean weight of token i on key i+1")),
}


def real_head_frame(trace: AttentionTrace, word_ids) -> pd.DataFrame:
    """The toy pages' head-diagnostics table, plus the real-sentence columns of ``REAL_COLUMNS``.

    Key 0 is [CLS], so the toy table's 'on first token' column is the mass on [CLS].
    """
    frame = head_summary_frame(trace)
    measures = layer_measures(trace, word_ids)
    for slug, (label, _meaning) in REAL_COLUMNS.items():
        frame[label] = measures[slug]
    return frame


