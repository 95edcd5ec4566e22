"""QK-norm (``kernel=qknorm``): the RMSNorm with gains, before positions, the bound on the logits, and the decoder.

Expectations come from a 2-feature head worked on paper, from NumPy written here (norm, then RoPE, then the softmax
head), and from the other order (RoPE, then norm), which must differ where a rotated pair's gains differ.
"""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.attention import multi_head_attention
from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS
from mha_core.positions import rope_angles, rotate
from mha_core.qk_norm import QKNormParams, logit_bound, normalise_qk, qk_norm_params, rms_normalise
from mha_core.steps import AttentionWeights
from mha_core.variant_decoding import decode_variant_run

RNG = np.random.default_rng(34)


def test_a_two_feature_row_worked_on_paper():
    # q = (3, 4): mean of squares (9 + 16) / 2 = 12.5, rms = sqrt(12.5) = 3.5355...; gains (2, 0.5)
    q = np.array([[[3.0, 4.0]]])
    out = rms_normalise(q, np.array([2.0, 0.5]), 0.0)
    assert out[0, 0] == pytest.approx([2 * 3 / 12.5**0.5, 0.5 * 4 / 12.5**0.5], abs=1e-15)
    assert out[0, 0] == pytest.approx([1.6970562748, 0.5656854249], abs=1e-10)


def test_the_row_is_registered_with_a_hook_before_positions_and_every_other_row_has_none():
    assert KERNELS["qknorm"].before_positions is normalise_qk
    assert all(k.before_positions is None and not k.early_steps for name, k in KERNELS.items() if name != "qknorm")


def test_gains_are_seeded_near_one_and_differ_within_a_rotated_pair():
    p = qk_norm_params(8, 3)
    assert np.array_equal(p.gain_q, qk_norm_params(8, 3).gain_q) and not np.array_equal(p.gain_q, qk_norm_params(8, 4).gain_q)
    assert np.all(np.abs(p.gain_q - 1) < 0.5) and np.all(np.abs(p.gain_k - 1) < 0.5)
    assert not np.allclose(p.gain_q[:4], p.gain_q[4:])  # pair (f, f + hs/2) gets two gains


def by_hand(config: MHAConfig, order: str = "norm_then_rope"):
    """The layer written out here: project, split, RMSNorm with the gains and RoPE in the given order, softmax head."""
    result = run(config)
    w, x, p = result.weights, result.x_q, qk_norm_params(config.head_size, config.seed)
    nh, kv, hs = config.n_heads, config.key_value_heads, config.head_size
    q = (x @ w.w_q).reshape(len(x), nh, hs).transpose(1, 0, 2)
    k = (x @ w.w_k).reshape(len(x), kv, hs).transpose(1, 0, 2)
    v = (x @ w.w_v).reshape(len(x), kv, hs).transpose(1, 0, 2)
    norm = lambda a, g: a / np.sqrt(np.mean(a**2, axis=-1, keepdims=True) + p.eps) * g  # noqa: E731
    theta = rope_angles(np.arange(len(x)), hs)
    turn = (lambda a: rotate(a, theta)) if config.pe == "rope" else (lambda a: a)
    if order == "norm_then_rope":
        q, k = turn(norm(q, p.gain_q)), turn(norm(k, p.gain_k))
    else:
        q, k = norm(turn(q), p.gain_q), norm(turn(k), p.gain_k)
    reads = np.arange(nh) // (nh // kv)
    logits = q @ k[reads].transpose(0, 2, 1) / np.sqrt(hs)
    if result.mask is not None:
        logits = np.where(result.mask, logits, -np.inf)
    a = np.exp(logits - logits.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    return q, logits, a, a @ v[reads]


@pytest.mark.parametrize("settings", [dict(pe="rope", mask="causal"), dict(pe="rope", kv_heads=2, seed=7),
                                      dict(pe="none", mask="causal", kv_heads=1), dict(pe="sinusoidal", seed=11)])
def test_the_engine_equals_norm_then_positions_written_out(settings):
    config = MHAConfig(kernel="qknorm", d_model=16, n_heads=4, **settings)
    t = run(config).trace
    q, logits, weights, heads = by_hand(config)
    np.testing.assert_allclose(t.q, q, atol=1e-12)
    np.testing.assert_allclose(np.where(np.isinf(logits), 0, t.logits - np.where(np.isinf(logits), 0, logits)), 0,
                               atol=1e-12)
    np.testing.assert_allclose(t.weights, weights, atol=1e-12)
    np.testing.assert_allclose(t.heads, heads, atol=1e-12)
    assert np.allclose(t.projected_q, run(MHAConfig(**{**config.__dict__, "kernel": "softmax"})).trace.projected_q)


def test_the_order_matters_where_a_rotated_pair_has_two_gains():
    config = MHAConfig(kernel="qknorm", pe="rope", mask="causal", seed=5)
    t = run(config).trace
    _q, _l, other_order, _h = by_hand(config, order="rope_then_norm")
    assert np.max(np.abs(t.weights - other_order)) > 1e-3  # the engine normalises first
    # with one gain for every feature the two orders agree: RoPE keeps the root mean square
    q = RNG.normal(size=(2, 5, 8))
    theta = rope_angles(np.arange(5), 8)
    even = np.full(8, 1.3)
    np.testing.assert_allclose(rotate(rms_normalise(q, even, 1e-6), theta), rms_normalise(rotate(q, theta), even, 1e-6),
                               atol=1e-12)
    uneven = qk_norm_params(8, 5).gain_q
    assert np.max(np.abs(rotate(rms_normalise(q, uneven, 1e-6), theta) - rms_normalise(rotate(q, theta), uneven, 1e-6))) > 1e-3


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("factor", [1.0, 10.0, 1000.0])
def test_the_logits_stay_below_scale_times_hs_times_the_largest_gains_however_large_the_weights(seed, factor):
    config = MHAConfig(kernel="qknorm", d_model=32, n_heads=4, pe="rope", seed=seed, init="uniform")
    result = run(config)
    w = result.weights
    big = AttentionWeights(w.w_q * factor, w.w_k * factor, w.w_v, w.w_o)
    params = qk_norm_params(config.head_size, seed)
    t = multi_head_attention(result.x_q, big, 4, pe="rope", kernel="qknorm", kernel_params=params)
    bound = logit_bound(config.head_size, t.scale, params)
    assert bound == pytest.approx(t.scale * 8 * np.abs(params.gain_q).max() * np.abs(params.gain_k).max())
    assert np.max(np.abs(t.scores * t.scale)) <= bound
    assert t.kernel_parts.bound == bound
    plain = multi_head_attention(result.x_q, big, 4, pe="rope")
    if factor >= 10:
        assert np.max(np.abs(plain.logits)) > 10 * bound  # without the norm they grow with the weights
    assert np.linalg.norm(t.q, axis=-1).max() <= np.sqrt(8) * np.abs(params.gain_q).max()


def test_the_bound_is_reached_when_q_and_k_align_on_the_largest_gain():
    hs = 4
    params = QKNormParams(np.array([1.0, 2.0, 1.0, 1.0]), np.array([1.0, 3.0, 1.0, 1.0]), 0.0)
    e = np.zeros((1, 1, hs))
    e[..., 1] = 5.0  # every feature but the one of the largest gains is 0
    q, k = normalise_qk(e, e, params)
    assert float(q[0, 0] @ k[0, 0]) * 0.5 == pytest.approx(logit_bound(hs, 0.5, params))  # 0.5 * 4 * 2 * 3 = 12


def test_weights_scaled_up_leave_the_qk_norm_head_as_it_was():
    config = MHAConfig(kernel="qknorm", d_model=16, n_heads=4, pe="rope", mask="causal", seed=2)
    result = run(config)
    w = result.weights
    big = AttentionWeights(w.w_q * 50, w.w_k * 50, w.w_v, w.w_o)
    t = multi_head_attention(result.x_q, big, 4, pe="rope", mask=result.mask, kernel="qknorm",
                             kernel_params=result.kernel_params)
    np.testing.assert_allclose(t.weights, result.trace.weights, atol=1e-4)  # eps is all that changes
    p = result.kernel_params
    no_eps = QKNormParams(p.gain_q, p.gain_k, 0.0)
    small, large = (multi_head_attention(result.x_q, ws, 4, pe="rope", mask=result.mask, kernel="qknorm",
                                         kernel_params=no_eps) for ws in (w, big))
    np.testing.assert_allclose(large.weights, small.weights, atol=1e-12)  # without eps: exactly scale-free


@pytest.mark.parametrize("settings", [dict(pe="rope", kv_heads=2), dict(pe="alibi"), dict(pe="rope", null_key=True)])
def test_decoding_token_by_token_gives_the_rows_of_full_attention(settings):
    result = run(MHAConfig(kernel="qknorm", mask="causal", seed=4, **settings))
    steps = decode_variant_run(result)
    for step in steps:
        t = step.position
        np.testing.assert_allclose(step.weights, result.trace.weights[:, t, : t + 1], atol=1e-12)
        np.testing.assert_allclose(step.output, result.trace.output[t], atol=1e-12)


def test_latent_attention_is_refused_with_its_fix():
    found = MHAConfig(kernel="qknorm", mla_rank=4).problem()
    assert found is not None and "latent" in str(found.message)
    assert found.fix(MHAConfig(kernel="qknorm", mla_rank=4)).problem() is None
