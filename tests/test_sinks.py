"""mha_core.sinks: the mass a key draws, as weight and as norm-weighted share, against a loop and paper."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from mha_core.attention import AttentionWeights, multi_head_attention
from mha_core.sinks import norm_weighted_share, special_mass


def test_norm_weighted_share_by_hand():
    # one head, two queries, two keys. Row 0 carries (0.5*2, 0.5*6) = (1, 3): key 0 holds 1/4.
    # Row 1 carries nothing (a fully masked row): it counts as 0. Mean over the rows: 1/8.
    carried = np.array([[[1.0, 3.0], [0.0, 0.0]]])  # (1, 2, 2)
    np.testing.assert_allclose(norm_weighted_share(carried, 0), [0.125], rtol=0, atol=1e-15)
    np.testing.assert_allclose(norm_weighted_share(carried, 1), [0.375], rtol=0, atol=1e-15)


def _loop_special_mass(traces, w_os, position):
    """Per layer, head and query, written out: weight on ``position`` and its share of weight x ||v_j W_O(h)||."""
    weight, share = [], []
    for trace, w_o in zip(traces, w_os, strict=True):
        nh, t, _ = trace.weights.shape
        hv = trace.v.shape[-1]
        layer_w, layer_s = [], []
        for h in range(nh):
            g = h // (nh // trace.v.shape[0])
            rows = w_o[h * hv : (h + 1) * hv]  # head h's rows of W_O
            size = [np.linalg.norm(trace.v[g, j] @ rows) for j in range(t)]
            layer_w.append(np.mean([trace.weights[h, i, position] for i in range(t)]))
            layer_s.append(np.mean([trace.weights[h, i, position] * size[position]
                                    / sum(trace.weights[h, i, j] * size[j] for j in range(t)) for i in range(t)]))
        weight.append(layer_w)
        share.append(layer_s)
    return np.array(weight), np.array(share)


def test_special_mass_against_a_loop_over_layers_heads_and_queries():
    rng = np.random.default_rng(3)
    c, nh, t = 8, 4, 5
    traces, w_os = [], []
    for kv in (4, 2):  # the second layer shares key/value heads: a group reads one V
        w_o = rng.normal(size=(c, c))
        weights = AttentionWeights(rng.normal(size=(c, c)), rng.normal(size=(c, kv * 2)),
                                   rng.normal(size=(c, kv * 2)), w_o)
        traces.append(multi_head_attention(rng.normal(size=(t, c)), weights, nh, kv_heads=kv))
        w_os.append(w_o)
    for position in (0, t - 1):
        weight, share = special_mass(traces, w_os, position)
        assert weight.shape == share.shape == (2, nh)
        expected_weight, expected_share = _loop_special_mass(traces, w_os, position)
        np.testing.assert_allclose(weight, expected_weight, rtol=0, atol=1e-12)
        np.testing.assert_allclose(share, expected_share, rtol=0, atol=1e-12)


def test_a_key_with_a_short_value_draws_weight_but_little_share():
    # one head, 2 keys, each row 0.9 on key 0 whose value is 10x shorter than key 1's: the sink picture.
    weights = np.array([[[0.9, 0.1], [0.9, 0.1]]])  # (1, T, T)
    v = np.array([[[0.1, 0.0], [0.0, 1.0]]])  # (1, T, hv): ||v_0|| = 0.1, ||v_1|| = 1
    trace = SimpleNamespace(weights=weights, v=v, values_per_query_head=lambda: v)
    weight, share = special_mass([trace], [np.eye(2)], 0)
    np.testing.assert_allclose(weight, [[0.9]])
    np.testing.assert_allclose(share, [[0.09 / (0.09 + 0.1)]])  # 0.9*0.1 against 0.1*1
