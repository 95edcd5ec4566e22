"""The lesson on sparse selection (issue 34): which keys MoBA and DeepSeek Sparse Attention keep, and what dropping
the others costs. The question is asked before anything is shown; the findings recount the kept keys from the
engine's own selections and recompute the dense rows' lost weight and ||o_sparse − o_dense||. No streamlit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core.config import run
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Grid, Lesson, LessonPanel, tiny

TOKENS = ("the", "cat", "sat", "on", "a", "mat", "and", "slept")
SPARSE = replace(BASE, tokens=TOKENS, mask="causal", sparse_topk=2, sparse_block=2)


def sparse_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Kept keys counted from the engine's selections; dense-row mass on dropped keys and the gap recomputed here."""
    moba, dsa = (run(p.config) for p in panels)
    dense = run(replace(moba.config, kernel="softmax"))  # the same heads, every allowed key
    t, last = len(TOKENS), len(TOKENS) - 1
    k, block = moba.config.sparse_topk, moba.config.sparse_block
    moba_parts, dsa_parts = moba.trace.kernel_parts, dsa.trace.kernel_parts
    own = np.arange(t) // block  # (T,)
    moba_blocks = moba_parts.chosen.sum(axis=-1)  # (nh, T)
    dsa_keys = dsa_parts.kept.sum(axis=-1)  # (nh, T)
    lost_moba = np.where(moba_parts.kept, 0.0, dense.trace.weights).sum(axis=-1)  # (nh, T): dense weight dropped
    lost_dsa = np.where(dsa_parts.kept, 0.0, dense.trace.weights).sum(axis=-1)  # (nh, T)
    gap_moba = np.linalg.norm(moba.trace.heads - dense.trace.heads, axis=-1)  # (nh, T)
    gap_dsa = np.linalg.norm(dsa.trace.heads - dense.trace.heads, axis=-1)  # (nh, T)
    sum_gap = max(float(np.max(np.abs(r.trace.weights.sum(-1) - 1))) for r in (moba, dsa))
    full = [run(replace(p.config, sparse_topk=t)) for p in panels]
    full_gap = max(float(np.max(np.abs(f.trace.output - dense.trace.output))) for f in full)
    claims = (
        Claim(_("MoBA: the last token ({token}) keeps its own block and the best earlier one, k = {k} blocks of "
                "{block}: {kept} of the {allowed} keys it may see.").format(
            token=moba.query_labels[last], k=k, block=block, kept=int(moba_parts.kept[0, last].sum()), allowed=t),
              bool(np.all(moba_blocks == np.minimum(k, own + 1))) and bool(moba_parts.chosen[0, last, own[last]])),
        Claim(_("DSA: every query keeps k = {k} keys (fewer only while fewer exist), chosen by its indexer; the last "
                "token keeps {keys}, the same keys in all {nh} heads.").format(
            k=k, keys=", ".join(dsa.key_labels[j] for j in np.flatnonzero(dsa_parts.kept[0, last])), nh=len(dsa_keys)),
              bool(np.all(dsa_keys == np.minimum(k, np.arange(t) + 1))) and bool(np.all(dsa_parts.kept == dsa_parts.kept[:1]))),
        Claim(_("No selection reads a future key, and no row loses its sum: the kept weights still sum to 1 (max |sum "
                "− 1| = {gap}).").format(gap=tiny(sum_gap)),
              sum_gap <= 1e-12 and not np.any((moba_parts.kept | dsa_parts.kept) & ~np.tri(t, dtype=bool))),
        Claim(_("What it costs, head 0 at the last token: the dense row put {moba:.0%} (MoBA) and {dsa:.0%} (DSA) of "
                "its weight on the dropped keys; ‖o_sparse − o_dense‖ = {gm:.3f} and {gd:.3f}.").format(
            moba=lost_moba[0, last], dsa=lost_dsa[0, last], gm=gap_moba[0, last], gd=gap_dsa[0, last]),
              bool(np.allclose(gap_moba, moba_parts.gap, atol=1e-12) and np.allclose(gap_dsa, dsa_parts.gap, atol=1e-12))),
        Claim(_("With k = T = {t} (every block, every key) both give the dense output exactly: max |Δ| = {gap}.").format(
            t=t, gap=tiny(full_gap)), full_gap <= 1e-12),
    )
    figures = (Grid(np.stack([dense.trace.weights[0], moba.trace.weights[0], dsa.trace.weights[0]]), dense.query_labels,
                    dense.key_labels, [_("dense softmax, head 0"), _("MoBA, head 0"), _("DSA, head 0")], max_cols=3,
                    mask=np.stack([dense.mask, moba_parts.kept[0], dsa_parts.kept[0]])),)
    row = pd.DataFrame({N_("key"): dense.key_labels, N_("dense"): dense.trace.weights[0, last],
                        N_("MoBA"): moba.trace.weights[0, last], N_("DSA"): dsa.trace.weights[0, last],
                        N_("DSA index I"): dsa_parts.index[last]})
    tables = ((_("Row {row}, head 0: the dense weights, the sparse ones (0 where a key was dropped) and DSA's "
                 "index.").format(row=dense.query_labels[last]), row),)
    return Findings(figures, claims, tables, note=_("Grey cells are keys a row does not read: the future under the "
                                                    "causal mask, and the keys each selection dropped."))


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="sparse",
        short_title=N_("Sparse selection"),
        title=N_("Sparse selection: MoBA's blocks and DeepSeek's indexer keep k, the softmax runs over those"),
        question=N_("Before you look: with k = 2, which keys does the last token read under MoBA (blocks of 2) and "
                    "under DeepSeek Sparse Attention? Does its row still sum to 1? And with k = T?"),
        source=N_("issue 34: attention as 2026 models ship it"),
        source_url="",
        panels=(LessonPanel(N_("MoBA, k = 2 blocks of 2"), replace(SPARSE, kernel="moba")),
                LessonPanel(N_("DeepSeek Sparse Attention, k = 2 keys"), replace(SPARSE, kernel="dsa"))),
        explanation=N_(
            "Both choose first and attend after. MoBA scores each block of keys by q · the block's mean key (no "
            "parameter), keeps the query's own block and the best earlier ones, and the causal mask still holds "
            "inside the own block. DeepSeek Sparse Attention runs a small lightning indexer on the layer's input, "
            "I = Σⱼ wⱼ·ReLU(qᴵⱼ·kᴵ), and keeps the k best keys for every head. The softmax then runs over the kept "
            "keys only, so each row still sums to 1; what the dense row gave the dropped keys is lost, and "
            "‖o_sparse − o_dense‖ measures it. With k covering everything nothing is dropped."
        ),
        findings=sparse_findings,
    ),
)
