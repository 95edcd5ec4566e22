"""Positions inside attention: rotary embeddings (RoPE) and linear biases (ALiBi).

The sinusoidal encoding of "Attention Is All You Need" is added to the tokens before attention
(``mha_core.inputs``); the two schemes here act inside it:

- **RoPE** (Su et al. 2021) turns each pair of a query's or key's features by an angle
  proportional to the token's position, so that q_i . k_j depends on i - j only. Pairs are
  half-split as in LLaMA and GPT-NeoX: feature f is paired with feature f + hs/2.
- **ALiBi** (Press et al. 2022) adds -m_h |i - j| to head h's logits: a penalty growing with
  the distance, steeper in some heads than in others.
"""

from __future__ import annotations

import math

import numpy as np

PE_KINDS = ("none", "rope", "alibi")  # the schemes that act inside attention
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
