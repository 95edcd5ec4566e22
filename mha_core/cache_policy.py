"""Which keys a decoder's cache keeps: full, a sliding window, or a window with attention sinks.

A cache that keeps every token grows without end. A sliding window keeps the last W tokens only; Xiao et
al. 2023 (StreamingLLM, "Efficient Streaming Language Models with Attention Sinks") found that a model's
quality collapses once the first tokens leave such a window, because heads park their spare weight on
them, and that keeping the first S tokens ("sinks") forever besides the window fixes it.

A policy is one ``CachePolicy`` record of ``POLICIES``; how positions are counted inside the cache is one
``CachePositions`` record of ``POSITIONINGS``: a key keeps its original position, or is re-indexed by its
slot in the cache (StreamingLLM: keys are cached before RoPE and turned by slot at every step, so the
distances a head sees never exceed the cache's size). ``decode_with_policy`` decodes one token at a time,
evicting by the policy; each step's row is full causal attention restricted to the kept keys (with the
original positions). Pure NumPy, shapes as in ``mha_core`` (n: keys held in the cache).
"""

from __future__ import annotations

from collections.abc import Callable
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
from mha_core.config import RunResult, attention_scheme
from mha_core.positions import ROPE_BASE, apply_positions, check_inside_attention


@dataclass(frozen=True)
class CachePolicy:
    """One way to bound the cache: whether it slides a window of W recent tokens, and keeps S sinks."""

    name: str  # the link's value
    label: str
    summary: str
    slides: bool = False  # keeps only the ``window`` most recent tokens (the new one included)
    sinks: bool = False  # ... and the first ``sinks`` tokens, never evicted
    paper: str = ""

    def keeps(self, positions: np.ndarray, newest: int, window: int, sinks: int) -> np.ndarray:
        """(n,) True for each held position the cache keeps once token ``newest`` is in."""
        if not self.slides:
            return np.ones(positions.shape, dtype=bool)  # (n,)
        recent = positions > newest - window  # (n,) the last ``window`` positions
        return recent | (positions < sinks) if self.sinks else recent  # (n,)


POLICIES: dict[str, CachePolicy] = {
    policy.name: policy
    for policy in (
        CachePolicy("full", "full cache", "Every token stays: the cache grows by one token per step."),
        CachePolicy("window", "sliding window of W tokens", "Only the W most recent tokens stay (the new one "
                    "included); older ones are evicted.", slides=True,
                    paper="Xiao et al. 2023 (StreamingLLM), its window-attention baseline"),
        CachePolicy("sinks", "window of W + S attention sinks", "The first S tokens are never evicted; besides them "
                    "the W most recent stay.", slides=True, sinks=True, paper="Xiao et al. 2023 (StreamingLLM)"),
    )
}


@dataclass(frozen=True)
class CachePositions:
    """Where a cached key stands for RoPE and ALiBi, and where the new query stands."""

    name: str
    label: str
    summary: str
    # (held positions (n,), the new token's position t) -> (key positions (n,), query position)
    place: Callable[[np.ndarray, int], tuple[np.ndarray, int]]


POSITIONINGS: dict[str, CachePositions] = {
    p.name: p
    for p in (
        CachePositions("original", "original positions", "A key keeps the position it had in the text; the "
                       "query stands at t. Distances can exceed the cache's size.",
                       lambda held, t: (held, t)),
        CachePositions("cache", "re-indexed by cache slot (StreamingLLM)", "Keys are numbered by their slot in "
                       "the cache, 0..n−1, and the query by n−1: distances never exceed the cache's size.",
                       lambda held, t: (np.arange(held.size), held.size - 1)),
    )
}


def cache_problem(policy: str, window: int, sinks: int, positioning: str) -> str | None:
    """Why these cache settings cannot run, or None."""
    if policy not in POLICIES:
        return f"unknown cache policy {policy!r}: choose one of {', '.join(POLICIES)}"
    if positioning not in POSITIONINGS:
        return f"unknown cache positioning {positioning!r}: choose one of {', '.join(POSITIONINGS)}"
    for name, value, low in (("window W", window, 1), ("sinks S", sinks, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            return f"{name} must be a whole number of at least {low}, got {value!r}"
    return None


@dataclass(frozen=True)
class PolicyStep:
    """One decoding step under a cache policy; arrays read-only.

    ``position`` t of the new token; ``held (n,)`` the original positions the cache holds after the step
    (the new token included), ``evicted`` those it dropped at this step; ``key_positions (n,)`` and
    ``query_position``: where RoPE/ALiBi place them; ``logits``, ``weights (nh, 1, n)``; ``heads (nh, 1, hv)``;
    ``output (1, C_out)``; ``null_weight (nh,)``: what the null key took (0 without it).
    """

    position: int
    held: np.ndarray
    evicted: np.ndarray
    key_positions: np.ndarray
    query_position: int
    logits: np.ndarray
    weights: np.ndarray
    heads: np.ndarray
    output: np.ndarray
    null_weight: np.ndarray

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def cache_size(self) -> int:
        """n, the tokens held."""
        return int(self.held.size)


def decode_with_policy(
    x: np.ndarray,
    weights: AttentionWeights,
    n_heads: int,
    *,
    policy: str = "full",
    window: int = 4,
    sinks: int = 1,
    positioning: str = "original",
    kv_heads: int | None = None,
    pe: str = "none",
    rope_base: float = ROPE_BASE,
    scale: float | None = None,
    null_key: bool = False,
) -> list[PolicyStep]:
    """Decode the tokens of ``x`` (T, C) one at a time, the cache evicting by ``POLICIES[policy]``.

    The cache holds each token's unturned key and its value with its original position; every step turns
    the held keys at the positions ``POSITIONINGS[positioning]`` gives (with original positions that is
    the same as caching turned keys). The other options are ``multi_head_attention``'s.
    """
    problem = cache_problem(policy, window, sinks, positioning)
    if problem is not None:
        raise ValueError(problem)
    rule, place = POLICIES[policy], POSITIONINGS[positioning].place
    kv_heads = n_heads if kv_heads is None else kv_heads
    dtype = compute_dtype(x, *weights.arrays())
    x, weights = np.asarray(x, dtype=dtype), weights.astype(dtype)
    check_inside_attention(pe, weights.w_q.shape[1] // n_heads, False, rope_base)
    k_all = split_heads(project(x, weights.w_k, weights.b_k), kv_heads)  # (kv, T, hs) unturned
    v_all = split_heads(project(x, weights.w_v, weights.b_v), kv_heads)  # (kv, T, hv)
    q_all = split_heads(project(x, weights.w_q, weights.b_q), n_heads)  # (nh, T, hs)
    scale = default_scale(q_all.shape[-1]) if scale is None else float(scale)
    held = np.zeros(0, dtype=int)  # (n,) original positions in the cache
    steps = []
    for t in range(x.shape[0]):
        held = np.append(held, t)  # (n+1,) the new token goes in
        keep = rule.keeps(held, t, window, sinks)  # (n+1,)
        evicted, held = held[~keep], held[keep]  # (e,), (n,)
        key_positions, query_position = place(held, t)  # (n,), int
        placed = apply_positions(pe, q_all[:, t : t + 1], k_all[:, held], np.array([query_position]),
                                 key_positions, rope_base=rope_base)  # q (nh,1,hs), k (kv,n,hs); bias (nh,1,n)
        _, logits, attn, heads = scaled_dot_product_attention(placed.q, placed.k, v_all[:, held], None, scale,
                                                              bias=placed.bias, null_key=null_key)  # (nh,1,n) x2
        output = output_projection(merge_heads(heads), weights.w_o, weights.b_o)  # (1, C_out)
        spare = 1.0 - attn[:, 0].sum(axis=-1) if null_key else np.zeros(n_heads)  # (nh,)
        steps.append(PolicyStep(t, held, evicted, np.asarray(key_positions), int(query_position), logits, attn,
                                heads, output, spare))
    return steps


def policy_run(result: RunResult, policy: str, window: int, sinks: int, positioning: str) -> list[PolicyStep]:
    """Decode ``result``'s tokens (a ``decoder_config`` run) under a cache policy, with the layer's own options."""
    config, trace = result.config, result.trace
    return decode_with_policy(result.x_q, result.weights, config.n_heads, policy=policy, window=window,
                              sinks=sinks if POLICIES[policy].sinks else 0, positioning=positioning,
                              kv_heads=config.key_value_heads, pe=attention_scheme(config),
                              rope_base=config.rope_base, scale=trace.scale, null_key=config.null_key)
