"""Settings made once per server process, for many small sessions on few cores."""

from __future__ import annotations

import gc

import streamlit as st
from threadpoolctl import threadpool_limits


@st.cache_resource(show_spinner=False)
def tune_server() -> dict:
    """Limit BLAS to one thread and freeze the imported objects out of the garbage collector.

    One BLAS thread: with many sessions on 1-2 cores, a second thread per matrix product only
    fights the other sessions for the same cores (measured: the real model's 32-piece forward
    pass took 20-45 ms with one thread and 0.3-1 s with two on a busy machine).
    gc.freeze: Streamlit runs a full collection after every script run; freezing the tens of
    thousands of objects the imports made keeps that collection from walking them each time
    (measured with py-spy: it was about a third of the server's CPU per rerun).
    """
    limits = threadpool_limits(limits=1, user_api="blas")
    gc.collect()
    gc.freeze()
    return {"blas_threads": 1, "frozen_objects": gc.get_freeze_count(), "limits": repr(limits)}
