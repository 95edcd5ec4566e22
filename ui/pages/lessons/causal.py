"""Lesson 2, the causal mask: rows renormalise over keys 0..i, and the outputs 'shift' by one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.diagnostics import renormalised_rows
from ui.charts.markdown import literal
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, tiny

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
            N_("key"): labels,
            N_("may attend"): [_("yes") if m else _("no (masked)") for m in causal.mask[i]],
            N_("weight without mask"): w_free[i],
            N_("÷ kept mass"): expected[i],
            N_("weight with causal mask"): w_causal[i],
        }
    )
    shift_table = pd.DataFrame(
        {
            N_("position"): labels,
            N_("its output mixes"): [" ".join(tokens[: t + 1]) for t in range(len(tokens))],
            N_("a language model uses it to predict"): [*tokens[1:], _("(the word after the sentence)")],
        }
    )
    claims = (
        Claim(
            _("Every weight above the diagonal is 0 (largest: {largest}) and every row still sums to 1 "
              "(max |sum − 1| = {gap}).").format(largest=tiny(upper.max()), gap=tiny(np.abs(row_sums - 1).max())),
            bool(np.all(upper == 0) and np.all(np.abs(row_sums - 1) <= 1e-12)),
        ),
        Claim(
            _("Each causal row is the unmasked row cut to keys 0..i and divided by what is left: row {row} keeps "
              "{kept:.3f} of its weight and every kept weight is divided by it (max |Δ| = {gap}).").format(
                row=row, kept=kept_mass, gap=tiny(gap)),
            gap <= 1e-12,
        ),
    )
    figures = (
        Grid(
            np.stack([w_free, w_causal]),  # (2, T, T)
            free.query_labels,
            labels,
            [_("no mask"), _("causal mask")],
            max_cols=2,
            mask=np.stack([np.ones_like(causal.mask), causal.mask]),  # (2, T, T)
        ),
    )
    tables = (
        (_("Row {row}, step by step: the masked keys' weight is shared out again in proportion.").format(row=row),
         row_table),
        (_("The 'shift': position i only sees tokens 0..i, so it is trained to predict token i+1."), shift_table),
    )
    return Findings(figures, claims, tables)


LESSONS = (
    Lesson(
        key="causal",
        title=N_("Causal mask: rows renormalise, outputs 'shift'"),
        short_title=N_("Causal mask"),
        question=N_("With a causal mask, what happens to each row, and why does the output look shifted by one?"),
        source=N_("asked in llm-viz #13"),
        source_url="https://github.com/bbycroft/llm-viz/issues/13",
        panels=(
            LessonPanel(N_("No mask"), replace(BASE, n_heads=1)),
            LessonPanel(N_("Causal mask"), replace(BASE, n_heads=1, mask="causal")),
        ),
        explanation=N_(
            "The mask sets the scores of later tokens to −∞ before the softmax, so they get weight exactly 0 and "
            "the softmax hands the whole weight to the keys the row may see: the surviving weights are the "
            "unmasked ones divided by their sum. Row i therefore mixes only tokens 0..i. A language model uses "
            "the output at position i to predict token i+1, so each prediction lands one position later than "
            "the token it was computed at: that is the 'shift'."
        ),
        findings=causal_findings,
    ),
)
