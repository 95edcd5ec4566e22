"""Fixtures shared by the test modules.

``model``: all-MiniLM-L6-v2, loaded once per session from the installed files (never downloaded).
Every test that asks for it skips, saying how to get the files, when none are installed.
``downloads``: what each st.download_button of a run was given, by key.
"""

from __future__ import annotations

import pytest
import streamlit

from mha_core.pretrained import ModelUnavailableError, load_minilm


@pytest.fixture(scope="session")
def model():
    try:
        return load_minilm(allow_download=False)
    except ModelUnavailableError as error:
        pytest.skip(f"the model files are not available here: {error}")


@pytest.fixture
def downloads(monkeypatch):
    """The ``data`` argument of every st.download_button call, by key."""
    captured = {}
    original = streamlit.download_button

    def recording(label, data, *args, **kwargs):
        captured[kwargs.get("key")] = data
        return original(label, data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", recording)
    return captured
