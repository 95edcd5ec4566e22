"""RoPE and ALiBi: worked examples, properties, and agreement with transformers' LLaMA and BLOOM code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from strategies import random_matrix

from mha_core import AttentionWeights, causal_mask, multi_head_attention
from mha_core.positions import alibi_bias, alibi_slopes, rope_angles, rotate

EXACT = 1e-12


def layer(rng, c: int, width: int, kv_width: int | None = None) -> AttentionWeights:
    kv_width = width if kv_width is None else kv_width
    return AttentionWeights(random_matrix(rng, c, width), random_matrix(rng, c, kv_width),
                            random_matrix(rng, c, kv_width), random_matrix(rng, width, c))


# ---- RoPE -----------------------------------------------------------------------------------


def test_rope_on_one_pair_is_a_turn_by_position_radians():
    # hs = 2: one pair, frequency base^0 = 1, so position p turns (1, 0) by p radians.
    x = np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]]])  # (nh=1, T=3, hs=2)
    turned = rotate(x, rope_angles(np.array([0, 1, 2]), 2))
    expected = [[1.0, 0.0], [math.cos(1), math.sin(1)], [-2 * math.sin(2), 2 * math.cos(2)]]
    np.testing.assert_allclose(turned[0], expected, rtol=0, atol=EXACT)


def test_rope_angles_follow_the_base():
    # hs = 4: pairs (0, 2) and (1, 3) turn at frequencies 1 and base^(-1/2).
    angles = rope_angles(np.array([3]), 4, base=100.0)
    np.testing.assert_allclose(angles, [[3.0, 3.0 / 10.0]], rtol=0, atol=EXACT)


@pytest.mark.parametrize(("feature", "partner"), [(1, 5), (6, 2)])
def test_rope_pairs_feature_f_with_f_plus_half_the_head(feature, partner):
    # hs = 8, half-split as LLaMA / GPT-NeoX: pairs (0, 4), (1, 5), (2, 6), (3, 7), pair p turning by
    # position * base^(-2p/8). Interleaved pairs (0, 1), (2, 3), ... would move feature 1 into 0, 6 into 7.
    hs, position, base = 8, 3, 100.0
    x = np.zeros((1, 1, hs))
    x[0, 0, feature] = 2.0
    turned = rotate(x, rope_angles(np.array([position]), hs, base))[0, 0]  # (hs,)
    pair = min(feature, partner)  # p: the angle index of the pair
    angle = position * base ** (-2 * pair / hs)  # 3, 3/10^0.5, 3/10 for p = 0, 1, 2
    cos, sin = 2.0 * math.cos(angle), 2.0 * math.sin(angle)
    expected = np.zeros(hs)
    if feature < partner:  # the first of the pair: (x, 0) -> (x cos, x sin)
        expected[feature], expected[partner] = cos, sin
    else:  # the second: (0, x) -> (-x sin, x cos)
        expected[partner], expected[feature] = -sin, cos
    np.testing.assert_allclose(turned, expected, rtol=0, atol=EXACT)
    assert set(np.flatnonzero(turned)) == {feature, partner}


def test_rope_keeps_lengths_and_makes_scores_depend_on_the_offset_only():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 1, 8))  # (nh, 1, hs) each
    for i, j in ((5, 2), (9, 6), (3, 0)):  # offset 3 each time
        q_i = rotate(q, rope_angles(np.array([i]), 8))
        k_j = rotate(k, rope_angles(np.array([j]), 8))
        np.testing.assert_allclose(np.linalg.norm(q_i, axis=-1), np.linalg.norm(q, axis=-1), rtol=0, atol=EXACT)
        score = (q_i * k_j).sum(axis=-1)  # (nh, 1)
        if (i, j) == (5, 2):
            first = score
        np.testing.assert_allclose(score, first, rtol=0, atol=EXACT)


def test_multi_head_attention_with_rope_traces_the_turn():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 8))
    trace = multi_head_attention(x, layer(rng, 8, 8), 2, pe="rope", rope_base=50.0)
    np.testing.assert_allclose(trace.q, rotate(trace.q_unrotated, trace.q_angles), rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.k, rotate(trace.k_unrotated, trace.k_angles), rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.q_angles, rope_angles(np.arange(5), 4, 50.0), rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.scores, trace.q @ trace.k.transpose(0, 2, 1), rtol=0, atol=EXACT)
    plain = multi_head_attention(x, layer(np.random.default_rng(1), 8, 8), 2)
    assert plain.q_unrotated is None and plain.bias is None and plain.pe == "none"


# ---- ALiBi ----------------------------------------------------------------------------------


def test_alibi_slopes_of_eight_heads_are_halves():
    np.testing.assert_allclose(alibi_slopes(8), [2.0**-k for k in range(1, 9)], rtol=0, atol=EXACT)


def test_alibi_slopes_of_six_heads_interleave_the_next_power_of_two():
    # the paper's rule: 4 heads' slopes (1/4 ... 1/256), then every other of 8 heads' (1/2, 1/8)
    np.testing.assert_allclose(alibi_slopes(6), [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8], rtol=0, atol=EXACT)


def test_alibi_bias_is_minus_slope_times_distance_both_ways():
    bias = alibi_bias(np.array([0.5]), np.arange(3), np.arange(3))
    np.testing.assert_allclose(bias[0], [[0, -0.5, -1], [-0.5, 0, -0.5], [-1, -0.5, 0]], rtol=0, atol=EXACT)


def test_multi_head_attention_with_alibi_adds_the_bias_to_the_scaled_scores():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6))
    mask = causal_mask(4)
    trace = multi_head_attention(x, layer(rng, 6, 6), 3, pe="alibi", mask=mask)
    expected = trace.scores * trace.scale + alibi_bias(alibi_slopes(3), np.arange(4), np.arange(4))
    np.testing.assert_allclose(trace.logits[:, mask], expected[:, mask], rtol=0, atol=EXACT)
    assert np.all(trace.logits[:, ~mask] == -np.inf)
    np.testing.assert_allclose(trace.bias, alibi_bias(alibi_slopes(3), np.arange(4), np.arange(4)), atol=EXACT)


# ---- bad combinations -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pe": "rope", "n_heads": 2, "width": 6}, "head size must be even; it is 3"),
        ({"pe": "sinusoidal"}, "added to the tokens before attention"),
        ({"pe": "rope", "rope_base": 1.0}, "RoPE base 1.0 must be a number above 1"),
        ({"pe": "alibi", "x_k": np.ones((3, 4))}, "ALiBi penalises the distance"),
        ({"kv_heads": 3, "n_heads": 2}, "kv_heads = 3 does not divide n_heads = 2"),
        ({"kv_heads": 0}, "kv_heads must be a positive integer"),
        ({"pe": "rope", "q_positions": np.arange(3)}, r"q_positions must give one number per token, shape \(2,\)"),
    ],
)
def test_bad_combinations_raise_a_clear_value_error(kwargs, message):
    width = kwargs.pop("width", 4)
    n_heads = kwargs.pop("n_heads", 2)
    eye = np.eye(4, width)
    weights = AttentionWeights(eye, eye, eye)
    with pytest.raises(ValueError, match=message):
        multi_head_attention(np.arange(8.0).reshape(2, 4), weights, n_heads, **kwargs)


def test_alibi_accepts_self_attention_given_as_an_equal_x_k():
    x = np.random.default_rng(3).standard_normal((3, 4))
    eye = np.eye(4)
    same = multi_head_attention(x, AttentionWeights(eye, eye, eye), 2, pe="alibi", x_k=x.copy())
    alone = multi_head_attention(x, AttentionWeights(eye, eye, eye), 2, pe="alibi")
    np.testing.assert_array_equal(same.weights, alone.weights)


# ---- against transformers -------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.parametrize(("dtype", "tol"), [("float32", 1e-6), ("float64", 1e-12)])
@pytest.mark.parametrize("offset", [0, 7])
def test_rope_matches_transformers_llama(dtype, tol, offset):
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig

    n_heads, hs, t, base = 4, 8, 6, 500.0
    rng = np.random.default_rng(4)
    x = rng.standard_normal((t, n_heads * hs)).astype(dtype)
    positions = np.arange(offset, offset + t)
    weights = layer(rng, n_heads * hs, n_heads * hs).astype(np.dtype(dtype))
    ours = multi_head_attention(x, weights, n_heads, pe="rope", rope_base=base, q_positions=positions,
                                k_positions=positions)
    position_ids = torch.from_numpy(positions)[None]  # (1, T)
    if dtype == "float32":  # LLaMA's own rotary module computes its angles in float32
        config = LlamaConfig(hidden_size=n_heads * hs, num_attention_heads=n_heads, rope_theta=base)
        cos, sin = llama.LlamaRotaryEmbedding(config)(torch.zeros(1), position_ids)  # (1, T, hs) each
    else:  # the module's formula in float64: inv_freq = 1 / base^(2p/hs), emb = cat(freqs, freqs)
        inv_freq = 1.0 / (base ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs))
        emb = torch.cat([position_ids[..., None] * inv_freq] * 2, dim=-1)  # (1, T, hs)
        cos, sin = emb.cos(), emb.sin()
    q, k = (torch.from_numpy(np.ascontiguousarray(a))[None] for a in (ours.q_unrotated, ours.k_unrotated))
    q_turned, k_turned = llama.apply_rotary_pos_emb(q, k, cos, sin)  # (1, nh, T, hs) each
    assert np.abs(ours.q - q_turned[0].numpy()).max() <= tol
    assert np.abs(ours.k - k_turned[0].numpy()).max() <= tol


@pytest.mark.torch
@pytest.mark.parametrize("n_heads", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16])
def test_alibi_matches_transformers_bloom(n_heads):
    torch = pytest.importorskip("torch")
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    t = 7
    theirs = bloom.build_alibi_tensor(torch.ones(1, t), n_heads, torch.float64)[:, 0].numpy()  # (nh, Tk): m_h * j
    ours = alibi_bias(alibi_slopes(n_heads), np.arange(t), np.arange(t))  # (nh, Tq, Tk): -m_h |i - j|
    np.testing.assert_allclose(theirs[:, 1], alibi_slopes(n_heads), rtol=0, atol=1e-6)
    # BLOOM adds m_h * j to every row and relies on softmax ignoring a constant per row: under a
    # causal mask m_h * j = -m_h (i - j) + m_h * i, so the two agree up to the row's constant m_h * i.
    causal = causal_mask(t)
    shifted = ours + alibi_slopes(n_heads)[:, None, None] * np.arange(t)[:, None]  # (nh, Tq, Tk)
    expected = np.broadcast_to(theirs[:, None, :], shifted.shape)
    assert np.abs(shifted[:, causal] - expected[:, causal]).max() <= 1e-6
    # and the weights of a causal layer are the same with either bias
    rng = np.random.default_rng(n_heads)
    x = rng.standard_normal((t, 2 * n_heads))
    trace = multi_head_attention(x, layer(rng, 2 * n_heads, 2 * n_heads), n_heads, pe="alibi", mask=causal)
    logits = np.where(causal, trace.scores * trace.scale + theirs[:, None, :], -np.inf)
    weights = torch.softmax(torch.from_numpy(logits), dim=-1).numpy()
    assert np.abs(trace.weights - weights).max() <= 1e-6


@pytest.mark.parametrize("options", [{"pe": "rope"}, {"pe": "alibi"}, {"kv_heads": 1}, {"null_key": True}])
def test_every_option_keeps_float32_and_read_only_arrays(options):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    width = 2 if options.get("kv_heads") == 1 else 4
    weights = layer(rng, 4, 4, width)
    weights = AttentionWeights(*(a.astype(np.float32) for a in (weights.w_q, weights.w_k, weights.w_v, weights.w_o)))
    trace = multi_head_attention(x, weights, 2, mask=causal_mask(3), **options)
    for name, value in trace.__dict__.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert value.dtype == (np.float64 if name.endswith("_angles") else np.float32), name  # angles: see rope_angles
            assert not value.flags.writeable, name
