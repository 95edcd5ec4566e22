"""Shared key/value heads (GQA/MQA), decoding with a KV cache, and the null key (softmax_1).

References: torch's ``F.scaled_dot_product_attention(..., enable_gqa=True)``, a loop that copies
each key/value head to the query heads that read it, full causal attention, and a softmax over
the keys plus one explicit extra key of logit 0 and value 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import MASK_KINDS, mha_problems, random_matrix, random_problem, random_shape

from mha_core import AttentionWeights, causal_mask, multi_head_attention, softmax
from mha_core.kv_cache import decode
from mha_core.positions import sinusoidal_positional_encoding

N_CONFIGS = 200
GQA_TOL = 1e-10
EXACT = 1e-12


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def shared_kv(problem, kv_heads: int) -> AttentionWeights:
    """The problem's weights with K and V cut to their first kv_heads heads' columns."""
    s, w = problem.shape, problem.weights
    cut = {"w_k": w.w_k[:, : kv_heads * s.hs], "w_v": w.w_v[:, : kv_heads * s.hv]}
    if w.b_k is not None:
        cut |= {"b_k": w.b_k[: kv_heads * s.hs], "b_v": w.b_v[: kv_heads * s.hv]}
    return AttentionWeights(**(w.__dict__ | cut))


def gqa_configurations():
    """N_CONFIGS seeded (problem, kv_heads) pairs, every mask kind, fully masked rows allowed."""
    rng = np.random.default_rng(12)
    for i in range(N_CONFIGS):
        shape = random_shape(rng, max_heads=6, allow_fully_masked=i % 2 == 0)
        shape = type(shape)(**(shape.__dict__ | {"mask": MASK_KINDS[i % len(MASK_KINDS)]}))
        problem = random_problem(rng, shape)
        yield problem, int(rng.choice(divisors(shape.n_heads)))


# ---- grouped-query and multi-query attention ------------------------------------------------


@pytest.mark.torch
def test_shared_kv_heads_match_torch_sdpa_with_enable_gqa_on_200_configurations():
    torch = pytest.importorskip("torch")
    kinds = set()
    for problem, kv_heads in gqa_configurations():
        kinds.add(problem.shape.mask)
        weights = shared_kv(problem, kv_heads)
        trace = multi_head_attention(problem.x_q, weights, problem.n_heads, kv_heads=kv_heads, **problem.kwargs())
        q, k, v = (torch.from_numpy(np.array(a))[None] for a in (trace.q, trace.k, trace.v))
        mask = None if problem.mask is None else torch.from_numpy(np.ascontiguousarray(problem.mask))
        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=trace.scale,
                                                                 enable_gqa=True)[0].numpy()  # (nh, Tq, hv)
        assert trace.k.shape[0] == kv_heads
        assert np.abs(trace.heads - heads).max() <= GQA_TOL, (problem.shape, kv_heads)
    assert kinds == set(MASK_KINDS)


def test_shared_kv_heads_equal_full_heads_holding_copies():
    # loop reference: MHA whose head h has K/V columns copied from kv head h // (nh/kv)
    for problem, kv_heads in list(gqa_configurations())[:60]:
        s = problem.shape
        weights = shared_kv(problem, kv_heads)
        group = s.n_heads // kv_heads
        copy_k = [h // group for h in range(s.n_heads) for _ in range(s.hs)]
        columns_k = [kv * s.hs + c for kv, c in zip(copy_k, list(range(s.hs)) * s.n_heads, strict=True)]
        copy_v = [h // group for h in range(s.n_heads) for _ in range(s.hv)]
        columns_v = [kv * s.hv + c for kv, c in zip(copy_v, list(range(s.hv)) * s.n_heads, strict=True)]
        full = AttentionWeights(**(weights.__dict__ | {
            "w_k": weights.w_k[:, columns_k], "w_v": weights.w_v[:, columns_v],
            "b_k": None if weights.b_k is None else weights.b_k[columns_k],
            "b_v": None if weights.b_v is None else weights.b_v[columns_v]}))
        shared = multi_head_attention(problem.x_q, weights, s.n_heads, kv_heads=kv_heads, **problem.kwargs())
        copied = multi_head_attention(problem.x_q, full, s.n_heads, **problem.kwargs())
        for name in ("weights", "heads", "output"):
            assert np.abs(getattr(shared, name) - getattr(copied, name)).max() <= EXACT, name
        assert [shared.kv_head_of(h) for h in range(s.n_heads)] == [h // group for h in range(s.n_heads)]


# ---- the KV cache ---------------------------------------------------------------------------


@pytest.mark.parametrize("pe", ["none", "sinusoidal", "rope", "alibi"])
@pytest.mark.parametrize(("n_heads", "kv_heads"), [(4, 4), (4, 2), (4, 1), (6, 3)])
@pytest.mark.parametrize("null_key", [False, True])
def test_decoding_with_a_cache_gives_the_rows_of_full_causal_attention(pe, n_heads, kv_heads, null_key):
    t, hs = 9, 4
    c = n_heads * hs
    rng = np.random.default_rng(n_heads * 10 + kv_heads)
    x = rng.standard_normal((t, c))  # (T, C)
    if pe == "sinusoidal":  # added to the tokens before attention, by position
        x = x + sinusoidal_positional_encoding(t, c)
    weights = AttentionWeights(random_matrix(rng, c, c), random_matrix(rng, c, kv_heads * hs),
                               random_matrix(rng, c, kv_heads * hs), random_matrix(rng, c, c),
                               *(rng.standard_normal(n) for n in (c, kv_heads * hs, kv_heads * hs, c)))
    inside = "none" if pe == "sinusoidal" else pe
    options = {"kv_heads": kv_heads, "pe": inside, "null_key": null_key}
    full = multi_head_attention(x, weights, n_heads, mask=causal_mask(t), **options)
    steps = decode(x, weights, n_heads, **options)
    for step in steps:
        i = step.position
        assert np.abs(step.weights[:, 0] - full.weights[:, i, : i + 1]).max() <= EXACT
        assert np.abs(step.output[0] - full.output[i]).max() <= EXACT
        assert np.abs(step.cache.k - full.k[:, : i + 1]).max() <= EXACT  # the cached keys, rotated with RoPE
        assert step.cache.numbers == kv_heads * (i + 1) * 2 * hs
        assert step.cache.nbytes == 8 * step.cache.numbers
    assert np.all(full.weights[:, np.triu_indices(t, 1)[0], np.triu_indices(t, 1)[1]] == 0)


def test_a_decoding_step_leaves_the_previous_cache_unchanged():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4))
    eye = np.eye(4)
    steps = decode(x, AttentionWeights(eye, eye, eye), 2)
    assert [s.cache.length for s in steps] == [1, 2, 3]
    np.testing.assert_array_equal(steps[0].cache.k, steps[2].cache.k[:, :1])
    with pytest.raises(ValueError, match="read-only"):
        steps[0].cache.k[0, 0, 0] = 1.0


def test_decoding_in_float32_keeps_float32_and_halves_the_bytes():
    x = np.ones((2, 4), dtype=np.float32)
    eye = np.eye(4, dtype=np.float32)
    step = decode(x, AttentionWeights(eye, eye, eye), 2)[-1]
    assert step.output.dtype == np.float32 and step.cache.nbytes == 4 * step.cache.numbers == 4 * 16


def test_decoding_refuses_bad_combinations():
    eye = np.eye(6)
    with pytest.raises(ValueError, match="kv_heads = 4 must divide n_heads = 2"):
        decode(np.ones((2, 6)), AttentionWeights(eye, eye, eye), 2, kv_heads=4)
    with pytest.raises(ValueError, match="kv_heads = 0 must divide"):
        decode(np.ones((2, 6)), AttentionWeights(eye, eye, eye), 2, kv_heads=0)
    with pytest.raises(ValueError, match="head size must be even; it is 3"):
        decode(np.ones((2, 6)), AttentionWeights(eye, eye, eye), 2, pe="rope")


# ---- the null key (softmax_1) ---------------------------------------------------------------


def test_softmax_with_a_null_key_worked_on_paper():
    # logits (0, ln 2): exp = (1, 2), plus the null key's exp(0) = 1: weights (1/4, 2/4)
    np.testing.assert_allclose(softmax(np.array([0.0, np.log(2.0)]), null_key=True), [0.25, 0.5], rtol=0, atol=EXACT)
    np.testing.assert_array_equal(softmax(np.array([-np.inf, -np.inf]), null_key=True), [0.0, 0.0])
    np.testing.assert_allclose(softmax(np.array([1000.0, 0.0]), null_key=True), [1.0, 0.0], rtol=0, atol=EXACT)


@settings(max_examples=80, deadline=None)
@given(mha_problems())  # draws fully masked rows too (allow_fully_masked)
def test_null_key_equals_an_explicit_key_of_logit_zero_and_value_zero(problem):
    trace = multi_head_attention(problem.x_q, problem.weights, problem.n_heads, null_key=True, **problem.kwargs())
    plain = multi_head_attention(problem.x_q, problem.weights, problem.n_heads, **problem.kwargs())
    nh, tq, _ = plain.logits.shape
    extra = np.concatenate([plain.logits, np.zeros((nh, tq, 1))], axis=-1)  # (nh, Tq, Tk+1), never masked
    explicit = softmax(extra)  # (nh, Tq, Tk+1)
    v_extra = np.concatenate([plain.v, np.zeros((nh, 1, plain.v.shape[-1]))], axis=1)  # (nh, Tk+1, hv)
    assert np.abs(trace.weights - explicit[..., :-1]).max() <= EXACT
    assert np.abs(trace.heads - explicit @ v_extra).max() <= EXACT
    np.testing.assert_array_equal(trace.logits, plain.logits)
    np.testing.assert_array_equal(trace.fully_masked, plain.fully_masked)
    assert np.all(trace.weights[trace.fully_masked] == 0) and trace.null_key


def test_each_query_head_reads_the_values_of_its_own_group():
    from mha_core.config import MHAConfig, run

    trace = run(MHAConfig(n_heads=8, kv_heads=2, d_model=16)).trace
    per_head = trace.values_per_query_head()
    assert per_head.shape == (8, *trace.v.shape[1:])
    for h in range(8):
        np.testing.assert_array_equal(per_head[h], trace.v[h // 4])  # heads 0-3 read K/V head 0, 4-7 head 1
