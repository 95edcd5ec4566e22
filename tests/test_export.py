"""ui.export: the downloaded bytes load back to exactly the trace (npz), or to it with -inf as null (json)."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from mha_core.config import MHAConfig, run
from ui import export, tables

CONFIGS = {
    "causal": MHAConfig(mask="causal", bias=True),
    "cross, padding, fully masked": MHAConfig(kv_tokens=("a", "dog", "ran"), mask="padding", valid_len=0),
    "no W_O, positions": MHAConfig(output_projection=False, pe="sinusoidal", n_heads=2),
}


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def result(request):
    return run(CONFIGS[request.param])


def test_npz_round_trips_every_intermediate_exactly(result):
    loaded = np.load(io.BytesIO(export.npz_bytes(result)), allow_pickle=False)
    arrays = export.intermediates(result)
    assert set(loaded.files) == set(arrays) | {"query_labels", "key_labels"}
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype, name
        np.testing.assert_array_equal(loaded[name], array, err_msg=name)
    assert list(loaded["query_labels"]) == result.query_labels
    assert list(loaded["key_labels"]) == result.key_labels


def test_intermediates_hold_the_trace_and_leave_out_what_is_absent(result):
    arrays = export.intermediates(result)
    t = result.trace
    for name in ("q", "k", "v", "scores", "logits", "weights", "heads", "concat", "output", "fully_masked"):
        np.testing.assert_array_equal(arrays[name], getattr(t, name))
    assert float(arrays["scale"]) == t.scale
    assert ("w_o" in arrays) == result.config.output_projection
    assert ("positional" in arrays) == (result.config.pe == "sinusoidal")
    assert ("mask" in arrays) == (result.config.mask != "none")


def test_json_round_trips_with_minus_infinity_as_null(result):
    document = json.loads(export.json_bytes(result))
    assert "-inf" in document["README"] and "null" in document["README"]
    assert document["query_labels"] == result.query_labels
    assert document["config"]["tokens"] == list(result.config.tokens)
    for name, array in export.intermediates(result).items():
        stored = document["arrays"][name]
        assert document["shapes"][name] == list(array.shape), name
        if array.dtype == np.bool_:
            np.testing.assert_array_equal(np.array(stored, dtype=bool), array, err_msg=name)
            continue
        as_float = np.array(stored, dtype=object)
        nulls = np.equal(as_float, None)
        np.testing.assert_array_equal(nulls, np.isneginf(array), err_msg=name)  # null exactly where -inf
        values = np.where(nulls, np.nan, as_float).astype(np.float64)
        np.testing.assert_array_equal(values[~nulls], np.asarray(array, dtype=np.float64)[~nulls], err_msg=name)


def test_json_is_strict_json_with_no_infinity_or_nan():
    data = export.json_bytes(run(MHAConfig(mask="causal"))).decode()
    assert "Infinity" not in data and "NaN" not in data
    json.loads(data, parse_constant=lambda name: pytest.fail(f"non-standard constant {name}"))


def test_masked_logits_really_are_null_in_json():
    document = json.loads(export.json_bytes(run(MHAConfig(mask="causal"))))
    first_row_of_head_0 = document["arrays"]["logits"][0][0]
    assert first_row_of_head_0[0] is not None
    assert first_row_of_head_0[1:] == [None] * 5


def test_csv_has_the_token_labels_and_reads_back():
    result = run(MHAConfig(mask="causal"))
    frame = tables.matrix_frame(result.trace.logits[1], result.query_labels, result.key_labels)
    back = pd.read_csv(io.BytesIO(export.csv_bytes(frame)), index_col=0)
    assert list(back.index) == result.query_labels and list(back.columns) == result.key_labels
    np.testing.assert_allclose(back.to_numpy(), result.trace.logits[1], rtol=1e-8)  # '-inf' reads back as -inf
    assert np.isneginf(back.loc["0:the", "5:mat"])


def test_stacked_csv_reads_back_with_its_two_level_index():
    result = run(MHAConfig(n_heads=2))
    titles = ["head 0", "head 1"]
    frame = tables.stacked_frame(result.trace.weights, titles, result.query_labels, result.key_labels)
    back = pd.read_csv(io.BytesIO(export.csv_bytes(frame)), index_col=[0, 1])
    np.testing.assert_allclose(back.loc["head 1"].to_numpy(), result.trace.weights[1], rtol=1e-8)


# ---- every exported name against the engine array it must hold -------------------------------

# name in the download -> the RunResult attribute it must equal (never read through ui.export)
EXPORTED = {
    "embeddings": lambda r: r.embeddings,
    "key_embeddings": lambda r: r.key_embeddings,
    "positional": lambda r: r.positional,
    "x_q": lambda r: r.x_q,
    "x_kv": lambda r: r.x_kv,
    "w_q": lambda r: r.weights.w_q,
    "w_k": lambda r: r.weights.w_k,
    "w_v": lambda r: r.weights.w_v,
    "w_o": lambda r: r.weights.w_o,
    "b_q": lambda r: r.weights.b_q,
    "b_k": lambda r: r.weights.b_k,
    "b_v": lambda r: r.weights.b_v,
    "b_o": lambda r: r.weights.b_o,
    "mask": lambda r: r.mask,
    "q": lambda r: r.trace.q,
    "k": lambda r: r.trace.k,
    "v": lambda r: r.trace.v,
    "scores": lambda r: r.trace.scores,
    "logits": lambda r: r.trace.logits,
    "weights": lambda r: r.trace.weights,
    "heads": lambda r: r.trace.heads,
    "concat": lambda r: r.trace.concat,
    "output": lambda r: r.trace.output,
    "fully_masked": lambda r: r.trace.fully_masked,
    "scale": lambda r: r.trace.scale,
    "query_labels": lambda r: r.query_labels,
    "key_labels": lambda r: r.key_labels,
}


def expected_exports(result) -> dict[str, np.ndarray]:
    """Every name of the table whose attribute is set on this run, with the array it must hold."""
    found = {name: attribute(result) for name, attribute in EXPORTED.items()}
    return {name: np.asarray(value) for name, value in found.items() if value is not None}


def test_every_name_in_the_npz_holds_the_run_result_attribute_of_that_name(result):
    loaded = np.load(io.BytesIO(export.npz_bytes(result)), allow_pickle=False)
    expected = expected_exports(result)
    assert set(loaded.files) == set(expected), "an exported name is missing from the table, or the reverse"
    for name, array in expected.items():
        assert loaded[name].shape == array.shape, name
        np.testing.assert_array_equal(loaded[name], array, err_msg=name)


def test_every_name_in_the_json_holds_the_run_result_attribute_of_that_name(result):
    document = json.loads(export.json_bytes(result))
    expected = expected_exports(result)
    labels = {"query_labels", "key_labels"}
    assert set(document["arrays"]) == set(expected) - labels
    for name in labels:
        assert document[name] == list(expected[name]), name
    for name, array in expected.items():
        if name in labels:
            continue
        stored = np.array(document["arrays"][name], dtype=object)
        stored = np.where(np.equal(stored, None), -np.inf, stored).astype(array.dtype)  # null is a masked -inf
        np.testing.assert_array_equal(stored, array, err_msg=name)
