"""What-ifs on SmolLM2 (mha_core.smollm2_whatif): top-k attention in chosen layers, the first token dropped with and
without fitted sinks. The numbers are checked against the dense run and hand-made logits, not against the code."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import smollm2_whatif as wi

PROMPT = "A cat sat on the mat. A cat sat on the"  # not used while writing the code


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(PROMPT)


def test_sparse_weights_keep_exactly_k_keys_per_row():
    rng = np.random.default_rng(3)
    logits = np.where(np.tri(7, dtype=bool), rng.normal(size=(2, 7, 7)), -np.inf)  # (nh, T, T) causal
    for k in (1, 2, 3, 7):
        weights, kept = wi.sparse_weights(logits, k)
        seen = np.arange(1, 8)  # query i sees i + 1 keys
        np.testing.assert_array_equal(kept.sum(axis=-1), np.minimum(k, seen)[None].repeat(2, 0))
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
        assert not (weights[~kept] != 0).any()
        # the kept ones are the largest: every kept logit ≥ every dropped finite logit of its row
        low = np.where(kept, logits, np.inf).min(axis=-1)
        high = np.where(~kept & np.isfinite(logits), logits, -np.inf).max(axis=-1)
        assert (low >= high).all()


def test_sparse_weights_by_hand():
    logits = np.array([[[0.0, -np.inf, -np.inf], [1.0, 3.0, -np.inf], [2.0, 0.0, 1.0]]])  # (1, 3, 3)
    weights, kept = wi.sparse_weights(logits, 1)
    np.testing.assert_array_equal(weights[0], [[1, 0, 0], [0, 1, 0], [1, 0, 0]])
    weights, _kept = wi.sparse_weights(logits, 2)
    e = np.exp([2.0, 1.0])
    np.testing.assert_allclose(weights[0, 2], [e[0] / e.sum(), 0, e[1] / e.sum()], atol=1e-15)


def test_k_as_large_as_the_prompt_is_the_dense_model(smollm2, run):
    dense = smollm2.prompt_losses(run)
    np.testing.assert_allclose(wi.sparse_losses(smollm2, run, range(30), run.n_tokens), dense, atol=1e-6, rtol=0)
    one = wi.sparse_losses(smollm2, run, [5], 1)
    assert abs(one.mean() - dense.mean()) > 1e-3  # k = 1 in one layer changes the loss


def test_kept_keys_in_the_first_sparse_layer_are_the_clean_logits_top_k(smollm2, run):
    kept = wi.kept_keys(smollm2, run, 4, 3, [4, 9])
    _normed, trace, _w = smollm2.layer_trace(run, 4)
    t = run.n_tokens
    for head in (0, 8):
        for i in (0, 1, t - 1):
            row = trace.logits[head, i, : i + 1]
            expected = np.argsort(-row, kind="stable")[:3]
            assert set(np.flatnonzero(kept[head, i])) == set(expected.tolist())


def test_sweep_falls_to_the_dense_loss(smollm2, run):
    seen = []
    sweep = wi.sparse_sweep(smollm2, run, [2, 3], ks=(64, 1, 4), progress=lambda done, total: seen.append((done, total)))
    assert sweep.ks == (1, 4, 64) and seen == [(1, 3), (2, 3), (3, 3)]
    assert sweep.losses[-1] == pytest.approx(sweep.dense, abs=1e-6)  # 64 ≥ the prompt's tokens
    assert sweep.losses[0] > sweep.dense


def test_bad_layers_and_k_are_refused(smollm2, run):
    with pytest.raises(ValueError, match="0..29"):
        wi.sparse_losses(smollm2, run, [30], 2)
    with pytest.raises(ValueError, match="at least 1"):
        wi.sparse_losses(smollm2, run, [1], 0)


# ---- sinks without the sink token ----


def test_fit_sink_gives_back_the_mass():
    r = np.array([0.5, 2.0, -1.0, 3.0])
    for mass in (0.01, 0.3, 0.9):
        s = wi.fit_sink(r, mass)
        assert np.mean(1 / (1 + np.exp(r - s))) == pytest.approx(mass, abs=1e-10)
    assert wi.fit_sink(r, 0.0) == -np.inf
    # one row: the closed form s = L_0, the logit that was dropped
    logits = np.array([1.5, 0.2, -0.7])
    mass = np.exp(logits[0]) / np.exp(logits).sum()
    assert wi.fit_sink(np.array([np.log(np.exp(logits[1:]).sum())]), mass) == pytest.approx(1.5, abs=1e-9)


def test_fitted_sinks_drop_the_column_and_take_the_first_tokens_mass(smollm2, run):
    sinks = wi.fit_sinks(smollm2, run)  # (L, nh)
    mass = wi.first_token_mass(run)
    assert sinks.shape == (30, 9) and np.isfinite(sinks).all()
    for layer in (0, 3, 17):
        _normed, trace, _w = smollm2.layer_trace(run, layer)
        weights = wi.sink_weights("fitted", sinks[layer])(trace.logits)  # (nh, T, T)
        assert not weights[:, :, 0].any()  # the first token's column is gone
        share = 1.0 - weights[:, 1:].sum(axis=-1)  # (nh, T-1): what the sink took from queries 1..T-1
        np.testing.assert_allclose(share.mean(axis=-1), mass[layer], atol=2e-6)
        np.testing.assert_allclose(mass[layer], run.layers[layer].weights[:, 1:, 0].mean(axis=-1), atol=0)


def test_without_the_first_token_rows_renormalise(smollm2, run):
    _normed, trace, _w = smollm2.layer_trace(run, 6)
    weights = wi.sink_weights("without", None)(trace.logits)
    clean = run.layers[6].weights.astype(np.float64)
    expected = clean[:, 1:, 1:] / clean[:, 1:, 1:].sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(weights[:, 1:, 1:], expected, atol=1e-5)
    assert not weights[:, :, 0].any() and not weights[:, 0].any()  # query 0 has nothing left to read


def test_sink_losses_with_is_the_clean_loss(smollm2):
    short = smollm2.forward("The sea is wide.")
    sinks = wi.fit_sinks(smollm2, short)
    losses = wi.sink_losses(smollm2, short, sinks)
    assert list(losses) == list(wi.SINK_VARIANTS)
    assert losses["with"] == pytest.approx(float(smollm2.prompt_losses(short).mean()), abs=1e-12)
    assert len({round(v, 6) for v in losses.values()}) == 4  # four different models


# ---- MoBA's block selection ----


def test_moba_keeps_whole_blocks_its_own_first(smollm2):
    run = smollm2.forward(wi.CALIBRATION_TEXT, traces=())  # ~80 tokens: 11 blocks of 8
    blocks, b = 3, wi.MOBA_BLOCK
    kept = wi.kept_keys(smollm2, run, 7, blocks, [3, 7], method="moba")  # (nh, T, T)
    t = run.n_tokens
    assert t > 4 * b
    for i in range(t):
        own = i // b
        assert kept[:, i, own * b : i + 1].all()  # its own block up to itself
        assert not kept[:, i, i + 1 :].any()  # never the future
        for head in (0, 8):
            chosen = {j // b for j in np.flatnonzero(kept[head, i])}
            assert len(chosen) == min(blocks, own + 1)
            for block in chosen - {own}:  # a chosen earlier block is kept whole
                assert kept[head, i, block * b : (block + 1) * b].all()


def test_moba_with_every_block_is_the_dense_model(smollm2, run):
    dense = smollm2.prompt_losses(run)
    every = -(-run.n_tokens // wi.MOBA_BLOCK)
    np.testing.assert_allclose(wi.moba_losses(smollm2, run, [0, 15], every), dense, atol=1e-6, rtol=0)
    assert abs(wi.moba_losses(smollm2, run, [0, 15], 1).mean() - dense.mean()) > 1e-3


def test_head_output_change_is_each_heads_own_sparse_output_against_its_dense_one(smollm2, run):
    change = wi.head_output_change(smollm2, run, 2)
    assert change.shape == (30, 9)
    _normed, trace, _w = smollm2.layer_trace(run, 7)
    t = run.n_tokens
    for head in (0, 5):
        logits, v = np.asarray(trace.logits[head], dtype=np.float64), np.asarray(trace.v[head // 3], dtype=np.float64)
        weights = np.zeros((t, t))
        for i in range(t):  # by hand: the two largest logits of the row, softmax over them
            keep = np.argsort(-logits[i, : i + 1], kind="stable")[:2]
            weights[i, keep] = np.exp(logits[i, keep] - logits[i, keep].max()) / np.exp(
                logits[i, keep] - logits[i, keep].max()).sum()
        dense = np.asarray(trace.weights[head], dtype=np.float64) @ v  # (T, hs)
        assert change[7, head] == pytest.approx(np.linalg.norm(weights @ v - dense) / np.linalg.norm(dense), rel=1e-5)
    assert np.abs(wi.head_output_change(smollm2, run, t)).max() < 1e-6  # k ≥ T: nothing dropped
