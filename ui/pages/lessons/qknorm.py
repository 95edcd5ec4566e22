"""Lesson: QK-norm. Make the queries and keys larger and a plain head saturates; after QK-norm's RMSNorm nothing
changes, and no logit can pass scale · d_k · max|g_q| · max|g_k|: a saturated softmax no longer comes from ‖q‖‖k‖."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.attention import AttentionWeights, multi_head_attention
from mha_core.config import RunResult, run
from mha_core.diagnostics import max_weight
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, head_titles

GROWTH = (1.0, 2.0, 4.0, 8.0)  # W_Q and W_K multiplied by these: ‖q‖‖k‖ grows by their squares
QK_BASE = replace(BASE, d_model=64, pe="rope", mask="causal")


def grown(result: RunResult, factor: float, kernel: str):
    """The same layer with W_Q and W_K multiplied by ``factor``, under ``kernel`` (its own parameters kept)."""
    w, c = result.weights, result.config
    bigger = AttentionWeights(w.w_q * factor, w.w_k * factor, w.w_v, w.w_o)
    return multi_head_attention(result.x_q, bigger, c.n_heads, mask=result.mask, pe=c.pe, kernel=kernel,
                                kernel_params=result.kernel_params if kernel == c.kernel else None)


def growth_table(plain: RunResult, normed: RunResult) -> pd.DataFrame:
    """Per factor: the mean row maximum and the largest |scaled score| of the plain head and of QK-norm's, and
    QK-norm's bound scale · d_k · max|g_q| · max|g_k|."""
    rows = []
    for factor in GROWTH:
        p, q = grown(plain, factor, "softmax"), grown(normed, factor, "qknorm")
        rows.append({N_("W_Q, W_K × c"): factor,
                     N_("row max · softmax"): float(max_weight(p.weights).mean()),
                     N_("row max · QK-norm"): float(max_weight(q.weights).mean()),
                     N_("largest |logit| · softmax"): float(np.max(np.abs(p.scores * p.scale))),
                     N_("largest |logit| · QK-norm"): float(np.max(np.abs(q.scores * q.scale))),
                     N_("QK-norm's bound"): q.kernel_parts.bound})
    return pd.DataFrame(rows)


def qknorm_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The plain head saturates as its weights grow; QK-norm's weights stay as they were, under the bound."""
    plain, normed = (run(p.config) for p in panels)
    table = growth_table(plain, normed)
    first, last = table.iloc[0], table.iloc[-1]
    c = GROWTH[-1]
    gap = float(np.max(np.abs(grown(normed, c, "qknorm").weights - normed.trace.weights)))
    growth = last["largest |logit| · softmax"] / first["largest |logit| · softmax"]
    claims = (
        Claim(_("With W_Q and W_K {c:g} times larger, the plain head's largest logit grows {growth:.0f}-fold ({c2:g} "
                "= c²) and its mean row maximum goes from {before:.2f} to {after:.2f}: nearly one key per row.").format(
                    c=c, growth=growth, c2=c * c, before=first["row max · softmax"], after=last["row max · softmax"]),
              bool(abs(growth - c * c) < 1e-6 * c * c and last["row max · softmax"] > first["row max · softmax"] + 0.2)),
        Claim(_("QK-norm's weights hardly move: max |Δ| = {gap:.1e} (only the RMSNorm's ε notices the size), and its "
                "mean row maximum stays {kept:.2f}.").format(gap=gap, kept=last["row max · QK-norm"]),
              gap < 1e-3),
        Claim(_("Its largest |logit| is {largest:.3f} at every size, below the bound scale · d_k · max|g_q| · max|g_k| "
                "= {bound:.3f}.").format(largest=last["largest |logit| · QK-norm"], bound=last["QK-norm's bound"]),
              bool(np.all(table["largest |logit| · QK-norm"] <= table["QK-norm's bound"]))),
    )
    n_heads = plain.config.n_heads
    weights = np.concatenate([grown(plain, c, "softmax").weights, grown(normed, c, "qknorm").weights])  # (2 nh, T, T)
    titles = [*head_titles(_("softmax, W × {c:g} · ").format(c=c), n_heads),
              *head_titles(_("QK-norm, W × {c:g} · ").format(c=c), n_heads)]
    figures = (Grid(weights, plain.query_labels, plain.key_labels, titles, max_cols=n_heads, mask=plain.mask),)
    caption = _("Measured live on this sentence: W_Q and W_K multiplied by c (so every q and k is c times longer), the "
                "same seed, RoPE and a causal mask; the largest |logit| is max |scale · q·k| over every head.")
    return Findings(figures, claims, ((caption, table),))


LESSONS = (
    Lesson(
        key="qknorm",
        title=N_("QK-norm: a softmax that longer queries cannot saturate"),
        short_title=N_("QK-norm"),
        question=N_("Multiply W_Q and W_K by 8. The plain head's rows turn one-hot. Predict: what happens to the "
                    "same head with QK-norm, and what is the largest logit it can ever reach?"),
        source=N_("used by OLMo 2, Qwen3 and Gemma 3 to keep attention logits from growing in training (Dehghani et "
                  "al. 2023)"),
        source_url="https://arxiv.org/abs/2302.05442",
        panels=(
            LessonPanel(N_("softmax head (RoPE, causal)"), QK_BASE),
            LessonPanel(N_("the same layer with QK-norm"), replace(QK_BASE, kernel="qknorm")),
        ),
        explanation=N_(
            "QK-norm divides each head's q and k by their root mean square and multiplies them by learned gains, "
            "before RoPE turns them. Every q̂ is then at most √d_k · max|g_q| long, whatever W_Q did, and RoPE keeps "
            "lengths, so |scale · q̂·k̂| ≤ scale · d_k · max|g_q| · max|g_k|. Longer queries and keys change nothing: "
            "a head can still be sharp, but only by pointing q̂ at one key, and only as sharp as the gains and the "
            "scale allow."
        ),
        findings=qknorm_findings,
    ),
)
