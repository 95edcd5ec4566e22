"""Attention as a function of the offset i − j between a query's position and a key's.

RoPE makes a score depend on the offset alone (``rope_offset_scores``, checked with
``diagonal_spread``); ALiBi penalises the distance |i − j|, which shows in how far each head looks
(``mean_attended_distance``). Pure NumPy; the Decoding page and the lessons draw these numbers.
"""

from __future__ import annotations

import numpy as np

from mha_core.positions import rope_angles, rotate


def rope_offset_scores(q: np.ndarray, k: np.ndarray, positions: int, base: float) -> np.ndarray:
    """(P, P) scores of one query vector placed at position p and one key vector at p', after RoPE.

    q, k : (hs,) the unrotated vectors. Entry [p, p'] = rotate(q, p) . rotate(k, p'); RoPE makes it a
    function of p - p' only, so every diagonal (the same offset, shifted) holds one number.
    """
    angles = rope_angles(np.arange(positions), q.shape[-1], base)  # (P, hs/2)
    q_at = rotate(np.broadcast_to(q, (1, positions, q.shape[-1])), angles)[0]  # (P, hs)
    k_at = rotate(np.broadcast_to(k, (1, positions, k.shape[-1])), angles)[0]  # (P, hs)
    return q_at @ k_at.T  # (P, P)


def diagonal_spread(matrix: np.ndarray) -> float:
    """The largest max - min along any diagonal of a square matrix (0 when every offset has one value)."""
    n = matrix.shape[0]
    return float(max(np.ptp(np.diagonal(matrix, offset)) for offset in range(-n + 1, n)))


def distances(n_queries: int, n_keys: int) -> np.ndarray:
    """(Tq, Tk) of |i − j|: how far key j stands from query i."""
    return np.abs(np.subtract.outer(np.arange(n_queries), np.arange(n_keys)))  # (Tq, Tk)


def mean_attended_distance(weights: np.ndarray) -> np.ndarray:
    """How far each head looks: sum_j A_ij |i − j| averaged over the rows i. (nh, Tq, Tk) -> (nh,)."""
    return (weights * distances(*weights.shape[-2:])).sum(axis=-1).mean(axis=-1)  # (nh,)
