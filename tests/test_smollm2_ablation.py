"""Head ablation on SmolLM2 (mha_core.smollm2_ablation) without torch: hand-made concatenations, the cached
layers against a run from layer 0, and KL / loss against their definitions written here. The transformers
cross-check is tests/test_ablation_transformers.py."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import smollm2_ablation as ab
from mha_core.smollm2 import rms_norm

PROMPT = "Rivers carve valleys slowly, over thousands of years. Rivers carve"


def test_ablate_concat_replaces_only_the_chosen_columns():
    concat = np.arange(2 * 6, dtype=np.float64).reshape(2, 6)  # T = 2, nh = 3, hs = 2
    zeroed = ab.ablate_concat(concat, [1], head_size=2)
    np.testing.assert_array_equal(zeroed, [[0, 1, 0, 0, 4, 5], [6, 7, 0, 0, 10, 11]])
    means = np.array([[9.0, 9.0], [7.0, 8.0], [5.0, 5.0]])  # (nh, hs)
    meaned = ab.ablate_concat(concat, [0, 2], head_size=2, means=means)
    np.testing.assert_array_equal(meaned, [[9, 9, 2, 3, 5, 5], [9, 9, 8, 9, 5, 5]])
    assert concat[0, 2] == 2  # the input is left alone


def test_kl_divergence_against_its_definition():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=50), rng.normal(size=50)
    p, q = np.exp(a) / np.exp(a).sum(), np.exp(b) / np.exp(b).sum()
    assert ab.kl_divergence(a, b) == pytest.approx(float(np.sum(p * np.log(p / q))), rel=1e-12)
    assert ab.kl_divergence(a, a + 5.0) == pytest.approx(0.0, abs=1e-15)  # a shift changes no probability
    assert np.isfinite(ab.kl_divergence(np.array([0.0, 800.0]), np.array([800.0, 0.0])))


def test_checked_heads_sorts_and_refuses():
    assert ab.checked_heads([(3, 1), (0, 2), (3, 1)], 30, 9) == ((0, 2), (3, 1))
    with pytest.raises(ValueError, match="layer 30, head 0 does not exist"):
        ab.checked_heads([(30, 0)], 30, 9)
    with pytest.raises(ValueError, match="head 9"):
        ab.checked_heads([(2, 9)], 30, 9)


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(PROMPT, traces=())


def from_layer_zero(model, ids, heads, means=None):
    """The ablated forward written out from the embeddings, every layer run, the concatenation edited here."""
    config, hs = model.config, model.config.head_size
    x = model.embed(ids)
    for index in range(config.n_layers):
        weights = model.layers[index]
        trace = model.layer(x, index).trace
        concat = np.array(trace.concat)  # (T, nh*hs)
        for layer, head in heads:
            if layer == index:
                concat[:, head * hs:(head + 1) * hs] = 0.0 if means is None else means[layer, head]
        attention_output = concat @ weights.w_o.transposed()  # (T, C); SmolLM2 has no biases
        x = model.after_attention(x, attention_output, index)
    final = rms_norm(x, model.final_norm, config.eps)
    return model.unembed(final)  # (T, V)


def test_no_head_off_is_the_clean_run(smollm2, run):
    result = ab.ablate(smollm2, run, [])
    np.testing.assert_array_equal(result.next_logits, run.next_logits)
    assert result.kl == 0.0
    assert result.loss == result.clean_loss


def test_cached_layers_equal_a_run_from_layer_zero(smollm2, run):
    heads = ((7, 3), (7, 5), (16, 1))
    result = ab.ablate(smollm2, run, heads)
    assert result.first_layer == 7
    expected = from_layer_zero(smollm2, run.token_ids, heads)  # (T, V)
    np.testing.assert_allclose(result.next_logits, expected[-1], atol=1e-4, rtol=0)
    logits = expected[:-1].astype(np.float64)
    top = logits.max(axis=1, keepdims=True)
    losses = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0] - logits[np.arange(len(logits)), run.token_ids[1:]]
    np.testing.assert_allclose(result.losses, losses, atol=1e-4, rtol=0)
    np.testing.assert_allclose(result.clean_losses, smollm2.prompt_losses(run), atol=0, rtol=0)
    assert np.abs(result.next_logits - run.next_logits).max() > 1e-2  # the heads mattered


def test_mean_ablation_uses_the_means(smollm2, run):
    means = np.zeros((30, 9, 64), dtype=np.float32)
    zero = ab.ablate(smollm2, run, [(4, 4)], "zero")
    np.testing.assert_allclose(ab.ablate(smollm2, run, [(4, 4)], "mean", means=means).next_logits, zero.next_logits,
                               atol=1e-5)
    with pytest.raises(ValueError, match="mean ablation needs"):
        ab.ablate(smollm2, run, [(4, 4)], "mean")
    with pytest.raises(ValueError, match="not one of"):
        ab.ablate(smollm2, run, [(4, 4)], "resample")
