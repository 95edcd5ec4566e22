"""The KV cache, step by step, as a table: what the Decoding page and the KV-cache lesson both show."""

from __future__ import annotations

import pandas as pd

from mha_core.decoder import step_cost
from mha_core.kv_cache import DecodeStep


def cache_table(steps: list[DecodeStep], labels: list[str], n_heads: int) -> pd.DataFrame:
    """One row per step: the token, the numbers computed fresh, read from the cache, and the cache's size.

    ``as MHA`` is the size the cache would have with a key/value head per query head (nh/kv times more).
    """
    rows = []
    for step in steps:
        cost = step_cost(step)
        kv = step.cache.k.shape[0]
        rows.append({"token": labels[step.position], "fresh numbers": cost.fresh, "reused from cache": cost.reused,
                     "cache numbers": cost.cache_numbers, "cache bytes": cost.cache_bytes,
                     "cache bytes as MHA": cost.cache_bytes * n_heads // kv})
    return pd.DataFrame(rows, index=pd.Index([step.position for step in steps], name="step t"))
