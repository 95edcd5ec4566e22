"""The one cached call of the engine for the toy pages."""

from __future__ import annotations

import dataclasses

import numpy as np
import streamlit as st

from mha_core.config import MHAConfig, RunResult, run
from ui.i18n import _

# One result per configuration, shared by every session: st.cache_resource hands out the object itself,
# where st.cache_data unpickled a copy on every hit (21 ms per hit at the caps, twice per Heads rerun: the
# page and its quick-check fragment). Shared means read-only: every array of a cached result is made
# unwritable, so a page that changed one in place would fail loudly instead of changing another
# session's numbers. An entry at the caps (64 tokens, d_model 512) is 11.8 MB, 8 of them the four weight
# matrices. 12 entries held 135 MB, too much beside both real models (issue 38: that server reached 780 MB,
# python -m bench --only memory); 4 hold at most ~47 MB. A result not kept is computed again (~0.1 s at the caps).
MAX_RESULTS = 4


# The key is the configuration's repr: every field is a string, number, bool or tuple of them, so equal reprs are
# equal configurations (a false miss at worst: 1 against 1.0). Streamlit's own hasher walked the 25 fields in
# Python, 1.2 ms per lookup, twice per Heads run (the page and its quiz fragment).
@st.cache_resource(max_entries=MAX_RESULTS, show_spinner=False, hash_funcs={MHAConfig: repr})
def cached_run(config: MHAConfig) -> RunResult:
    """``mha_core.run`` memoised on the frozen configuration, its arrays read-only (bounded: 4 per server)."""
    return read_only(run(config))


def read_only(value):
    """``value`` with every numpy array in it (dataclass fields followed) made unwritable, in place."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            read_only(getattr(value, field.name))
    elif isinstance(value, list | tuple):
        for item in value:
            read_only(item)
    return value


def compute(config: MHAConfig) -> RunResult | None:
    """Run the engine for ``config``; on an invalid configuration show why and return None."""
    try:
        return cached_run(config)
    except ValueError as err:
        st.error(_("These settings cannot be computed: {error}").format(error=_(err.args[0]) if err.args and isinstance(err.args[0], str) else err))
        return None


def result_later(config: MHAConfig) -> RunResult:
    """The result for ``config`` again, for code that runs after the page: a download's click, a fragment's rerun.

    A deferred download's callable, and a fragment with its arguments, are kept for as long as their
    session lives, and a session outlives its closed tab by ``server.disconnectedSessionTTL``
    (.streamlit/config.toml). So they keep only the frozen config and ask the cache (or the engine:
    ~0.1 s at the caps) when they run. Download callables that held the RunResult kept ~11 MB per
    session at the caps (issue 15); the quick-check fragment holding it did the same (found with
    tracemalloc: 25 sessions at the caps kept 25 results).
    """
    return cached_run(config)
