"""Uploaded embedding matrices: pure parsing (``parse_matrix``, tested alone) and the upload widget."""

from __future__ import annotations

import io

import numpy as np
import streamlit as st

from ui.charts.numbers import count
from ui.i18n import N_, _

MAX_UPLOAD_BYTES = 1_000_000


def uploaded_embedding(n_rows: int, d_model: int):
    """Parse and validate an uploaded CSV / .npy matrix; None (with a message) when unusable."""
    ss = st.session_state
    upload = st.file_uploader(_("Embedding matrix (.csv or .npy)"), type=["csv", "npy"], key="upload_embedding")
    st.caption(_("One row per token ({n_rows}), {d_model} columns (= d_model). Uploads do not travel in links.").format(
        n_rows=n_rows, d_model=d_model))
    if upload is not None:
        try:
            ss.uploaded_matrix = (upload.name, parse_matrix(upload.name, upload.getvalue()))
        except ValueError as err:
            st.error(_("Could not use {name}: {error} Using seeded random embeddings.").format(name=upload.name, error=err))
            return None
    elif "uploaded_matrix" in ss:
        # A file uploader forgets its file on a page switch; the parsed matrix is kept instead.
        st.caption(_("Using {name}, uploaded earlier. Upload another file to replace it.").format(name=ss.uploaded_matrix[0]))
    else:
        st.info(_("No file yet: using seeded random embeddings."))
        return None
    name, table = ss.uploaded_matrix
    if table.shape != (n_rows, d_model):
        st.error(
            _("{name} has shape {shape}, but {n_rows} tokens with d_model {d_model} need "
              "({n_rows}, {d_model}). Using seeded random embeddings.").format(
                name=name, shape=table.shape, n_rows=n_rows, d_model=d_model)
        )
        return None
    return tuple(tuple(float(v) for v in row) for row in table)


# What an uploaded array holds, by dtype kind, when it is not real numbers (numpy's dtype.kind letters).
NOT_REAL_KINDS = {
    "c": N_("complex numbers; only real numbers can be embeddings (save np.real(a) if the real part is meant)"),
    "b": N_("true/false values; save them as numbers (a.astype(float)) if 0 and 1 are meant"),
    "U": N_("text"),
    "S": N_("bytes (text)"),
    "M": N_("dates and times"),
    "m": N_("time spans"),
    "O": N_("Python objects"),
    "V": N_("records (a structured array)"),
}
NOT_NUMBERS = N_("values that are not numbers")  # any other dtype kind


def _npy_dtype(data: bytes) -> np.dtype:
    """The dtype written in a .npy file's header, read without loading (or unpickling) the data."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    _shape, _order, dtype = read_header(stream)
    return dtype


def _refuse_unless_real(dtype: np.dtype) -> None:
    """ValueError naming what the array holds unless it holds real numbers (integers or floats)."""
    if dtype.kind not in "iuf":
        what = _(NOT_REAL_KINDS.get(dtype.kind, NOT_NUMBERS))
        raise ValueError(_("it must be a 2-D matrix of numbers, but it holds {what} (dtype {dtype}).").format(
            what=what, dtype=dtype))


def _load_npy(data: bytes) -> np.ndarray:
    """The array in .npy bytes, its dtype checked from the header first; ValueError otherwise."""
    try:
        dtype = _npy_dtype(data)
    except Exception as err:  # a malformed header can fail in many ways
        raise ValueError(_("it is not a valid .npy file ({error}).").format(error=type(err).__name__)) from None
    if dtype.hasobject:  # its payload is a pickle, which could run code: never loaded
        raise ValueError(_("it is not a valid .npy file of numbers: it holds Python objects (dtype {dtype}).").format(
            dtype=dtype))
    _refuse_unless_real(dtype)
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as err:  # a truncated payload can fail in many ways inside np.load
        raise ValueError(_("it is not a valid .npy file ({error}).").format(error=type(err).__name__)) from None


def parse_matrix(name: str, data: bytes) -> np.ndarray:
    """A finite 2-D float matrix from CSV text or .npy bytes of real numbers; ValueError with the reason otherwise.

    Complex, boolean, text, date, object and structured arrays are refused, never converted
    (a complex matrix cast to float would silently lose its imaginary part).
    """
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(_("the file is {size} bytes; the limit is {limit}.").format(
            size=count(len(data)), limit=count(MAX_UPLOAD_BYTES)))
    if name.lower().endswith(".npy"):
        table = _load_npy(data)
    else:
        try:
            text = data.decode("utf-8-sig")  # Excel's "CSV UTF-8" starts with a byte order mark
            table = np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2)
        except (UnicodeDecodeError, ValueError):
            raise ValueError(_("it is not a CSV of numbers (comma-separated, no header).")) from None
    _refuse_unless_real(table.dtype)
    if table.ndim != 2:
        raise ValueError(_("it must be a 2-D matrix of numbers, got shape {shape} of {dtype}.").format(
            shape=table.shape, dtype=table.dtype))
    table = table.astype(np.float64)
    if not np.all(np.isfinite(table)):
        raise ValueError(_("it contains NaN or infinite values."))
    return table

