"""Longer than trained (mha_core.smollm2_long): the positions, the scalings' theta, RoPE's shift invariance in float64,
the blocked attention against a dense reference, and the link of its view (ui/pages/real_model/long_view.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mha_core import smollm2_long as lg
from mha_core.positions import rotate
from ui.pages.real_model import long_view as lv

HS, BASE, TRAINED = 64, 100000.0, 8192


def test_positions_keep_the_first_copy_and_move_the_rest_past_the_trained_length():
    setting = lg.LongSetting("yarn", 2.0, 0.5, 256)
    positions = lg.long_positions(setting, TRAINED, 37)
    assert positions[:37].tolist() == list(range(37))
    assert positions[37] == 37 + 2 * TRAINED - 256
    assert positions[-1] == 2 * TRAINED - 1
    assert np.all(np.diff(positions[37:]) == 1)
    inside = lg.long_positions(lg.LongSetting("inside", 2.0, 0.5, 256), TRAINED, 37)
    assert inside.tolist() == list(range(256))


@pytest.mark.parametrize("method", list(lg.METHODS))
def test_scores_depend_only_on_the_distance_to_1e_12(method):
    """RoPE's shift invariance, every method's theta, float64: q_i . k_j of unit vectors with both positions moved by
    1000. (At positions near 16k one ulp of an angle is already 4e-12 rad, so the positions stay below 3000 here.)"""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 1, 40, HS))  # (1, T, hs) each
    q, k = q / np.linalg.norm(q, axis=-1, keepdims=True), k / np.linalg.norm(k, axis=-1, keepdims=True)
    positions = np.sort(rng.choice(2000, size=40, replace=False))  # (T,)
    setting = lg.LongSetting(method, 2.0, 0.5, 256)
    scores = []
    for shift in (0, 1000):
        angles, _multiplier = lg.layer_angles(setting, 3, positions + shift, HS, BASE, TRAINED)  # (T, hs/2)
        scores.append(rotate(q, angles)[0] @ rotate(k, angles)[0].T)  # (T, T)
    np.testing.assert_allclose(scores[0], scores[1], atol=1e-12, rtol=0)


def test_yarn_keeps_the_fast_pairs_and_interpolates_the_slow_ones():
    """YaRN by the paper: pairs turning more than 32 times over the trained length keep theta, pairs turning less
    than once get theta / s; the ramp rises from low to high; q and k carry 0.1 ln s + 1."""
    trained_theta = BASE ** -(np.arange(0, HS, 2) / HS)
    theta, multiplier = lg.inverse_frequencies("yarn", 4.0, HS, BASE, TRAINED, 2 * TRAINED)
    turns = TRAINED * trained_theta / (2 * math.pi)  # (hs/2,)
    np.testing.assert_allclose(theta[turns > 32], trained_theta[turns > 32], rtol=1e-15)
    np.testing.assert_allclose(theta[turns < 1], trained_theta[turns < 1] / 4, rtol=1e-15)
    assert (turns > 32).sum() >= 5 and (turns < 1).sum() >= 5  # both ends exist for SmolLM2's base
    assert np.all(np.diff(lg.yarn_ramp(HS, BASE, TRAINED)) >= 0)
    assert multiplier == pytest.approx(0.1 * math.log(4.0) + 1.0, abs=1e-15)


def test_the_scalings_by_their_definitions():
    trained_theta = BASE ** -(np.arange(0, HS, 2) / HS)
    linear, _m = lg.inverse_frequencies("linear", 2.0, HS, BASE, TRAINED, 2 * TRAINED)
    np.testing.assert_allclose(linear, trained_theta / 2, rtol=1e-15)
    ntk, _m = lg.inverse_frequencies("ntk", 2.0, HS, BASE, TRAINED, 2 * TRAINED)
    assert ntk[0] == 1.0 and ntk[-1] == pytest.approx(trained_theta[-1] / 2, rel=1e-12)  # slowest pair: / s exactly
    inside, _m = lg.inverse_frequencies("dynamic", 2.0, HS, BASE, TRAINED, TRAINED)
    np.testing.assert_allclose(inside, trained_theta, rtol=1e-15)  # dynamic: as trained inside the trained length
    grown, _m = lg.inverse_frequencies("dynamic", 2.0, HS, BASE, TRAINED, 2 * TRAINED)
    assert grown[-1] == pytest.approx(trained_theta[-1] / 3, rel=1e-12)  # s n / L - (s - 1) = 3


def test_partial_rope_and_nope_layers_drop_the_right_pairs():
    positions = np.arange(10) * 1000
    partial = lg.LongSetting("partial", 2.0, 0.25, 256)
    angles, _m = lg.layer_angles(partial, 0, positions, HS, BASE, TRAINED)  # (T, hs/2)
    assert np.all(angles[1:, :8] != 0) and np.all(angles[:, 8:] == 0)  # the 8 fastest pairs of 32 turn
    nope = lg.LongSetting("nope4", 2.0, 0.5, 256)
    turned = [bool(np.any(lg.layer_angles(nope, layer, positions, HS, BASE, TRAINED)[0])) for layer in range(8)]
    assert turned == [True, True, True, False, True, True, True, False]


def test_blocked_attention_equals_the_dense_softmax(monkeypatch):
    monkeypatch.setattr(lg, "QUERY_BLOCK", 7)  # several blocks, one cut inside the sampled rows
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 2, 30, 8)).astype(np.float32)  # (nh, T, hs) each
    rows, period = lg.sampled_rows(30, 6, count=10), 6
    heads, measures = lg.attend_in_blocks(q, k, v, rows, period)
    logits = (q.astype(np.float64) @ k.transpose(0, 2, 1)) / np.sqrt(8)  # (nh, T, T): the reference, float64
    logits[:, ~np.tri(30, dtype=bool)] = -np.inf
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)  # (nh, T, T)
    np.testing.assert_allclose(heads, weights @ v, atol=1e-5)
    picked = weights[:, rows]  # (nh, S, T)
    entropy = -np.sum(np.where(picked > 0, picked * np.log(np.where(picked > 0, picked, 1)), 0), axis=-1)
    np.testing.assert_allclose(measures["entropy"], entropy.mean(axis=1), atol=1e-5)
    np.testing.assert_allclose(measures["first"], picked[:, :, 0].mean(axis=1), atol=1e-6)
    np.testing.assert_allclose(measures["induction"], picked[:, np.arange(rows.size), rows - period + 1].mean(axis=1),
                               atol=1e-6)


def test_bad_settings_are_refused():
    for bad in ({"method": "rope2"}, {"factor": 0.5}, {"fraction": 1.5}, {"n_tokens": 5000}):
        with pytest.raises(ValueError):
            lg.LongSetting(**bad)


def test_link_round_trip_and_bad_values():
    link = lv.LongLink(True, "partial", 4.0, 0.25, 1024, "whatif")
    messages = []
    assert lv.read_link(lv.link_params(link), messages) == link and messages == []
    assert lv.link_params(lv.LongLink()) == {}
    assert lv.link_params(lv.LongLink(on=True)) == {"rm_long": "1"}
    messages = []
    read = lv.read_link({"rm_long": "yes", "rm_long_method": "rope9", "rm_long_factor": "3",
                         "rm_long_fraction": "x", "rm_long_tokens": "99999", "rm_long_text": "novel"}, messages)
    assert read == lv.LongLink()
    assert len(messages) == 6 and all("`rm_long" in message for message in messages)
