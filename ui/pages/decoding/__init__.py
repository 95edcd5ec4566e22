"""Pure builders for the Decoding page: the same layer under every positional scheme.

The page's numbers (decoding through the KV cache, RoPE's offset scores) are the engine's
(``mha_core.decoder``, ``mha_core.offsets``); the cache table is shared with the KV-cache lesson
(``ui/pipeline/cache_table.py``). No streamlit here: everything is tested without a server.
"""

from __future__ import annotations

from dataclasses import replace

from mha_core.config import MHAConfig
from mha_core.positions import SCHEMES


def position_configs(config: MHAConfig) -> dict[str, MHAConfig]:
    """The same layer under every positional scheme (the other settings unchanged)."""
    return {pe: replace(config, pe=pe) for pe in SCHEMES}
