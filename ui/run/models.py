"""The real models a server holds once for every session and page that reads them (the Real model page, the
lessons that run SmolLM2)."""

from __future__ import annotations

import streamlit as st

from mha_core import smollm2 as smol
from mha_core.models import shared_smollm2


@st.cache_resource(max_entries=1, show_spinner=False)  # the spinners are the callers', in the page's language
def cached_model(model_file: str | None) -> smol.SmolLM2:
    """The verified model, from a file already on this server; ``model_file`` ($MHA_SMOLLM2_FILE) is only the
    cache key. ModelNotFetchedError when it must be downloaded first (``fetch_with_progress``)."""
    shared_smollm2.cache_clear()  # this cache missed (first use, or cleared): read the file again, as before
    return shared_smollm2(model_file)  # the same object a lesson or a static build reads (one copy per process)
