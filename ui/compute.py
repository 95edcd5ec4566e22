"""The one cached call of the engine for the toy pages."""

from __future__ import annotations

import streamlit as st

from mha_core.config import MHAConfig, RunResult, run


# An entry at the caps (64 tokens, d_model 512) pickles to 11.8 MB (python -m bench --only app): 16 entries
# hold at most ~190 MB, within the smallest host's 690 MB beside the real model; 64 would hold 755 MB.
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
