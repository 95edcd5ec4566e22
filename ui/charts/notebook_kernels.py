"""The notebook's cells for the steps of the other attention kernels (differential, linear, one map), one per step slug
of ``ui.pipeline.kernel_steps``, each with its assert against the engine's own intermediates
(``trace.kernel_parts``). Used by ``ui.pipeline.notebook`` beside ``ui.charts.notebook_cells.STEP_CELLS``; no
streamlit in here. Latent attention (MLA) has no cells yet: its notebook is refused with a message. Whole-line comments
are in the current language (``notebook_cells.comment``), the code the same in every one."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import numpy as np

from ui.charts.labels import said
from ui.charts.notebook_cells import Cell, Context, _mask_source, _number, array_source, check, comment, scheme_source
from ui.charts.notebook_deltanet import DELTANET_CELLS
from ui.charts.notebook_gated import output_gate_cell, sink_weights_cell
from ui.charts.notebook_kernels_sparse import SPARSE_CELLS
from ui.charts.notebook_qknorm import qk_norm_cell
from ui.i18n import _

SCALE_OF_A_HALF = {
    "sqrt_dk": "s = 1 / np.sqrt(h2)  # 1/sqrt(d) of a half: each map has hs/2 features",
    "sqrt_t": "s = 1 / np.sqrt(T_k)  # 1/sqrt(T): seed 001's rule",
    "none": "s = 1.0  # no scaling",
    "temperature": "s = 1 / temperature",
}

MASKED_SOFTMAX = """\
def masked_softmax(L):
    L = np.where(M, L, -np.inf)  # (nh, T_q, T_k): a masked logit is -inf, its weight 0
    m = L.max(axis=-1, keepdims=True)  # (nh, T_q, 1)
    m = np.where(np.isfinite(m), m, 0.0)  # a row with every key masked: its weights stay 0
    e = np.exp(L - m)  # (nh, T_q, T_k)
    total = e.sum(axis=-1, keepdims=True)  # (nh, T_q, 1)
    return e / np.where(total > 0, total, 1.0)  # (nh, T_q, T_k)"""


def _key_heads(ctx: Context, array: np.ndarray) -> np.ndarray:
    """A (kv, ...) array of the engine as the notebook holds it after its K/V sharing step: (nh, ...)."""
    return array[ctx.reads] if ctx.shared else array


# ---- RoPE on each half (differential) ------------------------------------------------------------


def _part_rope_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    source = scheme_source(ctx, {"theta_q": (t.q_angles, "(T_q, hs/4)"), "theta_k": (t.k_angles, "(T_k, hs/4)")})
    angles = ("def half_angles(hs):  # the scheme's angles for heads of hs features, here a half of h2\n"
              + textwrap.indent(source, "    ") + "\n    return theta_q, theta_k\n\n"
              "theta_q, theta_k = half_angles(h2)  # (T_q, hs/4), (T_k, hs/4)\n")
    code = (comment(_("RoPE on each half of a head on its own (the two maps of differential attention): in a half "
                      "of h2 = hs/2 features, pair (d_p, d_(p+h2/2)) turns by position * base^(-2p/h2)")) + "\n"
            "h2 = hs // 2\n" + angles + "\n"
            "def rotate(x, theta):\n"
            "    first, second = x[..., : h2 // 2], x[..., h2 // 2 :]  # (heads, T, h2/2) each\n"
            "    cos, sin = np.cos(theta), np.sin(theta)  # (T, h2/2) each\n"
            "    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)  # (heads, T, h2)\n"
            "\n"
            "Q_h = np.concatenate([rotate(Q_h[..., :h2], theta_q), rotate(Q_h[..., h2:], theta_q)], axis=-1)  # (nh, T_q, hs)\n"
            "K_h = np.concatenate([rotate(K_h[..., :h2], theta_k), rotate(K_h[..., h2:], theta_k)], axis=-1)  # (nh, T_k, hs)")
    expected = {"theta_q": t.q_angles, "theta_k": t.k_angles, "Q_rot": t.q, "K_rot": _key_heads(ctx, t.k)}
    asserts = "\n".join([check("theta_q"), check("theta_k"), check("Q_h", "Q_rot"), check("K_h", "K_rot")])
    return Cell(code, asserts, expected)


# ---- a kernel whose weights are one map of the logits ----------------------------------------------


def _kernel_weights_cell(ctx: Context) -> Cell:
    kernel = ctx.config.attention_kernel
    function = kernel.weights_of.__name__
    code = (comment(_("{title}: {formula} (the kernel's own function, as the app runs it)").format(
                title=said(kernel.weights_title), formula=kernel.formula)) + "\n"
            f"{kernel.weights_source}\n\n"
            f"A = {function}(L)  # (nh, T_q, T_k): {kernel.row_sums}")
    return Cell(code, check("A"), {"A": ctx.result.trace.weights})


# ---- differential ----------------------------------------------------------------------------------


def _bias_source(ctx: Context) -> str:
    bias = ctx.result.trace.bias
    if bias is None:
        return ""
    return f"B = {array_source(bias)}  # (nh, T_q, T_k): scheme {ctx.config.pe!r}'s bias, the app's\n"


def _diff_maps_cell(ctx: Context) -> Cell:
    parts, config = ctx.result.trace.kernel_parts, ctx.config
    scale = SCALE_OF_A_HALF[config.scale_rule]
    if config.scale_rule == "temperature":
        scale = f"temperature = {_number(config.temperature)}\n{scale}"
    plus_bias = " + B" if ctx.result.trace.bias is not None else ""
    code = (comment(_("Each head's q and k in two halves of h2 = hs/2 features: two softmax maps per head")) + "\n"
            "h2 = hs // 2\n"
            "Q1, Q2 = Q_h[..., :h2], Q_h[..., h2:]  # (nh, T_q, hs/2) each\n"
            "K1, K2 = K_h[..., :h2], K_h[..., h2:]  # (nh, T_k, hs/2) each\n"
            f"{scale}\n{_bias_source(ctx)}{_mask_source(ctx)}\n\n{MASKED_SOFTMAX}\n\n"
            f"L1 = np.where(M, Q1 @ K1.transpose(0, 2, 1) * s{plus_bias}, -np.inf)  # (nh, T_q, T_k)\n"
            f"L2 = np.where(M, Q2 @ K2.transpose(0, 2, 1) * s{plus_bias}, -np.inf)  # (nh, T_q, T_k)\n"
            "A1, A2 = masked_softmax(L1), masked_softmax(L2)  # (nh, T_q, T_k) each, rows sum to 1")
    expected = {"M": ctx.mask, "L1": parts.logits1, "L2": parts.logits2,
                "A1": parts.map1, "A2": parts.map2}
    asserts = "\n".join(['assert np.array_equal(M, app["M"])', check("L1"), check("L2"), check("A1"), check("A2")])
    return Cell(code, asserts, expected)


def _diff_combine_cell(ctx: Context) -> Cell:
    p = ctx.result.kernel_params
    code = (comment(_("lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init (the layer's learned vectors, the "
                      "app's)")) + "\n"
            f"lambda_q1 = {array_source(p.lambda_q1)}  # (hs/2,)\n"
            f"lambda_k1 = {array_source(p.lambda_k1)}  # (hs/2,)\n"
            f"lambda_q2 = {array_source(p.lambda_q2)}  # (hs/2,)\n"
            f"lambda_k2 = {array_source(p.lambda_k2)}  # (hs/2,)\n"
            f"lambda_init = {_number(p.lambda_init)}  # 0.8 - 0.6 exp(-0.3 (layer - 1))\n"
            "lam = np.exp(lambda_q1 @ lambda_k1) - np.exp(lambda_q2 @ lambda_k2) + lambda_init\n"
            "A = A1 - lam * A2  # (nh, T_q, T_k): signed, a row that sees a key sums to 1 - lam")
    parts = ctx.result.trace.kernel_parts
    asserts = "\n".join(['assert np.isclose(lam, app["lam"])', check("A")])
    return Cell(code, asserts, {"lam": np.asarray(parts.lam), "A": ctx.result.trace.weights})


def _diff_norm_cell(ctx: Context) -> Cell:
    p = ctx.result.kernel_params
    code = (f"eps = {_number(p.norm_eps)}  # RMSNorm's epsilon\n"
            "rms = np.sqrt(np.mean(heads ** 2, axis=-1, keepdims=True) + eps)  # (nh, T_q, 1)\n"
            "mixed = heads / rms * (1 - lambda_init)  # (nh, T_q, hs): each head on its own scale, what concatenates")
    return Cell(code, check("mixed"), {"mixed": ctx.result.trace.kernel_parts.normed_heads})


# ---- linear ----------------------------------------------------------------------------------------


def _linear_phi_cell(ctx: Context) -> Cell:
    parts = ctx.result.trace.kernel_parts
    code = ("def phi(x):  # elu(x) + 1: x + 1 above 0, exp(x) below; always > 0\n"
            "    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))\n"
            "\n"
            "phi_Q = phi(Q_h)  # (nh, T_q, hs)\n"
            "phi_K = phi(K_h)  # (nh, T_k, hs)")
    expected = {"phi_Q": parts.phi_q, "phi_K": _key_heads(ctx, parts.phi_k)}
    return Cell(code, "\n".join([check("phi_Q"), check("phi_K")]), expected)


def _linear_weights_cell(ctx: Context) -> Cell:
    parts = ctx.result.trace.kernel_parts
    code = (f"{_mask_source(ctx)}\n"
            "sim = np.where(M, phi_Q @ phi_K.transpose(0, 2, 1), 0.0)  # (nh, T_q, T_k): phi(q).phi(k), 0 where masked\n"
            "z = sim.sum(axis=-1)  # (nh, T_q): each row's sum\n"
            "A = sim / np.where(z > 0, z, 1.0)[..., None]  # (nh, T_q, T_k): rows sum to 1, no softmax, no scale")
    expected = {"M": ctx.mask, "sim": parts.similarity,
                "z": parts.normaliser, "A": ctx.result.trace.weights}
    asserts = "\n".join(['assert np.array_equal(M, app["M"])', check("sim"), check("z"), check("A")])
    return Cell(code, asserts, expected)


def _linear_state_cell(ctx: Context) -> Cell:
    parts = ctx.result.trace.kernel_parts
    code = (comment(_("The same heads from a running state of constant size: token t adds phi(k_t) v_t^T to S and "
                      "phi(k_t) to z, then phi(q_t) reads them (query t sees keys 0..t, the causal mask)")) + "\n"
            "S_state = np.zeros((nh, hs, V_h.shape[-1]))  # (nh, hs, hs): never grows with T\n"
            "z_state = np.zeros((nh, hs))  # (nh, hs)\n"
            "rows = []\n"
            "for t in range(T_q):\n"
            "    S_state = S_state + phi_K[:, t, :, None] * V_h[:, t, None, :]  # (nh, hs, hs)\n"
            "    z_state = z_state + phi_K[:, t]  # (nh, hs)\n"
            "    top = np.einsum('hd,hde->he', phi_Q[:, t], S_state)  # (nh, hs)\n"
            "    rows.append(top / np.einsum('hd,hd->h', phi_Q[:, t], z_state)[:, None])  # (nh, hs)\n"
            "recurrent = np.stack(rows, axis=1)  # (nh, T_q, hs): equals A @ V_h, computed without A")
    expected = {"S_state": parts.state, "z_state": parts.state_sum, "recurrent": parts.recurrent_heads}
    return Cell(code, "\n".join([check("S_state"), check("z_state"), check("recurrent")]), expected)


# One NumPy cell per step slug of ``ui.pipeline.kernel_steps`` (MLA's steps are not here yet).
KERNEL_CELLS: dict[str, Callable[[Context], Cell]] = {
    "kernel_weights": _kernel_weights_cell,
    "part_rope": _part_rope_cell,
    "diff_maps": _diff_maps_cell,
    "diff_combine": _diff_combine_cell,
    "diff_norm": _diff_norm_cell,
    "linear_phi": _linear_phi_cell,
    "linear_weights": _linear_weights_cell,
    "linear_state": _linear_state_cell,
    **SPARSE_CELLS,  # MoBA's gate, DSA's indexer, the softmax over the kept keys (notebook_kernels_sparse.py)
    "output_gate": output_gate_cell,
    "sink_weights": sink_weights_cell,
    "qk_norm": qk_norm_cell,
    **DELTANET_CELLS,
}
