"""Which keys a decoder's cache keeps: full, a sliding window, or a window with attention sinks.

A cache that keeps every token grows without end. A sliding window keeps the last W tokens only; Xiao et
al. 2023 (StreamingLLM, "Efficient Streaming Language Models with Attention Sinks") found that a model's
quality collapses once the first tokens leave such a window, because heads park their spare weight on
them, and that keeping the first S tokens ("sinks") forever besides the window fixes it.

A policy is one ``CachePolicy`` record of ``POLICIES``; how positions are counted inside the cache is one
``CachePositions`` record of ``POSITIONINGS``: a key keeps its original position, or is re-indexed by its
slot in the cache (StreamingLLM: keys are cached before RoPE and turned by slot at every step, so the
distances a head sees never exceed the cache's size). ``decode_with_policy`` decodes one token at a time
through the engine's one loop (``mha_core.decoding``) with the policy's kept-state record (``window_cache``),
evicting by the policy; each step's row is full causal attention restricted to the kept keys (with the
original positions). Pure NumPy, shapes as in ``mha_core`` (n: keys held in the cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from mha_core.config import RunResult, attention_scheme
from mha_core.decoder_state import Decoder, DecoderLayer, NewToken, Reading, attend_over_keys
from mha_core.decoding import cast_for_decoding, decode_tokens, decoder_layer
from mha_core.marks import N_
from mha_core.positions import ROPE_BASE, check_inside_attention
from mha_core.steps import AttentionWeights, apply_positions_per_part


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
        CachePolicy("full", N_("full cache"), N_("Every token stays: the cache grows by one token per step.")),
        CachePolicy("window", N_("sliding window of W tokens"), N_("Only the W most recent tokens stay (the new one "
                    "included); older ones are evicted."), slides=True,
                    paper="Xiao et al. 2023 (StreamingLLM), its window-attention baseline"),
        CachePolicy("sinks", N_("window of W + S attention sinks"), N_("The first S tokens are never evicted; "
                    "besides them the W most recent stay."), slides=True, sinks=True, paper="Xiao et al. 2023 (StreamingLLM)"),
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
        CachePositions("original", N_("original positions"), N_("A key keeps the position it had in the text; the "
                       "query stands at t. Distances can exceed the cache's size."),
                       lambda held, t: (held, t)),
        CachePositions("cache", N_("re-indexed by cache slot (StreamingLLM)"), N_("Keys are numbered by their slot "
                       "in the cache, 0..n−1, and the query by n−1: distances never exceed the cache's size."),
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
class WindowCache:
    """What a decoder under a cache policy keeps: ``held (n,)`` the original positions of the tokens in the cache,
    ``k (kv,n,hs)`` their keys before RoPE, ``v (kv,n,hv)`` their values; ``evicted (e,)`` the positions the last
    step dropped, ``key_positions (n,)`` and ``query_position`` where that step placed them."""

    held: np.ndarray
    k: np.ndarray
    v: np.ndarray
    evicted: np.ndarray
    key_positions: np.ndarray
    query_position: int


@dataclass(frozen=True)
class WindowSettings:
    """A policy's settings as its record's hooks read them."""

    policy: CachePolicy
    positions: CachePositions
    window: int
    sinks: int


def _start_window(settings: WindowSettings, layer: DecoderLayer, dtype) -> WindowCache:
    hs, hv = layer.weights.w_k.shape[1] // layer.kv_heads, layer.weights.w_v.shape[1] // layer.kv_heads
    none = np.zeros(0, dtype=int)  # (0,)
    return WindowCache(none, np.empty((layer.kv_heads, 0, hs), dtype=dtype),  # (kv, 0, hs)
                       np.empty((layer.kv_heads, 0, hv), dtype=dtype), none, none, 0)  # (kv, 0, hv)


def _keep_in_window(settings: WindowSettings, layer: DecoderLayer, kept: WindowCache,
                    token: NewToken) -> tuple[WindowCache, Reading]:
    """The new token in, the policy's evictions out, the held keys turned where the positioning places them."""
    t = token.position
    held = np.append(kept.held, t)  # (n+1,) the new token goes in
    keeps = settings.policy.keeps(held, t, settings.window, settings.sinks)  # (n+1,)
    k = np.concatenate([kept.k, token.k], axis=1)[:, keeps]  # (kv, n, hs) unturned
    v = np.concatenate([kept.v, token.v], axis=1)[:, keeps]  # (kv, n, hv)
    key_positions, query_position = settings.positions.place(held[keeps], t)  # (n,), int
    placed = apply_positions_per_part(layer.pe, token.q, k, np.array([query_position]), key_positions,
                                      layer.rope_base, layer.kernel.sub_heads)  # q (nh,1,hs), k (kv,n,hs)
    kept = WindowCache(held[keeps], k, v, held[~keeps], np.asarray(key_positions), int(query_position))
    return kept, Reading(placed.q, placed.k, v, placed.bias)  # bias (nh, 1, n) at most


def _held_window(kept: WindowCache) -> tuple[tuple[str, np.ndarray], ...]:
    return (("K cache (before RoPE)", kept.k), ("V cache", kept.v))


def window_cache(policy: str, window: int, sinks: int, positioning: str) -> Decoder:
    """The kept-state record of a cache policy: keep the new token, evict by ``POLICIES[policy]``, and turn the
    held keys at the positions ``POSITIONINGS[positioning]`` gives at every step (keys are cached unturned)."""
    settings = WindowSettings(POLICIES[policy], POSITIONINGS[positioning], window, sinks)
    return Decoder(f"{policy} cache", partial(_start_window, settings), partial(_keep_in_window, settings),
                   attend_over_keys, _held_window, words=settings.policy.summary)


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
    kernel: str = "softmax",
    kernel_params=None,
) -> list[PolicyStep]:
    """Decode the tokens of ``x`` (T, C) one at a time, the cache evicting by ``POLICIES[policy]``.

    The cache holds each token's unturned key and its value with its original position; every step turns
    the held keys at the positions ``POSITIONINGS[positioning]`` gives (with original positions that is
    the same as caching turned keys); the kernel's own ``attend`` reads the kept keys. The other options are
    ``multi_head_attention``'s.
    """
    problem = cache_problem(policy, window, sinks, positioning)
    if problem is not None:
        raise ValueError(problem)
    x, weights, _ = cast_for_decoding(x, weights)
    check_inside_attention(pe, weights.w_q.shape[1] // n_heads, False, rope_base)
    layer = decoder_layer(weights, n_heads, kv_heads=kv_heads, pe=pe, rope_base=rope_base, scale=scale,
                          null_key=null_key, kernel=kernel, kernel_params=kernel_params)
    steps = []
    for step in decode_tokens(x, layer, window_cache(policy, window, sinks, positioning), prompt=True):
        kept, attn = step.kept, step.attended.weights  # attn (nh, 1, n)
        spare = 1.0 - attn[:, 0].sum(axis=-1) if null_key else np.zeros(n_heads)  # (nh,)
        steps.append(PolicyStep(step.position, kept.held, kept.evicted, kept.key_positions, kept.query_position,
                                step.attended.logits, attn, step.attended.heads, step.output, spare))
    return steps


def policy_run(result: RunResult, policy: str, window: int, sinks: int, positioning: str) -> list[PolicyStep]:
    """Decode ``result``'s tokens (a ``decoder_config`` run) under a cache policy, with the layer's own options."""
    config, trace = result.config, result.trace
    return decode_with_policy(result.x_q, result.weights, config.n_heads, policy=policy, window=window,
                              sinks=sinks if POLICIES[policy].sinks else 0, positioning=positioning,
                              kv_heads=config.key_value_heads, pe=attention_scheme(config),
                              rope_base=config.rope_base, scale=trace.scale, null_key=config.null_key,
                              kernel=config.kernel, kernel_params=result.kernel_params)
