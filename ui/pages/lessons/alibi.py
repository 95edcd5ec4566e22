"""Lesson 8, ALiBi: a distance penalty −m·|i − j| on the logits, fixed per head, for any length."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.offsets import distances, mean_attended_distance
from ui.i18n import N_, _
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
        Claim(_("The bias is −m·|i − j| with slopes {slopes} (max |Δ| = {gap}).").format(
            slopes=", ".join(f"{m:g}" for m in slopes), gap=tiny(bias_gap)), bias_gap == 0),
        Claim(_("Every head looks nearer with the penalty: mean distance attended {pairs} without it.").format(
            pairs=", ".join(_("{near:.2f} vs {far:.2f}").format(near=a, far=b) for a, b in zip(near, far, strict=True))),
              bool(np.all(near <= far + 1e-12))),
        Claim(_("Nothing is learned per position: on a sentence twice as long ({long} tokens) the first {t}×{t} block "
                "of the bias is the same (max |Δ| = {gap}), so it extrapolates.").format(long=2 * t, t=t,
                                                                                       gap=tiny(extends)),
              extends == 0),
    )
    table = pd.DataFrame({N_("slope m"): slopes, N_("mean distance, ALiBi"): near,
                          N_("mean distance, no positions"): far}, index=pd.Index(head_titles("", nh), name=_("head")))
    figures = (Grid(np.concatenate([result.trace.weights, plain.trace.weights]), result.query_labels,
                    result.key_labels, head_titles("ALiBi, ", nh) + head_titles(_("none, "), nh)),)
    return Findings(figures, claims, ((_("How far each head looks, with and without the penalty."), table),))


LESSONS = (
    Lesson(
        key="alibi",
        title=N_("ALiBi: a distance penalty on the logits"),
        short_title="ALiBi",
        question=N_("ALiBi has no position vectors at all: how does it know about order, and why does it "
                    "extrapolate?"),
        source=N_("answered in Press et al. 2022, Train Short, Test Long (used by BLOOM, MPT)"),
        source_url="https://arxiv.org/abs/2108.12409",
        panels=(LessonPanel(N_("ALiBi, causal mask"), replace(BASE, pe="alibi", mask="causal")),),
        explanation=N_(
            "ALiBi subtracts m·|i − j| from every logit: the further the key, the lower its score. Each head has "
            "its own fixed slope m, a geometric series, so some heads look near and some far. Nothing depends "
            "on a learned position table, so a longer sentence than any seen in training gets the same rule."
        ),
        findings=alibi_findings,
    ),
)
