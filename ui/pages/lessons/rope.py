"""Lesson 7, RoPE: a rotation of q and k makes the score depend on the offset i − j alone."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.offsets import diagonal_spread, rope_offset_scores
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, head_titles, tiny

OFFSET_POSITIONS = 6  # positions 0..5 of the lesson's table


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
        Claim(_("Query and key moved together by any shift keep their score: along every diagonal of the table the "
                "scores differ by at most {spread}.").format(spread=tiny(spread)), spread <= 1e-10),
        Claim(_("The rotation only turns: every query keeps its length (max change {change}).").format(
            change=tiny(length_change)), length_change <= 1e-12),
        Claim(_("The offset does matter: the same two vectors score from {low:.3f} to {high:.3f} as i − j goes from 0 "
                "to {last}.").format(low=by_offset.min(), high=by_offset.max(), last=OFFSET_POSITIONS - 1),
              np.ptp(by_offset) > 1e-3),
    )
    table = pd.DataFrame(scores, index=[_("q at {p}").format(p=p) for p in offsets],
                         columns=[_("k at {p}").format(p=p) for p in offsets])
    figures = (Grid(trace.weights, result.query_labels, result.key_labels, head_titles("RoPE, ", config.n_heads)),)
    return Findings(figures, claims, ((_("Head 0: the query of token 0 and the key of token 1, placed at every pair of "
                                         "positions (score after RoPE)."), table),))


LESSONS = (
    Lesson(
        key="rope",
        title=N_("RoPE: relative position from a rotation"),
        short_title="RoPE",
        question=N_("How can rotating q and k tell a head how far apart two tokens are?"),
        source=N_("answered in Su et al. 2021, RoFormer (used by LLaMA, Mistral, Qwen)"),
        source_url="https://arxiv.org/abs/2104.09864",
        panels=(LessonPanel(N_("RoPE, causal mask"), replace(BASE, pe="rope", mask="causal")),),
        explanation=N_(
            "RoPE adds nothing to the tokens: it turns each pair of a query's and a key's features by an angle "
            "proportional to the token's position. A dot product of two turned vectors depends on the difference "
            "of their angles, so the score of query i and key j depends on i − j, not on where the pair stands. "
            "Values are not turned, and lengths never change."
        ),
        findings=rope_findings,
    ),
)
