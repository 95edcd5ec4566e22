"""Lesson 9, GQA and MQA: groups of query heads read one key/value head, and the cache shrinks by nh/kv."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, head_titles, tiny


def gqa_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Grouped heads read the same keys and values but keep their own queries; the cache shrinks by nh/kv."""
    grouped, single = (run(p.config) for p in panels)
    trace, nh = grouped.trace, grouped.config.n_heads
    shared = float(np.max(np.abs(trace.scores[1] - trace.q[1] @ trace.k[0].T)))  # head 1 reads K/V head 0
    differ = float(np.max(np.abs(trace.weights[0] - trace.weights[1])))
    rows = []
    for kv in (nh, grouped.config.key_value_heads, single.config.key_value_heads):
        t = run(replace(grouped.config, kv_heads=kv)).trace
        rows.append({"K/V heads": kv, "K shape": str(t.k.shape), "cache numbers": t.k.size + t.v.size,
                     "cache bytes (float64)": t.k.nbytes + t.v.nbytes})
    table = pd.DataFrame(rows, index=pd.Index(["MHA", "GQA", "MQA"], name="layout"))
    sizes = table["cache numbers"].to_numpy()
    claims = (
        Claim(f"Query heads 0 and 1 share key/value head 0: head 1's scores are its q times K_0 (max |Δ| = "
              f"{tiny(shared)}).", shared <= 1e-12),
        Claim(f"They still attend differently, with their own queries: their weights differ by up to {differ:.3f}.",
              differ > 1e-3),
        Claim(f"The cache holds {sizes[0]} numbers with {nh} K/V heads, {sizes[1]} with "
              f"{grouped.config.key_value_heads}, {sizes[2]} with 1: nh/kv times fewer.",
              bool(sizes[0] == sizes[1] * nh // grouped.config.key_value_heads == sizes[2] * nh)),
    )
    figures = (Grid(np.concatenate([grouped.trace.weights, single.trace.weights]), grouped.query_labels,
                    grouped.key_labels, head_titles("GQA, ", nh) + head_titles("MQA, ", nh)),)
    return Findings(figures, claims, (("Keys and values for this sentence under each layout.", table),))


LESSONS = (
    Lesson(
        key="gqa",
        title="GQA and MQA: fewer key/value heads",
        short_title="GQA / MQA",
        question="What do grouped-query and multi-query attention share, and what do they save?",
        source="answered in Ainslie et al. 2023 (GQA) and Shazeer 2019 (MQA)",
        source_url="https://arxiv.org/abs/2305.13245",
        panels=(
            LessonPanel("GQA: 4 query heads, 2 K/V heads", replace(BASE, kv_heads=2)),
            LessonPanel("MQA: 4 query heads, 1 K/V head", replace(BASE, kv_heads=1)),
        ),
        explanation=(
            "Each query head keeps its own W_Q, but groups of query heads share one key head and one value head. "
            "The heads of a group look up the same keys and mix the same values, with different questions, so "
            "their weights still differ. K and V, and the decoder's cache that holds them, shrink by nh/kv."
        ),
        findings=gqa_findings,
    ),
)
