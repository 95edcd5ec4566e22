"""Lesson 4, averaging heads: the average is flatter than every head and shows a pattern no head computes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.diagnostics import max_weight
from ui.i18n import N_, _
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
            N_("panel"): [*head_titles("", config.n_heads), _("average")],
            N_("mean row maximum"): [*per_head, of_average],
            N_("rows whose strongest key matches the average's"): [
                *(_("{agree} of {rows}").format(agree=a, rows=n_rows) for a in agree), "—"],
        }
    )
    claims = (
        Claim(
            _("The average's mean row maximum is {average:.2f}, lower than every single head's ({low:.2f} to "
              "{high:.2f}): averaging blurs.").format(average=of_average, low=per_head.min(), high=per_head.max()),
            bool(of_average < per_head.min()),
        ),
        Claim(
            _("The average's strongest key matches a head's in only {low} to {high} of {rows} rows: it shows a "
              "pattern no single head computes.").format(low=agree.min(), high=agree.max(), rows=n_rows),
            bool(agree.min() < n_rows),
        ),
    )
    titles = [*head_titles("", config.n_heads), _("average of the heads")]
    figures = (
        Grid(
            np.concatenate([weights, average[None]]),  # (nh + 1, T, T)
            result.query_labels,
            result.key_labels,
            titles,
            max_cols=config.n_heads + 1,
        ),
    )
    note = _("Weights drawn standard normal (as in seed 003): each head is sharp, so the blur of the average is easy "
             "to see.")
    return Findings(figures, claims, ((_("Each head against the average."), table),), note)


LESSONS = (
    Lesson(
        key="average",
        title=N_("Averaging heads hides what each head does"),
        short_title=N_("Average of heads"),
        question=N_("Should I look at the average over heads, or at each head separately?"),
        source=N_("asked in BertViz #111 and pytorch #47583"),
        source_url="https://github.com/jessevig/bertviz/issues/111",
        panels=(LessonPanel(N_("Four heads and their average"), replace(BASE, init="normal"), {"avg": True}),),
        explanation=N_(
            "Each head computes its own weights and its own output, and the layer concatenates them: it never "
            "averages. The average is a summary for the eye only: it is flatter than every head, and where the "
            "heads disagree it shows a blend that no head computes. torch's nn.MultiheadAttention returns this "
            "average unless you pass average_attn_weights=False."
        ),
        findings=average_findings,
    ),
)
