"""The Gated DeltaNet lesson (issue 34): the delta rule overwrites where linear attention adds, the state keeps a
constant size, and its implied matrix M is the layer's signed "attention"; with the 3:1 stack of Qwen3-Next and
Qwen3.5 (three DeltaNet layers, then one gated-attention layer) as a table of what each layer keeps.

The question is asked before anything is shown; the findings compute the answer from the engine. No streamlit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from mha_core.deltanet import delta_recurrence, l2_normalise
from mha_core.variant_decoding import decode_variant_run
from ui.charts.numbers import count
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, tiny

LONG_TOKENS = 60  # "after 60 tokens"
# Qwen3-Next-80B-A3B as transformers 5.23's Qwen3NextConfig() describes it (layer_types: full_attention_interval 4):
# 48 layers; gated attention with 2 key/value heads of 256; Gated DeltaNet with 32 value heads of 128 x 128 keys.
QWEN3_NEXT = {"layers": 48, "interval": 4, "kv_heads": 2, "head_dim": 256, "v_heads": 32, "k_dim": 128, "v_dim": 128}
CONTEXTS = (4_096, 131_072, 1_048_576)  # 4k, 128k, 1M tokens


def overwrite_demo(seed: int = 0, size: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two tokens with the same key, β = 1, α = 1: what the state recalls for that key after both (delta rule) and
    what a linear-attention state (S + k vᵀ) would. Returns v_1, v_2, the delta rule's recall, the sum's recall."""
    rng = np.random.default_rng(seed)
    key = l2_normalise(rng.normal(size=(1, 1, size)))  # (1, 1, hs)
    k = np.concatenate([key, key], axis=1)  # (1, 2, hs): the same key twice
    v = rng.normal(size=(1, 2, size))  # (1, 2, hv)
    _heads, state = delta_recurrence(k, k, v, np.zeros((1, 2)), np.ones((1, 2)))  # (1, hs, hv)
    recalled = key[0, 0] @ state[0]  # (hv,)
    summed = key[0, 0] @ (k[0].T @ v[0])  # (hv,): Σ_t k_t v_tᵀ read with the key
    return v[0, 0], v[0, 1], recalled, summed


def stack_table(t_toy: int, toy_state: int, toy_kv_per_token: int) -> pd.DataFrame:
    """Four layers as Qwen3-Next and Qwen3.5 lay them out (three Gated DeltaNet, one gated attention), with what each
    keeps while decoding: the toy's numbers at its sentence length, and Qwen3-Next's per layer at 4k, 128k, 1M."""
    c = QWEN3_NEXT
    state = c["v_heads"] * c["k_dim"] * c["v_dim"]  # numbers per DeltaNet layer, whatever the length
    per_token = 2 * c["kv_heads"] * c["head_dim"]  # K and V numbers per token per attention layer
    kinds = [N_("Gated DeltaNet")] * (c["interval"] - 1) + [N_("gated attention (KV cache)")]
    rows = []
    for layer, kind in enumerate(kinds, start=1):
        attention = layer % c["interval"] == 0
        rows.append([layer, _(kind), toy_kv_per_token * t_toy if attention else toy_state,
                     *((per_token * n) if attention else state for n in CONTEXTS)])
    columns = [N_("layer"), N_("kind"), _("toy, {t} tokens").format(t=t_toy),
               *(_("Qwen3-Next, {n} tokens").format(n=count(n)) for n in CONTEXTS)]
    return pd.DataFrame(rows, columns=columns)


def deltanet_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The overwrite, the three forms, M recomputed from the paper's transitions, the state's size, signed rows."""
    plain, delta = (run(p.config) for p in panels)
    config, trace = delta.config, delta.trace
    parts = trace.kernel_parts
    v1, v2, recalled, summed = overwrite_demo()
    overwrite_gap = float(np.max(np.abs(recalled - v2)))
    recurrent_gap = float(np.max(np.abs(parts.recurrent_heads - trace.heads)))
    chunked_gap = float(np.max(np.abs(parts.chunked_heads - trace.heads)))
    t, hs = trace.q.shape[1], trace.q.shape[-1]
    transitions = [np.exp(parts.g[0, m]) * (np.eye(hs) - parts.beta[0, m] * np.outer(parts.k_hat[0, m], parts.k_hat[0, m]))
                   for m in range(t)]  # head 0's A_m, (hs, hs) each
    last = t - 1
    row, carried = np.zeros(t), parts.q_hat[0, last]  # M's last row of head 0, from the last key back
    for j in range(last, -1, -1):
        row[j] = parts.beta[0, j] * parts.k_hat[0, j] @ carried
        carried = transitions[j] @ carried
    matrix_gap = float(np.max(np.abs(row - trace.weights[0, last])))
    steps = decode_variant_run(delta)
    long_steps = decode_variant_run(run(replace(config, tokens=tuple(f"w{i}" for i in range(LONG_TOKENS)))))
    sizes = {s.numbers for s in steps} | {s.numbers for s in long_steps}
    kv_per_token = 2 * config.n_heads * config.head_size
    sums = trace.weights.sum(axis=-1)  # (nh, T)
    negative = int((trace.weights < 0).sum())
    claims = (
        Claim(_("The delta rule overwrites: two tokens with the same key and β = α = 1 leave the state recalling the "
                "second value (max |Δ| = {gap}, from the ε of the L2 norm); a linear-attention state would recall their sum (first "
                "entry {summed:.3f} = {v1:.3f} + {v2:.3f}).").format(gap=tiny(overwrite_gap), summed=summed[0],
                                                                    v1=v1[0], v2=v2[0]),
              overwrite_gap <= 1e-5 and not np.allclose(summed, v2)),
        Claim(_("The recurrence, the chunked form ({chunk} tokens a chunk) and M V give the same heads (max |Δ| = "
                "{recurrent} and {chunked}).").format(chunk=parts.chunk, recurrent=tiny(recurrent_gap),
                                                      chunked=tiny(chunked_gap)),
              recurrent_gap <= 1e-12 and chunked_gap <= 1e-12),
        Claim(_("M's last row in head 0, recomputed here as β_j k̂_jᵀ(A_(j+1) ⋯ A_i) q̂_i from the explicit matrices "
                "A_m = α_m(I − β_m k̂_m k̂_mᵀ), is the engine's (max |Δ| = {gap}).").format(gap=tiny(matrix_gap)),
              matrix_gap <= 1e-12),
        Claim(_("The decoder keeps {first} numbers after 1 token, {last} after {t} and {long} after {long_t}; a KV "
                "cache would hold {kv} after {t} and {kv_long} after {long_t}.").format(
            first=steps[0].numbers, last=steps[-1].numbers, t=len(steps), long=long_steps[-1].numbers,
            long_t=LONG_TOKENS, kv=kv_per_token * len(steps), kv_long=kv_per_token * LONG_TOKENS),
              len(sizes) == 1),
        Claim(_("{negative} of M's entries are negative and its row sums run from {low:.3f} to {high:.3f}: signed "
                "weights with no fixed sum, on a scale centred on 0.").format(
            negative=negative, low=float(sums.min()), high=float(sums.max())), negative > 0),
    )
    figures = (
        Grid(plain.trace.weights[:1], plain.query_labels, plain.key_labels, [_("softmax, head 0")], max_cols=1,
             mask=plain.mask),
        Grid(trace.weights[:1], plain.query_labels, plain.key_labels, [_("Gated DeltaNet M, head 0")],
             kind="signed_weights", max_cols=1, mask=plain.mask),
    )
    tables = ((_("What four layers keep while decoding, laid out as Qwen3-Next and Qwen3.5 do (three Gated DeltaNet, "
                 "then one gated attention; numbers per layer: the toy's, and Qwen3-Next-80B-A3B's from transformers' "
                 "Qwen3NextConfig)."), stack_table(len(steps), steps[-1].numbers, kv_per_token)),)
    return Findings(figures, claims, tables, note=_("The softmax head is on 0..1; M is on its own scale "
                                                    "centred on 0 (blue below 0): signed, with no fixed row sum."))


CAUSAL = replace(BASE, mask="causal")

LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="deltanet",
        short_title=N_("Gated DeltaNet"),
        title=N_("Gated DeltaNet: a state that overwrites, and the matrix it implies"),
        question=N_("Before you look: two tokens write different values under the same key. Does a Gated DeltaNet "
                    "state then recall their sum (as linear attention does) or only the second? And how many numbers "
                    "does its decoder keep after 6 tokens, and after 60?"),
        source=N_("Yang, Kautz & Hatamizadeh, Gated Delta Networks (arXiv 2412.06464); Qwen3-Next"),
        source_url="https://arxiv.org/abs/2412.06464",
        panels=(LessonPanel(N_("Softmax heads"), CAUSAL),
                LessonPanel(N_("Gated DeltaNet heads"), replace(CAUSAL, kernel="deltanet"))),
        explanation=N_(
            "Each head keeps a matrix S. For every token it first decays S by α_t, then asks what S already recalls "
            "for the key k_t, and writes only the correction β_t (v_t − recalled): with β = 1 the old value under "
            "that key is replaced, not added to, and the query reads o_t = S_t q_t. Because S is linear in the values, "
            "o_i = Σ_j M_ij v_j for a matrix M made of the decays and corrections: that is what Heads draws. It can be "
            "negative (a later token erased part of v_j) and its rows have no fixed sum. Qwen3-Next and Qwen3.5 use "
            "three such layers for every softmax (gated) attention layer, so most layers keep a state of constant "
            "size."
        ),
        findings=deltanet_findings,
    ),
)
