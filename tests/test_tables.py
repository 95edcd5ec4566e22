"""ui.charts.tables: DataFrames whose labels line up with the figures and whose numbers are the engine's."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from ui.charts import tables
from ui.charts.labels import concat_columns

LABELS = ["0:the", "1:cat", "2:the"]


def test_matrix_frame_keeps_labels_and_values():
    matrix = np.arange(6.0).reshape(3, 2)
    frame = tables.matrix_frame(matrix, LABELS, ["x", "y"])
    assert list(frame.index) == LABELS and list(frame.columns) == ["x", "y"]
    assert frame.loc["2:the", "y"] == 5.0


def test_matrix_frame_refuses_labels_that_do_not_fit():
    with pytest.raises(ValueError, match="does not fit 3 row and 3 column labels"):
        tables.matrix_frame(np.zeros((3, 2)), LABELS, LABELS)


def test_stacked_frame_has_one_block_of_rows_per_panel():
    mats = np.arange(2 * 3 * 3, dtype=float).reshape(2, 3, 3)
    frame = tables.stacked_frame(mats, ["head 0", "head 1"], LABELS, LABELS)
    assert frame.shape == (6, 3)
    assert frame.index.names == ["head", "query"]
    assert frame.loc[("head 1", "0:the"), "2:the"] == mats[1, 0, 2]
    np.testing.assert_array_equal(frame.loc["head 0"].to_numpy(), mats[0])


def test_head_summary_frame_matches_hand_counted_numbers():
    # identity preset: every weight on the diagonal, so entropy 0, max weight 1, diagonal mass 1
    result = run(MHAConfig(tokens=("a", "b", "c", "d"), init="identity", d_model=8, n_heads=2))
    frame = tables.head_summary_frame(result.trace)
    assert list(frame.index) == ["head 0", "head 1"]
    assert list(frame.columns) == [label for label, _ in tables.DIAGNOSTIC_COLUMNS.values()]
    np.testing.assert_allclose(frame["entropy"], 0.0, atol=1e-6)
    np.testing.assert_allclose(frame["mean row max"], 1.0, atol=1e-6)
    np.testing.assert_allclose(frame["on itself"], 1.0, atol=1e-6)
    np.testing.assert_allclose(frame["on previous"], 0.0, atol=1e-6)
    np.testing.assert_allclose(frame["on first token"], 0.25, atol=1e-6)  # only query 0 puts weight on key 0


def test_similarity_frame_is_symmetric_with_ones_on_the_diagonal():
    frame = tables.similarity_frame(run(MHAConfig(n_heads=4)).trace)
    values = frame.to_numpy()
    np.testing.assert_allclose(values, values.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(values), 1.0, atol=1e-12)
    assert list(frame.columns) == ["head 0", "head 1", "head 2", "head 3"]


def test_fully_masked_queries_lists_the_rows_with_nothing_to_attend_to():
    grid = ((False, False, False), (True, False, False), (False, False, False))
    result = run(MHAConfig(tokens=("the", "cat", "the"), mask="custom", custom_mask=grid, d_model=4, n_heads=2))
    assert tables.fully_masked_queries(result.trace, result.query_labels) == ["0:the", "2:the"]
    assert tables.fully_masked_queries(run(MHAConfig()).trace, LABELS * 2) == []


def test_concat_columns_name_the_head_and_the_column_inside_it():
    assert concat_columns(6, 3) == ["h0·0", "h0·1", "h1·0", "h1·1", "h2·0", "h2·1"]


def test_cross_attention_has_no_on_itself_or_on_previous_columns():
    result = run(MHAConfig(kv_tokens=("a", "dog", "ran"), n_heads=2))
    frame = tables.head_summary_frame(result.trace, cross=True)
    assert list(frame.columns) == ["entropy", "mean row max", "on first token"]
    np.testing.assert_allclose(frame["on first token"], result.trace.weights[:, :, 0].mean(axis=1), atol=1e-12)
