"""QK-norm after the fact on SmolLM2 (mha_core.smollm2_qknorm): the numbers against the clean run and against q and
k normalised here by hand, not against the code that made them."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import smollm2_qknorm as qn
from mha_core.smollm2 import rms_norm

PROMPT = "Two trains leave the station at noon, one going north and one going"  # not used while writing the code
LAYERS = (6, 17)


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(PROMPT)


@pytest.fixture(scope="module")
def plain(smollm2, run):
    return qn.qk_norm_run(smollm2, run, LAYERS, "one")


def turned(x, base):
    """RoPE by hand, transformers' convention: the pairs (f, f + hs/2) turned by position · base^(-2f/hs)."""
    t, hs = x.shape[1], x.shape[2]
    angles = np.arange(t)[:, None] * base ** (-np.arange(0, hs, 2) / hs)  # (T, hs/2)
    cos, sin, low, high = np.cos(angles), np.sin(angles), x[..., : hs // 2], x[..., hs // 2 :]
    return np.concatenate([low * cos - high * sin, high * cos + low * sin], axis=-1)  # x's shape


def by_hand_logits(model, x, index, gain):
    """Layer ``index``'s logits (nh, T, T) with q, k RMS-normalised per head here, turned by RoPE, scaled."""
    config, layer = model.config, model.layers[index]
    normed = rms_norm(x, layer.attn_norm, config.eps).astype(np.float64)  # (T, C)
    t, hs = x.shape[0], config.head_size
    q = (normed @ layer.w_q.transposed()).reshape(t, config.n_heads, hs).transpose(1, 0, 2)  # (nh, T, hs)
    k = (normed @ layer.w_k.transposed()).reshape(t, config.kv_heads, hs).transpose(1, 0, 2)  # (kv, T, hs)
    q = gain * q / np.sqrt((q * q).mean(axis=-1, keepdims=True) + 1e-6)
    k = k / np.sqrt((k * k).mean(axis=-1, keepdims=True) + 1e-6)
    q, k = turned(q, config.rope_base), turned(k, config.rope_base)
    k = np.repeat(k, config.group_size, axis=0)  # (nh, T, hs)
    logits = q @ k.transpose(0, 2, 1) / np.sqrt(hs)  # (nh, T, T)
    return np.where(np.tri(t, dtype=bool), logits, -np.inf)


def test_no_layer_changed_is_the_trained_model(smollm2, run):
    empty = qn.qk_norm_run(smollm2, run, (), "one")
    np.testing.assert_array_equal(empty.losses, smollm2.prompt_losses(run))
    np.testing.assert_array_equal(empty.after, empty.before)


def test_before_is_the_clean_runs_logit_range(smollm2, run, plain):
    for index in (0, 6, 29):
        _normed, trace, _w = smollm2.layer_trace(run, index)
        values = trace.logits[:, np.tri(run.n_tokens, dtype=bool)]
        assert plain.before[index].tolist() == pytest.approx([values.min(), values.max()], abs=1e-9)
    np.testing.assert_array_equal(plain.after[:LAYERS[0]], plain.before[:LAYERS[0]])  # untouched before layer 6


def test_the_normed_layer_logits_are_those_normalised_by_hand(smollm2, run, plain):
    hand = by_hand_logits(smollm2, run.layers[LAYERS[0]].input, LAYERS[0], 1.0)  # layer 6 sees the clean stream
    visible = hand[:, np.tri(run.n_tokens, dtype=bool)]
    assert plain.after[LAYERS[0]].tolist() == pytest.approx([visible.min(), visible.max()], abs=1e-4)
    bound = smollm2.config.head_size**0.5  # scale · hs = 8
    assert (np.abs(plain.after[list(LAYERS)]) <= bound + 1e-5).all()
    assert np.abs(plain.before).max() > bound  # the trained model passes it somewhere
    assert plain.gains[list(LAYERS)].tolist() == [1.0, 1.0] and np.isnan(plain.gains[0])


def test_matched_gain_gives_back_each_layers_logit_rms(smollm2, run):
    gains = qn.matched_gains(smollm2, run)
    assert gains.shape == (30,) and (gains > 0).all()
    tri = np.tri(run.n_tokens, dtype=bool)
    for index in (3, 20):
        x = run.layers[index].input
        _normed, trace, _w = smollm2.layer_trace(run, index)
        trained = np.asarray(trace.logits, dtype=np.float64)[:, tri]
        mine = by_hand_logits(smollm2, x, index, gains[index])[:, tri]
        assert np.sqrt((mine**2).mean()) == pytest.approx(np.sqrt((trained**2).mean()), rel=1e-5)
        nudged = by_hand_logits(smollm2, x, index, 1.01 * gains[index])[:, tri]
        assert abs(np.sqrt((nudged**2).mean()) / np.sqrt((trained**2).mean()) - 1.01) < 1e-4


def test_matched_run_uses_the_fitted_gains_and_changes_the_loss(smollm2, run, plain):
    matched = qn.qk_norm_run(smollm2, run, LAYERS, "matched")
    np.testing.assert_allclose(matched.gains[list(LAYERS)], qn.matched_gains(smollm2, run)[list(LAYERS)], rtol=1e-12)
    dense = float(smollm2.prompt_losses(run).mean())
    assert matched.dense == pytest.approx(dense, abs=1e-12)
    assert abs(plain.loss - dense) > 1e-3 and abs(matched.loss - plain.loss) > 1e-4


def test_bad_settings_are_refused(smollm2, run):
    with pytest.raises(ValueError, match="gain"):
        qn.qk_norm_run(smollm2, run, LAYERS, "learned")
    with pytest.raises(ValueError, match="layers"):
        qn.qk_norm_run(smollm2, run, (30,), "one")
