"""Head diagnostics on hand-made weight matrices whose answers are known without the engine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mha_core.diagnostics import (
    diagonal_mass,
    encoder_patterns,
    first_token_mass,
    head_similarity,
    head_summary,
    heads_agree,
    key_mass,
    max_weight,
    normalized_entropy,
    renormalised_rows,
    row_spread,
    same_word_mass,
)

TOL = 1e-12
EYE = np.eye(4)  # attends to itself
UNIFORM = np.full((4, 4), 0.25)  # attends evenly
PREVIOUS = np.eye(4, k=-1) + np.diag([1.0, 0, 0, 0])  # row i on key i-1; row 0 on itself
FIRST = np.zeros((4, 4))
FIRST[:, 0] = 1.0  # every row on key 0
CAUSAL_UNIFORM = np.tri(4) / np.arange(1, 5)[:, None]  # row i: 1/(i+1) on keys 0..i


def stack(*heads: np.ndarray) -> np.ndarray:
    return np.stack(heads)  # (nh, Tq, Tk)


def none_masked(weights: np.ndarray) -> np.ndarray:
    return np.zeros(weights.shape[:2], dtype=bool)  # (nh, Tq)


def test_summary_of_known_heads():
    weights = stack(EYE, UNIFORM, PREVIOUS, FIRST)
    summary = head_summary(weights, none_masked(weights))
    np.testing.assert_allclose(summary["max_weight"], [1, 0.25, 1, 1], rtol=0, atol=TOL)
    # diagonal: PREVIOUS has only row 0 on the diagonal (1/4); FIRST likewise
    np.testing.assert_allclose(summary["diagonal"], [1, 0.25, 0.25, 0.25], rtol=0, atol=TOL)
    # previous: rows 1..3 count; EYE and FIRST put 0 there except FIRST's row 1 (key 0 = previous of 1)
    np.testing.assert_allclose(summary["previous"], [0, 0.25, 1, 1 / 3], rtol=0, atol=TOL)
    # first: PREVIOUS has rows 0 and 1 on key 0 (2/4)
    np.testing.assert_allclose(summary["first"], [0.25, 0.25, 0.5, 1], rtol=0, atol=TOL)
    assert set(summary) == {"entropy", "max_weight", "diagonal", "previous", "first"}


def test_entropy_is_one_for_even_rows_and_matches_the_formula_otherwise():
    skewed = np.array([0.7, 0.1, 0.1, 0.1])
    # H = -(0.7 ln 0.7 + 3 * 0.1 ln 0.1) / ln 4 = (0.249672 + 0.690776) / 1.386294 = 0.678390
    expected = -(0.7 * math.log(0.7) + 3 * 0.1 * math.log(0.1)) / math.log(4)
    weights = stack(UNIFORM, np.tile(skewed, (4, 1)))
    np.testing.assert_allclose(normalized_entropy(weights, none_masked(weights)), [1.0, expected], rtol=0, atol=TOL)
    assert expected == pytest.approx(0.678390, abs=1e-6)  # the same on paper


def test_entropy_normalises_by_the_keys_a_row_may_see():
    # Causal rows spread evenly over the keys they may see: entropy 1 in every row with a choice;
    # row 0 (one key, no choice) is left out.
    weights = stack(CAUSAL_UNIFORM)
    allowed = np.tri(4, dtype=bool)[None]
    np.testing.assert_allclose(normalized_entropy(weights, none_masked(weights), allowed), [1.0], rtol=0, atol=TOL)


def test_a_one_hot_head_has_entropy_zero_not_nan():
    weights = stack(np.eye(4))
    np.testing.assert_allclose(normalized_entropy(weights, none_masked(weights)), [0.0], rtol=0, atol=TOL)


def test_fully_masked_rows_are_left_out_and_an_all_masked_head_is_nan():
    masked_row = UNIFORM.copy()
    masked_row[2] = 0.0
    weights = stack(masked_row, np.zeros((4, 4)))
    fully_masked = np.array([[False, False, True, False], [True, True, True, True]])
    summary = head_summary(weights, fully_masked)
    np.testing.assert_allclose(summary["max_weight"][0], 0.25, rtol=0, atol=TOL)  # not (3 * 0.25 + 0) / 4
    np.testing.assert_allclose(summary["first"][0], 0.25, rtol=0, atol=TOL)
    for name, values in summary.items():
        assert np.isnan(values[1]), name


def test_diagonal_with_more_queries_than_keys_counts_rows_that_have_the_key():
    weights = np.zeros((1, 3, 2))
    weights[0, 0, 0] = weights[0, 1, 1] = 1.0  # rows 0, 1 on their diagonal
    weights[0, 2, 0] = 1.0  # row 2 has no key 2: it must not count
    np.testing.assert_allclose(diagonal_mass(weights, none_masked(weights)), [1.0], rtol=0, atol=TOL)
    # previous token: rows 1 and 2 count (keys 0 and 1); both put 0 there
    np.testing.assert_allclose(diagonal_mass(weights, none_masked(weights), 1), [0.0], rtol=0, atol=TOL)


def test_previous_token_offset_ignores_row_zero():
    weights = stack(PREVIOUS)
    np.testing.assert_allclose(diagonal_mass(weights, none_masked(weights), 1), [1.0], rtol=0, atol=TOL)
    np.testing.assert_allclose(first_token_mass(weights, none_masked(weights)), [0.5], rtol=0, atol=TOL)
    np.testing.assert_allclose(max_weight(weights, none_masked(weights)), [1.0], rtol=0, atol=TOL)


def test_head_similarity_of_known_heads():
    anti = np.fliplr(EYE)  # no overlap with the identity
    sim = head_similarity(stack(EYE, EYE, anti, UNIFORM))
    # EYE . UNIFORM = 4 * 0.25 = 1; |EYE| = 2, |UNIFORM| = 1 -> cosine 1/2
    expected = np.array(
        [
            [1, 1, 0, 0.5],
            [1, 1, 0, 0.5],
            [0, 0, 1, 0.5],
            [0.5, 0.5, 0.5, 1],
        ]
    )
    np.testing.assert_allclose(sim, expected, rtol=0, atol=TOL)


def test_head_similarity_of_an_all_zero_head_is_zero_to_the_others():
    sim = head_similarity(stack(EYE, np.zeros((4, 4))))
    assert sim[0, 1] == 0.0 and sim[1, 0] == 0.0
    assert sim[0, 0] == pytest.approx(1.0, abs=TOL)
    assert np.all(np.isfinite(sim))


# ---- against plain loops on random weights ---------------------------------------------------


def random_weights(seed: int, n_heads: int = 3, t: int = 5) -> np.ndarray:
    """Rows of softmax-like weights: positive, each row summing to 1. Shape (nh, T, T)."""
    raw = np.random.default_rng(seed).random((n_heads, t, t)) ** 3  # (nh, T, T), some rows peaked
    return raw / raw.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("seed", range(10))
def test_key_mass_max_weight_and_row_spread_match_loops(seed):
    weights = random_weights(seed)
    n_heads, t, _ = weights.shape
    for key in (0, 2, -1):
        expected = [sum(weights[h, i, key] for i in range(t)) / t for h in range(n_heads)]
        np.testing.assert_allclose(key_mass(weights, None, key), expected, rtol=0, atol=TOL)
    np.testing.assert_allclose(max_weight(weights), [sum(max(row) for row in weights[h]) / t for h in range(n_heads)],
                               rtol=0, atol=TOL)
    spreads = []
    for h in range(n_heads):
        row_stds = []
        for i in range(t):
            mean = sum(weights[h, i]) / t
            row_stds.append(math.sqrt(sum((x - mean) ** 2 for x in weights[h, i]) / t))
        spreads.append(sum(row_stds) / t)
    np.testing.assert_allclose(row_spread(weights), spreads, rtol=0, atol=TOL)


def test_key_mass_leaves_fully_masked_rows_out():
    weights = stack(UNIFORM)
    weights[0, 3] = 0.0
    fully_masked = np.array([[False, False, False, True]])
    np.testing.assert_allclose(key_mass(weights, fully_masked, -1), [0.25], rtol=0, atol=TOL)  # not 0.75 / 4


@pytest.mark.parametrize("seed", range(10))
def test_heads_agree_matches_a_loop(seed):
    weights = random_weights(seed, n_heads=2, t=6)
    agree = 0
    for i in range(6):
        picks = {max(range(6), key=lambda j, h=h: weights[h, i, j]) for h in range(2)}
        agree += len(picks) == 1
    assert heads_agree(weights) == pytest.approx(agree / 6, abs=TOL)
    assert heads_agree(stack(FIRST, FIRST)) == 1.0
    assert heads_agree(stack(EYE, FIRST)) == pytest.approx(0.25, abs=TOL)  # only row 0 picks key 0 in both


def test_renormalised_rows_match_a_loop():
    weights = random_weights(4, n_heads=1, t=4)[0]
    mask = np.tri(4, dtype=bool)
    expected = np.zeros((4, 4))
    for i in range(4):
        kept = sum(weights[i, j] for j in range(4) if mask[i, j])
        for j in range(4):
            expected[i, j] = weights[i, j] / kept if mask[i, j] else 0.0
    np.testing.assert_allclose(renormalised_rows(weights, mask), expected, rtol=0, atol=TOL)


def test_same_word_mass_counts_only_the_other_pieces_of_split_words():
    # pieces: [CLS], un, ##bel, fast, [SEP]; only rows 1 and 2 belong to a split word
    word_ids = [None, 0, 0, 1, None]
    weights = np.full((1, 5, 5), 0.2)  # (1, T, T), rows sum to 1
    weights[0, 1] = [0.1, 0.2, 0.6, 0.1, 0.0]  # un -> ##bel: 0.6
    weights[0, 2] = [0.0, 0.3, 0.5, 0.2, 0.0]  # ##bel -> un: 0.3 (its own 0.5 does not count)
    np.testing.assert_allclose(same_word_mass(weights, word_ids), [(0.6 + 0.3) / 2], rtol=0, atol=TOL)


@pytest.mark.parametrize("seed", range(5))
def test_same_word_mass_matches_a_loop(seed):
    weights = random_weights(seed, t=7)
    word_ids = [None, 0, 0, 0, 1, 2, 2]
    rows = [i for i in range(7) if word_ids[i] is not None and word_ids.count(word_ids[i]) > 1]
    for h in range(3):
        per_row = [sum(weights[h, i, j] for j in range(7) if j != i and word_ids[j] == word_ids[i]) for i in rows]
        assert same_word_mass(weights, word_ids)[h] == pytest.approx(sum(per_row) / len(per_row), abs=TOL)


def test_same_word_mass_is_nan_without_a_split_word():
    assert np.isnan(same_word_mass(np.full((2, 3, 3), 1 / 3), [None, 0, None])).all()


def test_encoder_patterns_are_the_named_measures():
    weights = random_weights(9, t=6)
    fully_masked = none_masked(weights)
    allowed = np.ones(weights.shape, dtype=bool)
    word_ids = [None, 0, 0, 1, 2, None]
    measures = encoder_patterns(weights, fully_masked, allowed, word_ids)
    expected = {
        "previous": diagonal_mass(weights, fully_masked, 1),
        "next": diagonal_mass(weights, fully_masked, -1),
        "first": weights[:, :, 0].mean(axis=1),
        "last": weights[:, :, -1].mean(axis=1),
        "same_word": same_word_mass(weights, word_ids),
        "entropy": normalized_entropy(weights, fully_masked, allowed),
    }
    assert set(measures) == set(expected)
    for name, values in expected.items():
        np.testing.assert_allclose(measures[name], values, rtol=0, atol=TOL, err_msg=name)
