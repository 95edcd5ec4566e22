"""The Decoding page's variant stepper (issue 26): what a differential, linear or MLA decoder keeps per step
instead of an ordinary KV cache, as pure builders; ``variant_stepper`` draws them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_core.config import MHAConfig
from mha_core.mla import cache_per_token
from mha_core.variant_decoding import VariantStep


def assembled_variant_weights(steps: list[VariantStep], upto: int, n_tokens: int | None = None) -> np.ndarray:
    """The rows of steps 0..upto stacked into (nh, T, T), T = ``n_tokens`` (default: the steps given, but the page
    decodes only tokens 0..t); the future is 0, rows not decoded yet NaN (blank)."""
    n_heads, t = steps[0].weights.shape[0], len(steps) if n_tokens is None else n_tokens
    rows = np.full((n_heads, t, t), np.nan)  # (nh, T, T)
    for step in steps[: upto + 1]:
        rows[:, step.position, : step.position + 1] = step.weights  # (nh, t+1)
        rows[:, step.position, step.position + 1:] = 0.0
    return rows


def held_words(config: MHAConfig) -> str:
    """What the variant's decoder keeps, in words."""
    if config.mla_rank:
        return (f"the latent c (r = {config.mla_rank}) and the shared RoPE key k_R ({config.mla_rope}) of every token: "
                f"{config.mla_rank + config.mla_rope} numbers per token for all heads together")
    hs, kv = config.head_size, config.key_value_heads
    if config.kernel == "linear":
        return (f"a state S ({hs}×{hs}) and its sum z ({hs}) per key/value head: {kv * hs * (hs + 1)} numbers, "
                "the same at every step, and no keys or values at all")
    return f"the keys and values of every token, as softmax heads do: {2 * kv * hs} numbers per token"


def variant_intro(config: MHAConfig) -> str:
    """The Decoding page's opening sentence for a variant: what its decoder keeps instead of (or as) a KV cache."""
    if config.mla_rank:
        kept = ("a **latent cache**: one latent vector c and the shared RoPE key k_R per token, from which every "
                "head's scores are taken the absorbed way (K and V are never built)")
    elif config.kernel == "linear":
        kept = ("a **state of constant size**: S = Σ φ(k_t) v_tᵀ and z = Σ φ(k_t), updated once per token; no "
                "keys or values are kept")
    else:
        kept = "a **KV cache**, as softmax heads do; each step's row is A₁ − λA₂ over the whole cache"
    return (f"A decoder generates one token per step. This layer keeps {kept}. The rows it assembles are exactly "
            "the rows of full causal attention, shown beside them.")


def memory_table(steps: list[VariantStep], labels: list[str], config: MHAConfig) -> pd.DataFrame:
    """One row per step: the token, the numbers the variant keeps, and what MHA's (and GQA's) KV cache would."""
    per_token = cache_per_token(config.n_heads, config.head_size, config.key_value_heads)
    rows = []
    for step in steps:
        t = step.position + 1
        row = {"token": labels[step.position], "kept (this layer)": step.numbers}
        row.update({f"{name} KV cache": size * t for name, size in per_token.items()})
        rows.append(row)
    return pd.DataFrame(rows, index=pd.Index([step.position for step in steps], name="step t"))


@dataclass(frozen=True)
class CacheComparison:
    """The metric beside what the variant keeps: a softmax layer's KV cache with the same K/V heads, and a sentence
    with multi-head attention's (one K/V head per query head) when that differs ("" otherwise)."""

    label: str
    numbers: int
    sentence: str


def cache_comparison(table: pd.DataFrame, config: MHAConfig, t: int) -> CacheComparison:
    """Like with like after token ``t``: the KV cache of the layer's own K/V heads (``memory_table``'s columns)."""
    mha = int(table["MHA KV cache"].iloc[t])
    shared = [name for name in table.columns if name.endswith(" KV cache") and name != "MHA KV cache"]
    if not shared:  # one K/V head per query head: the layer's own cache is MHA's
        return CacheComparison("MHA's KV cache would hold", mha, "")
    kind, kv = shared[0].removesuffix(" KV cache"), config.key_value_heads
    same = int(table[shared[0]].iloc[t])
    return CacheComparison(
        f"{kind} KV cache ({kv} K/V heads)", same,
        f"A softmax layer with the same {kv} K/V heads ({kind}) would have cached **{same:,}** numbers by now; with "
        f"one K/V head per query head (MHA, {config.n_heads}), **{mha:,}**.")


def max_variant_difference(steps: list[VariantStep], upto: int, weights: np.ndarray) -> float:
    """max |Δ| between the decoded rows 0..upto and the same rows of full causal attention (nh, T, T)."""
    rows = assembled_variant_weights(steps, upto, weights.shape[-1])[:, : upto + 1]  # (nh, upto+1, T)
    return float(np.max(np.abs(rows - weights[:, : upto + 1])))
