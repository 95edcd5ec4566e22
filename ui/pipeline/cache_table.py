"""The KV cache, step by step, as a table: what the Decoding page and the KV-cache lesson both show."""

from __future__ import annotations

import pandas as pd

from mha_core.decoder import step_cost
from mha_core.kv_cache import DecodeStep
from ui.i18n import N_, _

# The table's headers, in the run's language where it is built (a page that caches the table keys it on the language)
TOKEN, FRESH, REUSED, CACHE_NUMBERS, CACHE_BYTES, AS_MHA, STEP = (
    N_("token"), N_("fresh numbers"), N_("reused from cache"), N_("cache numbers"), N_("cache bytes"),
    N_("cache bytes as MHA"), N_("step t"))


def cache_table(steps: list[DecodeStep], labels: list[str], n_heads: int) -> pd.DataFrame:
    """One row per step: the token, the numbers computed fresh, read from the cache, and the cache's size.

    ``as MHA`` is the size the cache would have with a key/value head per query head (nh/kv times more).
    """
    rows = []
    for step in steps:
        cost = step_cost(step)
        kv = step.cache.k.shape[0]
        rows.append({_(TOKEN): labels[step.position], _(FRESH): cost.fresh, _(REUSED): cost.reused,
                     _(CACHE_NUMBERS): cost.cache_numbers, _(CACHE_BYTES): cost.cache_bytes,
                     _(AS_MHA): cost.cache_bytes * n_heads // kv})
    return pd.DataFrame(rows, index=pd.Index([step.position for step in steps], name=_(STEP)))
