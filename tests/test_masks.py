"""Mask builders: True = the query (row) may attend to the key (column)."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import causal_mask, combine_masks, padding_mask, window_mask

T, F = True, False


def test_causal_square():
    np.testing.assert_array_equal(
        causal_mask(3),
        [
            [T, F, F],
            [T, T, F],
            [T, T, T],
        ],
    )


def test_causal_more_keys_than_queries_is_top_left_aligned():
    # Query i sees keys 0..i; the extra keys on the right stay hidden from every query.
    np.testing.assert_array_equal(
        causal_mask(2, 4),
        [
            [T, F, F, F],
            [T, T, F, F],
        ],
    )


def test_causal_more_queries_than_keys_is_top_left_aligned():
    # Queries past the last key see every key.
    np.testing.assert_array_equal(
        causal_mask(4, 2),
        [
            [T, F],
            [T, T],
            [T, T],
            [T, T],
        ],
    )


@pytest.mark.parametrize(("tq", "tk"), [(1, 1), (5, 5), (3, 7), (7, 3)])
def test_causal_matches_its_definition(tq, tk):
    mask = causal_mask(tq, tk)
    expected = [[j <= i for j in range(tk)] for i in range(tq)]
    assert mask.dtype == np.bool_ and mask.shape == (tq, tk)
    np.testing.assert_array_equal(mask, expected)


def test_padding_mask_hides_keys_past_the_valid_length():
    np.testing.assert_array_equal(
        padding_mask(2, 4, 3),
        [
            [T, T, T, F],
            [T, T, T, F],
        ],
    )


def test_padding_mask_edges():
    assert not padding_mask(3, 4, 0).any()  # valid length 0: every key hidden (seed 000's NaN case)
    assert padding_mask(3, 4, 4).all()
    assert padding_mask(3, 4, 9).all()  # longer than the keys: nothing to hide


def test_padding_mask_is_writable_copy():
    mask = padding_mask(2, 3, 1)
    mask[0, 2] = True  # a broadcast view would refuse the write or change every row
    assert not mask[1, 2]


def test_window_mask_radius_one():
    np.testing.assert_array_equal(
        window_mask(4, 4, 1),
        [
            [T, T, F, F],
            [T, T, T, F],
            [F, T, T, T],
            [F, F, T, T],
        ],
    )


def test_window_mask_causal():
    np.testing.assert_array_equal(
        window_mask(4, 4, 1, causal=True),
        [
            [T, F, F, F],
            [T, T, F, F],
            [F, T, T, F],
            [F, F, T, T],
        ],
    )


def test_window_radius_zero_is_the_diagonal_and_large_radius_is_everything():
    np.testing.assert_array_equal(window_mask(3, 3, 0), np.eye(3, dtype=bool))
    assert window_mask(3, 5, 10).all()
    np.testing.assert_array_equal(window_mask(3, 5, 10, causal=True), causal_mask(3, 5))


def test_window_rectangular_matches_definition():
    mask = window_mask(3, 6, 2)
    expected = [[abs(i - j) <= 2 for j in range(6)] for i in range(3)]
    np.testing.assert_array_equal(mask, expected)


def test_combine_is_logical_and():
    combined = combine_masks(causal_mask(3), padding_mask(3, 3, 2))
    np.testing.assert_array_equal(
        combined,
        [
            [T, F, F],
            [T, T, F],
            [T, T, F],
        ],
    )


def test_combine_skips_none_and_returns_none_for_nothing():
    assert combine_masks() is None
    assert combine_masks(None, None) is None
    np.testing.assert_array_equal(combine_masks(None, causal_mask(2)), causal_mask(2))


def test_combine_broadcasts_a_per_head_mask():
    per_head = np.array([np.ones((2, 2), dtype=bool), np.zeros((2, 2), dtype=bool)])  # (nh, Tq, Tk)
    combined = combine_masks(per_head, causal_mask(2))
    assert combined.shape == (2, 2, 2)
    np.testing.assert_array_equal(combined[0], causal_mask(2))
    assert not combined[1].any()


def test_combine_accepts_integer_masks_as_booleans():
    combined = combine_masks(np.array([[1, 0], [2, 1]]), np.ones((2, 2), dtype=bool))
    assert combined.dtype == np.bool_
    np.testing.assert_array_equal(combined, [[T, F], [T, T]])
