"""MHAConfig validation (messages a student understands), its limits, and run()."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from mha_core import LIMITS, MHAConfig, run
from mha_core.config import build_mask, scale_factor, valid_head_counts
from mha_core.inputs import random_embeddings
from mha_core.masks import causal_mask, padding_mask, window_mask
from mha_core.positions import sinusoidal_positional_encoding

SIX = ("the", "cat", "sat", "on", "the", "mat")


def words(n: int) -> tuple[str, ...]:
    return tuple(f"w{i}" for i in range(n))


def error_of(config: MHAConfig) -> str:
    with pytest.raises(ValueError) as info:
        config.validate()
    return str(info.value)


def test_indivisible_heads_message_lists_the_choices():
    assert error_of(MHAConfig(d_model=10, n_heads=3)) == "d_model 10 is not divisible by 3 heads: choose 1, 2, 5 or 10"
    assert error_of(MHAConfig(d_model=7, n_heads=2)) == "d_model 7 is not divisible by 2 heads: choose 1 or 7"


def test_valid_head_counts_respect_the_head_limit():
    assert valid_head_counts(12) == [1, 2, 3, 4, 6, 12]
    assert valid_head_counts(64) == [1, 2, 4, 8, 16]  # 32 and 64 divide 64 but exceed max_heads
    assert valid_head_counts(1) == [1]


# Each limit: a configuration exactly at the cap (valid), one just past it (invalid), and the message.
LIMIT_CASES = {
    "max_tokens": (
        MHAConfig(tokens=words(64)),
        MHAConfig(tokens=words(65)),
        "the sentence has 65 tokens; the limit is 64: shorten it",
    ),
    "max_d_model": (
        MHAConfig(d_model=512, n_heads=8),
        MHAConfig(d_model=513, n_heads=1),
        "d_model 513 is out of range: choose a whole number from 1 to 512",
    ),
    "max_heads": (
        MHAConfig(d_model=32, n_heads=16),
        MHAConfig(d_model=34, n_heads=17),
        "heads 17 is out of range: choose a whole number from 1 to 16",
    ),
    "max_seed": (
        MHAConfig(seed=2**32 - 1),
        MHAConfig(seed=2**32),
        "seed 4294967296 is out of range: choose a whole number from 0 to 4294967295",
    ),
    "max_temperature": (
        MHAConfig(scale_rule="temperature", temperature=1000.0),
        MHAConfig(scale_rule="temperature", temperature=1000.5),
        "temperature 1000.5 must be a number above 0 and at most 1000, e.g. 1.0",
    ),
}


def test_every_limit_is_covered():
    assert set(LIMIT_CASES) == set(LIMITS)


@pytest.mark.parametrize("name", sorted(LIMIT_CASES))
def test_each_limit_admits_its_cap_and_rejects_one_more(name):
    at_cap, past_cap, message = LIMIT_CASES[name]
    at_cap.validate()
    assert error_of(past_cap) == message


def test_limit_values_are_the_documented_ones():
    assert LIMITS == {
        "max_tokens": 64,
        "max_d_model": 512,
        "max_heads": 16,
        "max_seed": 2**32 - 1,
        "max_temperature": 1000.0,
    }


def test_the_largest_configuration_runs():
    result = run(MHAConfig(tokens=words(64), kv_tokens=words(64), d_model=512, n_heads=16, mask="causal"))
    assert result.trace.weights.shape == (16, 64, 64)
    assert result.trace.output.shape == (64, 512)


def test_key_value_sentence_has_the_same_token_limit():
    assert error_of(MHAConfig(kv_tokens=words(65))) == "the key/value sentence has 65 tokens; the limit is 64: shorten it"
    MHAConfig(kv_tokens=words(64)).validate()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (MHAConfig(tokens=()), "the sentence is empty: type at least one word, e.g. 'the cat sat'"),
        (MHAConfig(kv_tokens=()), "the key/value sentence is empty: type at least one word, e.g. 'the cat sat'"),
        (MHAConfig(d_model=0), "d_model 0 is out of range: choose a whole number from 1 to 512"),
        (MHAConfig(d_model=True), "d_model must be a whole number from 1 to 512, got True"),
        (MHAConfig(d_model=8.0), "d_model must be a whole number from 1 to 512, got 8.0"),
        (MHAConfig(n_heads=0), "heads 0 is out of range: choose a whole number from 1 to 16"),
        (MHAConfig(seed=-1), "seed -1 is out of range: choose a whole number from 0 to 4294967295"),
        (
            MHAConfig(init="zeros"),
            "unknown weight init 'zeros': choose one of xavier, uniform, normal, he, identity, previous, first, "
            "same, uniform_head",
        ),
        (MHAConfig(scale_rule="sqrt_d"), "unknown scale rule 'sqrt_d': choose one of sqrt_dk, sqrt_t, none, temperature"),
        (
            MHAConfig(scale_rule="temperature", temperature=0.0),
            "temperature 0.0 must be a number above 0 and at most 1000, e.g. 1.0",
        ),
        (
            MHAConfig(scale_rule="temperature", temperature=math.nan),
            "temperature nan must be a number above 0 and at most 1000, e.g. 1.0",
        ),
        (MHAConfig(mask="diagonal"), "unknown mask 'diagonal': choose one of none, causal, padding, window, custom"),
        (
            MHAConfig(mask="padding", valid_len=7),
            "valid length 7 is out of range: choose a whole number from 0 to 6",
        ),
        (MHAConfig(mask="window", window=-1), "window -1 is out of range: choose a whole number from 0 to 64"),
        (MHAConfig(mask="custom"), "mask 'custom' needs a grid of checkboxes: start it from another mask"),
        (
            MHAConfig(tokens=("a", "b"), mask="custom", custom_mask=((True, True),)),
            "the custom mask must have 2 rows (queries) and 2 columns (keys); it was made for another sentence: "
            "reset it",
        ),
        (MHAConfig(embedding="glove"), "unknown embedding 'glove': choose one of random, onehot, custom"),
        (MHAConfig(embedding="custom"), "embedding 'custom' needs an uploaded matrix (CSV or .npy)"),
        (
            MHAConfig(tokens=("a", "b"), d_model=2, n_heads=1, embedding="custom", custom_embedding=((1.0, 2.0),)),
            "the uploaded embedding has shape (1, 2), but 2 tokens need a (2, 2) matrix: one row per token, "
            "d_model columns",
        ),
        (
            MHAConfig(
                tokens=("a",), d_model=2, n_heads=1, embedding="custom", custom_embedding=((1.0, math.inf),)
            ),
            "the uploaded embedding contains NaN or infinite values",
        ),
        (
            MHAConfig(init="identity", d_model=8, n_heads=8),
            "hand-built heads need d_model >= 4 and a head size of at least 2 (d_model 8 / 8 heads = 1): "
            "use fewer heads",
        ),
    ],
)
def test_invalid_configurations_say_what_would_work(config, message):
    assert error_of(config) == message


def test_cross_attention_custom_mask_and_embedding_use_both_sentences():
    config = MHAConfig(
        tokens=("a", "b"),
        kv_tokens=("x", "y", "z"),
        d_model=2,
        n_heads=1,
        mask="custom",
        custom_mask=((True, False, True), (False, True, False)),
        embedding="custom",
        custom_embedding=((1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (2.0, 0.0), (0.0, 2.0)),
    )
    result = run(config)
    np.testing.assert_array_equal(result.x_q, [[1, 0], [0, 1]])  # queries first ...
    np.testing.assert_array_equal(result.x_kv, [[1, 1], [2, 0], [0, 2]])  # ... then keys/values
    np.testing.assert_array_equal(result.mask, config.custom_mask)
    assert result.trace.weights.shape == (1, 2, 3)
    assert np.all(result.trace.weights[0][~result.mask] == 0)


def test_config_is_frozen():
    config = MHAConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 8  # type: ignore[misc]


def test_derived_properties():
    config = MHAConfig(tokens=("a", "b"), kv_tokens=("x", "y", "z"), d_model=12, n_heads=3)
    assert config.is_cross and config.key_tokens == ("x", "y", "z") and config.head_size == 4
    assert not MHAConfig().is_cross and MHAConfig().key_tokens == MHAConfig().tokens


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (MHAConfig(d_model=16, n_heads=4), 1 / math.sqrt(4)),
        (MHAConfig(d_model=16, n_heads=1), 1 / math.sqrt(16)),
        (MHAConfig(scale_rule="sqrt_t"), 1 / math.sqrt(6)),
        (MHAConfig(kv_tokens=words(9), scale_rule="sqrt_t"), 1 / 3),  # counts the keys
        (MHAConfig(scale_rule="none"), 1.0),
        (MHAConfig(scale_rule="temperature", temperature=4.0), 0.25),
    ],
)
def test_scale_rules(config, expected):
    assert scale_factor(config) == pytest.approx(expected, abs=1e-15)
    trace = run(config).trace
    assert trace.scale == pytest.approx(expected, abs=1e-15)
    np.testing.assert_allclose(trace.logits, trace.scores * expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (MHAConfig(), None),
        (MHAConfig(mask="causal"), causal_mask(6)),
        (MHAConfig(kv_tokens=words(4), mask="causal"), causal_mask(6, 4)),
        (MHAConfig(mask="padding", valid_len=2), padding_mask(6, 6, 2)),
        (MHAConfig(mask="padding"), np.ones((6, 6), dtype=bool)),  # valid_len None: every key real
        (MHAConfig(mask="window", window=2), window_mask(6, 6, 2)),
    ],
)
def test_build_mask(config, expected):
    mask = build_mask(config)
    if expected is None:
        assert mask is None
    else:
        np.testing.assert_array_equal(mask, expected)
        np.testing.assert_array_equal(run(config).mask, expected)


def test_run_self_attention_defaults():
    result = run(MHAConfig())
    assert result.query_labels == ["0:the", "1:cat", "2:sat", "3:on", "4:the", "5:mat"]
    assert result.key_labels == result.query_labels
    np.testing.assert_array_equal(result.embeddings, random_embeddings(SIX, 16, 0))
    np.testing.assert_array_equal(result.x_q, result.x_kv)
    assert result.positional is None and result.mask is None
    assert result.trace.output.shape == (6, 16) and result.trace.output.dtype == np.float64
    np.testing.assert_allclose(result.trace.weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


def test_run_cross_attention_shapes_and_inputs():
    result = run(MHAConfig(kv_tokens=("le", "chat", "dort"), d_model=8, n_heads=2))
    assert result.trace.weights.shape == (2, 6, 3)
    assert result.key_labels == ["0:le", "1:chat", "2:dort"]
    np.testing.assert_array_equal(result.x_kv, random_embeddings(("le", "chat", "dort"), 8, 0))


def test_run_adds_positional_encoding():
    result = run(MHAConfig(kv_tokens=words(8), d_model=8, n_heads=2, pe="sinusoidal"))
    pe = sinusoidal_positional_encoding(8, 8)
    np.testing.assert_allclose(result.x_q, result.embeddings + pe[:6], rtol=0, atol=1e-15)
    np.testing.assert_allclose(result.x_kv, result.key_embeddings + pe[:8], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(result.positional, pe[:6])


def test_one_hot_embedding_rows_are_unit_vectors_of_the_vocabulary():
    result = run(MHAConfig(embedding="onehot", d_model=8, n_heads=2))
    x = result.x_q
    np.testing.assert_array_equal(x[0], x[4])  # both "the"
    np.testing.assert_array_equal(x.sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.argmax(x, axis=1), [0, 1, 2, 3, 0, 4])


def test_run_is_deterministic_and_seeded():
    a, b = run(MHAConfig(seed=7)), run(MHAConfig(seed=7))
    np.testing.assert_array_equal(a.trace.output, b.trace.output)
    c = run(MHAConfig(seed=8))
    assert not np.allclose(a.trace.output, c.trace.output)


def test_no_output_projection_gives_the_concat():
    trace = run(MHAConfig(output_projection=False, bias=True)).trace
    np.testing.assert_array_equal(trace.output, trace.concat)


def test_invalid_configuration_is_refused_by_run():
    with pytest.raises(ValueError, match=re.escape("choose 1, 2, 5 or 10")):
        run(MHAConfig(d_model=10, n_heads=3))
