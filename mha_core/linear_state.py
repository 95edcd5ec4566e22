"""Linear attention's decoder: a state of constant size instead of a growing cache (Katharopoulos et al. 2020).

phi(x) = elu(x) + 1 > 0; each token adds phi(k_t) v_t^T to a state S (kv,hs,hv) and phi(k_t) to its sum z (kv,hs),
and the new query reads phi(q_t)^T S / phi(q_t)^T z. ``LINEAR_STATE`` is the linear kernel's ``decoder`` record
(``mha_core.kernels``), run by the engine's one decoding loop (``mha_core.decoding``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.decoder_state import Attended, Decoder, Reading
from mha_core.marks import N_
from mha_core.steps import apply_positions_per_part


def elu_plus_one(x: np.ndarray) -> np.ndarray:
    """phi(x) = elu(x) + 1: x + 1 for x > 0, exp(x) otherwise; always > 0. Shape kept."""
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # x's shape


def add_to_state(state: np.ndarray, state_sum: np.ndarray, phi_k_t, v_t):
    """Token t into the state: S + phi(k_t) v_t^T (n,hs,hv) and z + phi(k_t) (n,hs), phi_k_t (n,hs), v_t (n,hv)."""
    state = state + phi_k_t[:, :, None] * v_t[:, None, :]  # (n, hs, hv)
    return state, state_sum + phi_k_t  # (n, hs, hv), (n, hs)


def read_state(state: np.ndarray, state_sum: np.ndarray, phi_q_t) -> np.ndarray:
    """phi(q_t)^T S / phi(q_t)^T z: the head output (nh,hv) from a state (nh,hs,hv), its sum (nh,hs), phi_q_t (nh,hs)."""
    numerator = np.einsum("hd,hde->he", phi_q_t, state)  # (nh, hv)
    denominator = np.einsum("hd,hd->h", phi_q_t, state_sum)  # (nh,), > 0: phi > 0
    return numerator / denominator[:, None]  # (nh, hv)


@dataclass(frozen=True)
class LinearState:
    """What a linear-attention decoder keeps: ``state (kv,hs,hv)`` = S and ``state_sum (kv,hs)`` = z, the same size
    at every step, and ``seen (kv,t,hs)``: phi(k) of past tokens, kept only to draw the row the state implies."""

    state: np.ndarray
    state_sum: np.ndarray
    seen: np.ndarray


def _start_linear_state(layer, dtype) -> LinearState:
    kv, hs = layer.kv_heads, layer.weights.w_q.shape[1] // layer.n_heads
    hv = layer.weights.w_v.shape[1] // kv
    return LinearState(np.zeros((kv, hs, hv), dtype=dtype), np.zeros((kv, hs), dtype=dtype),  # (kv,hs,hv), (kv,hs)
                       np.empty((kv, 0, hs), dtype=dtype))  # (kv, 0, hs)


def _keep_in_linear_state(layer, kept: LinearState, token) -> tuple[LinearState, Reading]:
    """Turn q and k at the token's position, add phi(k_t) v_t^T to S and phi(k_t) to z."""
    here = np.array([token.position])  # (1,)
    placed = apply_positions_per_part(layer.pe, token.q, token.k, here, here, layer.rope_base, 1)
    phi_k = elu_plus_one(placed.k[:, 0])  # (kv, hs)
    state, state_sum = add_to_state(kept.state, kept.state_sum, phi_k, token.v[:, 0])  # (kv,hs,hv), (kv,hs)
    seen = np.concatenate([kept.seen, phi_k[:, None]], axis=1)  # (kv, t+1, hs)
    return LinearState(state, state_sum, seen), Reading(placed.q)


def _read_linear_state(layer, kept: LinearState, reading: Reading) -> Attended:
    """phi(q_t) reads S and z of its key/value head; the row phi(q_t) . phi(k_j) / sum is drawn from ``seen``."""
    phi_q = elu_plus_one(reading.q[:, 0])  # (nh, hs)
    by_query = np.repeat(np.arange(layer.kv_heads), layer.n_heads // layer.kv_heads)  # (nh,) each query head's kv head
    heads = read_state(kept.state[by_query], kept.state_sum[by_query], phi_q)  # (nh, hv)
    similarity = np.einsum("hd,htd->ht", phi_q, kept.seen[by_query])  # (nh, t+1)
    row = similarity / similarity.sum(axis=-1, keepdims=True)  # (nh, t+1)
    return Attended(row[:, None], heads[:, None])  # (nh, 1, t+1), (nh, 1, hv)


LINEAR_STATE = Decoder(
    "linear state", _start_linear_state, _keep_in_linear_state, _read_linear_state,
    lambda kept: ((N_("state S"), kept.state), (N_("state sum z"), kept.state_sum)),
    words=N_("a **state of constant size**: S = Σ φ(k_t) v_tᵀ and z = Σ φ(k_t), updated once per token; no keys or "
             "values are kept"),
    size_words=N_("a state S ({hs}×{hs}) and its sum z ({hs}) per key/value head: {numbers} numbers, the same at "
                  "every step, and no keys or values at all"),
    size_values=lambda c: {"hs": c.head_size, "numbers": c.key_value_heads * c.head_size * (c.head_size + 1)})
