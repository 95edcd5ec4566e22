"""The steps of sparse selection (issue 34) on Step by step: how MoBA's block gate or DSA's lightning indexer chooses
the keys, then the softmax over the kept keys beside the dense row, with ||o_sparse − o_dense|| per query.

Every matrix is an array of the engine's trace (``trace.kernel_parts``: ``MobaParts``, ``DsaParts``). Registered by
slug in ``ui.pipeline.kernel_steps.KERNEL_STEPS``. Pure: no streamlit.
"""

from __future__ import annotations

import numpy as np

from ui.i18n import _
from ui.pipeline.records import Panel, Step, StepInputs, dim_labels, qk_axes, shape_text


def _block_labels(count: int, block: int, tk: int) -> list[str]:
    """'b0 (0–1)', 'b1 (2–3)', ...: each block with the keys it holds."""
    return [f"b{b} ({b * block}–{min((b + 1) * block, tk) - 1})" for b in range(count)]


def moba_gate_step(inputs: StepInputs, head: int, cell=None) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    tk = trace.k.shape[1]
    count = parts.gate.shape[-1]
    blocks = _block_labels(count, parts.block, tk)
    hs = trace.q.shape[-1]
    future = np.isneginf(parts.gate[head])  # (Tq, nb)
    panels = (
        Panel(_("mean key of each block (head {head})").format(head=head), parts.block_means[head], blocks,
              dim_labels(hs), _("mean k"), axis_titles=(_("block"), _("feature"))),
        Panel(_("gate s = q_i · mean(K_b) (head {head})").format(head=head), np.where(future, 0.0, parts.gate[head]),
              inputs.query_labels, blocks, _("gate"), axis_titles=(_("query i"), _("block")), allowed=~future),
        Panel(_("blocks kept (1) by query i (head {head})").format(head=head), parts.chosen[head].astype(float), inputs.query_labels,
              blocks, _("kept"), kind="mask", axis_titles=(_("query i"), _("block"))),
    )
    why = _("The {tk} keys are cut into {count} blocks of B = {block}. The gate of block b for query i is the dot "
            "product of q_i with the block's **mean key**: no learned parameter. Query i always keeps its own block "
            "(where the causal mask still holds) and the earlier blocks with the highest gates, **k = {k} blocks in "
            "all**; a block after the query's own is never chosen (grey).").format(
        tk=tk, count=count, block=parts.block, k=parts.topk)
    formula = (r"s_{ib} = q_i\cdot\frac{1}{|B_b|}\sum_{j\in B_b} k_j,\qquad \mathcal{S}_i = \{b_i\}\cup"
               r"\operatorname{top}_{k-1}\{\,s_{ib} : b < b_i\,\},\qquad b_i = \lfloor i/B \rfloor")
    shapes = (f"Q_{head} {shape_text(trace.q[head])} @ mean(K)ᵀ {shape_text(parts.block_means[head].T)} -> "
              f"{shape_text(parts.gate[head])}")
    return Step("moba_gate", _("Choose blocks: q · mean key, top-k (MoBA)"), why, formula, shapes, panels)


def dsa_index_step(inputs: StepInputs, head: int, cell=None) -> Step:
    parts = inputs.trace.kernel_parts
    heads_i, size = parts.index_q.shape[1], parts.index_q.shape[2]
    causal = np.isfinite(parts.index)  # (Tq, Tk)
    q, k = inputs.query_labels, inputs.key_labels
    panels = (
        Panel(_("indexer keys kᴵ = LayerNorm(x Wᴵ_K)"), parts.index_k, k, dim_labels(size), "kᴵ",
              axis_titles=(_("key j"), _("feature"))),
        Panel(_("indexer head weights w = x Wᴵ_w / √Hᴵ"), parts.index_w, q, [f"j{j}" for j in range(heads_i)], "w",
              axis_titles=(_("query i"), _("indexer head"))),
        Panel(_("index I (every head shares it)"), np.where(causal, parts.index, 0.0), q, k, "I", cell=cell,
              axis_titles=qk_axes(), allowed=causal),
        Panel(_("keys kept (1): the top-k of each row"), parts.kept[0].astype(float), q, k, _("kept"), kind="mask",
              cell=cell, axis_titles=qk_axes()),
    )
    why = _("A small **lightning indexer** with {heads} heads of {size} features reads the layer's input x (its own "
            "weights, not W_Q or W_K) and scores every earlier token: each indexer head's ReLU(qᴵ·kᴵ), weighted by "
            "w and summed. Each query keeps the **k = {k} keys** with the highest index, the same keys for every "
            "attention head; a decoder keeps one indexer key kᴵ per token besides K and V.").format(
        heads=heads_i, size=size, k=parts.topk)
    formula = (r"I_{t,s} = \sum_{j=1}^{H^I} w_{t,j}\,\mathrm{ReLU}\!\Big(\frac{q^I_{t,j}\cdot k^I_s}{\sqrt{d^I}}\Big),"
               r"\qquad \mathcal{S}_t = \operatorname{top}_k\{\,I_{t,s} : s \le t\,\}")
    shapes = f"qᴵ {shape_text(parts.index_q)}, kᴵ {shape_text(parts.index_k)} -> I {shape_text(parts.index)}"
    return Step("dsa_index", _("Choose keys: the lightning indexer, top-k (DSA)"), why, formula, shapes, panels)


def sparse_keep_step(inputs: StepInputs, head: int, cell) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    q, k = inputs.query_labels, inputs.key_labels
    causal = parts.dense_weights[head] > 0  # (Tq, Tk): the keys the dense row sees
    heads = [f"h{h}" for h in range(trace.n_heads)]
    panels = (
        Panel(_("A_{head}: kept keys only").format(head=head), trace.weights[head], q, k, _("weight"),
              kind="weights", cell=cell, axis_titles=qk_axes(), allowed=parts.kept[head]),
        Panel(_("dense A_{head}: every allowed key").format(head=head), parts.dense_weights[head], q, k,
              _("weight"), kind="weights", cell=cell, axis_titles=qk_axes(), allowed=causal),
        Panel(_("‖o_sparse − o_dense‖ (query × head)"), parts.gap.T, q, heads, "‖Δo‖",
              axis_titles=(_("query i"), _("head"))),
    )
    dropped = np.where(parts.kept[head], 0.0, parts.dense_weights[head]).sum(axis=-1)  # (Tq,)
    worst = int(np.argmax(parts.gap[head]))
    why = _("The usual scaled logits, but the softmax runs over the **kept keys only**: each row still sums to 1. "
            "Beside it, the dense row over every allowed key. Head {head} keeps {kept} of {allowed} allowed "
            "(query, key) pairs; the dense rows put **{dropped}** of their weight, on average, on keys the selection "
            "dropped. The largest ‖o_sparse − o_dense‖ of head {head} is **{gap}**, at query {worst}. With k "
            "covering every block or key the two rows are equal.").format(
        head=head, kept=int(parts.kept[head].sum()), allowed=int(causal.sum()), dropped=f"{dropped.mean():.3f}",
        gap=f"{parts.gap[head, worst]:.4f}", worst=q[worst])
    formula = (r"A_{ij} = \frac{e^{L_{ij}}\,[j\in\mathcal{S}_i]}{\sum_{j'\in\mathcal{S}_i} e^{L_{ij'}}},\qquad "
               r"\Delta_i = \big\|\textstyle\sum_j A_{ij}v_j - \sum_j A^{\mathrm{dense}}_{ij}v_j\big\|")
    shapes = _("{shape}, row by row over the kept keys").format(shape=shape_text(trace.weights[head]))
    return Step("sparse_keep", _("Softmax over the kept keys, beside the dense row (sparse)"), why, formula, shapes,
                panels)


SPARSE_STEPS = {"moba_gate": moba_gate_step, "dsa_index": dsa_index_step, "sparse_keep": sparse_keep_step}
