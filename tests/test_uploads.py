"""Uploaded .npy embeddings: only real numbers are accepted; every other dtype is refused with a message.

Issue 15: a complex .npy was accepted and its imaginary part dropped (a ComplexWarning in the
server log only). Each kind of array is refused by ``parse_matrix`` with a message naming what
it holds, and in the app the page says so and falls back to seeded random embeddings.
"""

from __future__ import annotations

import datetime
import io
import warnings
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.sidebar_controls import set_control
from ui.widgets.uploads import parse_matrix

ROOT = Path(__file__).resolve().parents[1]


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


NOT_REAL = {
    "complex": (np.array([[1 + 2j, 3 - 1j], [0.5j, 2.0]]), "complex numbers"),
    "complex64": (np.ones((2, 3), dtype=np.complex64), "complex numbers"),
    "bool": (np.array([[True, False], [False, True]]), "true/false values"),
    "unicode": (np.array([["a", "b"], ["c", "d"]]), "text"),
    "bytes": (np.array([[b"a", b"b"]]), "bytes"),
    "datetime": (np.array([["2026-01-01", "2026-01-02"]], dtype="datetime64[D]"), "dates and times"),
    "timedelta": (np.array([[1, 2]], dtype="timedelta64[s]"), "time spans"),
    "object": (np.array([[1.0, datetime.date(2026, 1, 1)]], dtype=object), "Python objects"),
    "structured": (np.zeros((2, 2), dtype=[("x", "f8"), ("y", "f8")]), "records"),
}


@pytest.mark.parametrize("kind", sorted(NOT_REAL))
def test_an_npy_that_is_not_real_numbers_is_refused_with_what_it_holds(kind):
    array, holds = NOT_REAL[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a silent cast (ComplexWarning) would fail here too
        with pytest.raises(ValueError, match=holds) as refused:
            parse_matrix(f"{kind}.npy", npy_bytes(array))
    assert str(array.dtype) in str(refused.value)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16", "float16", "float32", "float64", "longdouble"])
def test_an_npy_of_real_numbers_is_accepted_with_its_values(dtype):
    array = (np.arange(12).reshape(3, 4) - 5).astype(dtype) if dtype[0] != "u" else np.arange(12, dtype=dtype).reshape(3, 4)
    got = parse_matrix("real.npy", npy_bytes(array))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, array.astype(np.float64))


def test_a_truncated_npy_of_real_numbers_is_refused_as_invalid():
    data = npy_bytes(np.ones((8, 8)))
    with pytest.raises(ValueError, match="not a valid .npy"):
        parse_matrix("cut.npy", data[: len(data) - 10])


def test_the_app_refuses_a_complex_upload_with_a_message_and_uses_random_embeddings():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    set_control(at, "w_embedding", "custom")
    complex_table = np.full((6, 16), 1 + 1j)  # the default sentence has 6 tokens, d_model 16
    at.get("file_uploader")[0].set_value(("emb.npy", npy_bytes(complex_table), "application/octet-stream"))
    at.run()
    assert not at.exception
    errors = " ".join(error.value for error in at.error)
    assert "complex numbers" in errors and "Using seeded random embeddings" in errors
    assert at.session_state["config"].embedding == "random"
