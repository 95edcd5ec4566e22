"""Lesson 4, averaging heads: the average is flatter than every head and shows a pattern no head computes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.diagnostics import max_weight
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, head_titles


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
    titles = [*head_titles("", config.n_heads), "average of the heads"]
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


LESSONS = (
    Lesson(
        key="average",
        title="Averaging heads hides what each head does",
        short_title="Average of heads",
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
)
