"""The Decoding page's lineage section: what published decoders keep per token, MHA → GQA → MQA → MLA → DSA →
sliding-window and linear layers, at 4k, 128k and 1M tokens, beside this toy layer's cache measured by the engine.

``per_layer_table`` and ``totals_table`` are pure builders over ``mha_core.lineage``'s records (English column
names, the keys the tests read; ``shown_table`` translates them); ``lineage_section`` draws them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core.config import MHAConfig, RunResult
from mha_core.lineage import (
    BYTES_PER_NUMBER,
    LENGTHS,
    LINEAGE,
    CachePart,
    MeasuredCache,
    ModelCache,
    cache_bytes,
    measured_cache,
    part_bytes_per_token,
)
from mha_core.variant_decoding import decode_variant_run
from ui.charts.numbers import count
from ui.i18n import N_, _
from ui.pages.decoding import shown_table

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
LENGTH_NAMES = {4096: "4k", 131072: "128k", 1048576: "1M"}
PER_LAYER_NAMES = (N_("model"), N_("attention"), N_("layer type"), N_("layers"), N_("numbers per token, one layer"),
                   N_("bytes per token, these layers"), N_("what is kept"), N_("source (config.json)"), N_("not checked"))
CACHE_AT = N_("cache at {n} tokens")
TOTAL_COLUMNS = tuple(CACHE_AT.format(n=n) for n in LENGTH_NAMES.values())  # the builder's English keys


def size_text(nbytes: int) -> str:
    """Bytes in binary units with one decimal: 2147483648 -> '2.0 GiB' (under 1 KiB: '512 B')."""
    value, unit = float(nbytes), 0
    while value >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{int(value)} B" if unit == 0 else f"{value:.1f} {UNITS[unit]}"


def kept_words(part: CachePart) -> str:
    """What a part keeps, in the reader's language."""
    if part.state:
        return _("a state of {n} numbers per layer, whatever the length").format(n=count(part.state))
    if part.window is not None:
        return _("the last {w} tokens").format(w=count(part.window))
    return _("every token")


def per_layer_table(models: tuple[ModelCache, ...] = LINEAGE) -> pd.DataFrame:
    """One row per model and layer type: layers, numbers per token and layer, bytes per token, what is kept."""
    rows = [{"model": m.name, "attention": _(m.family), "layer type": _(part.kind), "layers": part.layers,
             "numbers per token, one layer": part.per_token, "bytes per token, these layers": part_bytes_per_token(part),
             "what is kept": kept_words(part), "source (config.json)": m.source, "not checked": _(m.unchecked) if m.unchecked else ""}
            for m in models for part in m.parts]
    return pd.DataFrame(rows)


def totals_table(models: tuple[ModelCache, ...] = LINEAGE, toy: tuple[str, MeasuredCache] | None = None) -> pd.DataFrame:
    """Each model's whole cache at ``LENGTHS`` tokens (bf16), and the toy layer's, extrapolated from its measured
    cache (float64, as the engine keeps it), last."""
    rows = [{"model": m.name,
             **{column: size_text(cache_bytes(m, n)) for column, n in zip(TOTAL_COLUMNS, LENGTHS, strict=True)},
             "attention": _(m.family)}  # the sizes first: a phone shows the first columns
            for m in models]
    if toy is not None:
        name, measured = toy
        rows.append({"model": name,
                     **{column: size_text(measured.extrapolated(n)) for column, n in zip(TOTAL_COLUMNS, LENGTHS,
                                                                                         strict=True)},
                     "attention": _("this toy layer (measured, float64)")})
    return pd.DataFrame(rows)


def toy_measured(result: RunResult) -> MeasuredCache:
    """The toy layer's decoder, run by the engine over the sentence: what it keeps after each token."""
    steps = decode_variant_run(result)
    itemsize = next(array.itemsize for _name, array in steps[-1].held)
    return measured_cache([step.numbers for step in steps], itemsize)


def toy_name(config: MHAConfig) -> str:
    return _("this toy: 1 layer, {heads} heads, {kv} K/V heads, d_k {hs}").format(
        heads=config.n_heads, kv=config.key_value_heads, hs=config.head_size)


def lineage_section(result: RunResult) -> None:
    """The two tables, their captions, and the toy's measured cache beside them."""
    st.header(_("The lineage: what real decoders keep per token"), anchor="lineage")
    measured = toy_measured(result)
    st.markdown(_(
        "From multi-head attention to compressed and linear layers: **MHA** keeps every head's keys and values, "
        "**GQA** and **MQA** share them among query heads, **MLA** keeps one latent per token, **DSA** adds its "
        "indexer's keys to pick which tokens to read, **sliding-window** layers keep only the last W tokens, and "
        "**Gated DeltaNet** layers keep a state of constant size. Full attention keeps layers × kv_heads × "
        "head_dim × 2 (K and V) × bytes per number for every token."
    ))
    totals = shown_table(totals_table(toy=(toy_name(result.config), measured)), PER_LAYER_NAMES)
    lengths = {column: _(CACHE_AT).format(n=n) for column, n in zip(TOTAL_COLUMNS, LENGTH_NAMES.values(), strict=True)}
    st.dataframe(totals.rename(columns=lengths), key="dec_lineage_totals", hide_index=True)
    st.dataframe(shown_table(per_layer_table(), PER_LAYER_NAMES), key="dec_lineage_layers", hide_index=True)
    st.caption(_(
        "Counted at {bytes} bytes per number (bf16, the checkpoints' dtype); a server keeping FP8 or float32 "
        "changes the bytes, not the counts. The numbers of layers, heads, head sizes, windows and ranks are read "
        "from each model's published config.json (copies on the Hugging Face Hub and library docs), the last column "
        "says what could not be checked. Beyond a model's trained context (4k for Llama 2) the cache is arithmetic "
        "only. The toy's row is measured: its decoder holds {numbers} numbers ({bytes_now}) after {t} tokens and "
        "each token adds {growth} numbers, extrapolated from there."
    ).format(bytes=BYTES_PER_NUMBER, numbers=count(measured.numbers), bytes_now=size_text(measured.nbytes),
             t=measured.tokens, growth=count(measured.growth)))
