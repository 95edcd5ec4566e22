"""The Lessons page's content as data: one lesson per known learner confusion, plus the presets.

A ``Lesson`` names the confusion it answers and where learners raised it, the configurations
that show the point (each opens in the explorer and has a link), two or three sentences of
explanation, and a pure function that computes what the lesson shows: figure data on one shared
colour scale, tables, and its claims as numbers. ``app_pages/lessons.py`` renders a lesson without
knowing which one it is; ``tests/test_lessons.py`` checks every claim against its own computation.
No streamlit in here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

import numpy as np
import pandas as pd

from mha_core.attention import softmax
from mha_core.config import MHAConfig, run
from mha_core.contributions import head_contributions, head_output_shares, head_share_of_output
from mha_core.diagnostics import heads_agree, max_weight, renormalised_rows, row_spread
from mha_core.presets import PRESET_INITS
from ui.charts.markdown import literal
from ui.pages.decoding import (
    assembled_weights,
    cache_table,
    decode_run,
    decoder_config,
    diagonal_spread,
    rope_offset_scores,
)
from ui.state.urlstate import params_from_config, view_params

# A sentence without repeated words: repeated words share one embedding, so they split the
# weight between their copies, which would blur the row-maximum numbers of several lessons.
SENTENCE = ("the", "cat", "sat", "on", "a", "mat")
BASE = MHAConfig(tokens=SENTENCE, d_model=16, n_heads=4, seed=0)
MEASURE_SEEDS = range(10)  # seeds averaged over in the measured tables
SATURATION_WIDTHS = (16, 32, 64, 128)  # d_model values of the saturation table
HEAD_SIZES = (4, 16, 64, 256)  # d_k values of the sqrt(d_k) table (one head, d_model = d_k)


@dataclass(frozen=True)
class LessonPanel:
    """One configuration a lesson shows, and the explorer view it opens with."""

    caption: str
    config: MHAConfig
    view: Mapping[str, object] = field(default_factory=dict)  # keys of urlstate.VIEW_DEFAULTS


@dataclass(frozen=True)
class Grid:
    """Data for one ``attention_grid`` figure: every panel on one shared colour scale."""

    matrices: np.ndarray  # (n, Tq, Tk)
    row_labels: list[str]
    col_labels: list[str]
    titles: list[str]
    kind: str = "weights"
    max_cols: int = 4
    mask: np.ndarray | None = None  # True = may attend, broadcast to (n, Tq, Tk); masked cells are drawn grey


@dataclass(frozen=True)
class Heatmap:
    """Data for one ``matrix_heatmap``; a lesson's heatmaps are drawn side by side, same 0..1 range."""

    matrix: np.ndarray  # (R, C)
    row_labels: list[str]
    col_labels: list[str]
    title: str
    value_name: str
    row_name: str = "row"  # what a row is, for the hover text
    col_name: str = "column"


@dataclass(frozen=True)
class Claim:
    """The lesson's point as a sentence with live numbers, and whether the numbers bear it out."""

    text: str
    holds: bool


@dataclass(frozen=True)
class Findings:
    """Everything a lesson shows besides its text."""

    figures: tuple[Grid | Heatmap, ...]
    claims: tuple[Claim, ...]
    tables: tuple[tuple[str, pd.DataFrame], ...] = ()  # (caption, table)
    note: str = ""  # how to read the figures


@dataclass(frozen=True)
class Lesson:
    """One confusion, the configurations that answer it, and the numbers that prove the answer."""

    key: str  # the value of ?lesson=
    title: str
    question: str  # the confusion, as a learner asks it
    source: str  # where the confusion shows up, as a phrase: 'asked in llm-viz #13'
    source_url: str
    panels: tuple[LessonPanel, ...]
    explanation: str
    findings: Callable[[tuple[LessonPanel, ...]], Findings]


# ---------------------------------------------------------------------------------------------
# Numbers shared by several lessons
# ---------------------------------------------------------------------------------------------


def contributions_of(config: MHAConfig) -> np.ndarray:
    """What each head adds to the output of ``config``'s run, shape (nh, Tq, C_out) (``head_contributions``)."""
    result = run(config)
    return head_contributions(result.trace.heads, result.weights.w_o)


def _tiny(x: float) -> str:
    """A rounding-error-sized number: '0' when exactly zero, else one significant digit ('1e-16')."""
    return "0" if x == 0 else f"{x:.0e}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _head_titles(prefix: str, n_heads: int) -> list[str]:
    return [f"{prefix}head {h}" for h in range(n_heads)]


# ---------------------------------------------------------------------------------------------
# 1. W_O after the concatenation
# ---------------------------------------------------------------------------------------------


def wo_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Without W_O each output column belongs to one head; with W_O every column mixes all heads."""
    without, with_wo = (p.config for p in panels)
    run_without, run_with = run(without), run(with_wo)
    shares_without = head_output_shares(contributions_of(without))  # (nh, C)
    shares_with = head_output_shares(contributions_of(with_wo))  # (nh, C)
    n_heads = without.n_heads
    heads = [f"head {h}" for h in range(n_heads)]
    columns = [str(c) for c in range(without.d_model)]
    concat_gap = float(np.max(np.abs(run_without.trace.output - run_without.trace.concat)))
    weights_gap = float(np.max(np.abs(run_with.trace.weights - run_without.trace.weights)))
    sources_without = (shares_without > 0).sum(axis=0)  # (C,) heads feeding each column
    claims = (
        Claim(
            f"Without W_O the output is the concatenation itself (max |Δ| = {_tiny(concat_gap)}) and every output "
            f"column comes from exactly one head.",
            concat_gap == 0 and bool(np.all(sources_without == 1)),
        ),
        Claim(
            f"With W_O every output column mixes all {n_heads} heads: each head supplies "
            f"{_pct(shares_with.min())} to {_pct(shares_with.max())} of every column.",
            bool(np.all(shares_with > 0.01)),
        ),
        Claim(
            f"W_O comes after the softmax: the attention weights are identical with and without it "
            f"(max |Δ| = {_tiny(weights_gap)}).",
            weights_gap == 0,
        ),
    )
    figures = (
        Heatmap(shares_without, heads, columns, "Without W_O: output = concat", "share", "", "output column"),
        Heatmap(shares_with, heads, columns, "With W_O: output = concat · W_O", "share", "", "output column"),
    )
    note = (
        f"Rows: the {n_heads} heads. Columns: the {without.d_model} output columns. Colour: the share of that "
        "output column that comes from that head (each column sums to 1)."
    )
    return Findings(figures, claims, note=note)


# ---------------------------------------------------------------------------------------------
# 2. Causal mask: rows renormalise, outputs "shift"
# ---------------------------------------------------------------------------------------------

CAUSAL_ROW = 3  # the query row whose renormalisation the lesson spells out


def causal_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The causal weights are the unmasked weights renormalised over keys 0..i."""
    free, causal = (run(p.config) for p in panels)
    w_free, w_causal = free.trace.weights[0], causal.trace.weights[0]  # (T, T) each
    expected = renormalised_rows(w_free, causal.mask)  # (T, T)
    gap = float(np.max(np.abs(expected - w_causal)))
    upper = w_causal[np.triu_indices_from(w_causal, k=1)]
    row_sums = w_causal.sum(axis=-1)  # (T,)
    tokens = causal.config.tokens
    labels = free.key_labels
    i = CAUSAL_ROW
    row = literal(labels[i])
    kept_mass = float(w_free[i, : i + 1].sum())
    row_table = pd.DataFrame(
        {
            "key": labels,
            "may attend": ["yes" if m else "no (masked)" for m in causal.mask[i]],
            "weight without mask": w_free[i],
            "÷ kept mass": expected[i],
            "weight with causal mask": w_causal[i],
        }
    )
    shift_table = pd.DataFrame(
        {
            "position": labels,
            "its output mixes": [" ".join(tokens[: t + 1]) for t in range(len(tokens))],
            "a language model uses it to predict": [*tokens[1:], "(the word after the sentence)"],
        }
    )
    claims = (
        Claim(
            f"Every weight above the diagonal is 0 (largest: {_tiny(upper.max())}) and every row still sums to 1 "
            f"(max |sum − 1| = {_tiny(np.abs(row_sums - 1).max())}).",
            bool(np.all(upper == 0) and np.all(np.abs(row_sums - 1) <= 1e-12)),
        ),
        Claim(
            f"Each causal row is the unmasked row cut to keys 0..i and divided by what is left: row {row} "
            f"keeps {kept_mass:.3f} of its weight and every kept weight is divided by it (max |Δ| = {_tiny(gap)}).",
            gap <= 1e-12,
        ),
    )
    figures = (
        Grid(
            np.stack([w_free, w_causal]),  # (2, T, T)
            free.query_labels,
            labels,
            ["no mask", "causal mask"],
            max_cols=2,
            mask=np.stack([np.ones_like(causal.mask), causal.mask]),  # (2, T, T)
        ),
    )
    tables = (
        (f"Row {row}, step by step: the masked keys' weight is shared out again in proportion.", row_table),
        ("The 'shift': position i only sees tokens 0..i, so it is trained to predict token i+1.", shift_table),
    )
    return Findings(figures, claims, tables)


# ---------------------------------------------------------------------------------------------
# 3. Colours are weights, not importance
# ---------------------------------------------------------------------------------------------


def colour_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Bright and faint rows all sum to 1; the brightest head is not the one that moves the output most."""
    config = panels[0].config
    result = run(config)
    weights = result.trace.weights  # (nh, T, T)
    brightness = max_weight(weights)  # (nh,)
    shares = head_share_of_output(contributions_of(config))  # (nh,)
    row_sums = weights.sum(axis=-1)  # (nh, T)
    brightest, strongest = int(np.argmax(brightness)), int(np.argmax(shares))
    table = pd.DataFrame(
        {
            "head": [f"head {h}" for h in range(config.n_heads)],
            "brightest cell": weights.max(axis=(1, 2)),
            "mean row maximum": brightness,
            "every row sums to": row_sums.mean(axis=1),
            "share of the output (%)": 100 * shares,
        }
    )
    claims = (
        Claim(
            f"Every row of every head sums to 1 (max |sum − 1| = {_tiny(np.abs(row_sums - 1).max())}), "
            "whether it looks bright or faint.",
            bool(np.all(np.abs(row_sums - 1) <= 1e-12)),
        ),
        Claim(
            f"The brightest head (head {brightest}, mean row maximum {brightness[brightest]:.2f}) supplies "
            f"{_pct(shares[brightest])} of the output; head {strongest} supplies the most ({_pct(shares[strongest])}).",
            brightest != strongest,
        ),
    )
    figures = (Grid(weights, result.query_labels, result.key_labels, _head_titles("", config.n_heads)),)
    return Findings(figures, claims, (("Brightness is not importance.", table),))


# ---------------------------------------------------------------------------------------------
# 4. Averaging heads vs keeping them separate
# ---------------------------------------------------------------------------------------------


def average_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The average over heads is flatter than every head and often points elsewhere."""
    config = panels[0].config
    result = run(config)
    weights = result.trace.weights  # (nh, T, T)
    average = weights.mean(axis=0)  # (T, T)
    per_head = max_weight(weights)  # (nh,)
    of_average = float(max_weight(average[None])[0])
    agree = (weights.argmax(axis=-1) == average.argmax(axis=-1)).sum(axis=-1)  # (nh,) rows
    n_rows = len(config.tokens)
    table = pd.DataFrame(
        {
            "panel": [*(f"head {h}" for h in range(config.n_heads)), "average"],
            "mean row maximum": [*per_head, of_average],
            "rows whose strongest key matches the average's": [*(f"{a} of {n_rows}" for a in agree), "—"],
        }
    )
    claims = (
        Claim(
            f"The average's mean row maximum is {of_average:.2f}, lower than every single head's "
            f"({per_head.min():.2f} to {per_head.max():.2f}): averaging blurs.",
            bool(of_average < per_head.min()),
        ),
        Claim(
            f"The average's strongest key matches a head's in only {agree.min()} to {agree.max()} of "
            f"{n_rows} rows: it shows a pattern no single head computes.",
            bool(agree.min() < n_rows),
        ),
    )
    titles = [*_head_titles("", config.n_heads), "average of the heads"]
    figures = (
        Grid(
            np.concatenate([weights, average[None]]),  # (nh + 1, T, T)
            result.query_labels,
            result.key_labels,
            titles,
            max_cols=config.n_heads + 1,
        ),
    )
    note = (
        "Weights drawn standard normal (as in seed 003): each head is sharp, so the blur of the average is easy to see."
    )
    return Findings(figures, claims, (("Each head against the average.", table),), note)


# ---------------------------------------------------------------------------------------------
# 5. Unscaled random weights saturate the softmax
# ---------------------------------------------------------------------------------------------


def saturation_stats(
    init: str, d_model: int, n_heads: int, tokens=SENTENCE, seeds=MEASURE_SEEDS
) -> tuple[float, float]:
    """(mean row maximum, share of rows where every head picks the same key), averaged over ``seeds``."""
    maxima, same = [], []
    for seed in seeds:
        weights = run(MHAConfig(tokens=tokens, d_model=d_model, n_heads=n_heads, seed=seed, init=init)).trace.weights
        maxima.append(max_weight(weights).mean())
        same.append(heads_agree(weights))
    return float(np.mean(maxima)), float(np.mean(same))


def saturation_table(n_heads: int = 4, widths=SATURATION_WIDTHS, tokens=SENTENCE, seeds=MEASURE_SEEDS) -> pd.DataFrame:
    """Mean row maximum and head agreement, Xavier vs uniform [0, 1), at several d_model."""
    rows = []
    for d_model in widths:
        xavier_max, xavier_same = saturation_stats("xavier", d_model, n_heads, tokens, seeds)
        uniform_max, uniform_same = saturation_stats("uniform", d_model, n_heads, tokens, seeds)
        rows.append(
            {
                "d_model": d_model,
                "row max · Xavier": xavier_max,
                "row max · uniform": uniform_max,
                "all heads agree · Xavier (%)": 100 * xavier_same,
                "all heads agree · uniform (%)": 100 * uniform_same,
            }
        )
    return pd.DataFrame(rows)


def saturation_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Uniform [0, 1) weights give nearly one-hot rows at every width; Xavier keeps them spread."""
    xavier, uniform = (run(p.config) for p in panels)
    n_heads = xavier.config.n_heads
    table = saturation_table(n_heads)
    x_col, u_col = table["row max · Xavier"], table["row max · uniform"]
    x_same, u_same = table["all heads agree · Xavier (%)"], table["all heads agree · uniform (%)"]
    flat = 1 / len(SENTENCE)
    claims = (
        Claim(
            f"At every d_model from {SATURATION_WIDTHS[0]} to {SATURATION_WIDTHS[-1]}, uniform [0, 1) weights give "
            f"a mean row maximum of {u_col.min():.2f} to {u_col.max():.2f}; Xavier gives {x_col.min():.2f} to "
            f"{x_col.max():.2f} (a flat row would give {flat:.2f}).",
            bool(np.all(u_col.to_numpy() > x_col.to_numpy())),
        ),
        Claim(
            f"With uniform weights all {n_heads} heads pick the same key in {u_same.min():.0f}% to {u_same.max():.0f}% "
            f"of rows; with Xavier in {x_same.min():.0f}% to {x_same.max():.0f}%: saturated heads look alike.",
            bool(np.all(u_same.to_numpy() > x_same.to_numpy())),
        ),
    )
    weights = np.concatenate([xavier.trace.weights, uniform.trace.weights])  # (2 nh, T, T)
    titles = [*_head_titles("Xavier · ", n_heads), *_head_titles("uniform [0,1) · ", n_heads)]
    figures = (Grid(weights, xavier.query_labels, xavier.key_labels, titles, max_cols=n_heads),)
    caption = (
        f"Measured live: mean row maximum and the share of rows where every head picks the same key, for "
        f"{len(SENTENCE)} distinct tokens, {n_heads} heads, standard-normal embeddings, averaged over seeds "
        f"{MEASURE_SEEDS.start}-{MEASURE_SEEDS.stop - 1}. Issue 6 quotes 0.91-0.99 (unscaled) and 0.32-0.38 (Xavier) "
        "for d_model 16-128."
    )
    return Findings(figures, claims, ((caption, table),))


# ---------------------------------------------------------------------------------------------
# 6. Why divide by sqrt(d_k)
# ---------------------------------------------------------------------------------------------


def score_spread(d_k: int, tokens=SENTENCE, seeds=MEASURE_SEEDS) -> dict[str, float]:
    """Spread of a row's scores (std over keys) and mean row maximum, unscaled and divided by sqrt(d_k).

    One head of size d_k (d_model = d_k), averaged over ``seeds``. Both versions come from the same
    raw scores q·k, so the only difference is the scale.
    """
    numbers: dict[str, list[float]] = {"raw spread": [], "scaled spread": [], "raw max": [], "scaled max": []}
    for seed in seeds:
        trace = run(MHAConfig(tokens=tokens, d_model=d_k, n_heads=1, seed=seed)).trace
        scaled = trace.scores * trace.scale  # (1, T, T); no mask, so these are the logits
        numbers["raw spread"].append(row_spread(trace.scores)[0])
        numbers["scaled spread"].append(row_spread(scaled)[0])
        numbers["raw max"].append(max_weight(softmax(trace.scores))[0])
        numbers["scaled max"].append(max_weight(softmax(scaled))[0])
    return {name: float(np.mean(values)) for name, values in numbers.items()}


def scaling_table(head_sizes=HEAD_SIZES, tokens=SENTENCE, seeds=MEASURE_SEEDS) -> pd.DataFrame:
    """Spread of the scores and mean row maximum, with and without 1/sqrt(d_k), as d_k grows."""
    rows = []
    for d_k in head_sizes:
        numbers = score_spread(d_k, tokens, seeds)
        rows.append(
            {
                "d_k": d_k,
                "√d_k": float(np.sqrt(d_k)),  # to compare with the unscaled spread
                "score spread, unscaled": numbers["raw spread"],
                "score spread, ÷√d_k": numbers["scaled spread"],
                "mean row max, unscaled": numbers["raw max"],
                "mean row max, ÷√d_k": numbers["scaled max"],
            }
        )
    return pd.DataFrame(rows)


def scaling_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Unscaled score spread grows like sqrt(d_k); scaled it stays near 1."""
    raw, scaled = (run(p.config) for p in panels)
    table = scaling_table()
    raw_col, scaled_col = table["score spread, unscaled"], table["score spread, ÷√d_k"]
    growth = raw_col.iloc[-1] / raw_col.iloc[0]
    root_ratio = np.sqrt(HEAD_SIZES[-1] / HEAD_SIZES[0])
    claims = (
        Claim(
            f"From d_k = {HEAD_SIZES[0]} to {HEAD_SIZES[-1]} the unscaled scores spread {growth:.1f} times wider "
            f"(√{HEAD_SIZES[-1] // HEAD_SIZES[0]} = {root_ratio:.0f}); divided by √d_k they stay between "
            f"{scaled_col.min():.2f} and {scaled_col.max():.2f}.",
            bool(growth > root_ratio / 2 and scaled_col.max() / scaled_col.min() < 1.5),
        ),
        Claim(
            f"Unscaled, rows sharpen as d_k grows (mean row maximum {table['mean row max, unscaled'].iloc[0]:.2f} → "
            f"{table['mean row max, unscaled'].iloc[-1]:.2f}); scaled they stay near "
            f"{table['mean row max, ÷√d_k'].mean():.2f}.",
            bool(table["mean row max, unscaled"].iloc[-1] > table["mean row max, ÷√d_k"].iloc[-1]),
        ),
    )
    d_k = raw.config.head_size
    weights = np.concatenate([raw.trace.weights, scaled.trace.weights])  # (2, T, T)
    figures = (
        Grid(
            weights,
            raw.query_labels,
            raw.key_labels,
            [f"d_k = {d_k}, no scaling", f"d_k = {d_k}, ÷ √{d_k}"],
            max_cols=2,
        ),
    )
    caption = (
        f"Measured live: one head with d_model = d_k, {len(SENTENCE)} tokens, Xavier weights, averaged over seeds "
        f"{MEASURE_SEEDS.start}-{MEASURE_SEEDS.stop - 1}. Spread = standard deviation of a row's scores."
    )
    return Findings(figures, claims, ((caption, table),))



# ---------------------------------------------------------------------------------------------
# 7. RoPE: relative position from a rotation
# ---------------------------------------------------------------------------------------------

OFFSET_POSITIONS = 6  # positions 0..5 of the RoPE and decoding lessons' tables


def _mean_distance(weights: np.ndarray) -> np.ndarray:
    """(nh,) each head's average over rows of sum_j A_ij |i - j|: how far it looks."""
    t = weights.shape[-1]
    distance = np.abs(np.subtract.outer(np.arange(t), np.arange(t)))  # (T, T)
    return (weights * distance).sum(axis=-1).mean(axis=-1)  # (nh,)


def rope_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The same q and k moved together keep their score; rotation keeps lengths; the offset changes the score."""
    (panel,) = panels
    result = run(panel.config)
    trace, config = result.trace, panel.config
    q, k = trace.q_unrotated[0, 0], trace.k_unrotated[0, 1]  # (hs,) head 0: query of token 0, key of token 1
    scores = rope_offset_scores(q, k, OFFSET_POSITIONS, config.rope_base)  # (P, P)
    spread = diagonal_spread(scores)
    length_change = float(np.max(np.abs(np.linalg.norm(trace.q, axis=-1) - np.linalg.norm(trace.q_unrotated, axis=-1))))
    offsets = np.arange(OFFSET_POSITIONS)
    by_offset = np.array([scores[o, 0] for o in offsets])  # query o positions after the key
    claims = (
        Claim(f"Query and key moved together by any shift keep their score: along every diagonal of the table the "
              f"scores differ by at most {_tiny(spread)}.", spread <= 1e-10),
        Claim(f"The rotation only turns: every query keeps its length (max change {_tiny(length_change)}).",
              length_change <= 1e-12),
        Claim(f"The offset does matter: the same two vectors score from {by_offset.min():.3f} to "
              f"{by_offset.max():.3f} as i − j goes from 0 to {OFFSET_POSITIONS - 1}.", np.ptp(by_offset) > 1e-3),
    )
    table = pd.DataFrame(scores, index=[f"q at {p}" for p in offsets], columns=[f"k at {p}" for p in offsets])
    figures = (Grid(trace.weights, result.query_labels, result.key_labels, _head_titles("RoPE, ", config.n_heads)),)
    return Findings(figures, claims, (("Head 0: the query of token 0 and the key of token 1, placed at every pair of "
                                       "positions (score after RoPE).", table),))


# ---------------------------------------------------------------------------------------------
# 8. ALiBi: a distance penalty
# ---------------------------------------------------------------------------------------------


def alibi_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The bias is -m_h |i - j| with the paper's slopes; every head looks nearer; it extends to any length."""
    (panel,) = panels
    config = panel.config
    result, plain = run(config), run(replace(config, pe="none"))
    nh, t = config.n_heads, len(config.tokens)
    slopes = np.array([2.0 ** (-8.0 * (h + 1) / nh) for h in range(nh)])  # the paper's series, nh a power of 2
    distance = np.abs(np.subtract.outer(np.arange(t), np.arange(t)))  # (T, T)
    bias_gap = float(np.max(np.abs(result.trace.bias + slopes[:, None, None] * distance)))
    near, far = _mean_distance(result.trace.weights), _mean_distance(plain.trace.weights)
    longer = run(replace(config, tokens=config.tokens * 2))
    extends = float(np.max(np.abs(longer.trace.bias[:, :t, :t] - result.trace.bias)))
    claims = (
        Claim(f"The bias is −m·|i − j| with slopes {', '.join(f'{m:g}' for m in slopes)} (max |Δ| = {_tiny(bias_gap)}).",
              bias_gap == 0),
        Claim("Every head looks nearer with the penalty: mean distance attended "
              + ", ".join(f"{a:.2f} vs {b:.2f}" for a, b in zip(near, far, strict=True)) + " without it.",
              bool(np.all(near <= far + 1e-12))),
        Claim(f"Nothing is learned per position: on a sentence twice as long ({2 * t} tokens) the first {t}×{t} "
              f"block of the bias is the same (max |Δ| = {_tiny(extends)}), so it extrapolates.", extends == 0),
    )
    table = pd.DataFrame({"slope m": slopes, "mean distance, ALiBi": near, "mean distance, no positions": far},
                         index=pd.Index(_head_titles("", nh), name="head"))
    figures = (Grid(np.concatenate([result.trace.weights, plain.trace.weights]), result.query_labels,
                    result.key_labels, _head_titles("ALiBi, ", nh) + _head_titles("none, ", nh)),)
    return Findings(figures, claims, (("How far each head looks, with and without the penalty.", table),))


# ---------------------------------------------------------------------------------------------
# 9. GQA / MQA: fewer key/value heads
# ---------------------------------------------------------------------------------------------


def gqa_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Grouped heads read the same keys and values but keep their own queries; the cache shrinks by nh/kv."""
    grouped, single = (run(p.config) for p in panels)
    trace, nh = grouped.trace, grouped.config.n_heads
    shared = float(np.max(np.abs(trace.scores[1] - trace.q[1] @ trace.k[0].T)))  # head 1 reads K/V head 0
    differ = float(np.max(np.abs(trace.weights[0] - trace.weights[1])))
    rows = []
    for kv in (nh, grouped.config.key_value_heads, single.config.key_value_heads):
        t = run(replace(grouped.config, kv_heads=kv)).trace
        rows.append({"K/V heads": kv, "K shape": str(t.k.shape), "cache numbers": t.k.size + t.v.size,
                     "cache bytes (float64)": t.k.nbytes + t.v.nbytes})
    table = pd.DataFrame(rows, index=pd.Index(["MHA", "GQA", "MQA"], name="layout"))
    sizes = table["cache numbers"].to_numpy()
    claims = (
        Claim(f"Query heads 0 and 1 share key/value head 0: head 1's scores are its q times K_0 (max |Δ| = "
              f"{_tiny(shared)}).", shared <= 1e-12),
        Claim(f"They still attend differently, with their own queries: their weights differ by up to {differ:.3f}.",
              differ > 1e-3),
        Claim(f"The cache holds {sizes[0]} numbers with {nh} K/V heads, {sizes[1]} with "
              f"{grouped.config.key_value_heads}, {sizes[2]} with 1: nh/kv times fewer.",
              bool(sizes[0] == sizes[1] * nh // grouped.config.key_value_heads == sizes[2] * nh)),
    )
    figures = (Grid(np.concatenate([grouped.trace.weights, single.trace.weights]), grouped.query_labels,
                    grouped.key_labels, _head_titles("GQA, ", nh) + _head_titles("MQA, ", nh)),)
    return Findings(figures, claims, (("Keys and values for this sentence under each layout.", table),))


# ---------------------------------------------------------------------------------------------
# 10. The KV cache: why decoding is memory-bound
# ---------------------------------------------------------------------------------------------


def kv_cache_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Decoding with the cache gives the causal rows; each step reads the whole cache for one row of work."""
    (panel,) = panels
    result = run(decoder_config(panel.config))
    steps = decode_run(result)
    t = len(steps)
    assembled = assembled_weights(steps, t - 1)  # (nh, T, T)
    gap = float(np.max(np.abs(assembled - result.trace.weights)))
    last = steps[-1]
    flops = 2 * last.weights.size * (last.cache.k.shape[-1] + last.cache.v.shape[-1])  # q.k and A.V of one row
    decode_intensity = flops / last.cache.nbytes  # flops per byte of cache read
    prefill_intensity = decode_intensity * t  # full attention uses each cached key and value for all T queries
    fresh = {len(set(s.q.size + s.k_new.size + s.v_new.size for s in steps))}
    claims = (
        Claim(f"Token by token with the cache, the rows are those of full causal attention (max |Δ| = {_tiny(gap)}).",
              gap <= 1e-12),
        Claim(f"Every step computes the same amount fresh ({last.q.size + last.k_new.size + last.v_new.size} "
              f"numbers) while the cache it reads grows by {last.cache.numbers // t} numbers per token.",
              fresh == {1}),
        Claim(f"The last step does {flops} flops on {last.cache.nbytes} bytes of cache: {decode_intensity:.2f} "
              f"flops per byte, {t}× less than attention over the whole sentence at once "
              f"({prefill_intensity:.2f}). Hardware does ~10-100 flops per byte it reads, so decoding waits on memory.",
              decode_intensity < 1 and abs(prefill_intensity / decode_intensity - t) < 1e-9),
    )
    figures = (Grid(np.stack([assembled[0], result.trace.weights[0]]), result.query_labels, result.key_labels,
                    ["decoded with the cache", "full causal attention"], max_cols=2),)
    table = cache_table(steps, result.query_labels, result.config.n_heads)
    return Findings(figures, claims, (("The cache, step by step.", table),))


# ---------------------------------------------------------------------------------------------
# The table of lessons
# ---------------------------------------------------------------------------------------------

LESSONS: dict[str, Lesson] = {
    lesson.key: lesson
    for lesson in (
        Lesson(
            key="wo",
            title="W_O: the step after the concatenation",
            question="The heads are concatenated... and then? Where is W_O, and what does it do?",
            source="asked in Transformer Explainer #71 (and minGPT #118, transformers #8814)",
            source_url="https://github.com/poloclub/transformer-explainer/issues/71",
            panels=(
                LessonPanel("Without W_O (output = concat)", replace(BASE, output_projection=False)),
                LessonPanel("With W_O", BASE),
            ),
            explanation=(
                "Each head writes its result into its own block of columns, and concatenating only lays those "
                "blocks side by side: without W_O, every output column still belongs to a single head. W_O is one "
                "more learned matrix, applied after the concatenation, that mixes all heads into every output column. "
                "It acts after the softmax, so it never changes the attention heatmaps, which is why tools that draw "
                "only attention leave it out (GPT-2 and minGPT call it c_proj)."
            ),
            findings=wo_findings,
        ),
        Lesson(
            key="causal",
            title="Causal mask: rows renormalise, outputs 'shift'",
            question="With a causal mask, what happens to each row, and why does the output look shifted by one?",
            source="asked in llm-viz #13",
            source_url="https://github.com/bbycroft/llm-viz/issues/13",
            panels=(
                LessonPanel("No mask", replace(BASE, n_heads=1)),
                LessonPanel("Causal mask", replace(BASE, n_heads=1, mask="causal")),
            ),
            explanation=(
                "The mask sets the scores of later tokens to −∞ before the softmax, so they get weight exactly 0 and "
                "the softmax hands the whole weight to the keys the row may see: the surviving weights are the "
                "unmasked ones divided by their sum. Row i therefore mixes only tokens 0..i. A language model uses "
                "the output at position i to predict token i+1, so each prediction lands one position later than "
                "the token it was computed at: that is the 'shift'."
            ),
            findings=causal_findings,
        ),
        Lesson(
            key="colours",
            title="Colour is a weight within one row, not a head's importance",
            question="Does a brighter colour mean a more important head, or a stronger connection?",
            source="asked in BertViz #61",
            source_url="https://github.com/jessevig/bertviz/issues/61",
            panels=(LessonPanel("Four heads on one 0..1 colour scale", replace(BASE, seed=1)),),
            explanation=(
                "In BertViz's head view a colour marks which head a line belongs to and its shade marks the weight, so "
                "several colours on one word are several heads drawn on top of each other. Here every head has its own "
                "panel and colour means one thing only: the share of that query row's attention given to that key, on "
                "a fixed 0 to 1 scale. Every row hands out exactly 1, bright or faint; how much a head moves the output "
                "depends on its values and on W_O, which no attention heatmap shows."
            ),
            findings=colour_findings,
        ),
        Lesson(
            key="average",
            title="Averaging heads hides what each head does",
            question="Should I look at the average over heads, or at each head separately?",
            source="asked in BertViz #111 and pytorch #47583",
            source_url="https://github.com/jessevig/bertviz/issues/111",
            panels=(LessonPanel("Four heads and their average", replace(BASE, init="normal"), {"avg": True}),),
            explanation=(
                "Each head computes its own weights and its own output, and the layer concatenates them: it never "
                "averages. The average is a summary for the eye only: it is flatter than every head, and where the "
                "heads disagree it shows a blend that no head computes. torch's nn.MultiheadAttention returns this "
                "average unless you pass average_attn_weights=False."
            ),
            findings=average_findings,
        ),
        Lesson(
            key="saturation",
            title="Unscaled random weights saturate the softmax",
            question="Why does every head look the same, with one bright cell per row?",
            source="seen in seed 000, which draws its weights with np.random.rand",
            source_url="",
            panels=(
                LessonPanel("Xavier weights", replace(BASE, d_model=64)),
                LessonPanel("Uniform [0, 1) weights", replace(BASE, d_model=64, init="uniform")),
            ),
            explanation=(
                "Weights drawn uniformly from [0, 1) are all positive with mean 0.5, so queries and keys come out "
                "large and pointing the same way: the scores spread over tens of units and the softmax gives nearly "
                "all the weight to one key, often the same key in every head. Xavier scaling (standard deviation "
                "1/√d_model here) keeps the scaled scores near unit size, so rows stay spread and heads differ. The "
                "inputs are the app's standard-normal embeddings, which share no common offset, so the difference "
                "comes from the weights alone."
            ),
            findings=saturation_findings,
        ),
        Lesson(
            key="sqrt_dk",
            title="Why divide the scores by √d_k",
            question="Why scale the scores by 1/√d_k at all?",
            source="answered in Vaswani et al. 2017, section 3.2.1",
            source_url="https://arxiv.org/abs/1706.03762",
            panels=(
                LessonPanel(
                    "d_k = 64, no scaling", replace(BASE, d_model=64, n_heads=1, scale_rule="none"), {"view": "logits"}
                ),
                LessonPanel("d_k = 64, divided by √64 = 8", replace(BASE, d_model=64, n_heads=1), {"view": "logits"}),
            ),
            explanation=(
                "A score is a sum of d_k products, so when queries and keys have entries of unit size its spread grows "
                "like √d_k. Dividing by √d_k brings the spread back to about 1 whatever the head size, so the softmax "
                "keeps the same character when you change d_model or the number of heads. Without it, bigger heads give "
                "sharper, nearly one-hot rows, and in training the softmax's gradients all but vanish."
            ),
            findings=scaling_findings,
        ),
        Lesson(
            key="rope",
            title="RoPE: relative position from a rotation",
            question="How can rotating q and k tell a head how far apart two tokens are?",
            source="answered in Su et al. 2021, RoFormer (used by LLaMA, Mistral, Qwen)",
            source_url="https://arxiv.org/abs/2104.09864",
            panels=(LessonPanel("RoPE, causal mask", replace(BASE, pe="rope", mask="causal")),),
            explanation=(
                "RoPE adds nothing to the tokens: it turns each pair of a query's and a key's features by an angle "
                "proportional to the token's position. A dot product of two turned vectors depends on the difference "
                "of their angles, so the score of query i and key j depends on i − j, not on where the pair stands. "
                "Values are not turned, and lengths never change."
            ),
            findings=rope_findings,
        ),
        Lesson(
            key="alibi",
            title="ALiBi: a distance penalty on the logits",
            question="ALiBi has no position vectors at all: how does it know about order, and why does it extrapolate?",
            source="answered in Press et al. 2022, Train Short, Test Long (used by BLOOM, MPT)",
            source_url="https://arxiv.org/abs/2108.12409",
            panels=(LessonPanel("ALiBi, causal mask", replace(BASE, pe="alibi", mask="causal")),),
            explanation=(
                "ALiBi subtracts m·|i − j| from every logit: the further the key, the lower its score. Each head has "
                "its own fixed slope m, a geometric series, so some heads look near and some far. Nothing depends "
                "on a learned position table, so a longer sentence than any seen in training gets the same rule."
            ),
            findings=alibi_findings,
        ),
        Lesson(
            key="gqa",
            title="GQA and MQA: fewer key/value heads",
            question="What do grouped-query and multi-query attention share, and what do they save?",
            source="answered in Ainslie et al. 2023 (GQA) and Shazeer 2019 (MQA)",
            source_url="https://arxiv.org/abs/2305.13245",
            panels=(
                LessonPanel("GQA: 4 query heads, 2 K/V heads", replace(BASE, kv_heads=2)),
                LessonPanel("MQA: 4 query heads, 1 K/V head", replace(BASE, kv_heads=1)),
            ),
            explanation=(
                "Each query head keeps its own W_Q, but groups of query heads share one key head and one value head. "
                "The heads of a group look up the same keys and mix the same values, with different questions, so "
                "their weights still differ. K and V, and the decoder's cache that holds them, shrink by nh/kv."
            ),
            findings=gqa_findings,
        ),
        Lesson(
            key="kv_cache",
            title="The KV cache: why decoding is memory-bound",
            question="What does the KV cache keep, and why is generating text limited by memory, not arithmetic?",
            source="answered in Pope et al. 2022, Efficiently Scaling Transformer Inference",
            source_url="https://arxiv.org/abs/2211.05102",
            panels=(LessonPanel("Causal self-attention, decoded token by token", replace(BASE, mask="causal")),),
            explanation=(
                "A decoder generates one token at a time, and each new token attends to every earlier one. The cache "
                "keeps the earlier keys and values, so a step computes only one query, one key and one value, and the "
                "rows it builds are exactly full causal attention's. But each step reads the whole cache to do one "
                "row of arithmetic: few flops per byte, so the speed of memory, not of arithmetic, sets the pace."
            ),
            findings=kv_cache_findings,
        ),
    )
}


# ---------------------------------------------------------------------------------------------
# Hand-built presets
# ---------------------------------------------------------------------------------------------

# The default sentence repeats "the", so the same-token preset has something to find.
PRESETS: dict[str, MHAConfig] = {init: MHAConfig(init=init) for init in PRESET_INITS}
PRESET_NAMES = {
    "identity": "identity",
    "previous": "previous token",
    "first": "first token (sink)",
    "same": "same token",
    "uniform_head": "uniform",
}


def preset_grid() -> Grid:
    """Head 0 of every preset, side by side on one 0..1 scale."""
    results = [run(config) for config in PRESETS.values()]
    weights = np.stack([r.trace.weights[0] for r in results])  # (n_presets, T, T)
    titles = [PRESET_NAMES[init] for init in PRESETS]
    return Grid(weights, results[0].query_labels, results[0].key_labels, titles, max_cols=len(PRESETS))


# ---------------------------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------------------------

DEFAULT_PARAMS = params_from_config(MHAConfig())


def short_params(config: MHAConfig, view: Mapping[str, object] | None = None) -> dict[str, str]:
    """Query parameters that restore ``config`` and ``view``, leaving out those equal to the defaults."""
    params = {k: v for k, v in params_from_config(config).items() if DEFAULT_PARAMS.get(k) != v}
    params.update(view_params(view or {}))
    return params


def explorer_query(config: MHAConfig, view: Mapping[str, object] | None = None) -> str:
    """'?tokens=...&mask=causal': the query string of a Heads-page link."""
    return "?" + urlencode(short_params(config, view))


def lesson_query(key: str) -> str:
    """'?lesson=causal': the query string of a Lessons-page link."""
    return "?" + urlencode({"lesson": key})


def app_root(page_url: str | None, page_path: str) -> str:
    """The app's root URL from the URL of a page served at ``page_path`` ('' when unknown)."""
    if not page_url:
        return ""
    url = page_url.rstrip("/")
    suffix = "/" + page_path
    return url[: -len(suffix)] if url.endswith(suffix) else url


def lesson_label(key: str) -> str:
    """Short label for the lesson picker: its number and a few words."""
    return f"{list(LESSONS).index(key) + 1}. {SHORT_TITLES[key]}"


SHORT_TITLES = {
    "wo": "W_O",
    "causal": "Causal mask",
    "colours": "Colours",
    "average": "Average of heads",
    "saturation": "Saturation",
    "sqrt_dk": "÷ √d_k",
    "rope": "RoPE",
    "alibi": "ALiBi",
    "gqa": "GQA / MQA",
    "kv_cache": "KV cache",
}
