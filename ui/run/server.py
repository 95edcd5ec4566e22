"""Settings made once per server process, for many small sessions on few cores."""

from __future__ import annotations

import gc
import sys
import threading
import time

import streamlit as st
from threadpoolctl import threadpool_limits


@st.cache_resource(show_spinner=False)
def tune_server() -> dict:
    """Limit BLAS to one thread and freeze the imported objects out of the garbage collector.

    One BLAS thread: with many sessions on 1-2 cores, a second thread per matrix product only
    fights the other sessions for the same cores (measured: the real model's 32-piece forward
    pass took 20-45 ms with one thread and 0.3-1 s with two on a busy machine).
    gc.freeze: a full collection (``collect_garbage``) walks every tracked object; freezing the tens of
    thousands of objects the imports made keeps that collection from walking them each time
    (measured with py-spy: it was about a third of the server's CPU per rerun).
    """
    limits = threadpool_limits(limits=1, user_api="blas")
    gc.collect()
    gc.freeze()
    return {"blas_threads": 1, "frozen_objects": gc.get_freeze_count(), "limits": repr(limits)}


# A full collection at most this often (seconds), at the end of a script run. Streamlit's own one after
# every run (runner.postScriptGC, off in .streamlit/config.toml) took ~24 of ~65 ms of a Heads rerun.
# Python's own collector alone reaches the oldest generation rarely, so reference cycles left by closed
# sessions could wait there long; this bounds the wait to a second. `python -m bench --only memory`
# measures the result.
GC_INTERVAL_S = 1.0
_last_collection = [0.0]
_modules_at_freeze = [0]
_collection_lock = threading.Lock()


def collect_garbage(now: float | None = None) -> bool:
    """A full garbage collection if none ran in the last ``GC_INTERVAL_S`` seconds; True when it ran.

    When modules were imported since the last freeze (a page's first visit imports pandas, the real
    model...), what survives the collection is frozen too, as ``tune_server`` does for the first
    imports: those ~50,000 functions and classes made each full collection take ~30-50 ms. Frozen
    objects are still freed when nothing refers to them; only a reference cycle among them would
    stay, and the few freezes (one per page that imports something new) bound that.
    """
    now = time.monotonic() if now is None else now
    if now - _last_collection[0] < GC_INTERVAL_S or not _collection_lock.acquire(blocking=False):
        return False
    try:
        _last_collection[0] = now
        gc.collect()
        if len(sys.modules) != _modules_at_freeze[0]:
            _modules_at_freeze[0] = len(sys.modules)
            gc.freeze()
    finally:
        _collection_lock.release()
    return True
