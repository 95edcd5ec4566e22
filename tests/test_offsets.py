"""mha_core.offsets: RoPE's score by offset, the diagonal check, and how far a head looks, against loops and paper."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.offsets import diagonal_spread, distances, mean_attended_distance, rope_offset_scores


def turned(x: np.ndarray, position: int, base: float) -> np.ndarray:
    """RoPE written as a loop of 2x2 rotations: pair (f, f + hs/2) turned by position * base^(-2f/hs)."""
    half = x.size // 2
    out = x.copy()
    for f in range(half):
        a = position * base ** (-2 * f / x.size)
        out[f] = np.cos(a) * x[f] - np.sin(a) * x[f + half]
        out[f + half] = np.sin(a) * x[f] + np.cos(a) * x[f + half]
    return out


@pytest.mark.parametrize("base", [10000.0, 50.0])
def test_rope_offset_scores_are_the_dot_products_of_vectors_turned_by_a_loop(base):
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=8), rng.normal(size=8)
    scores = rope_offset_scores(q, k, 6, base)
    assert scores.shape == (6, 6)
    for p in range(6):
        for p_key in range(6):
            assert scores[p, p_key] == pytest.approx(turned(q, p, base) @ turned(k, p_key, base), abs=1e-12)
    assert scores[0, 0] == pytest.approx(q @ k, abs=1e-12)  # position 0 turns nothing
    assert diagonal_spread(scores) < 1e-12  # RoPE: the score depends on the offset only
    assert np.ptp(scores[:, 0]) > 1e-3  # ... and the offset does change it


def test_diagonal_spread_by_hand():
    assert diagonal_spread(np.array([[1.0, 2.0], [3.0, 1.0]])) == 0.0  # each diagonal holds one number
    # the main diagonal holds 1 and 4: spread 3; the others one number each
    assert diagonal_spread(np.array([[1.0, 2.0], [3.0, 4.0]])) == 3.0
    assert diagonal_spread(np.add.outer(np.arange(6.0), np.zeros(6))) == 5.0  # row i holds i: main diagonal 0..5


def test_distances_by_hand():
    np.testing.assert_array_equal(distances(2, 3), [[0, 1, 2], [1, 0, 1]])


def test_mean_attended_distance_against_a_loop_and_by_hand():
    # head 0 looks at itself (distance 0); head 1 puts every row on key 0, so row i looks i away:
    # (0 + 1 + 2) / 3 = 1; head 2 splits each row evenly over 3 keys.
    t = 3
    weights = np.stack([np.eye(t), np.tile([1.0, 0, 0], (t, 1)), np.full((t, t), 1 / 3)])
    measured = mean_attended_distance(weights)
    # head 2 by hand: row 0 (0+1+2)/3 = 1, row 1 (1+0+1)/3 = 2/3, row 2 1: mean 8/9
    np.testing.assert_allclose(measured, [0.0, 1.0, 8 / 9], rtol=0, atol=1e-15)
    rng = np.random.default_rng(2)
    random = rng.dirichlet(np.ones(5), size=(4, 5))  # (nh, T, T), rows sum to 1
    loop = [np.mean([sum(random[h, i, j] * abs(i - j) for j in range(5)) for i in range(5)]) for h in range(4)]
    np.testing.assert_allclose(mean_attended_distance(random), loop, rtol=0, atol=1e-12)
