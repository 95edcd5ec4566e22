"""Lesson 6, why divide by √d_k: the unscaled scores spread like √d_k; scaled they stay near 1."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.attention import softmax
from mha_core.config import MHAConfig, run
from mha_core.diagnostics import max_weight, row_spread
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, MEASURE_SEEDS, SENTENCE, Claim, Findings, Grid, Lesson, LessonPanel

HEAD_SIZES = (4, 16, 64, 256)  # d_k values of the sqrt(d_k) table (one head, d_model = d_k)


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
                N_("score spread, unscaled"): numbers["raw spread"],
                N_("score spread, ÷√d_k"): numbers["scaled spread"],
                N_("mean row max, unscaled"): numbers["raw max"],
                N_("mean row max, ÷√d_k"): numbers["scaled max"],
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
            _("From d_k = {first} to {last} the unscaled scores spread {growth:.1f} times wider (√{ratio} = "
              "{root:.0f}); divided by √d_k they stay between {low:.2f} and {high:.2f}.").format(
                first=HEAD_SIZES[0], last=HEAD_SIZES[-1], growth=growth, ratio=HEAD_SIZES[-1] // HEAD_SIZES[0],
                root=root_ratio, low=scaled_col.min(), high=scaled_col.max()),
            bool(growth > root_ratio / 2 and scaled_col.max() / scaled_col.min() < 1.5),
        ),
        Claim(
            _("Unscaled, rows sharpen as d_k grows (mean row maximum {start:.2f} → {end:.2f}); scaled they stay near "
              "{scaled:.2f}.").format(start=table["mean row max, unscaled"].iloc[0],
                                      end=table["mean row max, unscaled"].iloc[-1],
                                      scaled=table["mean row max, ÷√d_k"].mean()),
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
            [_("d_k = {d_k}, no scaling").format(d_k=d_k), f"d_k = {d_k}, ÷ √{d_k}"],
            max_cols=2,
        ),
    )
    caption = _(
        "Measured live: one head with d_model = d_k, {tokens} tokens, Xavier weights, averaged over seeds "
        "{first}-{last}. Spread = standard deviation of a row's scores."
    ).format(tokens=len(SENTENCE), first=MEASURE_SEEDS.start, last=MEASURE_SEEDS.stop - 1)
    return Findings(figures, claims, ((caption, table),))


LESSONS = (
    Lesson(
        key="sqrt_dk",
        title=N_("Why divide the scores by √d_k"),
        short_title="÷ √d_k",
        question=N_("Why scale the scores by 1/√d_k at all?"),
        source=N_("answered in Vaswani et al. 2017, section 3.2.1"),
        source_url="https://arxiv.org/abs/1706.03762",
        panels=(
            LessonPanel(
                N_("d_k = 64, no scaling"), replace(BASE, d_model=64, n_heads=1, scale_rule="none"), {"view": "logits"}
            ),
            LessonPanel(N_("d_k = 64, divided by √64 = 8"), replace(BASE, d_model=64, n_heads=1), {"view": "logits"}),
        ),
        explanation=N_(
            "A score is a sum of d_k products, so when queries and keys have entries of unit size its spread grows "
            "like √d_k. Dividing by √d_k brings the spread back to about 1 whatever the head size, so the softmax "
            "keeps the same character when you change d_model or the number of heads. Without it, bigger heads give "
            "sharper, nearly one-hot rows, and in training the softmax's gradients all but vanish."
        ),
        findings=scaling_findings,
    ),
)
