"""Lesson 10, the KV cache: decoding gives full causal attention's rows, and each step is memory-bound."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mha_core.config import run
from mha_core.decoder import assembled_weights, decode_run, decoder_config, max_difference, step_cost
from ui.charts.numbers import count
from ui.i18n import N_, _
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
        Claim(_("Token by token with the cache, the rows are those of full causal attention (max |Δ| = {gap}).").format(
            gap=tiny(gap)), gap <= 1e-12),
        Claim(_("Every step computes the same amount fresh ({fresh} numbers) while the cache it reads grows by "
                "{growth} numbers per token.").format(fresh=count(step_cost(last).fresh), growth=count(last.cache.numbers // t)),
              len(fresh) == 1),
        Claim(_("The last step does {flops} flops on {n_bytes} bytes of cache: {decode:.2f} flops per byte, {t}× less "
                "than attention over the whole sentence at once ({prefill:.2f}). Hardware does ~10-100 flops per byte "
                "it reads, so decoding waits on memory.").format(flops=count(flops), n_bytes=count(last.cache.nbytes),
                                                                decode=decode_intensity, t=t,
                                                                prefill=prefill_intensity),
              decode_intensity < 1 and abs(prefill_intensity / decode_intensity - t) < 1e-9),
    )
    figures = (Grid(np.stack([assembled[0], result.trace.weights[0]]), result.query_labels, result.key_labels,
                    [_("decoded with the cache"), _("full causal attention")], max_cols=2),)
    table = cache_table(steps, result.query_labels, result.config.n_heads)
    return Findings(figures, claims, ((_("The cache, step by step."), table),))


LESSONS = (
    Lesson(
        key="kv_cache",
        title=N_("The KV cache: why decoding is memory-bound"),
        short_title=N_("KV cache"),
        question=N_("What does the KV cache keep, and why is generating text limited by memory, not arithmetic?"),
        source=N_("answered in Pope et al. 2022, Efficiently Scaling Transformer Inference"),
        source_url="https://arxiv.org/abs/2211.05102",
        panels=(LessonPanel(N_("Causal self-attention, decoded token by token"), replace(BASE, mask="causal")),),
        explanation=N_(
            "A decoder generates one token at a time, and each new token attends to every earlier one. The cache "
            "keeps the earlier keys and values, so a step computes only one query, one key and one value, and the "
            "rows it builds are exactly full causal attention's. But each step reads the whole cache to do one "
            "row of arithmetic: few flops per byte, so the speed of memory, not of arithmetic, sets the pace."
        ),
        findings=kv_cache_findings,
    ),
)
