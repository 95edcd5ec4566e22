"""What a session keeps after its run: the Heads page's download buttons hold no arrays (issue 15).

A deferred download's callable lives in Streamlit's media file manager for as long as its
session does, and a closed tab's session is kept for ``server.disconnectedSessionTTL``. Issue 15's
leak was those callables holding the session's RunResult and tables (~11 MB at the caps, found
with tracemalloc snapshot diffs in the server). Here every callable the Heads page registers is
walked for arrays, and called: its bytes are compared with the engine's arrays.
"""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from mha_core.attention import AttentionTrace
from mha_core.config import MHAConfig, RunResult, run
from ui.widgets.uploads import MAX_UPLOAD_BYTES

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (np.ndarray, pd.DataFrame, pd.Series, RunResult, AttentionTrace)


def held_objects(function, seen=None):
    """Everything a function keeps alive through its closure and defaults, functions followed."""
    seen = set() if seen is None else seen
    if id(function) in seen:
        return []
    seen.add(id(function))
    found = [cell.cell_contents for cell in function.__closure__ or ()] + list(function.__defaults__ or ())
    for value in list(found):
        if callable(value) and hasattr(value, "__code__"):
            found += held_objects(value, seen)
    return found


def heads_page(params: dict[str, str]) -> AppTest:
    """Heads from a link, its downloads and its quick check open (drawn only while open), as a click leaves them."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    at.session_state["heads_downloads"] = at.session_state["quiz_open"] = True
    at.run()
    assert not at.exception
    return at


PARAMS = {"tokens": "the cat sat on the mat", "d_model": "32", "heads": "4", "seed": "5", "mask": "causal"}


def test_no_download_callable_of_the_heads_page_keeps_an_array(downloads):
    heads_page(PARAMS | {"avg": "1"})
    assert {"dl_grid", "dl_summary", "dl_similarity", "dl_concat", "dl_output", "dl_npz", "dl_json"} <= set(downloads)
    for key, data in downloads.items():
        assert callable(data), key
        heavy = [type(value).__name__ for value in held_objects(data) if isinstance(value, HEAVY)]
        assert not heavy, f"{key}'s callable keeps {heavy} alive for as long as its session"


@pytest.fixture
def stored_fragments(monkeypatch):
    """Every function Streamlit stores for a fragment's reruns (it holds the fragment's arguments)."""
    from streamlit.runtime.fragment import MemoryFragmentStorage

    stored = []
    original = MemoryFragmentStorage.register

    def recording(self, key, value, *args, **kwargs):
        stored.append(value)
        return original(self, key, value, *args, **kwargs)

    monkeypatch.setattr(MemoryFragmentStorage, "register", recording)
    return stored


@pytest.mark.parametrize("page", ["app_pages/heads.py", "app_pages/decoding.py", "app_pages/step_by_step.py",
                                  "app_pages/real_model.py", "app_pages/compare.py", "app_pages/lessons.py"])
def test_no_fragment_keeps_an_array_for_its_session(stored_fragments, page):
    at = heads_page(PARAMS)
    at.switch_page(page).run()
    assert not at.exception
    for fragment in stored_fragments:
        held = held_objects(fragment)
        held += [item for value in held if isinstance(value, tuple | dict)
                 for item in (value.values() if isinstance(value, dict) else value)]  # the call's args and kwargs
        heavy = [type(value).__name__ for value in held if isinstance(value, HEAVY)]
        assert not heavy, f"a fragment on {page} keeps {heavy} alive for as long as its session"


def test_the_download_callables_give_the_engine_arrays(downloads):
    at = heads_page(PARAMS | {"avg": "1", "view": "logits"})
    result = run(at.session_state["config"])  # the engine, not the page's helpers
    assert (result.config.d_model, result.config.n_heads, result.config.seed) == (32, 4, 5)  # the link was read
    saved = np.load(io.BytesIO(downloads["dl_npz"]()), allow_pickle=False)
    np.testing.assert_array_equal(saved["weights"], result.trace.weights)
    np.testing.assert_array_equal(saved["output"], result.trace.output)
    assert json.loads(downloads["dl_json"]())["arrays"]["weights"] == result.trace.weights.tolist()
    grid = pd.read_csv(io.BytesIO(downloads["dl_grid"]()), index_col=[0, 1])
    logits = result.trace.logits  # (nh, T, T), -inf where masked
    expected = np.concatenate([logits, logits.mean(axis=0, keepdims=True)]).reshape(-1, logits.shape[-1])
    np.testing.assert_allclose(grid.to_numpy(), expected, rtol=1e-8)
    concat = pd.read_csv(io.BytesIO(downloads["dl_concat"]()), index_col=0)
    np.testing.assert_allclose(concat.to_numpy(), result.trace.concat, rtol=1e-8)


def test_the_server_config_bounds_uploads_sessions_and_the_cache():
    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    server = settings["server"]
    assert server["maxUploadSize"] * 1_000_000 >= MAX_UPLOAD_BYTES  # the app's own limit still reachable
    assert server["maxUploadSize"] <= 1
    assert 0 < server["disconnectedSessionTTL"] <= 120
    assert server["maxCacheDataSize"].endswith("mb") and int(server["maxCacheDataSize"][:-2]) <= 200
    assert settings["browser"]["gatherUsageStats"] is False
    assert settings["client"]["toolbarMode"] == "viewer"


def test_a_cached_result_is_one_shared_object_whose_arrays_cannot_be_changed():
    from ui.run.compute import MAX_RESULTS, cached_run

    config = MHAConfig(mask="causal", seed=11)
    cached_run.clear()
    first, again = cached_run(config), cached_run(config)
    assert first is again  # no copy per rerun (st.cache_data unpickled 11.8 MB per hit at the caps)
    for array in (first.trace.weights, first.trace.q, first.weights.w_o, first.x_q, first.mask):
        with pytest.raises(ValueError, match="read-only"):
            array[(0,) * array.ndim] = 1  # another session's numbers must not change under it
    assert 11.8 * MAX_RESULTS <= 150  # MB at the caps, beside the real model on a 690 MB host
