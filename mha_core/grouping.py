"""Grouped-query attention's one rule: which key/value head a query head reads.

With kv key/value heads serving nh query heads, the query heads form kv groups of nh/kv
neighbours, and query head h reads key/value head h // (nh/kv). This module is the one place
that says so; ``AttentionTrace.kv_head_of`` and the step-by-step view's sharing matrix read it,
and ``attention.group_heads`` lays the heads out in the same groups.
"""

from __future__ import annotations

import numpy as np


def group_size(n_heads: int, kv_heads: int) -> int:
    """Query heads per key/value head, nh/kv (kv must divide nh)."""
    if kv_heads < 1 or n_heads % kv_heads:
        raise ValueError(f"{kv_heads} key/value heads cannot serve {n_heads} query heads in equal groups "
                         f"(kv must divide nh)")
    return n_heads // kv_heads


def kv_head_of(head, n_heads: int, kv_heads: int):
    """The key/value head query head ``head`` reads: head // (nh/kv). ``head`` may be an int or an int array."""
    return head // group_size(n_heads, kv_heads)


def kv_sharing_matrix(n_heads: int, kv_heads: int) -> np.ndarray:
    """(nh, kv) of 0/1: 1 where query head h reads key/value head g; every row holds one 1."""
    reads = kv_head_of(np.arange(n_heads), n_heads, kv_heads)  # (nh,)
    return (reads[:, None] == np.arange(kv_heads)[None, :]).astype(np.float64)  # (nh, kv)
