"""Sparse selection (MoBA, DeepSeek Sparse Attention) against slow loops of the papers' formulas written here.

MoBA (Lu et al. 2025): the keys in blocks of B; for query i in block b_i = i // B, the gate of block b <= b_i is
s_b = q_i . mean(K[b]); the query keeps block b_i and the best k - 1 earlier blocks, and attends with a softmax to
the keys of those blocks that are at most i. DSA (DeepSeek-V3.2): I_{t,s} = sum_j w_{t,j} ReLU(q^I_{t,j} . k^I_s),
query t keeps its k keys s <= t with the largest I, the softmax runs over them. Loops over heads, queries, blocks and
keys, one number at a time; float64 at 1e-12.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.decoding import decode_tokens, decoder_layer
from mha_core.sparse import INDEX_NORM_EPS, block_means, dsa_kernel, moba_kernel

EXACT = 1e-12
LINK = dict(tokens=("the", "cat", "sat", "on", "the", "mat", "and", "slept"), d_model=16, n_heads=4, mask="causal")


def slow_softmax(logits: list[float]) -> list[float]:
    peak = max(logits)
    e = [math.exp(v - peak) for v in logits]
    return [v / sum(e) for v in e]


def moba_by_hand(q, k, v, scale: float, block: int, topk: int) -> np.ndarray:
    """Head outputs (nh, T, hv) of MoBA by the paper's formula, one query at a time (causal, kv = nh / group)."""
    nh, t, _hs = q.shape
    group = nh // k.shape[0]
    out = np.zeros((nh, t, v.shape[-1]))
    for h in range(nh):
        kh, vh = k[h // group], v[h // group]
        for i in range(t):
            own = i // block
            gates = {}
            for b in range(own):  # earlier blocks only; the own block is always kept
                keys = range(b * block, min((b + 1) * block, t))
                mean = sum(kh[j] for j in keys) / len(keys)
                gates[b] = float(np.dot(q[h, i], mean))
            best = sorted(gates, key=lambda b: (-gates[b], b))[: topk - 1]
            blocks = sorted([own, *best])
            keys = [j for b in blocks for j in range(b * block, (b + 1) * block) if j <= i]
            weights = slow_softmax([float(np.dot(q[h, i], kh[j])) * scale for j in keys])
            out[h, i] = sum(w * vh[j] for w, j in zip(weights, keys, strict=True))
    return out


def index_by_hand(x, params) -> np.ndarray:
    """I_{t,s} with every sum written out (k^I LayerNorm'd, q^I . k^I / sqrt(dI), w / sqrt(HI))."""
    t = x.shape[0]
    heads, size = params.heads, params.size
    index = np.zeros((t, t))
    for s in range(t):
        raw = [sum(x[s, c] * params.w_k[c, d] for c in range(x.shape[1])) for d in range(size)]
        mean = sum(raw) / size
        var = sum((r - mean) ** 2 for r in raw) / size
        k_s = [(r - mean) / math.sqrt(var + INDEX_NORM_EPS) for r in raw]
        for tt in range(t):
            total = 0.0
            for j in range(heads):
                q_tj = [sum(x[tt, c] * params.w_q[c, j * size + d] for c in range(x.shape[1])) for d in range(size)]
                w_tj = sum(x[tt, c] * params.w_w[c, j] for c in range(x.shape[1])) / math.sqrt(heads)
                total += w_tj * max(sum(a * b for a, b in zip(q_tj, k_s, strict=True)) / math.sqrt(size), 0.0)
            index[tt, s] = total
    return index


def dsa_by_hand(q, k, v, scale: float, index: np.ndarray, topk: int) -> np.ndarray:
    nh, t, _hs = q.shape
    group = nh // k.shape[0]
    out = np.zeros((nh, t, v.shape[-1]))
    for i in range(t):
        keys = sorted(sorted(range(i + 1), key=lambda s: (-index[i, s], s))[:topk])
        for h in range(nh):
            kh, vh = k[h // group], v[h // group]
            weights = slow_softmax([float(np.dot(q[h, i], kh[j])) * scale for j in keys])
            out[h, i] = sum(w * vh[j] for w, j in zip(weights, keys, strict=True))
    return out


@pytest.mark.parametrize("block, topk", [(1, 1), (2, 2), (3, 2), (2, 3), (4, 1), (3, 5)])
@pytest.mark.parametrize("kv_heads", [None, 2])
def test_moba_equals_the_papers_formula_by_hand(block, topk, kv_heads):
    result = run(MHAConfig(**LINK, kernel="moba", sparse_block=block, sparse_topk=topk, kv_heads=kv_heads, seed=3))
    t = result.trace
    expected = moba_by_hand(t.q, t.k, t.v, t.scale, block, topk)
    assert np.max(np.abs(t.heads - expected)) < EXACT


@pytest.mark.parametrize("topk", [1, 2, 3, 5])
def test_dsa_index_and_heads_equal_the_formula_by_hand(topk):
    result = run(MHAConfig(**LINK, kernel="dsa", sparse_topk=topk, kv_heads=2, seed=5))
    t = result.trace
    index = index_by_hand(result.x_q, result.kernel_params)
    causal = np.tri(8, dtype=bool)
    assert np.max(np.abs(t.kernel_parts.index[causal] - index[causal])) < EXACT
    assert np.all(np.isneginf(t.kernel_parts.index[~causal]))
    assert np.max(np.abs(t.heads - dsa_by_hand(t.q, t.k, t.v, t.scale, index, topk))) < EXACT


@pytest.mark.parametrize("kernel", ["moba", "dsa"])
@pytest.mark.parametrize("pe", ["none", "rope", "alibi"])
def test_k_covering_every_block_or_key_is_dense_attention_exactly(kernel, pe):
    sparse = run(MHAConfig(**LINK, kernel=kernel, pe=pe, sparse_topk=8, sparse_block=2, kv_heads=2, seed=1))
    dense = run(MHAConfig(**LINK, pe=pe, kv_heads=2, seed=1))
    for name in ("weights", "heads", "output"):
        assert np.max(np.abs(getattr(sparse.trace, name) - getattr(dense.trace, name))) < EXACT, name
    assert np.max(sparse.trace.kernel_parts.gap) < EXACT
    assert np.max(np.abs(sparse.trace.kernel_parts.dense_weights - dense.trace.weights)) < EXACT


@pytest.mark.parametrize("kernel", ["moba", "dsa"])
def test_a_smaller_k_changes_the_output_and_the_gap_is_the_norm_of_the_difference(kernel):
    sparse = run(MHAConfig(**LINK, kernel=kernel, sparse_topk=1, seed=2))
    dense = run(MHAConfig(**LINK, seed=2))
    gap = np.linalg.norm(sparse.trace.heads - dense.trace.heads, axis=-1)  # (nh, T)
    assert np.max(np.abs(sparse.trace.kernel_parts.gap - gap)) < EXACT
    assert gap.max() > 0.01
    assert np.all(gap[:, 0] < EXACT)  # the first query has one key: nothing to drop


@pytest.mark.parametrize("topk", [1, 2, 3])
def test_moba_keeps_exactly_k_blocks_and_never_a_future_key(topk):
    block = 2
    parts = run(MHAConfig(**LINK, kernel="moba", sparse_block=block, sparse_topk=topk, seed=4)).trace.kernel_parts
    own = np.arange(8) // block
    assert np.array_equal(parts.chosen.sum(axis=-1), np.broadcast_to(np.minimum(topk, own + 1), (4, 8)))
    assert np.all(parts.chosen[:, np.arange(8), own])  # its own block, always
    assert not np.any(parts.kept & ~np.tri(8, dtype=bool))  # never a future key


@pytest.mark.parametrize("topk", [1, 2, 4])
def test_dsa_keeps_exactly_k_keys_the_same_for_every_head(topk):
    parts = run(MHAConfig(**LINK, kernel="dsa", sparse_topk=topk, seed=6)).trace.kernel_parts
    assert np.array_equal(parts.kept.sum(axis=-1), np.broadcast_to(np.minimum(topk, np.arange(8) + 1), (4, 8)))
    assert np.all(parts.kept == parts.kept[:1])
    assert not np.any(parts.kept & ~np.tri(8, dtype=bool))


@pytest.mark.parametrize("kernel", ["moba", "dsa"])
def test_decoding_token_by_token_gives_the_engines_rows(kernel):
    config = MHAConfig(**LINK, kernel=kernel, sparse_topk=2, sparse_block=3, kv_heads=2, pe="rope", seed=7)
    result = run(config)
    layer = decoder_layer(result.weights, 4, kernel=kernel, kernel_params=result.kernel_params, kv_heads=2, pe="rope")
    steps = list(decode_tokens(result.x_q, layer))
    for t, step in enumerate(steps):
        row = result.trace.weights[:, t, : t + 1]  # (nh, t+1)
        assert np.max(np.abs(step.attended.weights[:, 0] - row)) < EXACT
        assert np.max(np.abs(step.output[0] - result.trace.output[t])) < EXACT
    if kernel == "dsa":
        held = {name: a.shape for name, a in layer.kernel.decoder.held(steps[-1].kept)}
        assert held["indexer keys kᴵ"] == (1, 8, result.kernel_params.size)


def test_the_block_means_are_means_and_the_kernels_refuse_nothing_they_cannot_do():
    k = np.arange(2 * 5 * 3, dtype=float).reshape(2, 5, 3)
    means = block_means(k, 2)
    assert np.allclose(means[:, 2], k[:, 4])
    assert np.allclose(means[:, 0], (k[:, 0] + k[:, 1]) / 2)
    with pytest.raises(ValueError, match="causal"):
        MHAConfig(**{**LINK, "mask": "none"}, kernel="moba").validate()
    with pytest.raises(ValueError, match="top-k"):
        MHAConfig(**LINK, kernel="dsa", sparse_topk=0).validate()
    with pytest.raises(ValueError, match="self-attention"):
        dsa_kernel(np.zeros((1, 2, 2)), np.zeros((1, 3, 2)), np.zeros((1, 3, 2)), None, 1.0, x=np.zeros((2, 4)))
    assert moba_kernel(np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), np.ones((1, 2, 2)), None, 1.0).weights.shape == (1, 2, 2)
