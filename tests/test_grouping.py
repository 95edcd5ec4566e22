"""mha_core.grouping: which key/value head a query head reads, by hand and as the engine computes it."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.attention import AttentionWeights, multi_head_attention
from mha_core.grouping import group_size, kv_head_of, kv_sharing_matrix


def test_kv_head_of_by_hand():
    # 4 query heads, 2 key/value heads: heads 0, 1 read 0 and heads 2, 3 read 1 (not h % 2).
    assert [kv_head_of(h, 4, 2) for h in range(4)] == [0, 0, 1, 1]
    assert [kv_head_of(h, 6, 3) for h in range(6)] == [0, 0, 1, 1, 2, 2]
    assert [kv_head_of(h, 4, 1) for h in range(4)] == [0, 0, 0, 0]  # MQA
    assert [kv_head_of(h, 4, 4) for h in range(4)] == [0, 1, 2, 3]  # MHA
    np.testing.assert_array_equal(kv_head_of(np.arange(6), 6, 2), [0, 0, 0, 1, 1, 1])


def test_sharing_matrix_by_hand():
    expected = np.array([[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1]], dtype=float)
    np.testing.assert_array_equal(kv_sharing_matrix(6, 2), expected)
    np.testing.assert_array_equal(kv_sharing_matrix(3, 3), np.eye(3))


@pytest.mark.parametrize(("n_heads", "kv_heads"), [(4, 3), (4, 0), (6, 4)])
def test_groups_that_do_not_divide_are_refused(n_heads, kv_heads):
    with pytest.raises(ValueError, match="equal groups"):
        group_size(n_heads, kv_heads)


def test_the_engines_scores_use_the_head_the_rule_names():
    """Each query head's scores are its q times the keys of kv_head_of(h), as the engine computes them."""
    rng = np.random.default_rng(0)
    c, nh, kv, t = 12, 6, 3, 5
    hs = c // nh
    weights = AttentionWeights(rng.normal(size=(c, c)), rng.normal(size=(c, kv * hs)), rng.normal(size=(c, kv * hs)),
                               None)
    trace = multi_head_attention(rng.normal(size=(t, c)), weights, nh, kv_heads=kv)
    for h in range(nh):
        g = kv_head_of(h, nh, kv)
        assert trace.kv_head_of(h) == g
        np.testing.assert_allclose(trace.scores[h], trace.q[h] @ trace.k[g].T, rtol=0, atol=1e-12)
        others = [o for o in range(kv) if o != g]
        assert all(np.max(np.abs(trace.scores[h] - trace.q[h] @ trace.k[o].T)) > 1e-6 for o in others)
