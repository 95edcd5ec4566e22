"""Token sets: how much attention a chosen set of query tokens puts on a chosen set of key tokens. Pure NumPy.

For attention weights A (L, nh, T, T) (rows = queries, sum to 1), query set Q and key set K:

    grid[l, h]   = (1/|Q|) Σ_{i∈Q} Σ_{j∈K} A[l, h, i, j]   the share of the queries' attention that lands on the keys;
    received[j]  = mean over l, h of (1/|Q|) Σ_{i∈Q} A[l, h, i, j]   what each token receives from the queries;
    given[i]     = mean over l, h of Σ_{j∈K} A[l, h, i, j]            what each token gives to the keys.

With Q or K all tokens, this is "what the set attends to" or "what attends to the set".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def checked_positions(positions: Sequence[int], n_tokens: int) -> np.ndarray:
    """The positions sorted, once each; ValueError when there are none or one is outside 0..T-1."""
    chosen = np.unique(np.asarray(list(positions), dtype=np.int64))  # (k,)
    if chosen.size == 0:
        raise ValueError("a token set needs at least one token")
    if chosen[0] < 0 or chosen[-1] >= n_tokens:
        raise ValueError(f"token positions must lie in 0..{n_tokens - 1}, got {chosen.tolist()}")
    return chosen


def set_grid(attentions: np.ndarray, queries: Sequence[int], keys: Sequence[int]) -> np.ndarray:
    """grid (L, nh): the share of the query set's attention that lands on the key set, per layer and head."""
    t = attentions.shape[-1]
    q, k = checked_positions(queries, t), checked_positions(keys, t)
    block = attentions[:, :, q][:, :, :, k].astype(np.float64)  # (L, nh, |Q|, |K|)
    return block.sum(axis=(-2, -1)) / q.size  # (L, nh)


def per_token(attentions: np.ndarray, queries: Sequence[int], keys: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(received (T,), given (T,)): what each token receives from the queries and gives to the keys, averaged over
    layers and heads."""
    t = attentions.shape[-1]
    q, k = checked_positions(queries, t), checked_positions(keys, t)
    weights = attentions.astype(np.float64)  # (L, nh, T, T)
    received = weights[:, :, q].sum(axis=2).mean(axis=(0, 1)) / q.size  # (T,)
    given = weights[:, :, :, k].sum(axis=3).mean(axis=(0, 1))  # (T,)
    return received, given
