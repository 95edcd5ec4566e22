"""Head roles (mha_core.head_roles): each score against its definition written here as a loop, on hand-made
heads whose role is known, the threshold rule, and the spread-evenly baseline. The check against transformers'
own attentions is in tests/test_ablation_transformers.py."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import head_roles as hr

HALF = 24  # as on the page: at this length a spread-evenly head stays below the threshold
T = 2 * HALF


def by_loop(weights: np.ndarray, role: str) -> float:
    """One head's score (T, T) written from the module docstring's definitions, one query at a time."""
    picks = {
        "previous": [(i, [i - 1]) for i in range(1, T)],
        "induction": [(i, [i - HALF + 1]) for i in range(HALF, T)],
        "duplicate": [(i, [i - HALF]) for i in range(HALF, T)],
        "first": [(i, [0]) for i in range(1, T)],
        "local": [(i, [i - 3, i - 2, i - 1, i]) for i in range(3, T)],
    }[role]
    return sum(sum(weights[i, j] for j in keys) for i, keys in picks) / len(picks)


def causal_rows(rng) -> np.ndarray:
    """A random causal attention matrix (T, T): rows sum to 1 over keys 0..i."""
    raw = rng.random((T, T)) * np.tri(T)
    return raw / raw.sum(axis=1, keepdims=True)


def head(keys_of) -> np.ndarray:
    """A head that puts all its weight on key keys_of(i) (itself where that is not a valid key)."""
    weights = np.zeros((T, T))
    for i in range(T):
        j = keys_of(i)
        weights[i, j if 0 <= j <= i else i] = 1.0
    return weights


def test_scores_equal_their_definitions_on_random_heads():
    rng = np.random.default_rng(7)
    attentions = np.stack([[causal_rows(rng) for _h in range(3)] for _l in range(2)])  # (2, 3, T, T)
    scores = hr.role_scores(attentions, HALF)
    for role in hr.ROLES:
        for layer in range(2):
            for h in range(3):
                assert scores[role][layer, h] == pytest.approx(by_loop(attentions[layer, h], role), abs=1e-12)


def test_known_heads_get_their_role_and_uniform_gets_none():
    uniform = np.tri(T) / np.arange(1, T + 1)[:, None]
    window = np.tri(T) * (1 - np.tri(T, k=-4))  # keys i-3..i
    window = window / window.sum(axis=1, keepdims=True)
    heads = {
        "previous": head(lambda i: i - 1),
        "induction": head(lambda i: i - HALF + 1 if i >= HALF else 0),
        "duplicate": head(lambda i: i - HALF if i >= HALF else i - 1 if i % 2 else 0),
        "first": head(lambda i: 0),
        "local": window,
        "": uniform,
    }
    attentions = np.stack([list(heads.values())])  # (1, 6, T, T)
    roles = hr.assign_roles(hr.role_scores(attentions, HALF))
    assert list(roles[0]) == list(heads)


def test_threshold_is_above_every_uniform_score():
    uniform = hr.uniform_scores(24)
    assert max(uniform.values()) < hr.THRESHOLD
    assert uniform["first"] == pytest.approx(np.mean([1 / (i + 1) for i in range(1, 48)]), rel=1e-12)


def test_previous_token_wins_over_the_window_that_contains_it():
    scores = {key: np.zeros((1, 2)) for key in hr.ROLES}
    scores["previous"][0] = [0.5, 0.3]
    scores["local"][0] = [0.9, 0.9]
    assert list(hr.assign_roles(scores)[0]) == ["previous", "local"]
    scores["local"][0] = [0.39, 0.39]
    scores["previous"][0] = [0.39, 0.0]
    assert list(hr.assign_roles(scores)[0]) == ["", ""]  # nothing reaches the threshold: no clear role
