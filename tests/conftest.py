"""Fixtures shared by the test modules.

``model``: all-MiniLM-L6-v2, loaded once per session from the installed files (never downloaded).
Every test that asks for it skips, saying how to get the files, when none are installed.
"""

from __future__ import annotations

import pytest

from mha_core.pretrained import ModelUnavailableError, load_minilm


@pytest.fixture(scope="session")
def model():
    try:
        return load_minilm(allow_download=False)
    except ModelUnavailableError as error:
        pytest.skip(f"the model files are not available here: {error}")
