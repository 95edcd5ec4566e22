"""Hand-built heads: the attention pattern each preset promises, for many sentence lengths and scales."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import MHAConfig, run
from mha_core.config import INITS
from mha_core.presets import PRESET_INITS, PRESETS

SENTENCE = ("the", "cat", "sat", "on", "the", "mat", "and", "the", "dog", "sat", "too")
SCALES = [
    {"scale_rule": "sqrt_dk"},
    {"scale_rule": "sqrt_t"},
    {"scale_rule": "none"},
    {"scale_rule": "temperature", "temperature": 50.0},
]
SHAPES = [(2, 4, 1), (5, 8, 2), (11, 16, 4), (64, 32, 8)]  # (tokens, d_model, heads)
PATTERN_TOL = 1e-6  # presets put all but < 1e-8 of each row on the intended keys


def tokens(n: int) -> tuple[str, ...]:
    return tuple(SENTENCE[i % len(SENTENCE)] for i in range(n))


def preset_weights(init: str, n_tokens: int, d_model: int, n_heads: int, **scale) -> np.ndarray:
    return run(MHAConfig(tokens=tokens(n_tokens), d_model=d_model, n_heads=n_heads, init=init, **scale)).trace.weights


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: s["scale_rule"])
def test_identity_head_attends_to_itself(shape, scale):
    weights = preset_weights("identity", *shape, **scale)
    n = shape[0]
    np.testing.assert_allclose(weights, np.broadcast_to(np.eye(n), weights.shape), rtol=0, atol=PATTERN_TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: s["scale_rule"])
def test_previous_head_attends_to_the_token_before(shape, scale):
    weights = preset_weights("previous", *shape, **scale)
    n = shape[0]
    rows = np.arange(1, n)
    assert np.all(weights[:, rows, rows - 1] >= 0.99)
    assert np.all(weights[:, 0, 0] >= 0.99)  # the first token has no previous one: it attends to itself


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: s["scale_rule"])
def test_first_head_attends_to_token_zero(shape, scale):
    weights = preset_weights("first", *shape, **scale)
    assert np.all(weights[:, :, 0] >= 0.99)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: s["scale_rule"])
def test_same_head_shares_weight_among_copies_of_the_word(shape, scale):
    weights = preset_weights("same", *shape, **scale)
    words = np.array(tokens(shape[0]))
    same = words[:, None] == words[None, :]  # (T, T): key j is the same word as query i
    for w in weights:
        np.testing.assert_allclose(np.where(same, w, 0).sum(axis=-1), 1.0, rtol=0, atol=PATTERN_TOL)
        for i in range(len(words)):
            copies = w[i, same[i]]
            np.testing.assert_allclose(copies, 1 / len(copies), rtol=0, atol=PATTERN_TOL)


def test_same_head_on_the_cat_sat_on_the_mat():
    weights = preset_weights("same", 6, 8, 2)
    # "the" at 0 and 4 split the weight between them; "cat" attends only to itself.
    np.testing.assert_allclose(weights[:, 0, [0, 4]], 0.5, rtol=0, atol=PATTERN_TOL)
    np.testing.assert_allclose(weights[:, 4, [0, 4]], 0.5, rtol=0, atol=PATTERN_TOL)
    np.testing.assert_allclose(weights[:, 1, 1], 1.0, rtol=0, atol=PATTERN_TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: s["scale_rule"])
def test_uniform_head_rows_are_one_over_t(shape, scale):
    weights = preset_weights("uniform_head", *shape, **scale)
    np.testing.assert_allclose(weights, 1 / shape[0], rtol=0, atol=1e-15)


def test_identity_head_in_cross_attention_matches_positions():
    config = MHAConfig(tokens=tokens(4), kv_tokens=("le", "chat", "dort", "sur", "le", "tapis"), d_model=8,
                       n_heads=2, init="identity")
    weights = run(config).trace.weights
    assert weights.shape == (2, 4, 6)
    assert np.all(weights[:, np.arange(4), np.arange(4)] >= 0.99)


def test_identity_head_output_reproduces_its_own_position_and_word():
    # W_V copies dims 0-3 (position, word) into each head and W_O is the identity, so a head that
    # attends to itself returns its own code.
    result = run(MHAConfig(tokens=tokens(6), d_model=8, n_heads=2, init="identity"))
    np.testing.assert_allclose(result.trace.output[:, 0:4], result.x_q[:, 0:4], rtol=0, atol=PATTERN_TOL)
    np.testing.assert_allclose(result.trace.output[:, 4:8], result.x_q[:, 0:4], rtol=0, atol=PATTERN_TOL)


def test_previous_head_under_a_causal_mask():
    weights = run(MHAConfig(tokens=tokens(8), init="previous", mask="causal")).trace.weights
    rows = np.arange(1, 8)
    assert np.all(weights[:, rows, rows - 1] >= 0.99)


def test_presets_ignore_positional_encoding_and_still_hold():
    weights = run(MHAConfig(init="identity", pe="sinusoidal")).trace.weights
    np.testing.assert_allclose(weights, np.broadcast_to(np.eye(6), weights.shape), rtol=0, atol=PATTERN_TOL)


def test_every_preset_row_names_itself_and_each_name_is_its_own():
    assert PRESET_INITS == ("identity", "previous", "first", "same", "uniform_head")
    for init, preset in PRESETS.items():
        assert preset.init == init
        assert preset.name.strip() and preset.description.strip()
        assert preset.label.startswith("hand-built: ")
    for field in ("name", "label", "description"):
        values = [getattr(p, field) for p in PRESETS.values()]
        assert len(set(values)) == len(values), f"two presets share a {field}"
    assert set(PRESET_INITS) <= set(INITS)  # the config accepts every row
