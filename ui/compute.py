"""The one cached call of the engine for the toy pages."""

from __future__ import annotations

import streamlit as st

from mha_core.config import MHAConfig, RunResult, run


@st.cache_data(max_entries=64, show_spinner=False)
def cached_run(config: MHAConfig) -> RunResult:
    """``mha_core.run`` memoised on the frozen configuration (bounded: 64 entries per server)."""
    return run(config)


def compute(config: MHAConfig) -> RunResult | None:
    """Run the engine for ``config``; on an invalid configuration show why and return None."""
    try:
        return cached_run(config)
    except ValueError as err:
        st.error(f"These settings cannot be computed: {err}")
        return None
