"""Pure builders for the Decoding page: the same layer under every positional scheme, and its tables' words.

The page's numbers (decoding through the KV cache, RoPE's offset scores) are the engine's
(``mha_core.decoder``, ``mha_core.offsets``); the cache table is shared with the KV-cache lesson
(``ui/pipeline/cache_table.py``). No streamlit here: everything is tested without a server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pandas as pd

from mha_core.config import MHAConfig
from mha_core.positions import SCHEMES
from ui.i18n import N_, _

QK_AXES = (N_("query i"), N_("key j"))  # the weights' axes, translated where drawn

# The shared cache table's columns (ui/pipeline/cache_table.py keeps them as keys), as the Decoding page shows them.
CACHE_TABLE_NAMES = (N_("step t"), N_("token"), N_("fresh numbers"), N_("reused from cache"), N_("cache numbers"),
                     N_("cache bytes"), N_("cache bytes as MHA"))


def position_configs(config: MHAConfig) -> dict[str, MHAConfig]:
    """The same layer under every positional scheme (the other settings unchanged)."""
    return {pe: replace(config, pe=pe) for pe in SCHEMES}


def qk_axes() -> tuple[str, str]:
    """The weights' axis titles in the reader's language."""
    return _(QK_AXES[0]), _(QK_AXES[1])


def shown_table(frame: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    """``frame`` with the column and index names among ``names`` (marked msgids) in the reader's language.

    The builders keep English names, which the code reads as keys; only the names listed are translated, so a
    token used as a column name is never taken for a word.
    """
    names = set(names)
    shown = frame.rename(columns={c: _(c) for c in frame.columns if c in names})
    if shown.index.name in names:
        shown.index = shown.index.rename(_(shown.index.name))
    return shown
