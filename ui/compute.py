"""The one cached call of the engine for the toy pages."""

from __future__ import annotations

import streamlit as st

from mha_core.config import MHAConfig, RunResult, run


# An entry at the caps (64 tokens, d_model 512) pickles to 11.8 MB (python -m bench --only app): 16 entries
# hold at most ~190 MB; 64 would hold 755 MB. All st.cache_data entries together are also capped at 160 MB
# (server.maxCacheDataSize in .streamlit/config.toml, least recently used evicted first), which keeps the
# server under 600 MB beside the real model (python -m bench --only memory).
@st.cache_data(max_entries=16, show_spinner=False)
def cached_run(config: MHAConfig) -> RunResult:
    """``mha_core.run`` memoised on the frozen configuration (bounded: 16 entries per server)."""
    return run(config)


def compute(config: MHAConfig) -> RunResult | None:
    """Run the engine for ``config``; on an invalid configuration show why and return None."""
    try:
        return cached_run(config)
    except ValueError as err:
        st.error(f"These settings cannot be computed: {err}")
        return None


def result_later(config: MHAConfig) -> RunResult:
    """The result for ``config`` again, for code that runs after the page: a download's click, a fragment's rerun.

    A deferred download's callable, and a fragment with its arguments, are kept for as long as their
    session lives, and a session outlives its closed tab by ``server.disconnectedSessionTTL``
    (.streamlit/config.toml). So they keep only the frozen config and ask the cache (or the engine:
    ~0.1 s at the caps) when they run. Download callables that held the RunResult kept ~11 MB per
    session at the caps (issue 15); the quick-check fragment holding it did the same (found with
    tracemalloc: 25 sessions at the caps kept 25 results, 1 GB of RSS).
    """
    return cached_run(config)
