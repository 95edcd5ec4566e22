"""The notebook's cells for gated attention's and learned sinks' own steps (issue 34), one per step slug of
``ui.pipeline.kernel_steps_gated``, each with its assert against the engine's intermediates (``trace.kernel_parts``);
registered in ``ui.charts.notebook_kernels.KERNEL_CELLS``. No streamlit in here."""

from __future__ import annotations

from ui.charts.notebook_cells import Cell, Context, array_source, check, comment
from ui.i18n import _


def output_gate_cell(ctx: Context) -> Cell:
    parts, params = ctx.result.trace.kernel_parts, ctx.result.kernel_params
    code = (comment(_("The output gate (Qwen3-Next): sigma(X W_theta), one number per head, token and feature, "
                      "multiplies each head's A V before W_O (W_theta: the app's, drawn from the seed)")) + "\n"
            f"W_theta = {array_source(params.w_gate)}  # (C, nh*hs)\n"
            "G = 1.0 / (1.0 + np.exp(-(X @ W_theta)))  # (T_q, nh*hs): each gate in (0, 1)\n"
            "G_h = G.reshape(T_q, nh, hs).transpose(1, 0, 2)  # (nh, T_q, hs): head h's gates\n"
            "mixed = heads * G_h  # (nh, T_q, hs): Y' = Y * sigma(X W_theta), what the heads concatenate\n"
            "opening = G_h.mean(axis=-1)  # (nh, T_q): how far each head's gate opens per token")
    expected = {"G_h": parts.gate, "mixed": parts.gated_heads, "opening": parts.opening}
    return Cell(code, "\n".join([check("G_h"), check("mixed"), check("opening")]), expected)


def sink_weights_cell(ctx: Context) -> Cell:
    parts, trace = ctx.result.trace.kernel_parts, ctx.result.trace
    code = (comment(_("Learned sinks (gpt-oss): one logit s_h per head joins every row, the softmax is taken, and "
                      "its column is dropped (s: the app's, drawn from the seed)")) + "\n"
            f"s = {array_source(parts.sinks)}  # (nh,)\n"
            "sink_column = np.broadcast_to(s[:, None, None], (nh, T_q, 1))  # (nh, T_q, 1)\n"
            "L_s = np.concatenate([L, sink_column], axis=-1)  # (nh, T_q, T_k + 1)\n"
            "e = np.exp(L_s - L_s.max(axis=-1, keepdims=True))  # (nh, T_q, T_k + 1): the sink keeps every max finite\n"
            "P = e / e.sum(axis=-1, keepdims=True)  # (nh, T_q, T_k + 1): rows sum to 1\n"
            "A = P[..., :-1]  # (nh, T_q, T_k): the sink's column dropped, rows sum to less than 1\n"
            "sink_share = 1.0 - A.sum(axis=-1)  # (nh, T_q): what the sink took")
    expected = {"A": trace.weights, "sink_share": parts.sink_share}
    return Cell(code, "\n".join([check("A"), check("sink_share")]), expected)
