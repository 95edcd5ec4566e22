"""Lesson 5, saturation: unscaled uniform [0, 1) weights give one-hot rows; Xavier keeps them spread."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import MHAConfig, run
from mha_core.diagnostics import heads_agree, max_weight
from ui.i18n import N_, _
from ui.pages.lessons.records import (
    BASE,
    MEASURE_SEEDS,
    SENTENCE,
    Claim,
    Findings,
    Grid,
    Lesson,
    LessonPanel,
    head_titles,
)

SATURATION_WIDTHS = (16, 32, 64, 128)  # d_model values of the saturation table


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
                N_("row max · Xavier"): xavier_max,
                N_("row max · uniform"): uniform_max,
                N_("all heads agree · Xavier (%)"): 100 * xavier_same,
                N_("all heads agree · uniform (%)"): 100 * uniform_same,
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
            _("At every d_model from {first} to {last}, uniform [0, 1) weights give a mean row maximum of {u_low:.2f} "
              "to {u_high:.2f}; Xavier gives {x_low:.2f} to {x_high:.2f} (a flat row would give {flat:.2f}).").format(
                first=SATURATION_WIDTHS[0], last=SATURATION_WIDTHS[-1], u_low=u_col.min(), u_high=u_col.max(),
                x_low=x_col.min(), x_high=x_col.max(), flat=flat),
            bool(np.all(u_col.to_numpy() > x_col.to_numpy())),
        ),
        Claim(
            _("With uniform weights all {n_heads} heads pick the same key in {u_low:.0f}% to {u_high:.0f}% of rows; "
              "with Xavier in {x_low:.0f}% to {x_high:.0f}%: saturated heads look alike.").format(
                n_heads=n_heads, u_low=u_same.min(), u_high=u_same.max(), x_low=x_same.min(), x_high=x_same.max()),
            bool(np.all(u_same.to_numpy() > x_same.to_numpy())),
        ),
    )
    weights = np.concatenate([xavier.trace.weights, uniform.trace.weights])  # (2 nh, T, T)
    titles = [*head_titles("Xavier · ", n_heads), *head_titles(_("uniform [0,1) · "), n_heads)]
    figures = (Grid(weights, xavier.query_labels, xavier.key_labels, titles, max_cols=n_heads),)
    caption = _(
        "Measured live: mean row maximum and the share of rows where every head picks the same key, for {tokens} "
        "distinct tokens, {n_heads} heads, standard-normal embeddings, averaged over seeds {first}-{last}. Issue 6 "
        "quotes 0.91-0.99 (unscaled) and 0.32-0.38 (Xavier) for d_model 16-128."
    ).format(tokens=len(SENTENCE), n_heads=n_heads, first=MEASURE_SEEDS.start, last=MEASURE_SEEDS.stop - 1)
    return Findings(figures, claims, ((caption, table),))


LESSONS = (
    Lesson(
        key="saturation",
        title=N_("Unscaled random weights saturate the softmax"),
        short_title=N_("Saturation"),
        question=N_("Why does every head look the same, with one bright cell per row?"),
        source=N_("seen in seed 000, which draws its weights with np.random.rand"),
        source_url="",
        panels=(
            LessonPanel(N_("Xavier weights"), replace(BASE, d_model=64)),
            LessonPanel(N_("Uniform [0, 1) weights"), replace(BASE, d_model=64, init="uniform")),
        ),
        explanation=N_(
            "Weights drawn uniformly from [0, 1) are all positive with mean 0.5, so queries and keys come out "
            "large and pointing the same way: the scores spread over tens of units and the softmax gives nearly "
            "all the weight to one key, often the same key in every head. Xavier scaling (standard deviation "
            "1/√d_model here) keeps the scaled scores near unit size, so rows stay spread and heads differ. The "
            "inputs are the app's standard-normal embeddings, which share no common offset, so the difference "
            "comes from the weights alone."
        ),
        findings=saturation_findings,
    ),
)
