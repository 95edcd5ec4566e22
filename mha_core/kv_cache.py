"""Decoding one token at a time with a key/value cache.

A decoder generates token t after tokens 0..t-1. Full causal attention would recompute every
key and value at every step; a cache keeps the keys and values already computed (after RoPE,
which depends on their own positions only) and each step adds one row per key/value head.
Step t then computes one query row: exactly row t of full causal attention. Each step is the engine's one
decoding step (``mha_core.decoding.decode_token``) with the KV cache record (``mha_core.decoder_state``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.decoder_state import KV_CACHE, KVCache, empty_cache
from mha_core.decoding import DecodedToken, cast_for_decoding, decode_token, decode_tokens, decoder_layer
from mha_core.positions import ROPE_BASE, check_inside_attention
from mha_core.steps import AttentionWeights

__all__ = ["KVCache", "DecodeStep", "decode", "decode_step", "empty_cache"]


@dataclass(frozen=True)
class DecodeStep:
    """What one decoding step computed; arrays are read-only.

    ``position`` of the new token; ``q (nh,1,hs)``, ``k_new (kv,1,hs)``, ``v_new (kv,1,hv)``:
    the only projections computed fresh; ``logits``, ``weights (nh,1,t+1)``: the new query row
    against every cached key (with the new one); ``heads (nh,1,hv)``, ``output (1,C_out)``;
    ``cache``: the cache after this step (t+1 tokens), whose size ``cache.numbers`` and
    ``cache.nbytes`` grows by kv*(hs+hv) numbers per step.
    """

    position: int
    q: np.ndarray
    k_new: np.ndarray
    v_new: np.ndarray
    logits: np.ndarray
    weights: np.ndarray
    heads: np.ndarray
    output: np.ndarray
    cache: KVCache

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)


def decode_step(
    x_new: np.ndarray,
    cache: KVCache,
    weights: AttentionWeights,
    n_heads: int,
    *,
    kv_heads: int | None = None,
    pe: str = "none",
    rope_base: float = ROPE_BASE,
    scale: float | None = None,
    null_key: bool = False,
    kernel: str = "softmax",
    kernel_params=None,
) -> DecodeStep:
    """Attention of one new token to itself and every cached token, and the cache with it added.

    Parameters
    ----------
    x_new : ndarray, shape (1, C)
        The new token (with any sinusoidal encoding already added); its position is cache.length.
    cache : KVCache, from ``empty_cache`` or the previous step
    weights, n_heads, kv_heads, pe, rope_base, scale, null_key, kernel, kernel_params : as in
        ``multi_head_attention``; the kernel's own ``attend`` reads the cache

    Returns
    -------
    DecodeStep
        Its weights and output equal row ``position`` of full causal attention over the tokens.
    """
    layer = decoder_layer(weights, n_heads, kv_heads=kv_heads, pe=pe, rope_base=rope_base, scale=scale,
                          null_key=null_key, kernel=kernel, kernel_params=kernel_params)
    check_inside_attention(pe, weights.w_q.shape[1] // n_heads, False, rope_base)
    return _as_decode_step(decode_token(layer, KV_CACHE, cache, x_new, cache.length))  # the engine's one step


def _as_decode_step(step: DecodedToken) -> DecodeStep:
    """The loop's step in this module's words: the new query, key and value, the row, and the cache after it."""
    return DecodeStep(step.position, step.reading.q, step.kept.k[:, -1:], step.token.v, step.attended.logits,
                      step.attended.weights, step.attended.heads, step.output, step.kept)


def decode(x: np.ndarray, weights: AttentionWeights, n_heads: int, **options) -> list[DecodeStep]:
    """Feed the tokens of ``x`` (T, C) one at a time through the engine's decoding loop with a KV cache.

    ``options`` are ``decode_step``'s keywords. The inputs compute in the engine's dtype
    (float32 stays float32, anything else not floating computes in float64).
    """
    x, weights, _ = cast_for_decoding(x, weights)
    kv_heads = n_heads if options.get("kv_heads") is None else options["kv_heads"]
    if kv_heads < 1 or n_heads % kv_heads or weights.w_k.shape[1] % kv_heads or weights.w_v.shape[1] % kv_heads:
        raise ValueError(f"kv_heads = {kv_heads} must divide n_heads = {n_heads} and the widths of w_k and w_v")
    layer = decoder_layer(weights, n_heads, **options)
    check_inside_attention(layer.pe, weights.w_q.shape[1] // n_heads, False, layer.rope_base)
    return [_as_decode_step(step) for step in decode_tokens(x, layer, KV_CACHE)]
