"""Lesson 9, GQA and MQA: groups of query heads read one key/value head, and the cache shrinks by nh/kv."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from ui.i18n import N_, _
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
        rows.append({N_("K/V heads"): kv, N_("K shape"): str(t.k.shape), N_("cache numbers"): t.k.size + t.v.size,
                     N_("cache bytes (float64)"): t.k.nbytes + t.v.nbytes})
    table = pd.DataFrame(rows, index=pd.Index(["MHA", "GQA", "MQA"], name=_("layout")))
    sizes = table["cache numbers"].to_numpy()
    claims = (
        Claim(_("Query heads 0 and 1 share key/value head 0: head 1's scores are its q times K_0 (max |Δ| = "
                "{gap}).").format(gap=tiny(shared)), shared <= 1e-12),
        Claim(_("They still attend differently, with their own queries: their weights differ by up to "
                "{differ:.3f}.").format(differ=differ), differ > 1e-3),
        Claim(_("The cache holds {mha} numbers with {nh} K/V heads, {gqa} with {kv}, {mqa} with 1: nh/kv times "
                "fewer.").format(mha=sizes[0], nh=nh, gqa=sizes[1], kv=grouped.config.key_value_heads, mqa=sizes[2]),
              bool(sizes[0] == sizes[1] * nh // grouped.config.key_value_heads == sizes[2] * nh)),
    )
    figures = (Grid(np.concatenate([grouped.trace.weights, single.trace.weights]), grouped.query_labels,
                    grouped.key_labels, head_titles("GQA, ", nh) + head_titles("MQA, ", nh)),)
    return Findings(figures, claims, ((_("Keys and values for this sentence under each layout."), table),))


LESSONS = (
    Lesson(
        key="gqa",
        title=N_("GQA and MQA: fewer key/value heads"),
        short_title="GQA / MQA",
        question=N_("What do grouped-query and multi-query attention share, and what do they save?"),
        source=N_("answered in Ainslie et al. 2023 (GQA) and Shazeer 2019 (MQA)"),
        source_url="https://arxiv.org/abs/2305.13245",
        panels=(
            LessonPanel(N_("GQA: 4 query heads, 2 K/V heads"), replace(BASE, kv_heads=2)),
            LessonPanel(N_("MQA: 4 query heads, 1 K/V head"), replace(BASE, kv_heads=1)),
        ),
        explanation=N_(
            "Each query head keeps its own W_Q, but groups of query heads share one key head and one value head. "
            "The heads of a group look up the same keys and mix the same values, with different questions, so "
            "their weights still differ. K and V, and the decoder's cache that holds them, shrink by nh/kv."
        ),
        findings=gqa_findings,
    ),
)
