"""Lessons for the attention variants (issue 26): differential attention, MLA's cache, linear attention's state.

Each ``Lesson`` asks its question before anything is shown (the student answers it first), and its
findings compute the answer from the engine: claims with live numbers, figures on one colour scale,
tables. Written with the records of ``ui.pages.lessons``; the lead registers ``LESSONS`` there. No streamlit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.attention import softmax
from mha_core.config import attention_scheme, run
from mha_core.kv_cache import decode
from mha_core.mla import cache_per_token
from mha_core.variant_decoding import decode_variant_run
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, tiny

ROW = 3  # the query row the tables follow
LONG_TOKENS = 60  # "after 60 tokens"


# ---- differential: after the softmax, rows sum to 1 - lambda -------------------------------------


def differential_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """A = softmax(L1) - lambda softmax(L2), recomputed here from the two halves' logits; rows sum to 1 - lambda."""
    plain, diff = (run(p.config) for p in panels)
    parts, weights = diff.trace.kernel_parts, diff.trace.weights  # (nh, T, T)
    lam = parts.lam
    after = softmax(parts.logits1) - lam * softmax(parts.logits2)  # (nh, T, T): subtract after the softmaxes
    before = softmax(parts.logits1 - lam * np.where(np.isinf(parts.logits2), 0.0, parts.logits2))  # (nh, T, T)
    after_gap = float(np.max(np.abs(after - weights)))
    before_gap = float(np.max(np.abs(before - weights)))
    sums = weights.sum(axis=-1)  # (nh, T)
    negative = int((weights < 0).sum())
    labels = diff.key_labels
    row = pd.DataFrame({N_("key"): labels, "A₁": parts.map1[0, ROW], "A₂": parts.map2[0, ROW],
                        "A₁ − λA₂": weights[0, ROW], N_("softmax head"): plain.trace.weights[0, ROW]})
    claims = (
        Claim(_("The weights are softmax(L₁) − λ·softmax(L₂), recomputed here from the two halves' logits: the "
                "subtraction comes **after** both softmaxes (max |Δ| = {gap}).").format(gap=tiny(after_gap)),
              after_gap <= 1e-12),
        Claim(_("Subtracting before the softmax, softmax(L₁ − λL₂), would give other weights (max |Δ| = {gap:.3f}), "
                "rows that sum to 1 and no negative weight.").format(gap=before_gap), before_gap > 1e-3),
        Claim(_("Every row sums to 1 − λ = {total:.4f}, not 1 (max |sum − (1 − λ)| = {gap}).").format(
            total=1 - lam, gap=tiny(float(np.max(np.abs(sums - (1 - lam)))))),
              bool(np.all(np.abs(sums - (1 - lam)) <= 1e-12))),
        Claim(_("{negative} of {visible} visible weights are negative (smallest {smallest:.3f}): a diverging colour "
                "scale is needed.").format(negative=negative, visible=int(diff.mask.sum()) * weights.shape[0],
                                           smallest=weights.min()),
              negative > 0),
    )
    figures = (
        Grid(np.stack([parts.map1[0], parts.map2[0]]), diff.query_labels, labels, [_("A₁ (head 0)"), _("A₂ (head 0)")],
             max_cols=2, mask=diff.mask),
        Grid(np.stack([weights[0], plain.trace.weights[0]]), diff.query_labels, labels,
             [_("A₁ − λA₂ (head 0)"), _("softmax head 0, same weights")], kind="signed_weights", max_cols=2, mask=diff.mask),
    )
    tables = ((_("Row {row}, head 0: the two maps, their difference, and the softmax head's row.").format(
        row=labels[ROW]), row),)
    return Findings(figures, claims, tables, note=_("The differential weights are on a scale centred on 0 (blue "
                                                    "below 0); the maps above them are ordinary softmax rows on 0..1."))


# ---- MLA: the cache is a latent -------------------------------------------------------------------


def mla_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Cache sizes measured from the decoders' own memory; absorbed = materialised; decoded rows = full rows."""
    mha, mla_run = (run(p.config) for p in panels)
    config = mla_run.config
    nh, hs, t = config.n_heads, config.head_size, len(config.tokens)
    mha_steps = decode(mha.x_q, mha.weights, nh, pe=attention_scheme(mha.config), scale=mha.trace.scale)
    gqa = run(replace(mha.config, kv_heads=1))
    gqa_steps = decode(gqa.x_q, gqa.weights, nh, kv_heads=1, pe=attention_scheme(gqa.config), scale=gqa.trace.scale)
    mla_steps = decode_variant_run(mla_run)
    per_token = cache_per_token(nh, hs, 1, config.mla_rank, config.mla_rope)
    sizes = pd.DataFrame({
        N_("tokens"): range(1, t + 1),
        N_("MHA KV cache"): [s.cache.numbers for s in mha_steps],
        N_("MQA KV cache (1 K/V head)"): [s.cache.numbers for s in gqa_steps],
        N_("MLA latent cache"): [s.numbers for s in mla_steps],
    })
    decoded_gap = max(float(np.max(np.abs(s.weights - mla_run.trace.weights[:, s.position, : s.position + 1])))
                      for s in mla_steps)
    claims = (
        Claim(_("Yes, MLA caches, but not K and V: a token costs r + d_rope = {rank} + {rope} = {mla} numbers for all "
                "{nh} heads together, against 2·{nh}·{hs} = {mha} for multi-head attention (measured in the decoders' "
                "memory).").format(rank=config.mla_rank, rope=config.mla_rope, mla=sizes["MLA latent cache"].iloc[0],
                                   nh=nh, hs=hs, mha=sizes["MHA KV cache"].iloc[0]),
              sizes["MLA latent cache"].iloc[0] == per_token["MLA"] and sizes["MHA KV cache"].iloc[0] == per_token["MHA"]),
        Claim(_("Folding W_UK into the query gives the same scores without building K: max |absorbed − materialised| "
                "= {gap}.").format(gap=tiny(mla_run.trace.mla.score_gap)), mla_run.trace.mla.score_gap <= 1e-12),
        Claim(_("A decoder that keeps only the latent and k_R, scoring the absorbed way, gives every row of full "
                "causal attention (max |Δ| = {gap}).").format(gap=tiny(decoded_gap)), decoded_gap <= 1e-12),
        Claim(_("After {t} tokens: MHA {mha}, MQA {mqa}, MLA {mla} numbers.").format(
            t=t, mha=sizes["MHA KV cache"].iloc[-1], mqa=sizes["MQA KV cache (1 K/V head)"].iloc[-1],
            mla=sizes["MLA latent cache"].iloc[-1]),
              sizes["MLA latent cache"].iloc[-1] < sizes["MQA KV cache (1 K/V head)"].iloc[-1]
              < sizes["MHA KV cache"].iloc[-1]),
    )
    figures = (
        Grid(np.stack([mha.trace.weights[0], mla_run.trace.weights[0]]), mha.query_labels, mha.key_labels,
             [_("MHA, head 0"), _("MLA (r = {rank}), head 0").format(rank=config.mla_rank)], max_cols=2,
             mask=mha.mask),
    )
    return Findings(figures, claims, ((_("Numbers cached by one layer as the sentence grows."), sizes),),
                    note=_("Two different layers (MLA's keys come from its latent): the point is what is cached, not "
                           "the pattern."))


# ---- linear attention: a constant state -------------------------------------------------------------


def linear_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The state's size measured at every step, at 6 and at 60 tokens; recurrent = parallel; flatter rows."""
    plain, linear = (run(p.config) for p in panels)
    config = linear.config
    steps = decode_variant_run(linear)
    long_config = replace(config, tokens=tuple(f"w{i}" for i in range(LONG_TOKENS)))
    long_steps = decode_variant_run(run(long_config))
    parts = linear.trace.kernel_parts
    recurrent_gap = float(np.max(np.abs(parts.recurrent_heads - linear.trace.heads)))
    kv_cache = [2 * config.n_heads * config.head_size * (s.position + 1) for s in steps]
    table = pd.DataFrame({N_("tokens"): [s.position + 1 for s in steps],
                          N_("linear: state numbers"): [s.numbers for s in steps],
                          N_("softmax: KV cache numbers"): kv_cache})
    peak_softmax = float(plain.trace.weights.max(axis=-1).mean())
    peak_linear = float(linear.trace.weights.max(axis=-1).mean())
    sizes = {s.numbers for s in steps} | {s.numbers for s in long_steps}
    claims = (
        Claim(_("No cache of keys and values: the decoder keeps S and z, {first} numbers after 1 token, {last} after "
                "{t} and {long} after {long_t} (softmax heads: {kv} after {t}, {kv_long} after {long_t}).").format(
            first=steps[0].numbers, last=steps[-1].numbers, t=len(steps), long=long_steps[-1].numbers,
            long_t=LONG_TOKENS, kv=kv_cache[-1], kv_long=2 * config.n_heads * config.head_size * LONG_TOKENS),
              len(sizes) == 1),
        Claim(_("The recurrent form gives the parallel form's heads (max |Δ| = {gap}).").format(gap=tiny(recurrent_gap)),
              recurrent_gap <= 1e-12),
        Claim(_("Rows still sum to 1 (max |sum − 1| = {gap}), but they are flatter: a row's largest weight is "
                "{linear:.3f} on average, against {softmax:.3f} for the softmax heads of the same weights.").format(
            gap=tiny(float(np.max(np.abs(linear.trace.weights.sum(-1) - 1)))), linear=peak_linear,
            softmax=peak_softmax), peak_linear < peak_softmax),
    )
    figures = (
        Grid(np.stack([plain.trace.weights[0], linear.trace.weights[0]]), plain.query_labels, plain.key_labels,
             [_("softmax, head 0"), _("linear (φ = elu + 1), head 0")], max_cols=2, mask=plain.mask),
    )
    return Findings(figures, claims, ((_("What one layer keeps while decoding."), table),))


CAUSAL = replace(BASE, mask="causal")

LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="differential",
        short_title=N_("Differential"),
        title=N_("Differential attention: subtract after the softmax; rows sum to 1 − λ"),
        question=N_("Before you look: is λ subtracted before or after the softmax? Do the rows still sum to 1, and "
                    "can a weight be negative?"),
        source=N_("asked in microsoft/unilm #1637"),
        source_url="https://github.com/microsoft/unilm/issues/1637",
        panels=(LessonPanel(N_("Softmax heads"), CAUSAL),
                LessonPanel(N_("Differential heads"), replace(CAUSAL, kernel="differential"))),
        explanation=N_(
            "Each head cuts its query and key in two halves and takes two ordinary softmax maps; the weights are the "
            "first map minus λ times the second, so the subtraction comes after both softmaxes. Attention that both "
            "maps give (noise, a sink) cancels. The price: a row sums to 1 − λ and some weights are negative. "
            "Each head's output is then normalised on its own (RMSNorm per head, the paper's GroupNorm) and "
            "multiplied by 1 − λ_init before the concatenation: the paper's reason is that differential heads have "
            "sparser patterns, so their statistics differ more from head to head, and normalising each head keeps "
            "training stable."
        ),
        findings=differential_findings,
    ),
    Lesson(
        key="mla_cache",
        short_title=N_("MLA cache"),
        title=N_("Multi-head latent attention: the cache is a latent, K is never built"),
        question=N_("Before you look: does MLA keep a KV cache? How many numbers per token, against multi-head "
                    "attention's 2 · heads · d_k?"),
        source=N_("asked in deepseek-ai/DeepSeek-V3 #305"),
        source_url="https://github.com/deepseek-ai/DeepSeek-V3/issues/305",
        panels=(LessonPanel(N_("Multi-head attention (RoPE)"), replace(CAUSAL, pe="rope")),
                LessonPanel(N_("MLA, latent rank 4, 2 RoPE dims"), replace(CAUSAL, pe="rope", mla_rank=4, mla_rope=2))),
        explanation=N_(
            "MLA keeps one latent vector c per token (rank r) and a small shared RoPE key; every head's keys and "
            "values are up-projections of c. Because q·(c W_UK) = (q W_UKᵀ)·c, the decoder folds W_UK into the "
            "query and scores against the cached latent directly: the cache is r + d_rope numbers per token, for "
            "all heads. RoPE cannot turn c itself (the turn would sit between q and W_UK), hence the decoupled part."
        ),
        findings=mla_findings,
    ),
    Lesson(
        key="linear_state",
        short_title=N_("Linear attention"),
        title=N_("Linear attention: a state of constant size instead of a growing cache"),
        question=N_("Before you look: how many numbers does a linear-attention decoder keep after 6 tokens, and "
                    "after 60?"),
        source=N_("requested in x-transformers and nanoGPT (issue 26)"),
        source_url="",
        panels=(LessonPanel(N_("Softmax heads"), CAUSAL),
                LessonPanel(N_("Linear heads (φ = elu + 1)"), replace(CAUSAL, kernel="linear"))),
        explanation=N_(
            "With φ(x) = elu(x) + 1 in place of exp, the numerator Σⱼ φ(qᵢ)·φ(kⱼ) vⱼ is φ(qᵢ) times Σⱼ φ(kⱼ)vⱼᵀ: a "
            "matrix that each token adds to once. A decoder keeps that matrix S and the sum z, d_k × (d_v + 1) "
            "numbers per head whatever the length, and never looks at an old key again. The weights still sum to 1 "
            "per row, but without the exponential they are flatter."
        ),
        findings=linear_findings,
    ),
)
