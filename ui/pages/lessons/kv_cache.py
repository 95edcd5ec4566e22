"""Lesson 10, the KV cache: decoding gives full causal attention's rows, and each step is memory-bound."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mha_core.config import run
from mha_core.decoder import assembled_weights, decode_run, decoder_config, max_difference, step_cost
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, tiny
from ui.pipeline.cache_table import cache_table


def kv_cache_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Decoding with the cache gives the causal rows; each step reads the whole cache for one row of work."""
    (panel,) = panels
    result = run(decoder_config(panel.config))
    steps = decode_run(result)
    t = len(steps)
    assembled = assembled_weights(steps, t - 1)  # (nh, T, T)
    gap = max_difference(steps, t - 1, result.trace.weights)
    last = steps[-1]
    flops = 2 * last.weights.size * (last.cache.k.shape[-1] + last.cache.v.shape[-1])  # q.k and A.V of one row
    decode_intensity = flops / last.cache.nbytes  # flops per byte of cache read
    prefill_intensity = decode_intensity * t  # full attention uses each cached key and value for all T queries
    fresh = {step_cost(step).fresh for step in steps}  # numbers each step computes anew
    claims = (
        Claim(f"Token by token with the cache, the rows are those of full causal attention (max |Δ| = {tiny(gap)}).",
              gap <= 1e-12),
        Claim(f"Every step computes the same amount fresh ({step_cost(last).fresh} numbers) while the cache it "
              f"reads grows by {last.cache.numbers // t} numbers per token.", len(fresh) == 1),
        Claim(f"The last step does {flops} flops on {last.cache.nbytes} bytes of cache: {decode_intensity:.2f} "
              f"flops per byte, {t}× less than attention over the whole sentence at once "
              f"({prefill_intensity:.2f}). Hardware does ~10-100 flops per byte it reads, so decoding waits on memory.",
              decode_intensity < 1 and abs(prefill_intensity / decode_intensity - t) < 1e-9),
    )
    figures = (Grid(np.stack([assembled[0], result.trace.weights[0]]), result.query_labels, result.key_labels,
                    ["decoded with the cache", "full causal attention"], max_cols=2),)
    table = cache_table(steps, result.query_labels, result.config.n_heads)
    return Findings(figures, claims, (("The cache, step by step.", table),))


LESSONS = (
    Lesson(
        key="kv_cache",
        title="The KV cache: why decoding is memory-bound",
        short_title="KV cache",
        question="What does the KV cache keep, and why is generating text limited by memory, not arithmetic?",
        source="answered in Pope et al. 2022, Efficiently Scaling Transformer Inference",
        source_url="https://arxiv.org/abs/2211.05102",
        panels=(LessonPanel("Causal self-attention, decoded token by token", replace(BASE, mask="causal")),),
        explanation=(
            "A decoder generates one token at a time, and each new token attends to every earlier one. The cache "
            "keeps the earlier keys and values, so a step computes only one query, one key and one value, and the "
            "rows it builds are exactly full causal attention's. But each step reads the whole cache to do one "
            "row of arithmetic: few flops per byte, so the speed of memory, not of arithmetic, sets the pace."
        ),
        findings=kv_cache_findings,
    ),
)
