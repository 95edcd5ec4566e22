"""Lesson 3, colour is a weight within one row: the brightest head is not the one that moves the output most."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.contributions import head_share_of_output
from mha_core.diagnostics import max_weight
from ui.i18n import N_, _
from ui.pages.lessons.records import (
    BASE,
    Claim,
    Findings,
    Grid,
    Lesson,
    LessonPanel,
    contributions_of,
    head_titles,
    pct,
    tiny,
)


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
            N_("head"): head_titles("", config.n_heads),
            N_("brightest cell"): weights.max(axis=(1, 2)),
            N_("mean row maximum"): brightness,
            N_("every row sums to"): row_sums.mean(axis=1),
            N_("share of the output (%)"): 100 * shares,
        }
    )
    claims = (
        Claim(
            _("Every row of every head sums to 1 (max |sum − 1| = {gap}), whether it looks bright or faint.").format(
                gap=tiny(np.abs(row_sums - 1).max())),
            bool(np.all(np.abs(row_sums - 1) <= 1e-12)),
        ),
        Claim(
            _("The brightest head (head {brightest}, mean row maximum {maximum:.2f}) supplies {share} of the output; "
              "head {strongest} supplies the most ({most}).").format(
                brightest=brightest, maximum=brightness[brightest], share=pct(shares[brightest]), strongest=strongest,
                most=pct(shares[strongest])),
            brightest != strongest,
        ),
    )
    figures = (Grid(weights, result.query_labels, result.key_labels, head_titles("", config.n_heads)),)
    return Findings(figures, claims, ((_("Brightness is not importance."), table),))


LESSONS = (
    Lesson(
        key="colours",
        title=N_("Colour is a weight within one row, not a head's importance"),
        short_title=N_("Colours"),
        question=N_("Does a brighter colour mean a more important head, or a stronger connection?"),
        source=N_("asked in BertViz #61"),
        source_url="https://github.com/jessevig/bertviz/issues/61",
        panels=(LessonPanel(N_("Four heads on one 0..1 colour scale"), replace(BASE, seed=1)),),
        explanation=N_(
            "In BertViz's head view a colour marks which head a line belongs to and its shade marks the weight, so "
            "several colours on one word are several heads drawn on top of each other. Here every head has its own "
            "panel and colour means one thing only: the share of that query row's attention given to that key, on "
            "a fixed 0 to 1 scale. Every row hands out exactly 1, bright or faint; how much a head moves the output "
            "depends on its values and on W_O, which no attention heatmap shows."
        ),
        findings=colour_findings,
    ),
)
