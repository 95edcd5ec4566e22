"""Lesson 1, W_O after the concatenation: without W_O each output column belongs to one head."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mha_core.config import run
from mha_core.contributions import head_output_shares
from ui.i18n import N_, _
from ui.pages.lessons.records import (
    BASE,
    Claim,
    Findings,
    Heatmap,
    Lesson,
    LessonPanel,
    contributions_of,
    head_titles,
    pct,
    tiny,
)


def wo_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Without W_O each output column belongs to one head; with W_O every column mixes all heads."""
    without, with_wo = (p.config for p in panels)
    run_without, run_with = run(without), run(with_wo)
    shares_without = head_output_shares(contributions_of(without))  # (nh, C)
    shares_with = head_output_shares(contributions_of(with_wo))  # (nh, C)
    n_heads = without.n_heads
    heads = head_titles("", n_heads)
    columns = [str(c) for c in range(without.d_model)]
    concat_gap = float(np.max(np.abs(run_without.trace.output - run_without.trace.concat)))
    weights_gap = float(np.max(np.abs(run_with.trace.weights - run_without.trace.weights)))
    sources_without = (shares_without > 0).sum(axis=0)  # (C,) heads feeding each column
    claims = (
        Claim(
            _("Without W_O the output is the concatenation itself (max |Δ| = {gap}) and every output column comes "
              "from exactly one head.").format(gap=tiny(concat_gap)),
            concat_gap == 0 and bool(np.all(sources_without == 1)),
        ),
        Claim(
            _("With W_O every output column mixes all {n_heads} heads: each head supplies {low} to {high} of every "
              "column.").format(n_heads=n_heads, low=pct(shares_with.min()), high=pct(shares_with.max())),
            bool(np.all(shares_with > 0.01)),
        ),
        Claim(
            _("W_O comes after the softmax: the attention weights are identical with and without it "
              "(max |Δ| = {gap}).").format(gap=tiny(weights_gap)),
            weights_gap == 0,
        ),
    )
    figures = (
        Heatmap(shares_without, heads, columns, _("Without W_O: output = concat"), _("share"), "", _("output column")),
        Heatmap(shares_with, heads, columns, _("With W_O: output = concat · W_O"), _("share"), "", _("output column")),
    )
    note = _("Rows: the {n_heads} heads. Columns: the {d_model} output columns. Colour: the share of that output "
             "column that comes from that head (each column sums to 1).").format(n_heads=n_heads, d_model=without.d_model)
    return Findings(figures, claims, note=note)


LESSONS = (
    Lesson(
        key="wo",
        title=N_("W_O: the step after the concatenation"),
        short_title="W_O",
        question=N_("The heads are concatenated... and then? Where is W_O, and what does it do?"),
        source=N_("asked in Transformer Explainer #71 (and minGPT #118, transformers #8814)"),
        source_url="https://github.com/poloclub/transformer-explainer/issues/71",
        panels=(
            LessonPanel(N_("Without W_O (output = concat)"), replace(BASE, output_projection=False)),
            LessonPanel(N_("With W_O"), BASE),
        ),
        explanation=N_(
            "Each head writes its result into its own block of columns, and concatenating only lays those "
            "blocks side by side: without W_O, every output column still belongs to a single head. W_O is one "
            "more learned matrix, applied after the concatenation, that mixes all heads into every output column. "
            "It acts after the softmax, so it never changes the attention heatmaps, which is why tools that draw "
            "only attention leave it out (GPT-2 and minGPT call it c_proj)."
        ),
        findings=wo_findings,
    ),
)
