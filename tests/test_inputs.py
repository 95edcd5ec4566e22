"""Tokens, embeddings, positional encoding and weight initialisation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mha_core.inputs import (
    init_matrix,
    one_hot_embeddings,
    random_embeddings,
    random_weights,
    token_labels,
    tokenize,
    vocabulary,
)
from mha_core.positions import sinusoidal_positional_encoding


def test_tokenize_keeps_duplicates_and_splits_on_any_whitespace():
    assert tokenize("the cat  sat\ton the\nmat") == ("the", "cat", "sat", "on", "the", "mat")
    assert tokenize("   ") == ()


def test_token_labels_carry_the_position_and_are_unique():
    labels = token_labels(("the", "cat", "the"))
    assert labels == ["0:the", "1:cat", "2:the"]
    assert len(set(labels)) == len(labels)


def test_vocabulary_in_order_of_first_appearance():
    assert vocabulary(("b", "a", "b"), ("c", "a")) == ["b", "a", "c"]


def test_random_embeddings_same_word_same_vector():
    x = random_embeddings(("the", "cat", "the"), 8, seed=0)
    assert x.shape == (3, 8)
    np.testing.assert_array_equal(x[0], x[2])
    assert not np.allclose(x[0], x[1])


def test_random_embeddings_depend_on_seed_and_word_only():
    a = random_embeddings(("the", "cat"), 8, seed=3)
    b = random_embeddings(("a", "big", "cat"), 8, seed=3)
    np.testing.assert_array_equal(a[1], b[2])  # editing the sentence leaves "cat" alone
    c = random_embeddings(("the", "cat"), 8, seed=4)
    assert not np.allclose(a, c)
    np.testing.assert_array_equal(a, random_embeddings(("the", "cat"), 8, seed=3))


def test_random_embeddings_dtype_and_empty():
    assert random_embeddings(("a",), 4, seed=0, dtype=np.float32).dtype == np.float32
    assert random_embeddings((), 4, seed=0).shape == (0, 4)


def test_one_hot_embeddings():
    vocab = ["the", "cat"]
    x = one_hot_embeddings(("cat", "the", "cat"), vocab, 4)
    np.testing.assert_array_equal(x, [[0, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]])


def test_one_hot_needs_room_for_every_word():
    with pytest.raises(ValueError, match=r"d_model >= the number of distinct words \(3\): choose d_model >= 3"):
        one_hot_embeddings(("a", "b", "c"), ["a", "b", "c"], 2)


def test_sinusoidal_positional_encoding_hand_values():
    pe = sinusoidal_positional_encoding(3, 4)
    # Position 0: sin 0 = 0 in even columns, cos 0 = 1 in odd ones.
    np.testing.assert_array_equal(pe[0], [0.0, 1.0, 0.0, 1.0])
    # Position 1, C = 4: column pair i = 0 has angle 1; pair i = 1 has angle 1 / 10000^(2/4) = 1/100.
    np.testing.assert_allclose(pe[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], rtol=0, atol=1e-15)
    np.testing.assert_allclose(pe[2, :2], [math.sin(2), math.cos(2)], rtol=0, atol=1e-15)


def test_sinusoidal_positional_encoding_odd_width_and_dtype():
    pe = sinusoidal_positional_encoding(5, 5, dtype=np.float32)
    assert pe.shape == (5, 5) and pe.dtype == np.float32
    # Column 4 is the sine of pair i = 2: angle p / 10000^(4/5).
    np.testing.assert_allclose(pe[:, 4], np.sin(np.arange(5) / 10000 ** 0.8), rtol=0, atol=1e-7)


@pytest.mark.parametrize(
    ("init", "expected_std"),
    [("xavier", math.sqrt(2 / (256 + 256))), ("he", math.sqrt(2 / 256)), ("normal", 1.0)],
)
def test_normal_inits_have_their_documented_spread(init, expected_std):
    w = init_matrix(np.random.default_rng(0), init, 256, 256)  # 65536 draws: sample std within ~0.3%
    assert w.shape == (256, 256)
    assert abs(w.std() / expected_std - 1) < 0.02
    assert abs(w.mean()) < 0.02 * expected_std  # standard error of the mean is std / 256


def test_uniform_init_is_in_zero_one():
    w = init_matrix(np.random.default_rng(0), "uniform", 64, 32)
    assert w.shape == (64, 32)
    assert w.min() >= 0.0 and w.max() < 1.0
    assert abs(w.mean() - 0.5) < 0.02


def test_unknown_init_names_the_choices():
    with pytest.raises(ValueError, match="unknown weight init 'zeros': choose one of xavier, uniform, normal, he"):
        init_matrix(np.random.default_rng(0), "zeros", 2, 2)


def test_random_weights_shapes_and_options():
    w = random_weights(6, seed=1)
    for m in (w.w_q, w.w_k, w.w_v, w.w_o):
        assert m.shape == (6, 6)
    assert w.b_q is None and w.b_o is None
    wb = random_weights(6, seed=1, bias=True)
    for b in (wb.b_q, wb.b_k, wb.b_v, wb.b_o):
        assert b.shape == (6,)
    no_out = random_weights(6, seed=1, bias=True, output_projection=False)
    assert no_out.w_o is None and no_out.b_o is None
    assert random_weights(6, seed=1, dtype=np.float32).w_q.dtype == np.float32


def test_turning_biases_on_keeps_the_weights():
    plain, biased = random_weights(8, seed=5), random_weights(8, seed=5, bias=True)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(biased, name))


def test_random_weights_are_seeded_and_distinct():
    a, b = random_weights(8, seed=5), random_weights(8, seed=6)
    np.testing.assert_array_equal(a.w_q, random_weights(8, seed=5).w_q)
    assert not np.allclose(a.w_q, b.w_q)
    assert not np.allclose(a.w_q, a.w_k)  # four separate draws, not one matrix reused
