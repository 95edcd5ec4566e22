"""The Decoding page's variant stepper (issue 26): what a layer's decoder keeps per step (its record in the engine:
a KV cache read by its kernel, a linear state, a latent cache), as pure builders; ``variant_stepper`` draws them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_core.config import MHAConfig
from mha_core.decoder_state import Decoder
from mha_core.decoding import decoder_for
from mha_core.kernels import attention_kernel
from mha_core.mla import cache_per_token
from mha_core.variant_decoding import VariantStep
from ui.charts.numbers import count
from ui.i18n import N_, _

STEP, TOKEN, KEPT = N_("step t"), N_("token"), N_("kept (this layer)")
KV_CACHE_COLUMN = N_("{kind} KV cache")  # one column per cache kind (MHA, GQA, MQA): read as keys in English


def assembled_variant_weights(steps: list[VariantStep], upto: int, n_tokens: int | None = None) -> np.ndarray:
    """The rows of steps 0..upto stacked into (nh, T, T), T = ``n_tokens`` (default: the steps given, but the page
    decodes only tokens 0..t); the future is 0, rows not decoded yet NaN (blank)."""
    n_heads, t = steps[0].weights.shape[0], len(steps) if n_tokens is None else n_tokens
    rows = np.full((n_heads, t, t), np.nan)  # (nh, T, T)
    for step in steps[: upto + 1]:
        rows[:, step.position, : step.position + 1] = step.weights  # (nh, t+1)
        rows[:, step.position, step.position + 1:] = 0.0
    return rows


def layer_decoder(config: MHAConfig) -> Decoder:
    """What the layer's decoder keeps: the record the engine's loop decodes it with."""
    return decoder_for(config.kernel, bool(config.mla_rank))


def plain_kv_cache(config: MHAConfig) -> bool:
    """The layer's kernel lets cache policies evict from its KV cache (its record says so) and it has no latent:
    the page's KV-cache stepper and its cache policies show it; any other layer gets the variant stepper."""
    return attention_kernel(config.kernel).cache_policies and not config.mla_rank


def held_words(config: MHAConfig) -> str:
    """What the variant's decoder keeps, in words, with its sizes (from the decoder's record), in the reader's
    language."""
    return layer_decoder(config).sizes_in(config, _)


def variant_intro(config: MHAConfig) -> str:
    """The Decoding page's opening sentence for a variant: what its decoder keeps instead of (or as) a KV cache."""
    kept = _(layer_decoder(config).words).format(weights=_(attention_kernel(config.kernel).weights_label))
    return _("A decoder generates one token per step. This layer keeps {kept}. The rows it assembles are shown beside "
             "the rows of full causal attention; max |Δ| below says how far apart they are (0 up to rounding when "
             "every step reads what full attention reads).").format(kept=kept)


def memory_table(steps: list[VariantStep], labels: list[str], config: MHAConfig) -> pd.DataFrame:
    """One row per step: the token, the numbers the variant keeps, and what MHA's (and GQA's) KV cache would."""
    per_token = cache_per_token(config.n_heads, config.head_size, config.key_value_heads)
    rows = []
    for step in steps:
        t = step.position + 1
        row = {TOKEN: labels[step.position], KEPT: step.numbers}
        row.update({KV_CACHE_COLUMN.format(kind=name): size * t for name, size in per_token.items()})
        rows.append(row)
    return pd.DataFrame(rows, index=pd.Index([step.position for step in steps], name=STEP))


def shown_memory_table(table: pd.DataFrame) -> pd.DataFrame:
    """``memory_table`` with its column names in the reader's language (the code reads the English ones)."""
    names = {TOKEN: _(TOKEN), KEPT: _(KEPT)}
    names.update({c: _(KV_CACHE_COLUMN).format(kind=c.removesuffix(" KV cache")) for c in table.columns
                  if c.endswith(" KV cache")})
    shown = table.rename(columns=names)
    shown.index = shown.index.rename(_(STEP))
    return shown


@dataclass(frozen=True)
class CacheComparison:
    """The metric beside what the variant keeps: a softmax layer's KV cache with the same K/V heads, and a sentence
    with multi-head attention's (one K/V head per query head) when that differs ("" otherwise); in the reader's
    language."""

    label: str
    numbers: int
    sentence: str


def cache_comparison(table: pd.DataFrame, config: MHAConfig, t: int) -> CacheComparison:
    """Like with like after token ``t``: the KV cache of the layer's own K/V heads (``memory_table``'s columns)."""
    mha = int(table["MHA KV cache"].iloc[t])
    shared = [name for name in table.columns if name.endswith(" KV cache") and name != "MHA KV cache"]
    if not shared:  # one K/V head per query head: the layer's own cache is MHA's
        return CacheComparison(_("MHA's KV cache would hold"), mha, "")
    kind, kv = shared[0].removesuffix(" KV cache"), config.key_value_heads
    same = int(table[shared[0]].iloc[t])
    return CacheComparison(
        _("{kind} KV cache ({kv} K/V heads)").format(kind=kind, kv=kv), same,
        _("A softmax layer with the same {kv} K/V heads ({kind}) would have cached **{same}** numbers by now; with "
          "one K/V head per query head (MHA, {heads}), **{mha}**.").format(
            kv=kv, kind=kind, same=count(same), heads=config.n_heads, mha=count(mha)))


def max_variant_difference(steps: list[VariantStep], upto: int, weights: np.ndarray) -> float:
    """max |Δ| between the decoded rows 0..upto and the same rows of full causal attention (nh, T, T)."""
    rows = assembled_variant_weights(steps, upto, weights.shape[-1])[:, : upto + 1]  # (nh, upto+1, T)
    return float(np.max(np.abs(rows - weights[:, : upto + 1])))
