"""Decoding one token at a time with a key/value cache.

A decoder generates token t after tokens 0..t-1. Full causal attention would recompute every
key and value at every step; a cache keeps the keys and values already computed (after RoPE,
which depends on their own positions only) and each step adds one row per key/value head.
Step t then computes one query row: exactly row t of full causal attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.attention import (
    AttentionWeights,
    compute_dtype,
    default_scale,
    merge_heads,
    output_projection,
    project,
    scaled_dot_product_attention,
    split_heads,
)
from mha_core.positions import ROPE_BASE, apply_positions, check_inside_attention


@dataclass(frozen=True)
class KVCache:
    """The keys and values of the tokens decoded so far; arrays are read-only.

    ``k (kv, t, hs)`` (rotated when RoPE is on), ``v (kv, t, hv)``: t tokens, kv key/value heads.
    A step returns a new cache and leaves this one as it was.
    """

    k: np.ndarray
    v: np.ndarray

    def __post_init__(self) -> None:
        self.k.setflags(write=False)
        self.v.setflags(write=False)

    @property
    def length(self) -> int:
        """Tokens cached, t."""
        return self.k.shape[1]

    @property
    def numbers(self) -> int:
        """Numbers held: kv * t * (hs + hv)."""
        return self.k.size + self.v.size

    @property
    def nbytes(self) -> int:
        """Bytes held: numbers * bytes per number (4 in float32, 8 in float64)."""
        return self.k.nbytes + self.v.nbytes

    def append(self, k_new: np.ndarray, v_new: np.ndarray) -> KVCache:
        """A cache one token longer: (kv, 1, hs), (kv, 1, hv) added at the end."""
        return KVCache(np.concatenate([self.k, k_new], axis=1), np.concatenate([self.v, v_new], axis=1))


def empty_cache(kv_heads: int, head_size: int, value_size: int, dtype=np.float64) -> KVCache:
    """A cache holding no token yet: k (kv, 0, hs), v (kv, 0, hv)."""
    return KVCache(np.empty((kv_heads, 0, head_size), dtype=dtype), np.empty((kv_heads, 0, value_size), dtype=dtype))


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
) -> DecodeStep:
    """Attention of one new token to itself and every cached token, and the cache with it added.

    Parameters
    ----------
    x_new : ndarray, shape (1, C)
        The new token (with any sinusoidal encoding already added); its position is cache.length.
    cache : KVCache, from ``empty_cache`` or the previous step
    weights, n_heads, kv_heads, pe, rope_base, scale, null_key : as in ``multi_head_attention``

    Returns
    -------
    DecodeStep
        Its weights and output equal row ``position`` of full causal attention over the tokens.
    """
    kv_heads = n_heads if kv_heads is None else kv_heads
    check_inside_attention(pe, weights.w_q.shape[1] // n_heads, False, rope_base)
    position = cache.length
    q = split_heads(project(x_new, weights.w_q, weights.b_q), n_heads)  # (nh, 1, hs)
    k_new = split_heads(project(x_new, weights.w_k, weights.b_k), kv_heads)  # (kv, 1, hs)
    v_new = split_heads(project(x_new, weights.w_v, weights.b_v), kv_heads)  # (kv, 1, hv)
    here = np.array([position])  # (1,) where the new token stands
    placed = apply_positions(pe, q, k_new, here, here, rope_base=rope_base,
                             key_positions=np.arange(position + 1))  # q, k_new turned; bias (nh, 1, t+1)
    q = placed.q  # (nh, 1, hs)
    cache = cache.append(placed.k, v_new)  # k (kv, t+1, hs), v (kv, t+1, hv)
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)
    _, logits, attn, heads = scaled_dot_product_attention(q, cache.k, cache.v, None, scale, bias=placed.bias,
                                                          null_key=null_key)  # (nh, 1, t+1) x2, (nh, 1, hv)
    output = output_projection(merge_heads(heads), weights.w_o, weights.b_o)  # (1, C_out)
    return DecodeStep(position, q, placed.k, v_new, logits, attn, heads, output, cache)


def decode(x: np.ndarray, weights: AttentionWeights, n_heads: int, **options) -> list[DecodeStep]:
    """Feed the tokens of ``x`` (T, C) one at a time through ``decode_step``, starting from an empty cache.

    ``options`` are ``decode_step``'s keywords. The inputs compute in the engine's dtype
    (float32 stays float32, anything else not floating computes in float64).
    """
    dtype = compute_dtype(x, *weights.arrays())
    x = np.asarray(x, dtype=dtype)
    weights = weights.astype(dtype)
    kv_heads = n_heads if options.get("kv_heads") is None else options["kv_heads"]
    if kv_heads < 1 or n_heads % kv_heads or weights.w_k.shape[1] % kv_heads or weights.w_v.shape[1] % kv_heads:
        raise ValueError(f"kv_heads = {kv_heads} must divide n_heads = {n_heads} and the widths of w_k and w_v")
    cache = empty_cache(kv_heads, weights.w_k.shape[1] // kv_heads, weights.w_v.shape[1] // kv_heads, dtype)
    steps = []
    for t in range(x.shape[0]):
        steps.append(decode_step(x[t : t + 1], cache, weights, n_heads, **options))
        cache = steps[-1].cache
    return steps
