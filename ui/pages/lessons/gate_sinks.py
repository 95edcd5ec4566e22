"""Lessons for two 2026 attention variants (issue 34): Qwen3-Next's output gate and gpt-oss's learned sinks.

Each asks its question before anything is shown, and its findings compute the answer from the engine: the gate
never moves the weights and a gate of 1 is the plain head; a sink is a learned null key (s_h = 0 is the null key
exactly) whose share grows with s_h. No streamlit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.attention import multi_head_attention
from mha_core.config import attention_scheme, run
from mha_core.gated import GateParams, first_token_delivery, sigmoid
from mha_core.sink_kernel import SinkParams
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Heatmap, Lesson, LessonPanel, tiny

OPEN = 40.0  # a gate bias with σ(40) = 1 exactly in float64: the gate is fully open


def rerun(result, **options):
    """The run's layer again on its own input, with other kernel options (``multi_head_attention``'s)."""
    c = result.config
    return multi_head_attention(result.x_q, result.weights, c.n_heads, x_k=result.x_kv, mask=result.mask,
                                scale=result.trace.scale, kv_heads=c.key_value_heads, pe=attention_scheme(c),
                                rope_base=c.rope_base, **options)


def head_names(n_heads: int) -> list[str]:
    return [_("head {h}").format(h=h) for h in range(n_heads)]


# ---- gated attention: the gate acts after A·V ---------------------------------------------------


def gated_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Same weights as the softmax heads; output = A·V ⊙ σ(X W_θ) recomputed here; a gate of 1 is the plain head."""
    plain, gated = (run(p.config) for p in panels)
    trace, params = gated.trace, gated.kernel_params
    weights_gap = float(np.max(np.abs(trace.weights - plain.trace.weights)))
    nh, hv = trace.n_heads, trace.heads.shape[-1]
    gate = sigmoid(gated.x_q @ params.w_gate).reshape(-1, nh, hv).transpose(1, 0, 2)  # (nh, T, hv), from X here
    output_gap = float(np.max(np.abs(plain.trace.heads * gate - trace.kernel_parts.gated_heads)))
    opened = GateParams(np.zeros_like(params.w_gate), np.full(params.w_gate.shape[1], OPEN))
    open_trace = rerun(gated, kernel="gated", kernel_params=opened)
    open_gap = float(np.max(np.abs(open_trace.output - plain.trace.output)))
    share, off, on = first_token_delivery(trace.weights, trace.values_per_query_head(), trace.kernel_parts.gate)
    claims = (
        Claim(_("The gate does not move a single weight: the gated heads' weights are the softmax heads' (max |Δ| = "
                "{gap}). It acts after A·V.").format(gap=tiny(weights_gap)), weights_gap == 0.0),
        Claim(_("Each gated head's output is its A·V times σ(X W_θ), feature by feature, recomputed here from X "
                "(max |Δ| = {gap}).").format(gap=tiny(output_gap)), output_gap <= 1e-12),
        Claim(_("A gate of 1 (σ(40) = 1 exactly) gives the plain layer's output exactly (max |Δ| = {gap}).").format(
            gap=tiny(open_gap)), open_gap == 0.0),
        Claim(_("Head 0 puts {share:.3f} of its weight on the first token with the gate on and off; what the first "
                "token hands on falls from {off:.4f} to {on:.4f} (mean ‖w_i0·v_0‖) when the gate closes part way.")
              .format(share=share[0], off=off[0], on=on[0]), bool(on[0] < off[0])),
    )
    table = pd.DataFrame({N_("head"): range(nh), N_("mean gate"): trace.kernel_parts.opening.mean(axis=-1),
                          N_("weight on first token"): share, N_("first token hands on, gate off"): off,
                          N_("first token hands on, gate on"): on})
    figures = (
        Heatmap(trace.kernel_parts.opening, head_names(nh), gated.query_labels,
                _("How far each head's gate opens, per token"), N_("mean gate"), row_name=N_("head"),
                col_name=N_("query")),
        Grid(np.stack([plain.trace.weights[0], trace.weights[0]]), gated.query_labels, gated.key_labels,
             [_("softmax, head 0"), _("gated, head 0 (the same weights)")], max_cols=2, mask=gated.mask),
    )
    return Findings(figures, claims, ((_("Per head: the gate's mean opening and the first token."), table),),
                    note=_("The gate's weights W_θ are drawn from the seed, not trained: the paper's finding that "
                           "trained gated models stop parking weight on the first token cannot appear here; what "
                           "can is why they no longer need to: a head can close its gate instead."))


# ---- learned sinks: a learned null key ----------------------------------------------------------


def sink_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Rows sum to < 1; the gpt-oss way (concatenate, softmax, drop) recomputed; s_h = 0 is the null key exactly."""
    null, sink = (run(p.config) for p in panels)
    trace, s = sink.trace, sink.kernel_params.logits
    logits = trace.logits  # (nh, T, T), -inf where masked
    combined = np.concatenate([logits, np.broadcast_to(s[:, None, None], logits.shape[:2] + (1,))], axis=-1)
    e = np.exp(combined - combined.max(axis=-1, keepdims=True))  # (nh, T, T + 1)
    by_hand = (e / e.sum(axis=-1, keepdims=True))[..., :-1]  # (nh, T, T): the sink's column dropped
    hand_gap = float(np.max(np.abs(by_hand - trace.weights)))
    zero = rerun(sink, kernel="sink", kernel_params=SinkParams(np.zeros_like(s)))
    null_gap = float(np.max(np.abs(zero.weights - null.trace.weights)))
    raised = rerun(sink, kernel="sink", kernel_params=SinkParams(s + 1.0)).kernel_parts.sink_share
    share = trace.kernel_parts.sink_share  # (nh, T)
    claims = (
        Claim(_("The rows do not sum to 1: the sink takes {low:.3f} to {high:.3f} of a row.").format(
            low=share.min(), high=share.max()), bool(share.min() > 0)),
        Claim(_("Recomputed the gpt-oss way from the logits (append s_h, softmax, drop its column): max |Δ| = {gap}.")
              .format(gap=tiny(hand_gap)), hand_gap <= 1e-12),
        Claim(_("With s_h = 0 for every head the weights are the null key's (softmax₁) exactly (max |Δ| = {gap}): "
                "a sink is a null key whose logit is learned, one per head.").format(gap=tiny(null_gap)),
              null_gap == 0.0),
        Claim(_("Raise every s_h by 1 and every row gives its sink more: the mean share goes from {before:.3f} to "
                "{after:.3f}.").format(before=share.mean(), after=raised.mean()), bool(np.all(raised > share))),
    )
    table = pd.DataFrame({N_("head"): range(trace.n_heads), "s_h": s, N_("mean sink share"): share.mean(axis=-1)})
    figures = (
        Heatmap(share, head_names(trace.n_heads), sink.query_labels, _("The sink's share of each row, 1 − Σ_j A_ij"),
                N_("sink share"), row_name=N_("head"), col_name=N_("query")),
        Grid(np.stack([null.trace.weights[0], trace.weights[0]]), sink.query_labels, sink.key_labels,
             [_("null key, head 0"), _("learned sink s_0 = {s:.3f}, head 0").format(s=s[0])], max_cols=2,
             mask=sink.mask),
    )
    return Findings(figures, claims, ((_("Per head: its sink logit and the share of a row it takes."), table),),
                    note=_("The sink logits are drawn from the seed, not trained."))


CAUSAL = replace(BASE, mask="causal")

LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="gated_attention",
        short_title=N_("Gated attention"),
        title=N_("Gated attention: a gate after A·V, and why the first token no longer has to take the weight"),
        question=N_("Before you look: Qwen3-Next multiplies each head's output by σ(X W_θ) before W_O. Does the gate "
                    "change where a head looks (its weights)? What does a gate of 1 give?"),
        source=N_("Qiu et al. 2025 (arXiv 2505.06708), as Qwen3-Next ships it"),
        source_url="https://arxiv.org/abs/2505.06708",
        panels=(LessonPanel(N_("Softmax heads"), CAUSAL),
                LessonPanel(N_("Gated heads"), replace(CAUSAL, kernel="gated"))),
        explanation=N_(
            "The gate is computed from the token's own input, like its query, one number in (0, 1) per head and value "
            "feature (elementwise, as in Qwen3-Next), and multiplies A·V before W_O. The weights stay the softmax's, "
            "so every row still sums to 1; what changes is how much of A·V the head hands on. A head with nothing to "
            "add used to park its weight on the first token (an attention sink, whose value is small); with a gate it "
            "can close the gate instead, which is why trained gated models lose the sink."
        ),
        findings=gated_findings,
    ),
    Lesson(
        key="learned_sinks",
        short_title=N_("Learned sinks"),
        title=N_("Learned attention sinks: one logit per head, appended, softmaxed, dropped"),
        question=N_("Before you look: gpt-oss appends one learned logit s_h to every row and drops its column after "
                    "the softmax. Do the rows still sum to 1? What is a sink of logit 0?"),
        source=N_("gpt-oss (OpenAI 2025) and transformers' gpt_oss attention"),
        source_url="https://github.com/openai/gpt-oss",
        panels=(LessonPanel(N_("Null key (softmax₁)"), replace(CAUSAL, null_key=True)),
                LessonPanel(N_("Learned sinks"), replace(CAUSAL, kernel="sink"))),
        explanation=N_(
            "The sink is a key with a logit and no value: it joins the softmax's denominator, takes a share of every "
            "row, and hands nothing on. A head that has nothing to add can give its weight to the sink instead of to "
            "a real token. Dividing through by e^(s_h) shows the sink is the null key (softmax₁) with every logit "
            "shifted by −s_h, so s_h = 0 is the null key exactly."
        ),
        findings=sink_findings,
    ),
)
