"""What each head does, in numbers: pure functions of an AttentionTrace's weights.

Every per-head figure is a mean over the query rows that have at least one key to attend to
(fully masked rows are left out); a head with no such row gets NaN.
"""

from __future__ import annotations

import numpy as np


def _row_mean(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mean of ``values (nh, Tq)`` over the rows where ``rows (nh, Tq)`` is True; NaN where none. Shape (nh,)."""
    counts = rows.sum(axis=1)  # (nh,)
    totals = np.where(rows, values, 0.0).sum(axis=1)  # (nh,)
    return np.divide(totals, counts, out=np.full(totals.shape, np.nan), where=counts > 0)


def normalized_entropy(weights: np.ndarray, fully_masked: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """Per head: row entropy / log(number of keys the row may attend to), averaged. 0 = one key, 1 = even. Shape (nh,).

    ``allowed (nh, Tq, Tk)`` marks the keys each row may attend to (``np.isfinite(trace.logits)``);
    None means every key. Rows with a single allowed key have no choice to make and are left out.
    """
    if allowed is None:
        allowed = np.ones(weights.shape, dtype=bool)  # (nh, Tq, Tk)
    n_keys = allowed.sum(axis=-1)  # (nh, Tq)
    safe = np.where(weights > 0, weights, 1.0)  # 0 * log 0 counts as 0
    entropy = -(weights * np.log(safe)).sum(axis=-1)  # (nh, Tq)
    norm = np.log(np.maximum(n_keys, 2))  # (nh, Tq)
    return _row_mean(entropy / norm, (n_keys > 1) & ~fully_masked)


def max_weight(weights: np.ndarray, fully_masked: np.ndarray) -> np.ndarray:
    """Per head: the mean of each row's largest weight (1 = one-hot rows). Shape (nh,)."""
    return _row_mean(weights.max(axis=-1), ~fully_masked)


def diagonal_mass(weights: np.ndarray, fully_masked: np.ndarray, offset: int = 0) -> np.ndarray:
    """Per head: mean weight of query i on key i - offset (0: itself, 1: the previous token). Shape (nh,).

    Only rows i with a key i - offset (0 <= i - offset < Tk) count.
    """
    nh, tq, tk = weights.shape
    rows = np.arange(tq)
    cols = rows - offset
    has_key = (cols >= 0) & (cols < tk)  # (Tq,)
    picked = np.zeros((nh, tq))
    picked[:, has_key] = weights[:, rows[has_key], cols[has_key]]
    return _row_mean(picked, has_key[None, :] & ~fully_masked)


def first_token_mass(weights: np.ndarray, fully_masked: np.ndarray) -> np.ndarray:
    """Per head: mean weight on key 0 (an attention sink). Shape (nh,)."""
    return _row_mean(weights[:, :, 0], ~fully_masked)


def head_summary(weights: np.ndarray, fully_masked: np.ndarray, allowed: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """All per-head diagnostics by name, each of shape (nh,); ``allowed`` as in ``normalized_entropy``."""
    return {
        "entropy": normalized_entropy(weights, fully_masked, allowed),
        "max_weight": max_weight(weights, fully_masked),
        "diagonal": diagonal_mass(weights, fully_masked, 0),
        "previous": diagonal_mass(weights, fully_masked, 1),
        "first": first_token_mass(weights, fully_masked),
    }


def head_similarity(weights: np.ndarray) -> np.ndarray:
    """Cosine similarity of every pair of heads' weight matrices, flattened. Shape (nh, nh).

    1 on the diagonal, except for a head whose weights are all zero (every row masked): it has
    similarity 0 to every head, itself included.
    """
    flat = weights.reshape(weights.shape[0], -1)  # (nh, Tq*Tk)
    norms = np.linalg.norm(flat, axis=1)  # (nh,)
    unit = np.divide(flat, norms[:, None], out=np.zeros_like(flat), where=norms[:, None] > 0)
    return unit @ unit.T  # (nh, nh)
