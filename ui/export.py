"""Bytes for the download buttons: one matrix as CSV, every intermediate as .npz or .json. No streamlit.

The .npz holds plain numeric / boolean / unicode arrays (it loads with ``allow_pickle=False``).
JSON has no infinity, so masked logits (-inf) are written as ``null``; the file says so in
its ``README`` key.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict

import numpy as np
import pandas as pd

from mha_core.config import RunResult

JSON_README = (
    "MHA Explorer export: every intermediate of one multi-head attention run. "
    "Shapes use T = tokens (Tq queries, Tk keys), C = d_model, nh = heads, hs = head size. "
    "Row convention: y = x @ W + b; head h owns columns h*hs:(h+1)*hs of W_Q, W_K, W_V. "
    "JSON has no infinity: every -inf (a masked logit) is written as null. "
    "Masks are true where a query may attend to a key. "
    "A query row with every key masked (fully_masked) has weights 0 and output 0, by our policy."
)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """A DataFrame as UTF-8 CSV with its index (the row labels); -inf is written as '-inf'."""
    return frame.to_csv(float_format="%.9g").encode("utf-8")


def intermediates(result: RunResult) -> dict[str, np.ndarray]:
    """Every array of one run by name: inputs, parameters, mask and each step of the trace."""
    trace, params = result.trace, result.weights
    arrays = {
        "embeddings": result.embeddings,  # (Tq, C)
        "key_embeddings": result.key_embeddings,  # (Tk, C)
        "positional": result.positional,  # (Tq, C) or absent
        "x_q": result.x_q,  # (Tq, C)
        "x_kv": result.x_kv,  # (Tk, C)
        "w_q": params.w_q,
        "w_k": params.w_k,
        "w_v": params.w_v,
        "w_o": params.w_o,
        "b_q": params.b_q,
        "b_k": params.b_k,
        "b_v": params.b_v,
        "b_o": params.b_o,
        "mask": result.mask,  # (Tq, Tk) bool or absent
        "q": trace.q,  # (nh, Tq, hs)
        "k": trace.k,  # (kv, Tk, hs): kv = nh unless K/V heads are shared
        "v": trace.v,  # (kv, Tk, hv)
        "scores": trace.scores,  # (nh, Tq, Tk)
        "logits": trace.logits,  # (nh, Tq, Tk), -inf where masked
        "weights": trace.weights,  # (nh, Tq, Tk)
        "heads": trace.heads,  # (nh, Tq, hv)
        "concat": trace.concat,  # (Tq, nh*hv)
        "output": trace.output,  # (Tq, C_out)
        "fully_masked": trace.fully_masked,  # (nh, Tq) bool
        "scale": np.array(trace.scale),  # ()
    }
    return {name: np.asarray(value) for name, value in arrays.items() if value is not None}


def npz_bytes(result: RunResult) -> bytes:
    """Every intermediate plus the token labels as one compressed .npz file."""
    buffer = io.BytesIO()
    labels = {
        "query_labels": np.array(result.query_labels, dtype=str),
        "key_labels": np.array(result.key_labels, dtype=str),
    }
    np.savez_compressed(buffer, **intermediates(result), **labels)
    return buffer.getvalue()


def _jsonable(array: np.ndarray):
    """Nested lists of Python numbers; every non-finite float (the masked -inf) becomes None."""
    if array.dtype == np.bool_:
        return array.tolist()
    as_float = array.astype(np.float64)
    as_object = np.where(np.isfinite(as_float), as_float, None).astype(object)
    return as_object.tolist()


def json_bytes(result: RunResult) -> bytes:
    """Every intermediate, the configuration and the labels as JSON (no Infinity/NaN: null instead)."""
    config = asdict(result.config)
    arrays = intermediates(result)
    document = {
        "README": JSON_README,
        "config": config,
        "query_labels": result.query_labels,
        "key_labels": result.key_labels,
        "shapes": {name: list(array.shape) for name, array in arrays.items()},
        "arrays": {name: _jsonable(array) for name, array in arrays.items()},
    }
    return json.dumps(document, allow_nan=False, separators=(",", ":")).encode("utf-8")
