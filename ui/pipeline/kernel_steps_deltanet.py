"""Gated DeltaNet's steps for Step by step (issue 34), where a softmax head has scores, scale, mask and softmax:

- "normalise q and k; β and α from x": q̂, k̂ of the head and each token's step size β_t and decay α_t;
- "the implied matrix M": q̂·k̂ (what M would be without decay and correction) beside M, the weights;
- "three forms, one output": the state S_T after the last token, the heads from the recurrence, and the largest
  gaps between the recurrent, the chunked and the matrix form, with the state's size against a KV cache's.

Every matrix is the engine's (``trace.kernel_parts``, a ``mha_core.deltanet.DeltaNetParts``). Pure: no streamlit.
"""

from __future__ import annotations

import numpy as np

from ui.i18n import _
from ui.pipeline.records import Panel, Step, StepInputs, dim_labels, qk_axes, shape_text


def deltanet_gates_step(inputs: StepInputs, head: int, cell=None) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    hs = trace.q.shape[-1]
    gates = np.stack([parts.beta[head], parts.alpha[head]], axis=-1)  # (T, 2)
    panels = (
        Panel(_("q̂ (head {head}) = q / ‖q‖ / √d_k").format(head=head), parts.q_hat[head], inputs.query_labels,
              dim_labels(hs, head * hs), "q̂"),
        Panel(_("k̂ (head {head}) = k / ‖k‖").format(head=head), parts.k_hat[head], inputs.key_labels,
              dim_labels(hs), "k̂"),
        Panel(_("β_t and α_t (head {head})").format(head=head), gates, inputs.query_labels, ["β", "α"],
              _("value"), kind="weights"),
    )
    why = _("Gated DeltaNet first makes every q and k of length 1 (L2 norm; q also times 1/√d_k = {scale}), so the "
            "state can never blow up. Then, from each token's input x_t, two numbers per head: the step size β_t = "
            "σ(x_t W_β) (how much of the correction is written) and the decay α_t = exp(g_t), g_t = −exp(A_log)·"
            "softplus(x_t W_a + dt_bias) (how much of the old state is kept), as Qwen3-Next computes them. In head "
            "{head}, α runs from {alpha_min} to {alpha_max} and β from {beta_min} to {beta_max}.").format(
        scale=f"{trace.scale:.4f}", head=head, alpha_min=f"{parts.alpha[head].min():.3f}",
        alpha_max=f"{parts.alpha[head].max():.3f}", beta_min=f"{parts.beta[head].min():.3f}",
        beta_max=f"{parts.beta[head].max():.3f}")
    formula = (r"\hat q_t = \frac{q_t}{\lVert q_t\rVert\sqrt{d_k}},\quad \hat k_t = \frac{k_t}{\lVert k_t\rVert},\quad "
               r"\beta_t = \sigma(x_t W_\beta),\quad \alpha_t = e^{g_t},\ g_t = -e^{A_{\log}}\,"
               r"\mathrm{softplus}(x_t W_a + b_{dt})")
    return Step("deltanet_gates", _("Normalise q and k; β and α from x (Gated DeltaNet)"), why, formula,
                _("q̂, k̂ {shape}; β, α ({t},) per head").format(shape=shape_text(parts.q_hat[head]),
                                                              t=parts.beta.shape[-1]), panels)


def deltanet_matrix_step(inputs: StepInputs, head: int, cell) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    q, k = inputs.query_labels, inputs.key_labels
    weights = trace.weights[head]  # (T, T)
    below = np.tril(np.ones_like(weights, dtype=bool))  # (T, T)
    panels = (
        Panel(_("q̂ k̂ᵀ (head {head}): no decay, no correction").format(head=head), parts.similarity[head], q, k,
              "q̂·k̂", cell=cell, axis_titles=qk_axes(), allowed=below),
        Panel(_("M (head {head}): how much v_j reaches o_i").format(head=head), weights, q, k, "M", cell=cell,
              axis_titles=qk_axes(), allowed=below),
    )
    negative = int(np.sum(weights[below] < 0))
    why = _("The state is linear in the values, so each output is a sum of value rows: o_i = Σ_j M_ij v_j. M_ij "
            "starts as β_j k̂_j·q̂_i and, for every later token m between j and i, is carried through α_m (I − β_m "
            "k̂_m k̂_mᵀ): the decay shrinks it and the delta rule takes out what a later, similar key overwrote. M "
            "is 0 above the diagonal (causal), its rows have no fixed sum, and {n} of its entries in head {head} are "
            "negative.").format(n=negative, head=head)
    formula = (r"M_{ij} = \beta_j\,\hat k_j^\top \Big(\prod_{m=j+1}^{i} \alpha_m\big(I - \beta_m \hat k_m \hat k_m^\top"
               r"\big)\Big)\,\hat q_i,\qquad j \le i,\qquad o_i = \sum_j M_{ij}\,v_j")
    return Step("deltanet_matrix", _("The implied matrix M (Gated DeltaNet)"), why, formula,
                _("{shape}, 0 above the diagonal").format(shape=shape_text(weights)), panels)


def deltanet_forms_step(inputs: StepInputs, head: int, cell=None) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    hs, hv, t = trace.q.shape[-1], trace.v.shape[-1], trace.q.shape[1]
    recurrent_gap = float(np.max(np.abs(parts.recurrent_heads - trace.heads)))
    chunked_gap = float(np.max(np.abs(parts.chunked_heads - trace.heads)))
    panels = (
        Panel(_("S_T (head {head}): the state after the last token").format(head=head), parts.state[head],
              dim_labels(hs), dim_labels(hv), _("state"), axis_titles=(_("key feature"), _("value feature"))),
        Panel(_("head_{head} from the state, token by token").format(head=head), parts.recurrent_heads[head],
              inputs.query_labels, dim_labels(hv, head * hv), _("head output")),
    )
    why = _("The same heads, three ways. **Recurrent**: S_t = α_t S_{{t−1}} + k̂_t δ_tᵀ with δ_t = β_t (v_t − α_t "
            "S_{{t−1}}ᵀ k̂_t), read by q̂_t; largest difference from M V, all heads: **{recurrent}**. **Chunked** "
            "({chunk} tokens at a time, the UT transform Qwen3-Next trains with): a chunk's corrections come from one "
            "triangular solve and the state is carried from chunk to chunk; largest difference: **{chunked}**. "
            "**Matrix**: M V, the weights above. The state has {state} numbers per head at every step; a KV cache "
            "would hold {cache} for these {t} tokens and grow by {per_token} with each new one.").format(
        recurrent=f"{recurrent_gap:.1e}", chunk=parts.chunk, chunked=f"{chunked_gap:.1e}", state=hs * hv,
        cache=t * (hs + hv), t=t, per_token=hs + hv)
    formula = (r"S_t = \alpha_t S_{t-1} + \hat k_t\,\delta_t^\top,\quad \delta_t = \beta_t\big(v_t - \alpha_t "
               r"S_{t-1}^\top \hat k_t\big),\quad o_t = S_t^\top \hat q_t")
    return Step("deltanet_forms", _("Three forms, one output; a state of constant size (Gated DeltaNet)"), why,
                formula, _("S {state} per head, whatever T").format(state=shape_text(parts.state[head])), panels)


# Gated DeltaNet's step builders by slug, registered in ``ui.pipeline.kernel_steps.KERNEL_STEPS``.
DELTANET_STEPS = {
    "deltanet_gates": deltanet_gates_step,
    "deltanet_matrix": deltanet_matrix_step,
    "deltanet_forms": deltanet_forms_step,
}
