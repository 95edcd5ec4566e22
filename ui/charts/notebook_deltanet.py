"""The notebook's cells for Gated DeltaNet's steps (``ui.pipeline.kernel_steps_deltanet``), one per step slug, each with
its assert against the engine's own intermediates (``trace.kernel_parts``, a ``mha_core.deltanet.DeltaNetParts``).
Registered in ``ui.charts.notebook_kernels.KERNEL_CELLS``; no streamlit in here."""

from __future__ import annotations

from ui.charts.notebook_cells import Cell, Context, array_source, check, comment
from ui.i18n import _


def _deltanet_gates_cell(ctx: Context) -> Cell:
    p, parts = ctx.result.kernel_params, ctx.result.trace.kernel_parts
    code = (comment(_("Gated DeltaNet's own weights (seed {seed}): β_t = σ(x_t W_β), and Qwen3-Next's decay "
                      "α_t = exp(g_t), g_t = −exp(A_log)·softplus(x_t W_a + dt_bias), one per head").format(
                seed=ctx.config.seed)) + "\n"
            f"W_beta = {array_source(p.w_beta)}  # (C, nh)\n"
            f"W_a = {array_source(p.w_a)}  # (C, nh)\n"
            f"A_log = {array_source(p.a_log)}  # (nh,)\n"
            f"dt_bias = {array_source(p.dt_bias)}  # (nh,)\n"
            "beta = (1 / (1 + np.exp(-(X @ W_beta)))).T  # (nh, T_q): the step size\n"
            "g = (-np.exp(A_log) * np.logaddexp(0.0, X @ W_a + dt_bias)).T  # (nh, T_q): log of the decay\n"
            "alpha = np.exp(g)  # (nh, T_q)\n"
            "q_hat = Q_h / np.sqrt((Q_h ** 2).sum(-1, keepdims=True) + 1e-6) / np.sqrt(hs)  # (nh, T_q, hs)\n"
            "k_hat = K_h / np.sqrt((K_h ** 2).sum(-1, keepdims=True) + 1e-6)  # (nh, T_k, hs): length 1")
    expected = {"beta": parts.beta, "g": parts.g, "q_hat": parts.q_hat, "k_hat": parts.k_hat}
    return Cell(code, "\n".join(check(name) for name in expected), expected)


def _deltanet_matrix_cell(ctx: Context) -> Cell:
    parts = ctx.result.trace.kernel_parts
    code = (comment(_("M_ij = β_j k̂_j · (A_(j+1) ... A_i q̂_i) with A_m = α_m (I − β_m k̂_m k̂_mᵀ): each row's vector "
                      "is carried back through the transitions, from the last key to the first")) + "\n"
            "A = np.zeros((nh, T_q, T_q))  # (nh, T_q, T_k): the implied matrix M, the weights\n"
            "r = q_hat.copy()  # (nh, T_q, hs)\n"
            "for j in reversed(range(T_q)):\n"
            "    reach = np.einsum('hid,hd->hi', r[:, j:], k_hat[:, j])  # (nh, T_q - j): k_j . r_i for rows i >= j\n"
            "    A[:, j:, j] = beta[:, j, None] * reach\n"
            "    r[:, j:] = alpha[:, j, None, None] * (r[:, j:] - beta[:, j, None, None] * reach[..., None] "
            "* k_hat[:, j, None, :])\n"
            "sim = np.tril(q_hat @ k_hat.transpose(0, 2, 1))  # (nh, T_q, T_k): M without decay or correction")
    expected = {"A": ctx.result.trace.weights, "sim": parts.similarity}
    return Cell(code, "\n".join([check("A"), check("sim")]), expected)


def _deltanet_forms_cell(ctx: Context) -> Cell:
    parts = ctx.result.trace.kernel_parts
    code = (comment(_("The same heads from the recurrence: decay the state, take out what it recalls for k_t, write "
                      "the correction β_t (v_t − recalled), read with q_t. S never grows with T")) + "\n"
            "S_state = np.zeros((nh, hs, V_h.shape[-1]))  # (nh, hs, hs): key features x value features\n"
            "rows = []\n"
            "for t in range(T_q):\n"
            "    S_state = alpha[:, t, None, None] * S_state  # (nh, hs, hs)\n"
            "    recalled = np.einsum('hd,hde->he', k_hat[:, t], S_state)  # (nh, hs)\n"
            "    delta = beta[:, t, None] * (V_h[:, t] - recalled)  # (nh, hs)\n"
            "    S_state = S_state + k_hat[:, t, :, None] * delta[:, None, :]  # (nh, hs, hs)\n"
            "    rows.append(np.einsum('hd,hde->he', q_hat[:, t], S_state))  # (nh, hs)\n"
            "recurrent = np.stack(rows, axis=1)  # (nh, T_q, hs): equals A @ V_h\n"
            "assert np.allclose(recurrent, A @ V_h)")
    expected = {"S_state": parts.state, "recurrent": parts.recurrent_heads}
    return Cell(code, "\n".join([check("S_state"), check("recurrent")]), expected)


# Gated DeltaNet's cells by step slug, registered in ``ui.charts.notebook_kernels.KERNEL_CELLS``.
DELTANET_CELLS = {
    "deltanet_gates": _deltanet_gates_cell,
    "deltanet_matrix": _deltanet_matrix_cell,
    "deltanet_forms": _deltanet_forms_cell,
}
