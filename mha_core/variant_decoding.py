"""Decoding one token at a time with the attention variants: what each keeps between steps.

- **differential**: the same key/value cache as softmax heads (kv (hs + hv) numbers per token); each step's
  query row is A1 - lambda A2 over the cache.
- **linear**: no keys are kept at all. A state S (kv, hs, hv) and its sum z (kv, hs) absorb each token
  (S += phi(k_t) v_t^T, z += phi(k_t)) and the new query reads them: kv hs (hv + 1) numbers, whatever t.
- **MLA**: the cache holds the latent c_t (r numbers) and the shared RoPE key k_R,t (d_rope), r + d_rope
  per token for all heads together; the scores are the absorbed ones, (q_C W_UK,h^T) . c + q_R . k_R,
  and the heads (A c) W_UV,h: K and V are never built.

Each step's row equals the row of full causal attention (``multi_head_attention`` with a causal mask).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.attention import (
    AttentionWeights,
    apply_positions_per_part,
    compute_dtype,
    default_scale,
    merge_heads,
    output_projection,
    project,
    softmax,
    split_heads,
)
from mha_core.config import RunResult, attention_scheme
from mha_core.kernels import attention_kernel, elu_plus_one, linear_step
from mha_core.mla import MLAWeights, absorbed_heads, absorbed_scores, compress
from mha_core.positions import ROPE_BASE, apply_positions


@dataclass(frozen=True)
class VariantStep:
    """One decoding step of a variant; arrays are read-only.

    ``position`` of the new token; ``weights (nh, t+1)``: its query's row over tokens 0..t (for linear
    attention the row the state implies, computed for display from keys the decoder does not keep);
    ``heads (nh, hv)``, ``output (C_out,)``; ``numbers``: how many numbers the decoder keeps after the step;
    ``held``: those arrays by name, on the last step only (a linear state per step would cost T times its
    size: 134 MB at d_model 512 with one head and 64 tokens).
    """

    position: int
    weights: np.ndarray
    heads: np.ndarray
    output: np.ndarray
    numbers: int
    held: tuple[tuple[str, np.ndarray], ...] = ()

    def __post_init__(self) -> None:
        for value in (self.weights, self.heads, self.output, *(a for _, a in self.held)):
            value.setflags(write=False)


def decode_variant(x: np.ndarray, weights: AttentionWeights, n_heads: int, *, kernel: str = "softmax",
                   kernel_params=None, mla: MLAWeights | None = None, kv_heads: int | None = None, pe: str = "none",
                   rope_base: float = ROPE_BASE, scale: float | None = None,
                   null_key: bool = False) -> list[VariantStep]:
    """Feed the tokens of ``x`` (T, C) one at a time through a differential, linear or MLA decoder.

    The options are ``multi_head_attention``'s; a softmax layer without ``mla`` is ``kv_cache.decode``'s.
    """
    dtype = compute_dtype(x, *weights.arrays())
    x = np.asarray(x, dtype=dtype)
    weights = weights.astype(dtype)
    kv_heads = n_heads if kv_heads is None else kv_heads
    head_size = weights.w_q.shape[1] // n_heads
    parts = attention_kernel(kernel).sub_heads
    scale = default_scale(head_size // parts) if scale is None else float(scale)
    if mla is not None:
        return _decode_latent(x, weights, mla.astype(dtype), n_heads, pe, rope_base, scale, null_key)
    if kernel == "linear":
        return _decode_linear(x, weights, n_heads, kv_heads, pe, rope_base)
    if kernel == "differential":
        return _decode_differential(x, weights, n_heads, kv_heads, pe, rope_base, scale, kernel_params)
    raise ValueError("decode_variant decodes differential, linear or MLA layers; softmax heads: kv_cache.decode")


def _new_token(x_t, weights: AttentionWeights, n_heads: int, kv_heads: int):
    """q (nh,1,hs), k (kv,1,hs), v (kv,1,hv) of one token (1, C)."""
    q = split_heads(project(x_t, weights.w_q, weights.b_q), n_heads)  # (nh, 1, hs)
    k = split_heads(project(x_t, weights.w_k, weights.b_k), kv_heads)  # (kv, 1, hs)
    v = split_heads(project(x_t, weights.w_v, weights.b_v), kv_heads)  # (kv, 1, hv)
    return q, k, v


def _finish(position: int, row, heads, weights: AttentionWeights, held, last: bool) -> VariantStep:
    output = output_projection(merge_heads(heads), weights.w_o, weights.b_o)  # (1, C_out)
    return VariantStep(position, row[:, 0], heads[:, 0], output[0], sum(a.size for _, a in held),
                       tuple(held) if last else ())


def _decode_differential(x, weights, n_heads, kv_heads, pe, rope_base, scale, params) -> list[VariantStep]:
    kernel = attention_kernel("differential")
    hs, hv = weights.w_q.shape[1] // n_heads, weights.w_v.shape[1] // kv_heads
    cache_k = np.empty((kv_heads, 0, hs), dtype=x.dtype)  # (kv, t, hs)
    cache_v = np.empty((kv_heads, 0, hv), dtype=x.dtype)  # (kv, t, hv)
    steps = []
    for t in range(x.shape[0]):
        q, k, v = _new_token(x[t : t + 1], weights, n_heads, kv_heads)
        here = np.array([t])  # (1,)
        placed = apply_positions_per_part(pe, q, k, here, here, rope_base, kernel.sub_heads)  # each half turned
        cache_k = np.concatenate([cache_k, placed.k], axis=1)  # (kv, t+1, hs)
        cache_v = np.concatenate([cache_v, v], axis=1)  # (kv, t+1, hv)
        out = kernel.attend(placed.q, cache_k, cache_v, None, scale, None, False, params)
        steps.append(_finish(t, out.weights, out.mixed, weights, (("K cache", cache_k), ("V cache", cache_v)),
                             t == x.shape[0] - 1))
    return steps


def _decode_linear(x, weights, n_heads, kv_heads, pe, rope_base) -> list[VariantStep]:
    hs, hv = weights.w_q.shape[1] // n_heads, weights.w_v.shape[1] // kv_heads
    group = n_heads // kv_heads
    state = np.zeros((kv_heads, hs, hv), dtype=x.dtype)  # (kv, hs, hv): S, the same size at every step
    state_sum = np.zeros((kv_heads, hs), dtype=x.dtype)  # (kv, hs): z
    seen = np.empty((kv_heads, 0, hs), dtype=x.dtype)  # (kv, t, hs) phi(k) of past tokens: for the shown row only
    steps = []
    for t in range(x.shape[0]):
        q, k, v = _new_token(x[t : t + 1], weights, n_heads, kv_heads)
        here = np.array([t])  # (1,)
        placed = apply_positions(pe, q, k, here, here, rope_base=rope_base)
        phi_q, phi_k = elu_plus_one(placed.q[:, 0]), elu_plus_one(placed.k[:, 0])  # (nh, hs), (kv, hs)
        by_query = np.repeat(np.arange(kv_heads), group)  # (nh,) the key/value head each query head reads
        state, state_sum, heads = linear_step(state, state_sum, phi_q, phi_k, v[:, 0]) if group == 1 else \
            _grouped_linear_step(state, state_sum, phi_q, phi_k, v[:, 0], by_query)
        seen = np.concatenate([seen, phi_k[:, None]], axis=1)  # (kv, t+1, hs)
        similarity = np.einsum("hd,htd->ht", phi_q, seen[by_query])  # (nh, t+1)
        row = similarity / similarity.sum(axis=-1, keepdims=True)  # (nh, t+1)
        steps.append(_finish(t, row[:, None], heads[:, None], weights, (("state S", state), ("state sum z", state_sum)),
                             t == x.shape[0] - 1))
    return steps


def _grouped_linear_step(state, state_sum, phi_q, phi_k, v, by_query):
    """``linear_step`` with kv < nh: one state per key/value head, read by every query head of its group."""
    state = state + phi_k[:, :, None] * v[:, None, :]  # (kv, hs, hv)
    state_sum = state_sum + phi_k  # (kv, hs)
    numerator = np.einsum("hd,hde->he", phi_q, state[by_query])  # (nh, hv)
    denominator = np.einsum("hd,hd->h", phi_q, state_sum[by_query])  # (nh,)
    return state, state_sum, numerator / denominator[:, None]  # (kv,hs,hv), (kv,hs), (nh,hv)


def _decode_latent(x, weights, mla: MLAWeights, n_heads, pe, rope_base, scale, null_key) -> list[VariantStep]:
    hs = weights.w_q.shape[1] // n_heads
    content = hs - mla.rope_dims
    latents = np.empty((0, mla.rank), dtype=x.dtype)  # (t, r), the cache
    rope_keys = np.empty((1, 0, mla.rope_dims), dtype=x.dtype)  # (1, t, d_rope), the cache
    steps = []
    for t in range(x.shape[0]):
        x_t = x[t : t + 1]  # (1, C)
        q = split_heads(project(x_t, weights.w_q, weights.b_q), n_heads)  # (nh, 1, hs)
        _, latent = compress(x_t, mla)  # (1, r)
        k_rope = project(x_t, mla.w_kr)[None]  # (1, 1, d_rope)
        here = np.array([t])  # (1,)
        placed = apply_positions(pe, q[..., content:], k_rope, here, here, rope_base=rope_base,
                                 key_positions=np.arange(t + 1))  # q_R, k_R turned; a bias (nh, 1, t+1) at most
        latents = np.concatenate([latents, latent], axis=0)  # (t+1, r)
        rope_keys = np.concatenate([rope_keys, placed.k], axis=1)  # (1, t+1, d_rope)
        _, scores = absorbed_scores(q[..., :content], placed.q, latents, rope_keys, mla.w_uk)  # (nh, 1, t+1)
        logits = scores * scale + (0.0 if placed.bias is None else placed.bias)  # (nh, 1, t+1)
        row = softmax(logits, axis=-1, null_key=null_key)  # (nh, 1, t+1)
        heads = absorbed_heads(row, latents, mla.w_uv)  # (nh, 1, hv)
        steps.append(_finish(t, row, heads, weights, (("latent cache c", latents), ("RoPE key cache k_R", rope_keys)),
                             t == x.shape[0] - 1))
    return steps


def decode_variant_run(result: RunResult, upto: int | None = None) -> list[VariantStep]:
    """Decode ``result``'s tokens 0..upto (default: all) one at a time with its variant (``result`` from
    ``mha_core.decoder.decoder_config``); the last step holds what the decoder keeps."""
    config = result.config
    x = result.x_q if upto is None else result.x_q[: upto + 1]  # (t+1, C)
    return decode_variant(x, result.weights, config.n_heads, kernel=config.kernel,
                          kernel_params=result.kernel_params, mla=result.mla_weights, kv_heads=config.key_value_heads,
                          pe=attention_scheme(config), rope_base=config.rope_base, scale=result.trace.scale,
                          null_key=config.null_key)
