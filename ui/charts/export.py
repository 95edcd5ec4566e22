"""Bytes for the download buttons: one matrix as CSV, every intermediate as .npz or .json. No streamlit.

The arrays are not listed here: ``intermediates`` walks the engine's records (``RunResult``, its
``AttentionWeights`` and its ``AttentionTrace``) field by field, so a field the engine adds later
is exported under its own name with no edit here.

The .npz holds plain numeric / boolean / unicode arrays (it loads with ``allow_pickle=False``),
the token labels and the configuration as JSON text (``config_json``, a 0-d unicode array).
JSON has no infinity, so masked logits (-inf) are written as ``null``; the file says so in
its ``README`` key, written in the current language (the arrays and their names are the same in every language).
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, fields, is_dataclass

import numpy as np
import pandas as pd

from mha_core.config import RunResult
from ui.i18n import N_, _

JSON_README = N_(
    "MHA Explorer export: every intermediate of one multi-head attention run. "
    "Shapes use T = tokens (Tq queries, Tk keys), C = d_model, nh = heads, hs = head size, "
    "kv = key/value heads (nh unless shared). "
    "Row convention: y = x @ W + b; head h owns columns h*hs:(h+1)*hs of W_Q, W_K, W_V. "
    "q, k are what the scores use: under a scheme that turns them (RoPE) the turned ones; q_unrotated, k_unrotated "
    "are x_q W_Q + b_Q and x_kv W_K + b_K split into heads, and q_angles, k_angles the angle of every "
    "position and feature pair. logits = scores * scale + bias, then masked: bias (nh, Tq, Tk) is the positional "
    "scheme's bias on the logits (ALiBi's distance penalty) and is absent under a scheme without one. "
    "null_key true: softmax_1, every row may also give weight to an implicit key of logit 0 and value 0, "
    "so rows of weights sum to at most 1. "
    "JSON has no infinity: every -inf (a masked logit) is written as null. "
    "Masks are true where a query may attend to a key. "
    "A query row with every key masked (fully_masked) has weights 0 and output 0, by our policy. "
    "kernel (issue 26): softmax, differential or linear. differential: weights = map1 - lam * map2 (signed, rows "
    "sum to 1 - lam), map1, map2 the softmax of logits1, logits2 (the two halves of q and k), concat holds "
    "normed_heads = RMSNorm(heads) * output_gain, and lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init are "
    "the learned scalars. linear: weights = similarity / normaliser, similarity = phi_q . phi_k (phi = elu + 1, "
    "masked cells 0); under a causal mask recurrent_heads, state (S) and state_sum (z) are the recurrent form. "
    "mla_rank > 0 (multi-head latent attention): w_k and w_v are absent; w_dkv, w_uk, w_uv, w_kr and latent_gain "
    "are the latent's projections, latent is what a decoder caches with k_rope, and absorbed_scores equal scores "
    "up to score_gap."
)

# RunResult fields exported under their own names by npz_bytes / json_bytes, not as intermediates.
NOT_INTERMEDIATES = ("config", "query_labels", "key_labels")


CSV_ENCODING = "utf-8-sig"  # UTF-8 that starts with a byte order mark: Excel reads it as UTF-8 only then


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """A DataFrame as UTF-8 CSV with its index (the row labels); -inf is written as '-inf'.

    The file starts with a byte order mark: without it Excel reads a CSV in the machine's legacy code page and
    shows an accented token ('café') garbled ('cafÃ©'); pandas, Python's csv module and spreadsheets skip it.
    """
    return frame.to_csv(float_format="%.9g").encode(CSV_ENCODING)


def _field_arrays(record, arrays: dict[str, np.ndarray]) -> None:
    """Put every field of ``record`` into ``arrays`` by its name; a field holding a record is walked in turn.

    ndarray fields as they are, numbers, flags and names (scale, null_key, pe) as 0-d arrays; None
    (an option that is off) is left out. The field name is the export name, so a name two records
    share would lose one of them: that raises instead.
    """
    for field in fields(record):
        if field.name in NOT_INTERMEDIATES:
            continue
        value = getattr(record, field.name)
        if value is None:
            continue
        if is_dataclass(value):
            _field_arrays(value, arrays)
            continue
        if not isinstance(value, np.ndarray | bool | int | float | str | np.generic):
            raise TypeError(f"{type(record).__name__}.{field.name} is a {type(value).__name__}: "
                            "ui.charts.export knows arrays, numbers, flags and names only; say how to export it")
        if field.name in arrays:
            raise ValueError(f"two fields are named {field.name!r} (one in {type(record).__name__}): "
                             "the export would keep only one; rename one of them")
        arrays[field.name] = np.asarray(value)


def intermediates(result: RunResult) -> dict[str, np.ndarray]:
    """Every array of one run by its field name: inputs, mask, parameters and each field of the trace.

    The trace's attention weights are "weights" (the parameters record is walked into w_q, ..., b_o).
    """
    arrays: dict[str, np.ndarray] = {}
    _field_arrays(result, arrays)
    return arrays


def config_json(result: RunResult) -> str:
    """The configuration as JSON text (tuples become lists)."""
    return json.dumps(asdict(result.config), allow_nan=False)


def npz_bytes(result: RunResult) -> bytes:
    """Every intermediate, the token labels and the configuration (JSON text) as one compressed .npz file."""
    buffer = io.BytesIO()
    extras = {
        "query_labels": np.array(result.query_labels, dtype=str),
        "key_labels": np.array(result.key_labels, dtype=str),
        "config_json": np.array(config_json(result)),  # 0-d unicode
    }
    np.savez_compressed(buffer, **intermediates(result), **extras)
    return buffer.getvalue()


def _jsonable(array: np.ndarray):
    """Nested lists of Python values; every non-finite float (the masked -inf) becomes None."""
    if array.dtype == np.bool_ or array.dtype.kind == "U":
        return array.tolist()
    as_float = array.astype(np.float64)
    as_object = np.where(np.isfinite(as_float), as_float, None).astype(object)
    return as_object.tolist()


def json_bytes(result: RunResult) -> bytes:
    """Every intermediate, the configuration and the labels as JSON (no Infinity/NaN: null instead)."""
    config = asdict(result.config)
    arrays = intermediates(result)
    document = {
        "README": _(JSON_README),
        "config": config,
        "query_labels": result.query_labels,
        "key_labels": result.key_labels,
        "shapes": {name: list(array.shape) for name, array in arrays.items()},
        "arrays": {name: _jsonable(array) for name, array in arrays.items()},
    }
    return json.dumps(document, allow_nan=False, separators=(",", ":")).encode("utf-8")
