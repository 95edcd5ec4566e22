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
    row = pd.DataFrame({"key": labels, "A₁": parts.map1[0, ROW], "A₂": parts.map2[0, ROW],
                        "A₁ − λA₂": weights[0, ROW], "softmax head": plain.trace.weights[0, ROW]})
    claims = (
        Claim(f"The weights are softmax(L₁) − λ·softmax(L₂), recomputed here from the two halves' logits: the "
              f"subtraction comes **after** both softmaxes (max |Δ| = {tiny(after_gap)}).", after_gap <= 1e-12),
        Claim(f"Subtracting before the softmax, softmax(L₁ − λL₂), would give other weights (max |Δ| = "
              f"{before_gap:.3f}), rows that sum to 1 and no negative weight.", before_gap > 1e-3),
        Claim(f"Every row sums to 1 − λ = {1 - lam:.4f}, not 1 (max |sum − (1 − λ)| = "
              f"{tiny(float(np.max(np.abs(sums - (1 - lam)))))}).", bool(np.all(np.abs(sums - (1 - lam)) <= 1e-12))),
        Claim(f"{negative} of {int(diff.mask.sum()) * weights.shape[0]} visible weights are negative (smallest {weights.min():.3f}): a diverging colour scale is needed.",
              negative > 0),
    )
    figures = (
        Grid(np.stack([parts.map1[0], parts.map2[0]]), diff.query_labels, labels, ["A₁ (head 0)", "A₂ (head 0)"],
             max_cols=2, mask=diff.mask),
        Grid(np.stack([weights[0], plain.trace.weights[0]]), diff.query_labels, labels,
             ["A₁ − λA₂ (head 0)", "softmax head 0, same weights"], kind="signed_weights", max_cols=2, mask=diff.mask),
    )
    tables = ((f"Row {labels[ROW]}, head 0: the two maps, their difference, and the softmax head's row.", row),)
    return Findings(figures, claims, tables, note="The differential weights are on a scale centred on 0 (blue "
                    "below 0); the maps above them are ordinary softmax rows on 0..1.")


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
        "tokens": range(1, t + 1),
        "MHA KV cache": [s.cache.numbers for s in mha_steps],
        "MQA KV cache (1 K/V head)": [s.cache.numbers for s in gqa_steps],
        "MLA latent cache": [s.numbers for s in mla_steps],
    })
    decoded_gap = max(float(np.max(np.abs(s.weights - mla_run.trace.weights[:, s.position, : s.position + 1])))
                      for s in mla_steps)
    claims = (
        Claim(f"Yes, MLA caches, but not K and V: a token costs r + d_rope = {config.mla_rank} + {config.mla_rope} = "
              f"{sizes['MLA latent cache'].iloc[0]} numbers for all {nh} heads together, against 2·{nh}·{hs} = "
              f"{sizes['MHA KV cache'].iloc[0]} for multi-head attention (measured in the decoders' memory).",
              sizes["MLA latent cache"].iloc[0] == per_token["MLA"] and sizes["MHA KV cache"].iloc[0] == per_token["MHA"]),
        Claim(f"Folding W_UK into the query gives the same scores without building K: max |absorbed − materialised| "
              f"= {tiny(mla_run.trace.mla.score_gap)}.", mla_run.trace.mla.score_gap <= 1e-12),
        Claim(f"A decoder that keeps only the latent and k_R, scoring the absorbed way, gives every row of full "
              f"causal attention (max |Δ| = {tiny(decoded_gap)}).", decoded_gap <= 1e-12),
        Claim(f"After {t} tokens: MHA {sizes['MHA KV cache'].iloc[-1]}, MQA {sizes['MQA KV cache (1 K/V head)'].iloc[-1]}, "
              f"MLA {sizes['MLA latent cache'].iloc[-1]} numbers.",
              sizes["MLA latent cache"].iloc[-1] < sizes["MQA KV cache (1 K/V head)"].iloc[-1]
              < sizes["MHA KV cache"].iloc[-1]),
    )
    figures = (
        Grid(np.stack([mha.trace.weights[0], mla_run.trace.weights[0]]), mha.query_labels, mha.key_labels,
             ["MHA, head 0", f"MLA (r = {config.mla_rank}), head 0"], max_cols=2, mask=mha.mask),
    )
    return Findings(figures, claims, (("Numbers cached by one layer as the sentence grows.", sizes),),
                    note="Two different layers (MLA's keys come from its latent): the point is what is cached, "
                    "not the pattern.")


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
    table = pd.DataFrame({"tokens": [s.position + 1 for s in steps], "linear: state numbers": [s.numbers for s in steps],
                          "softmax: KV cache numbers": kv_cache})
    peak_softmax = float(plain.trace.weights.max(axis=-1).mean())
    peak_linear = float(linear.trace.weights.max(axis=-1).mean())
    sizes = {s.numbers for s in steps} | {s.numbers for s in long_steps}
    claims = (
        Claim(f"No cache of keys and values: the decoder keeps S and z, {steps[0].numbers} numbers after 1 token, "
              f"{steps[-1].numbers} after {len(steps)} and {long_steps[-1].numbers} after {LONG_TOKENS} "
              f"(softmax heads: {kv_cache[-1]} after {len(steps)}, "
              f"{2 * config.n_heads * config.head_size * LONG_TOKENS} after {LONG_TOKENS}).", len(sizes) == 1),
        Claim(f"The recurrent form gives the parallel form's heads (max |Δ| = {tiny(recurrent_gap)}).",
              recurrent_gap <= 1e-12),
        Claim(f"Rows still sum to 1 (max |sum − 1| = {tiny(float(np.max(np.abs(linear.trace.weights.sum(-1) - 1))))}), "
              f"but they are flatter: a row's largest weight is {peak_linear:.3f} on average, against "
              f"{peak_softmax:.3f} for the softmax heads of the same weights.", peak_linear < peak_softmax),
    )
    figures = (
        Grid(np.stack([plain.trace.weights[0], linear.trace.weights[0]]), plain.query_labels, plain.key_labels,
             ["softmax, head 0", "linear (φ = elu + 1), head 0"], max_cols=2, mask=plain.mask),
    )
    return Findings(figures, claims, (("What one layer keeps while decoding.", table),))


CAUSAL = replace(BASE, mask="causal")

LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="differential",
        short_title="Differential",
        title="Differential attention: subtract after the softmax; rows sum to 1 − λ",
        question="Before you look: is λ subtracted before or after the softmax? Do the rows still sum to 1, and can "
                 "a weight be negative?",
        source="asked in microsoft/unilm #1637",
        source_url="https://github.com/microsoft/unilm/issues/1637",
        panels=(LessonPanel("Softmax heads", CAUSAL), LessonPanel("Differential heads", replace(CAUSAL, kernel="differential"))),
        explanation=(
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
        short_title="MLA cache",
        title="Multi-head latent attention: the cache is a latent, K is never built",
        question="Before you look: does MLA keep a KV cache? How many numbers per token, against multi-head "
                 "attention's 2 · heads · d_k?",
        source="asked in deepseek-ai/DeepSeek-V3 #305",
        source_url="https://github.com/deepseek-ai/DeepSeek-V3/issues/305",
        panels=(LessonPanel("Multi-head attention (RoPE)", replace(CAUSAL, pe="rope")),
                LessonPanel("MLA, latent rank 4, 2 RoPE dims", replace(CAUSAL, pe="rope", mla_rank=4, mla_rope=2))),
        explanation=(
            "MLA keeps one latent vector c per token (rank r) and a small shared RoPE key; every head's keys and "
            "values are up-projections of c. Because q·(c W_UK) = (q W_UKᵀ)·c, the decoder folds W_UK into the "
            "query and scores against the cached latent directly: the cache is r + d_rope numbers per token, for "
            "all heads. RoPE cannot turn c itself (the turn would sit between q and W_UK), hence the decoupled part."
        ),
        findings=mla_findings,
    ),
    Lesson(
        key="linear_state",
        short_title="Linear attention",
        title="Linear attention: a state of constant size instead of a growing cache",
        question="Before you look: how many numbers does a linear-attention decoder keep after 6 tokens, and after 60?",
        source="requested in x-transformers and nanoGPT (issue 26)",
        source_url="",
        panels=(LessonPanel("Softmax heads", CAUSAL), LessonPanel("Linear heads (φ = elu + 1)", replace(CAUSAL, kernel="linear"))),
        explanation=(
            "With φ(x) = elu(x) + 1 in place of exp, the numerator Σⱼ φ(qᵢ)·φ(kⱼ) vⱼ is φ(qᵢ) times Σⱼ φ(kⱼ)vⱼᵀ: a "
            "matrix that each token adds to once. A decoder keeps that matrix S and the sum z, d_k × (d_v + 1) "
            "numbers per head whatever the length, and never looks at an old key again. The weights still sum to 1 "
            "per row, but without the exponential they are flatter."
        ),
        findings=linear_findings,
    ),
)
