"""The notebook's cells for sparse selection (issue 34): MoBA's block gate, DSA's lightning indexer and the softmax
over the kept keys, one per step slug of ``ui.pipeline.kernel_steps_sparse``, each with its assert against the
engine's own intermediates (``trace.kernel_parts``). Registered in ``ui.charts.notebook_kernels.KERNEL_CELLS``."""

from __future__ import annotations

from ui.charts.notebook_cells import Cell, Context, _number, array_source, check, comment
from ui.i18n import _


def _moba_gate_cell(ctx: Context) -> Cell:
    parts = ctx.result.trace.kernel_parts
    code = (comment(_("MoBA: keys in blocks of B; block b's gate for query i is q_i . (the block's mean key); query i "
                      "keeps its own block and the best earlier ones, k blocks in all, never a later block")) + "\n"
            f"B, k_top = {parts.block}, {parts.topk}  # block size, blocks kept per query\n"
            "starts = np.arange(0, T_k, B)  # (nb,): where each block starts\n"
            "sizes = np.diff(np.append(starts, T_k))  # (nb,): the last block may be shorter\n"
            "means = np.add.reduceat(K_h, starts, axis=1) / sizes[:, None]  # (nh, nb, hs): each block's mean key\n"
            "own = np.arange(T_q) // B  # (T_q,): the block each query stands in\n"
            "b = np.arange(len(starts))  # (nb,)\n"
            "gate = np.where(b > own[:, None], -np.inf, Q_h @ means.transpose(0, 2, 1))  # (nh, T_q, nb)\n"
            "forced = np.where(b == own[:, None], np.inf, gate)  # its own block ranks first\n"
            "order = np.argsort(-forced, axis=-1, kind='stable')  # (nh, T_q, nb): best first, ties the earlier\n"
            "chosen = np.zeros(gate.shape, dtype=bool)\n"
            "np.put_along_axis(chosen, order[..., :k_top], True, axis=-1)\n"
            "chosen &= b <= own[:, None]  # never a block after the query's own\n"
            "kept = chosen[..., np.arange(T_k) // B] & M  # (nh, T_q, T_k): the keys each query reads")
    expected = {"means": parts.block_means, "gate": parts.gate, "chosen": parts.chosen, "kept": parts.kept}
    asserts = "\n".join([check("means"), check("gate"), 'assert np.array_equal(chosen, app["chosen"])',
                         'assert np.array_equal(kept, app["kept"])'])
    return Cell(code, asserts, expected)


def _dsa_index_cell(ctx: Context) -> Cell:
    parts, params = ctx.result.trace.kernel_parts, ctx.result.kernel_params
    code = (comment(_("DSA's lightning indexer (its own weights, the app's): I[t, s] = sum_j w[t, j] ReLU(qI[t, j] . "
                      "kI[s] / sqrt(dI)); each query keeps its k best earlier keys, the same for every head")) + "\n"
            f"W_iq = {array_source(params.w_q)}  # (C, HI*dI)\n"
            f"W_ik = {array_source(params.w_k)}  # (C, dI)\n"
            f"W_iw = {array_source(params.w_w)}  # (C, HI)\n"
            f"H_I, d_I, k_top = {params.heads}, {params.size}, {params.topk}\n"
            "q_I = (X @ W_iq).reshape(T_q, H_I, d_I)  # (T_q, HI, dI)\n"
            "raw = X @ W_ik  # (T_k, dI)\n"
            "centred = raw - raw.mean(axis=-1, keepdims=True)\n"
            f"k_I = centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + {_number(1e-6)})  # LayerNorm\n"
            "w_I = X @ W_iw / np.sqrt(H_I)  # (T_q, HI)\n"
            "relu = np.maximum(np.einsum('thd,sd->ths', q_I, k_I) / np.sqrt(d_I), 0.0)  # (T_q, HI, T_k)\n"
            "I = np.where(M, np.einsum('th,ths->ts', w_I, relu), -np.inf)  # (T_q, T_k): -inf after the query\n"
            "order = np.argsort(-I, axis=-1, kind='stable')  # best first, ties the earlier\n"
            "kept = np.zeros(I.shape, dtype=bool)\n"
            "np.put_along_axis(kept, order[:, :k_top], True, axis=-1)\n"
            "kept = kept & M  # (T_q, T_k): every head reads these keys")
    expected = {"k_I": parts.index_k, "I": parts.index, "kept": parts.kept[0]}
    asserts = "\n".join([check("k_I"), check("I"), 'assert np.array_equal(kept, app["kept"])'])
    return Cell(code, asserts, expected)


def _sparse_keep_cell(ctx: Context) -> Cell:
    trace = ctx.result.trace
    parts = trace.kernel_parts
    extra = "np.exp(-m) + " if trace.null_key else ""  # softmax_1: the null key's term in the denominator
    floor = "np.maximum(L.max(axis=-1, keepdims=True), 0.0)" if trace.null_key else \
        "np.where(np.isfinite(L.max(axis=-1, keepdims=True)), L.max(axis=-1, keepdims=True), 0.0)"
    code = (f"def softmax_rows(L):  # a masked logit (-inf) gets weight 0\n"
            f"    m = {floor}  # (nh, T_q, 1)\n"
            "    e = np.exp(L - m)  # (nh, T_q, T_k)\n"
            f"    total = {extra}e.sum(axis=-1, keepdims=True)  # (nh, T_q, 1)\n"
            "    return e / np.where(total > 0, total, 1.0)\n"
            "\n"
            "A = softmax_rows(np.where(kept, L, -np.inf))  # (nh, T_q, T_k): over the kept keys only\n"
            "A_dense = softmax_rows(L)  # (nh, T_q, T_k): over every allowed key\n"
            "gap = np.linalg.norm(A @ V_h - A_dense @ V_h, axis=-1)  # (nh, T_q): ||o_sparse - o_dense||")
    expected = {"A": trace.weights, "A_dense": parts.dense_weights, "gap": parts.gap}
    return Cell(code, "\n".join([check("A"), check("A_dense"), check("gap")]), expected)


SPARSE_CELLS = {"moba_gate": _moba_gate_cell, "dsa_index": _dsa_index_cell, "sparse_keep": _sparse_keep_cell}
