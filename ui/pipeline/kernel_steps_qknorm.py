"""QK-norm's own step of Step by step (``Kernel.early_steps``: after the heads are split, before positions): each
head's q and k as projected and RMS-normalised with their gains, and the bound no scaled score can pass.

Every matrix is an array of the engine's trace: ``projected_q``/``projected_k`` (as projected), ``q_unrotated``
(or ``q`` without a scheme that turns) for q̂, and ``kernel_parts`` (``mha_core.qk_norm.QKNormParts``). Pure: no
streamlit.
"""

from __future__ import annotations

import numpy as np

from ui.i18n import _
from ui.pipeline.records import Panel, Step, StepInputs, dim_labels, shape_text


def normalised_q(trace) -> np.ndarray:
    """q̂ (nh, Tq, hs): after the norm, before a scheme turns it."""
    return trace.q if trace.q_unrotated is None else trace.q_unrotated


def normalised_k(trace) -> np.ndarray:
    """k̂ (kv, Tk, hs): after the norm, before a scheme turns it."""
    return trace.k if trace.k_unrotated is None else trace.k_unrotated


def largest_scaled_score(trace, head: int) -> float:
    """max over the head's (query, key) pairs of |scale · q̂·k̂|, the number the bound holds (no bias, no mask)."""
    return float(np.max(np.abs(trace.scores[head] * trace.scale)))


def qk_norm_step(inputs: StepInputs, head: int, cell=None) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    hs, g = trace.q.shape[-1], trace.kv_head_of(head)
    gains = parts.gains  # (2, hs): g_q, g_k
    panels = (
        Panel(_("Q_{head} as projected").format(head=head), trace.projected_q[head], inputs.query_labels,
              dim_labels(hs, head * hs), "q"),
        Panel(_("Q̂_{head} = RMSNorm(Q_{head}) ⊙ g_q").format(head=head), normalised_q(trace)[head],
              inputs.query_labels, dim_labels(hs, head * hs), "q̂"),
        Panel(_("K_({g}) as projected").format(g=g), trace.projected_k[g], inputs.key_labels, dim_labels(hs, g * hs),
              "k"),
        Panel(_("K̂_({g}) = RMSNorm(K_({g})) ⊙ g_k").format(g=g), normalised_k(trace)[g], inputs.key_labels,
              dim_labels(hs, g * hs), "k̂"),
        Panel(_("The learned gains g_q, g_k (shared by the heads)"), gains, ["g_q", "g_k"], dim_labels(hs),
              _("gain"), axis_titles=(_("gain"), _("feature"))),
    )
    why = _("Each row of each head's q and k is divided by its root mean square, then multiplied feature by feature "
            "by a learned gain (drawn near 1 here), before positions turn them (Qwen3, OLMo 2, Gemma 3). Every row of "
            "Q̂ then has a length of at most √d_k · max|g_q|, whatever the weights, and RoPE keeps lengths: "
            "**|scale · q̂·k̂| ≤ scale · d_k · max|g_q| · max|g_k| = {bound}**. The largest in head {head}: "
            "**{largest}**.").format(bound=f"{parts.bound:.4f}", head=head,
                                     largest=f"{largest_scaled_score(trace, head):.4f}")
    formula = (r"\hat q_i = \frac{q_i}{\sqrt{\tfrac{1}{d_k}\sum_d q_{i,d}^2 + \epsilon}} \odot g_q,\quad "
               r"\hat k_j = \frac{k_j}{\sqrt{\tfrac{1}{d_k}\sum_d k_{j,d}^2 + \epsilon}} \odot g_k,\qquad "
               r"|s\,\hat q_i\cdot\hat k_j| \le s\,d_k \max|g_q| \max|g_k|")
    shapes = _("{shape} -> same shape, row by row; gains ({hs},) each").format(
        shape=shape_text(trace.projected_q[head]), hs=hs)
    return Step("qk_norm", _("Normalise q and k (QK-norm)"), why, formula, shapes, panels)
