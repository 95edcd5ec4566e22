"""Where tokens stand: the positional schemes, one table of records, and the steps that apply them.

Attention alone cannot tell word order. Each scheme in ``SCHEMES`` says it one way:

- **sinusoidal** ("Attention Is All You Need") adds sin/cos waves of the position to the tokens,
  before attention;
- **RoPE** (Su et al. 2021) turns each pair of a query's or key's features by an angle
  proportional to the token's position, so that q_i . k_j depends on i - j only. Pairs are
  half-split as in LLaMA and GPT-NeoX: feature f is paired with feature f + hs/2;
- **ALiBi** (Press et al. 2022) adds -m_h |i - j| to head h's logits: a penalty growing with
  the distance, steeper in some heads than in others.

A scheme is a ``PositionScheme`` record: what it does (add to the tokens, turn q and k, add a
bias to the logits) and the rules it brings. Every list, label, rule and grid of the app reads
``SCHEMES``; ``apply_positions`` is the one place that turns q and k and makes the bias, for full
attention and for a decoding step alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ROPE_BASE = 10000.0  # theta of RoPE: pair p turns by position * theta^(-2p/hs)


def rope_angles(positions: np.ndarray, head_size: int, base: float = ROPE_BASE) -> np.ndarray:
    """Angle of every (position, pair): positions (T,) -> (T, hs/2), angle = position * base^(-2p/hs).

    Always float64: an angle of 60 radians in float32 is off by up to 4e-6, and so would be
    every rotated q and k; ``rotate`` rounds only the cosines and sines to the attention's dtype.
    """
    pair = np.arange(0, head_size, 2)  # (hs/2,), 0, 2, 4, ...
    frequency = 1.0 / base ** (pair / head_size)  # (hs/2,)
    return np.asarray(positions, dtype=np.float64)[:, None] * frequency  # (T, hs/2)


def rotate(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Turn every pair (x_p, x_{p+hs/2}) by its angle: (nh, T, hs), (T, hs/2) -> (nh, T, hs).

    The 2-D rotation [[cos, -sin], [sin, cos]] applied to each pair; the length of every
    query and key is unchanged.
    """
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]  # (nh, T, hs/2) each
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)  # (T, hs/2) each
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)  # (nh, T, hs)


def alibi_slopes(n_heads: int) -> np.ndarray:
    """The paper's slope m_h of every head, (nh,): the geometric series 2^(-8/n), 2^(-16/n), ...

    For a head count that is not a power of two, the slopes of the power of two below it,
    then every other slope of the power of two above it, as many as are missing (the paper's
    reference code; BLOOM does the same).
    """
    below = 2 ** math.floor(math.log2(n_heads))
    slopes = _power_of_two_slopes(below)  # (below,)
    if below < n_heads:
        slopes = np.concatenate([slopes, _power_of_two_slopes(2 * below)[0::2][: n_heads - below]])  # (nh,)
    return slopes


def _power_of_two_slopes(n: int) -> np.ndarray:
    """2^(-8/n) to the powers 1..n, (n,)."""
    return 2.0 ** (-8.0 / n * np.arange(1, n + 1))  # (n,)


def alibi_bias(slopes: np.ndarray, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
    """The bias -m_h |i - j| added to head h's logits: (nh,), (Tq,), (Tk,) -> (nh, Tq, Tk).

    Causal rows (j <= i) get the paper's -m_h (i - j). A key after its query (j > i, possible
    without a causal mask) is penalised by its distance too, as in bidirectional ALiBi (e.g.
    MosaicBERT); the paper's -m_h (i - j) would reward it instead.
    """
    distance = np.abs(np.subtract.outer(q_positions, k_positions))  # (Tq, Tk), |i - j|
    return -slopes[:, None, None] * distance  # (nh, Tq, Tk)


def sinusoidal_positional_encoding(n_positions: int, d_model: int, dtype=np.float64) -> np.ndarray:
    """PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(same angle). Shape (T, C)."""
    positions = np.arange(n_positions)[:, None]  # (T, 1)
    pair = np.arange(d_model)[None, :] // 2  # (1, C), i for columns 2i and 2i+1
    angles = positions / np.power(10000.0, 2 * pair / d_model)  # (T, C)
    pe = np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))  # (T, C)
    return pe.astype(dtype)


def distance_bias(n_heads: int, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
    """ALiBi's bias with the paper's slopes: (nh,), (Tq,), (Tk,) -> (nh, Tq, Tk)."""
    return alibi_bias(alibi_slopes(n_heads), q_positions, k_positions)  # (nh, Tq, Tk)


# ---- the table of schemes -------------------------------------------------------------------


@dataclass(frozen=True)
class PositionScheme:
    """One positional scheme: its names, what it does to the computation, and the rules it brings.

    At most one of the three actions is usual, but none is required: a scheme with none is "no positions".
    """

    name: str  # the configuration's ``pe`` and the link's value
    label: str  # the sidebar's words for it
    short_label: str  # a heading, a summary line
    summary: str  # one sentence: what it does
    # (T, C) added to the tokens before attention, from (positions, d_model)
    add_to_tokens: Callable[[int, int], np.ndarray] | None = None
    # (T, hs/2) angles of every (position, pair), from (positions, hs, base); q and k are turned by them
    angles: Callable[[np.ndarray, int, float], np.ndarray] | None = None
    # (nh, Tq, Tk) added to the scaled scores, from (nh, query positions, key positions)
    bias: Callable[[int, np.ndarray, np.ndarray], np.ndarray] | None = None
    self_attention_only: bool = False  # it measures distances within one sentence
    paper: str = ""

    @property
    def inside_attention(self) -> bool:
        """It acts on q, k or the logits (not on the tokens): hand-built heads, which carry their own
        positions, cannot take it."""
        return self.angles is not None or self.bias is not None

    @property
    def turns(self) -> bool:
        """It turns q and k in pairs of features: the head size must be even, and the base applies."""
        return self.angles is not None


SCHEMES: dict[str, PositionScheme] = {
    scheme.name: scheme
    for scheme in (
        PositionScheme("none", "none", "none", "No position signal: attention sees a bag of tokens."),
        PositionScheme("sinusoidal", "sinusoidal, added to the tokens", "sinusoidal",
                       "Sine and cosine waves of the position are added to every token before attention.",
                       add_to_tokens=sinusoidal_positional_encoding, paper="Vaswani et al. 2017"),
        PositionScheme("rope", "RoPE (rotate q and k)", "RoPE",
                       "Each pair of a query's and key's features is turned by an angle proportional to its "
                       "position, so q_i · k_j depends on i − j only.",
                       angles=rope_angles, paper="Su et al. 2021"),
        PositionScheme("alibi", "ALiBi (distance penalty on logits)", "ALiBi",
                       "−m_h |i − j| is added to head h's logits: a penalty growing with the distance.",
                       bias=distance_bias, self_attention_only=True, paper="Press et al. 2022"),
    )
}


def position_scheme(name: str) -> PositionScheme:
    """The record of scheme ``name``; ValueError naming the choices otherwise."""
    if name not in SCHEMES:
        raise ValueError(f"unknown positional scheme {name!r}: choose one of {', '.join(SCHEMES)}")
    return SCHEMES[name]


def scheme_problem(name: str, head_size: int, cross: bool, rope_base) -> str | None:
    """Why scheme ``name`` cannot run on heads of ``head_size`` (in cross-attention when ``cross``), or None."""
    if name not in SCHEMES:
        return f"unknown positional scheme {name!r}: choose one of {', '.join(SCHEMES)}"
    scheme = SCHEMES[name]
    if scheme.turns:
        base_ok = isinstance(rope_base, int | float | np.integer | np.floating) and math.isfinite(rope_base)
        if not (base_ok and rope_base > 1):
            return f"RoPE base {rope_base!r} must be a number above 1 (LLaMA uses 10000)"
        if head_size % 2:
            return (f"{scheme.short_label} turns a head's features in pairs, so the head size must be even; "
                    f"it is {head_size}")
    if scheme.self_attention_only and cross:
        return (f"{scheme.short_label} penalises the distance between positions of one sentence; in cross-attention "
                "the keys come from another sentence: use RoPE, sinusoidal or no positions there")
    return None


def check_inside_attention(name: str, head_size: int, cross: bool, rope_base) -> None:
    """ValueError when scheme ``name`` cannot act inside this attention call (the engine's check)."""
    problem = scheme_problem(name, head_size, cross, rope_base)
    if problem is None and position_scheme(name).add_to_tokens is not None:
        problem = (f"pe={name!r} is added to the tokens before attention: add it to x (mha_core.positions) "
                   "and pass pe='none' here (MHAConfig runs do both)")
    if problem is not None:
        raise ValueError(problem)


@dataclass(frozen=True)
class Positioned:
    """q and k after a scheme acted on them, its bias, and what the trace keeps of it.

    ``q (nh,Tq,hs)``, ``k (kv,Tk,hs)`` turned or as they came; ``bias (nh,Tq,Tk')`` or None;
    for a scheme that turns: ``q_unrotated``, ``k_unrotated`` and the angles ``q_angles (Tq,hs/2)``,
    ``k_angles (Tk,hs/2)`` (always float64, see ``rope_angles``).
    """

    q: np.ndarray
    k: np.ndarray
    bias: np.ndarray | None = None
    q_unrotated: np.ndarray | None = None
    k_unrotated: np.ndarray | None = None
    q_angles: np.ndarray | None = None
    k_angles: np.ndarray | None = None


def apply_positions(
    name: str,
    q: np.ndarray,
    k: np.ndarray,
    q_positions: np.ndarray,
    k_positions: np.ndarray,
    *,
    rope_base: float = ROPE_BASE,
    key_positions: np.ndarray | None = None,
) -> Positioned:
    """What scheme ``name`` does inside attention: turn q (nh,Tq,hs) and k (kv,Tk,hs), make the bias.

    ``q_positions (Tq,)`` and ``k_positions (Tk,)`` are where the given queries and keys stand.
    ``key_positions (Tk',)``: every key the queries meet, when ``k`` holds only some of them (a
    decoding step turns its new key alone, while its query meets the whole cache); default k_positions.
    A scheme that adds to the tokens has already acted (on x) and changes nothing here.
    """
    scheme = position_scheme(name)
    key_positions = k_positions if key_positions is None else key_positions
    bias = None
    if scheme.bias is not None:
        bias = scheme.bias(q.shape[0], q_positions, key_positions).astype(q.dtype)  # (nh, Tq, Tk')
    if not scheme.turns:
        return Positioned(q, k, bias)
    q_angles = scheme.angles(q_positions, q.shape[-1], rope_base)  # (Tq, hs/2)
    k_angles = scheme.angles(k_positions, k.shape[-1], rope_base)  # (Tk, hs/2)
    return Positioned(rotate(q, q_angles), rotate(k, k_angles), bias, q, k, q_angles, k_angles)  # (nh,Tq,hs), (kv,Tk,hs)
