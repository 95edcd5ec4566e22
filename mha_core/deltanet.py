"""Gated DeltaNet (Yang, Kautz & Hatamizadeh, arXiv 2412.06464; the linear layers of Qwen3-Next and Qwen3.5).

Each head keeps a state S (hs x hv, stored as transformers' ``torch_recurrent_gated_delta_rule`` stores it: key
features by value features) and, token by token, decays it, takes out what it already recalls for k_t and writes
the correction:

    S_t = alpha_t S_{t-1} + k_t delta_t^T,   delta_t = beta_t (v_t - alpha_t S_{t-1}^T k_t),   o_t = S_t^T q_t

which is the paper's S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T with S transposed. q and k are
L2-normalised per head and q is scaled by 1/sqrt(hs) (transformers' convention); beta_t = sigmoid(x_t W_beta) and
alpha_t = exp(g_t) with Qwen3-Next's g_t = -exp(A_log) * softplus(x_t W_a + dt_bias), one of each per head.

Three ways to the same heads, all kept in ``DeltaNetParts``: the recurrence above, the chunked form (the UT transform
solves a chunk's deltas at once, then the state is carried from chunk to chunk) and the implied (nh,T,T) matrix M
with o_i = sum_j M_ij v_j:

    M_ij = beta_j k_j . (A_{j+1} ... A_i q_i),   A_m = alpha_m (I - beta_m k_m k_m^T),   j <= i, 0 above the diagonal

M is what Heads draws as the kernel's weights: signed, rows with no fixed sum. Causal only: a token's state holds
the tokens before it. Left out from Qwen3-Next's layer: the short convolution on q, k, v and the gated RMSNorm on o.

Shapes: ``nh`` heads, ``kv`` key/value heads, ``T`` tokens, ``hs`` head size, ``hv`` value size, ``C`` d_model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.decoder_state import Attended, Decoder, Reading
from mha_core.kernel_base import Kernel, KernelOutput, _read_only, _scaled_logits, no_bias, no_latent, no_null_key
from mha_core.kernel_records import Refusal, WeightInputs
from mha_core.marks import N_, Message
from mha_core.steps import apply_positions_per_part, weighted_sum

L2_EPS = 1e-6  # inside the square root of the L2 norm, as transformers' l2norm (the FLA library's)
CHUNK = 4  # the chunked form's chunk size here (Qwen3-Next uses 64); a toy sentence then spans several chunks
A_RANGE = (0.02, 1.0)  # exp(A_log) drawn log-uniform in here: alpha from ~0.97 to ~0.27, memories the toy can show


@dataclass(frozen=True)
class DeltaNetParams:
    """The learned weights of a Gated DeltaNet layer that make beta and alpha from x, one column per head.

    ``w_beta (C,nh)``: beta = sigmoid(x W_beta); ``w_a (C,nh)``, ``a_log (nh,)``, ``dt_bias (nh,)``:
    g = -exp(a_log) softplus(x W_a + dt_bias), alpha = exp(g).
    """

    w_beta: np.ndarray
    w_a: np.ndarray
    a_log: np.ndarray
    dt_bias: np.ndarray

    def __post_init__(self) -> None:
        _read_only(self)


def deltanet_params(d_model: int, n_heads: int, seed: int) -> DeltaNetParams:
    """Weights normal(0, 1/C) (so x W is of order 1), exp(A_log) log-uniform in ``A_RANGE``, dt_bias = 1 (Qwen3-Next's
    initialisation), from their own stream of ``seed``: the layer's other weights stay as they were."""
    rng = np.random.default_rng([seed, 2412, 6464])
    w_beta, w_a = rng.normal(0.0, 1.0 / np.sqrt(d_model), size=(2, d_model, n_heads))  # (C, nh) each
    a_log = rng.uniform(np.log(A_RANGE[0]), np.log(A_RANGE[1]), size=n_heads)  # (nh,)
    return DeltaNetParams(w_beta, w_a, a_log, np.ones(n_heads))


def plain_deltanet_params(d_model: int, n_heads: int) -> DeltaNetParams:
    """Zero weights: beta = 1/2 and g = -softplus(1) for every token and head."""
    return DeltaNetParams(np.zeros((d_model, n_heads)), np.zeros((d_model, n_heads)), np.zeros(n_heads),
                          np.ones(n_heads))


def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + e^x) without overflow. Shape kept."""
    return np.logaddexp(0.0, x)


def gates(x: np.ndarray, params: DeltaNetParams) -> tuple[np.ndarray, np.ndarray]:
    """beta (nh,T) = sigmoid(x W_beta) and g (nh,T) = -exp(A_log) softplus(x W_a + dt_bias) from x (T,C)."""
    beta = 1.0 / (1.0 + np.exp(-(x @ params.w_beta)))  # (T, nh)
    g = -np.exp(params.a_log) * softplus(x @ params.w_a + params.dt_bias)  # (T, nh)
    return beta.T.astype(x.dtype), g.T.astype(x.dtype)  # (nh, T) x2


def l2_normalise(x: np.ndarray, eps: float = L2_EPS) -> np.ndarray:
    """x / sqrt(sum(x^2) + eps) over the last axis (transformers' l2norm). Shape kept."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def delta_step(state: np.ndarray, q_t, k_t, v_t, alpha_t, beta_t) -> tuple[np.ndarray, np.ndarray]:
    """One token: decay, take out what the state recalls for k_t, write the correction, read with q_t.

    ``state (n,hs,hv)``, ``q_t (n,hs)`` (normalised and scaled), ``k_t (n,hs)``, ``v_t (n,hv)``, ``alpha_t, beta_t
    (n,)``; returns the new state (n,hs,hv) and the output (n,hv).
    """
    state = alpha_t[:, None, None] * state  # (n, hs, hv)
    recalled = np.einsum("nd,nde->ne", k_t, state)  # (n, hv): S^T k_t
    delta = beta_t[:, None] * (v_t - recalled)  # (n, hv)
    state = state + k_t[:, :, None] * delta[:, None, :]  # (n, hs, hv)
    return state, np.einsum("nd,nde->ne", q_t, state)  # (n, hs, hv), (n, hv)


def delta_recurrence(q, k, v, g, beta) -> tuple[np.ndarray, np.ndarray]:
    """``delta_step`` over the tokens from a zero state: q, k (n,T,hs), v (n,T,hv), g, beta (n,T). Returns the heads
    (n,T,hv) and the last state (n,hs,hv)."""
    state = np.zeros((q.shape[0], q.shape[-1], v.shape[-1]), dtype=v.dtype)  # (n, hs, hv), constant size
    heads = []
    for t in range(q.shape[1]):
        state, out = delta_step(state, q[:, t], k[:, t], v[:, t], np.exp(g[:, t]), beta[:, t])
        heads.append(out)
    return np.stack(heads, axis=1), state  # (n, T, hv), (n, hs, hv)


def delta_chunked(q, k, v, g, beta, chunk: int = CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """The same heads and last state, ``chunk`` tokens at a time (the paper's chunkwise form, the UT transform).

    In a chunk, with c_t the cumulative log decay from its start and S_0 the state before it, the deltas solve
    (I + L) Delta = beta (V - e^c K S_0), L_tm = beta_t e^(c_t - c_m) k_t . k_m for m < t (lower unitriangular);
    then o_t = e^(c_t) S_0^T q_t + sum_(m<=t) e^(c_t - c_m) (q_t . k_m) delta_m and the chunk's last state follows.
    """
    n, t_total, hs = q.shape
    state = np.zeros((n, hs, v.shape[-1]), dtype=v.dtype)  # (n, hs, hv)
    heads = []
    for start in range(0, t_total, chunk):
        part = slice(start, min(start + chunk, t_total))
        qc, kc, vc, bc = q[:, part], k[:, part], v[:, part], beta[:, part]  # (n, c, hs), (n, c, hs), (n, c, hv), (n, c)
        c = np.cumsum(g[:, part], axis=1)  # (n, c): log of the decay since the chunk's start
        below = np.tril(np.ones((c.shape[1], c.shape[1]), dtype=bool))  # (c, c), m <= t
        decay = np.where(below, np.exp(np.where(below, c[:, :, None] - c[:, None, :], 0.0)), 0.0)  # (n, c, c)
        lower = bc[:, :, None] * decay * (kc @ kc.transpose(0, 2, 1))  # (n, c, c)
        system = np.tril(lower, -1) + np.eye(c.shape[1])  # (n, c, c): I + L
        recalled = np.exp(c)[:, :, None] * (kc @ state)  # (n, c, hv): e^c K S_0
        deltas = np.linalg.solve(system, bc[:, :, None] * (vc - recalled))  # (n, c, hv)
        heads.append(np.exp(c)[:, :, None] * (qc @ state) + (decay * (qc @ kc.transpose(0, 2, 1))) @ deltas)
        to_end = np.exp(c[:, -1:] - c)  # (n, c): decay from each token to the chunk's end
        state = np.exp(c[:, -1])[:, None, None] * state + (kc * to_end[:, :, None]).transpose(0, 2, 1) @ deltas
    return np.concatenate(heads, axis=1), state  # (n, T, hv), (n, hs, hv)


def implied_matrix(q, k, g, beta) -> np.ndarray:
    """M (n,T,T) with o_i = sum_j M_ij v_j: M_ij = beta_j k_j . (A_(j+1) ... A_i q_i), A_m = alpha_m (I - beta_m k_m
    k_m^T), 0 for j > i. Built from the last key back: each row's vector r_i is carried through A_j once j <= i."""
    n, t_total, _hs = q.shape
    carried = q.copy()  # (n, T, hs): r_i, for rows i >= j the product A_(j+1) ... A_i q_i
    matrix = np.zeros((n, t_total, t_total), dtype=q.dtype)  # (n, T, T)
    for j in range(t_total - 1, -1, -1):
        reach = np.einsum("nid,nd->ni", carried[:, j:], k[:, j])  # (n, T - j): k_j . r_i
        matrix[:, j:, j] = beta[:, j, None] * reach
        carried[:, j:] = np.exp(g[:, j])[:, None, None] * (
            carried[:, j:] - beta[:, j, None, None] * reach[..., None] * k[:, j, None, :])  # (n, T - j, hs)
    return matrix


@dataclass(frozen=True)
class DeltaNetParts:
    """A Gated DeltaNet layer's own intermediates; arrays are read-only. Heads are the query heads (k, v repeated).

    ``q_hat (nh,T,hs)``: q L2-normalised and scaled by 1/sqrt(hs); ``k_hat (nh,T,hs)``: k L2-normalised;
    ``beta``, ``g``, ``alpha (nh,T)``; ``similarity (nh,T,T)`` = q_hat . k_hat, 0 above the diagonal (what the
    weights would be with alpha = 1 and no delta rule); ``recurrent_heads`` and ``chunked_heads (nh,T,hv)``: the
    two other forms of the heads; ``state (nh,hs,hv)``: S after the last token; ``chunk``: the chunk size.
    """

    q_hat: np.ndarray
    k_hat: np.ndarray
    beta: np.ndarray
    g: np.ndarray
    alpha: np.ndarray
    similarity: np.ndarray
    recurrent_heads: np.ndarray
    chunked_heads: np.ndarray
    state: np.ndarray
    chunk: int = CHUNK

    def __post_init__(self) -> None:
        _read_only(self)


def _is_causal(mask, tq: int, tk: int) -> bool:
    causal = np.tri(tq, tk, dtype=bool)  # (Tq, Tk)
    return mask is not None and tq == tk and bool(np.all(np.broadcast_to(mask, np.broadcast_shapes(mask.shape,
                                                                                                    causal.shape)) == causal))


def deltanet_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False,
                    params: DeltaNetParams | None = None, x=None) -> KernelOutput:
    """Gated DeltaNet's heads from q (nh,T,hs), k (kv,T,hs), v (kv,T,hv) and the layer's input x (T,C), causal mask
    only. The weights are the implied matrix M (signed); the heads M v equal the recurrent and the chunked form."""
    if x is None or not _is_causal(mask, q.shape[1], k.shape[1]):
        raise ValueError(Message(N_("Gated DeltaNet reads its state token by token: it needs the layer's input and a "
                                    "causal mask over one sentence")))
    params = plain_deltanet_params(x.shape[-1], q.shape[0]) if params is None else params
    scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, T, T) x2: the softmax head's view
    group = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # (nh, T, hs), (nh, T, hv)
    q_hat, k_hat = l2_normalise(q) * scale, l2_normalise(k)  # (nh, T, hs) x2
    beta, g = gates(x, params)  # (nh, T) x2
    weights = implied_matrix(q_hat, k_hat, g, beta)  # (nh, T, T), signed
    heads = weighted_sum(weights, v)  # (nh, T, hv)
    recurrent, state = delta_recurrence(q_hat, k_hat, v, g, beta)  # (nh, T, hv), (nh, hs, hv)
    chunked, _state = delta_chunked(q_hat, k_hat, v, g, beta)  # (nh, T, hv)
    similarity = np.tril(q_hat @ k_hat.transpose(0, 2, 1))  # (nh, T, T)
    parts = DeltaNetParts(q_hat, k_hat, beta, g, np.exp(g), similarity, recurrent, chunked, state)
    return KernelOutput(scores, logits, weights, heads, heads, parts)


# ---- the decoder: a state of constant size ----------------------------------------------------------


@dataclass(frozen=True)
class DeltaState:
    """What a Gated DeltaNet decoder keeps: ``state (nh,hs,hv)``, the same size at every step. ``seen_k (nh,t,hs)``,
    ``seen_beta`` and ``seen_g (nh,t)`` of past tokens are kept only to draw the row of M the state implies."""

    state: np.ndarray
    seen_k: np.ndarray
    seen_beta: np.ndarray
    seen_g: np.ndarray


def _start_delta_state(layer, dtype) -> DeltaState:
    nh, hs = layer.n_heads, layer.weights.w_q.shape[1] // layer.n_heads
    hv = layer.weights.w_v.shape[1] // layer.kv_heads
    return DeltaState(np.zeros((nh, hs, hv), dtype=dtype), np.empty((nh, 0, hs), dtype=dtype),  # (nh,hs,hv), (nh,0,hs)
                      np.empty((nh, 0), dtype=dtype), np.empty((nh, 0), dtype=dtype))  # (nh, 0) x2


def _keep_in_delta_state(layer, kept: DeltaState, token) -> tuple[DeltaState, Reading]:
    """Place q and k at the token's position, make beta_t and alpha_t from x_t, decay S and write the correction."""
    here = np.array([token.position])  # (1,)
    placed = apply_positions_per_part(layer.pe, token.q, token.k, here, here, layer.rope_base, 1)
    group = layer.n_heads // layer.kv_heads
    k_t = np.repeat(l2_normalise(placed.k[:, 0]), group, axis=0)  # (nh, hs)
    v_t = np.repeat(token.v[:, 0], group, axis=0)  # (nh, hv)
    params = layer.kernel_params or plain_deltanet_params(token.x.shape[-1], layer.n_heads)
    beta, g = gates(token.x, params)  # (nh, 1) x2
    state = np.exp(g[:, 0])[:, None, None] * kept.state  # (nh, hs, hv)
    state = state + k_t[:, :, None] * (beta[:, 0, None] * (v_t - np.einsum("nd,nde->ne", k_t, state)))[:, None, :]
    kept = DeltaState(state, np.concatenate([kept.seen_k, k_t[:, None]], axis=1),  # (nh, t+1, hs)
                      np.concatenate([kept.seen_beta, beta], axis=1), np.concatenate([kept.seen_g, g], axis=1))
    return kept, Reading(placed.q)


def _read_delta_state(layer, kept: DeltaState, reading: Reading) -> Attended:
    """q_t (normalised, scaled) reads S; the row of M it implies is drawn from the kept keys, betas and decays."""
    q_t = l2_normalise(reading.q[:, 0]) * layer.scale  # (nh, hs)
    heads = np.einsum("nd,nde->ne", q_t, kept.state)  # (nh, hv)
    t = kept.seen_k.shape[1]
    queries = np.zeros((q_t.shape[0], t, q_t.shape[-1]), dtype=q_t.dtype)  # (nh, t+1, hs): only the last row is read
    queries[:, -1] = q_t
    row = implied_matrix(queries, kept.seen_k, kept.seen_g, kept.seen_beta)[:, -1]  # (nh, t+1)
    return Attended(row[:, None], heads[:, None])  # (nh, 1, t+1), (nh, 1, hv)


DELTA_STATE = Decoder(
    "delta state", _start_delta_state, _keep_in_delta_state, _read_delta_state,
    lambda kept: (("state S per query head", kept.state),),  # a name the Decoding page draws by (query head h's)
    words=N_("a **state of constant size** per head, S_t = α_t S_{{t−1}} + k_t δ_tᵀ with δ_t = β_t (v_t − α_t S_{{t−1}}ᵀ "
             "k_t): decayed, corrected and read once per token; no keys or values are kept"),
    size_words=N_("a state S ({hs}×{hv}) per head: {numbers} numbers, the same at every step, and no keys or values "
                  "at all"),
    size_values=lambda c: {"hs": c.head_size, "hv": c.head_size, "numbers": c.n_heads * c.head_size * c.head_size})


# ---- the row of the kernels' table ---------------------------------------------------------------------------

_DELTANET = Message(N_("Gated DeltaNet"))  # what a refusal names


def _not_one_causal_sentence(config) -> bool:
    return getattr(config, "mask", "causal") != "causal" or getattr(config, "kv_tokens", None) is not None


_CAUSAL = {"mask": "causal", "kv_tokens": None}  # every fix also lands on one causal sentence: one fix, a valid run


def _and_causal(refusal: Refusal) -> Refusal:
    return Refusal(refusal.setting, refusal.reason, refusal.applies, {**refusal.fix, **_CAUSAL})


DELTANET = Kernel(
    "deltanet", N_("Gated DeltaNet"), N_("Gated DeltaNet"),  # the label as captions name it ("Gated DeltaNet attention")
    N_("A state per head is decayed by α_t, corrected towards v_t for the key k_t by a step β_t (the delta rule) and "
       "read by q_t; the weights are the matrix M that state implies, o_i = Σ_j M_ij v_j."),
    rows_sum_to_one=False, row_sums=N_("rows have no fixed sum, and weights can be negative"), signed=True,
    row_sum_formula="Σ_j M_ij", attend=deltanet_kernel, recurrent=True, decoder=DELTA_STATE, reads_input=True,
    refuses=(*(_and_causal(r) for r in (no_null_key(_DELTANET), no_bias(_DELTANET), no_latent(_DELTANET))),
             _and_causal(Refusal("scale_rule", N_("Gated DeltaNet scales its L2-normalised queries by 1/√d_k: keep the "
                                                  "standard scale rule"),
                                 lambda c: getattr(c, "scale_rule", "sqrt_dk") != "sqrt_dk", {"scale_rule": "sqrt_dk"})),
             Refusal("mask", N_("Gated DeltaNet reads a state token by token, so each token sees itself and the tokens "
                                "before it, in one sentence: use the causal mask (no cross-attention)"),
                     _not_one_causal_sentence, _CAUSAL)),
    paper="Yang et al. 2024 (arXiv 2412.06464); Qwen3-Next",
    formula="S_t = α_t S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ, o_t = S_t q_t",
    weights_label=N_("implied matrix M (Gated DeltaNet)"),
    params=lambda c: deltanet_params(c.d_model, c.n_heads, c.seed),
    steps=("deltanet_gates", "deltanet_matrix", "deltanet_forms"), drops=("scores", "scale", "mask"),
    mix_why=N_("Each query's output is Σ_j M_ij v_j: the same numbers the state gives token by token. Not an average: "
               "M's entries can be negative and a row has no fixed sum."),
    inputs=WeightInputs(
        ("",), lambda logits, parts: (parts.similarity,), N_("q̂·k̂ / √d_k, causal (before decay and the delta rule)"),
        "q̂·k̂", N_("normalised q̂·k̂ / √d_k"),
        N_("Colour = q̂·k̂ / √d_k with q and k L2-normalised, centred on 0 (red above, blue below), 0 above the "
           "diagonal: what M would be with α = 1 and β = 1 and no correction. The decay α and the delta rule's "
           "correction turn it into M."), "qhat_khat", masked_is_neginf=False),
    scores_caption=N_("Colour = the raw dot product q·k, centred on 0. Gated DeltaNet never uses it as it is: q and k "
                      "are L2-normalised first (q̂·k̂, the view before). Grey cells are masked."))
