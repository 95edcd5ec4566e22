"""The notebook's cell for QK-norm's step (``qk_norm``, after the heads are split and shared, before positions):
the gains as data, the RMSNorm in NumPy, and asserts against the engine's q̂ and k̂ and the length bound that makes
every logit bounded. Used by ``ui.charts.notebook_kernels.KERNEL_CELLS``; no streamlit in here."""

from __future__ import annotations

from ui.charts.notebook_cells import Cell, Context, _number, array_source, check, comment
from ui.i18n import _


def qk_norm_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    params = ctx.result.kernel_params  # QKNormParams: the gains and eps the engine used
    q_hat = t.q if t.q_unrotated is None else t.q_unrotated  # (nh, Tq, hs) before a scheme turns it
    k_hat = t.k if t.k_unrotated is None else t.k_unrotated  # (kv, Tk, hs)
    code = (comment(_("QK-norm: each row of each head's q and k is divided by its root mean square over the hs "
                      "features, then multiplied by a learned gain (the app's, embedded), before positions turn "
                      "them")) + "\n"
            f"g_q = {array_source(params.gain_q)}  # (hs,)\n"
            f"g_k = {array_source(params.gain_k)}  # (hs,)\n"
            f"eps = {_number(params.eps)}\n"
            "\n"
            "def rms_norm(x, gain):\n"
            "    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain  # (heads, T, hs)\n"
            "\n"
            "Q_h = rms_norm(Q_h, g_q)  # (nh, T_q, hs)\n"
            "K_h = rms_norm(K_h, g_k)  # (nh or kv, T_k, hs)")
    bound = ("# " + _("every row is at most sqrt(hs) * max|g| long: no scaled score can pass s * hs * max|g_q| * "
                      "max|g_k|") + "\n"
             "assert np.all(np.linalg.norm(Q_h, axis=-1) <= np.sqrt(hs) * np.abs(g_q).max())\n"
             "assert np.all(np.linalg.norm(K_h, axis=-1) <= np.sqrt(hs) * np.abs(g_k).max())")
    expected = {"g_q": params.gain_q, "g_k": params.gain_k, "Q_hat": q_hat,
                "K_hat": k_hat[ctx.reads] if ctx.shared else k_hat}
    asserts = "\n".join([check("g_q"), check("g_k"), check("Q_h", "Q_hat"), check("K_h", "K_hat"), bound])
    return Cell(code, asserts, expected)
