"""Lesson 8, ALiBi: a distance penalty −m·|i − j| on the logits, fixed per head, for any length."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.offsets import distances, mean_attended_distance
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, head_titles, tiny


def alibi_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The bias is -m_h |i - j| with the paper's slopes; every head looks nearer; it extends to any length."""
    (panel,) = panels
    config = panel.config
    result, plain = run(config), run(replace(config, pe="none"))
    nh, t = config.n_heads, len(config.tokens)
    slopes = np.array([2.0 ** (-8.0 * (h + 1) / nh) for h in range(nh)])  # the paper's series, nh a power of 2
    distance = distances(t, t)  # (T, T), |i − j|
    bias_gap = float(np.max(np.abs(result.trace.bias + slopes[:, None, None] * distance)))
    near, far = mean_attended_distance(result.trace.weights), mean_attended_distance(plain.trace.weights)
    longer = run(replace(config, tokens=config.tokens * 2))
    extends = float(np.max(np.abs(longer.trace.bias[:, :t, :t] - result.trace.bias)))
    claims = (
        Claim(f"The bias is −m·|i − j| with slopes {', '.join(f'{m:g}' for m in slopes)} (max |Δ| = {tiny(bias_gap)}).",
              bias_gap == 0),
        Claim("Every head looks nearer with the penalty: mean distance attended "
              + ", ".join(f"{a:.2f} vs {b:.2f}" for a, b in zip(near, far, strict=True)) + " without it.",
              bool(np.all(near <= far + 1e-12))),
        Claim(f"Nothing is learned per position: on a sentence twice as long ({2 * t} tokens) the first {t}×{t} "
              f"block of the bias is the same (max |Δ| = {tiny(extends)}), so it extrapolates.", extends == 0),
    )
    table = pd.DataFrame({"slope m": slopes, "mean distance, ALiBi": near, "mean distance, no positions": far},
                         index=pd.Index(head_titles("", nh), name="head"))
    figures = (Grid(np.concatenate([result.trace.weights, plain.trace.weights]), result.query_labels,
                    result.key_labels, head_titles("ALiBi, ", nh) + head_titles("none, ", nh)),)
    return Findings(figures, claims, (("How far each head looks, with and without the penalty.", table),))


LESSONS = (
    Lesson(
        key="alibi",
        title="ALiBi: a distance penalty on the logits",
        short_title="ALiBi",
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
)
