"""Properties that hold for every input: hypothesis draws the shapes, the masks and the numbers."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import finite_floats, logits_rows_k, mha_problems, tensors_nh_t_hs

from mha_core import AttentionWeights, merge_heads, multi_head_attention, softmax, split_heads

FAST = settings(max_examples=60, deadline=None)
TOL = 1e-12  # float64, values of order 1-100


def run(problem, **overrides):
    kwargs = problem.kwargs() | overrides
    return multi_head_attention(problem.x_q, problem.weights, problem.n_heads, **kwargs)


@FAST
@given(mha_problems())
def test_weight_rows_sum_to_one_except_fully_masked_rows(problem):
    trace = run(problem)
    allowed = problem.full_mask()  # (nh, Tq, Tk)
    no_key = ~allowed.any(axis=-1)  # (nh, Tq)
    np.testing.assert_array_equal(trace.fully_masked, no_key)
    np.testing.assert_allclose(trace.weights.sum(axis=-1)[~no_key], 1.0, rtol=0, atol=TOL)
    np.testing.assert_array_equal(trace.weights[no_key], 0.0)
    np.testing.assert_array_equal(trace.heads[no_key], 0.0)
    assert np.all((trace.weights >= 0) & (trace.weights <= 1))


@FAST
@given(mha_problems())
def test_masked_keys_get_zero_weight_and_minus_inf_logits(problem):
    trace = run(problem)
    allowed = problem.full_mask()
    np.testing.assert_array_equal(trace.weights[~allowed], 0.0)
    assert np.all(trace.logits[~allowed] == -np.inf)
    assert np.all(np.isfinite(trace.logits[allowed]))
    for name in ("q", "k", "v", "scores", "weights", "heads", "concat", "output"):
        assert np.all(np.isfinite(getattr(trace, name))), name


@FAST
@given(mha_problems(mask="causal"))
def test_causal_upper_triangle_is_zero(problem):
    trace = run(problem)
    tq, tk = problem.shape.tq, problem.shape.tk
    future = np.arange(tk)[None, :] > np.arange(tq)[:, None]  # (Tq, Tk): key j after query i
    np.testing.assert_array_equal(trace.weights[:, future], 0.0)
    assert not trace.fully_masked.any()  # query i always sees key 0


@FAST
@given(tensors_nh_t_hs())
def test_merge_then_split_heads_round_trips(heads):
    merged = merge_heads(heads)  # (T, nh*hs)
    assert merged.shape == (heads.shape[1], heads.shape[0] * heads.shape[2])
    np.testing.assert_array_equal(split_heads(merged, heads.shape[0]), heads)


@FAST
@given(st.data())
def test_split_then_merge_heads_round_trips(data):
    n_heads, t, hs = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))
    x = data.draw(hnp.arrays(np.float64, (t, n_heads * hs), elements=finite_floats))
    heads = split_heads(x, n_heads)  # (nh, T, hs)
    np.testing.assert_array_equal(merge_heads(heads), x)
    for h in range(n_heads):
        np.testing.assert_array_equal(heads[h], x[:, h * hs : (h + 1) * hs])


@FAST
@given(mha_problems(self_attention=True, mask="none"), st.data())
def test_self_attention_is_permutation_equivariant(problem, data):
    perm = np.array(data.draw(st.permutations(range(problem.shape.tq))))
    trace = run(problem)
    permuted = multi_head_attention(problem.x_q[perm], problem.weights, problem.n_heads, scale=problem.shape.scale)
    np.testing.assert_allclose(permuted.output, trace.output[perm], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(permuted.weights, trace.weights[:, perm][:, :, perm], rtol=TOL, atol=TOL)


@FAST
@given(mha_problems())
def test_each_head_output_is_a_convex_combination_of_values(problem):
    trace = run(problem)
    low, high = trace.v.min(axis=1, keepdims=True), trace.v.max(axis=1, keepdims=True)  # (nh, 1, hv)
    attended = ~trace.fully_masked  # (nh, Tq)
    inside = (trace.heads >= low - TOL) & (trace.heads <= high + TOL)  # (nh, Tq, hv)
    assert np.all(inside[attended])


@FAST
@given(mha_problems(self_attention=False))
def test_queries_do_not_influence_each_other(problem):
    # In cross-attention the keys do not come from the queries: dropping the last query leaves
    # every other query's weights and output unchanged.
    tq = problem.shape.tq
    assume(tq >= 2)
    mask = None if problem.mask is None else problem.mask[..., : tq - 1, :]
    trace = run(problem)
    fewer = run(dataclasses.replace(problem, x_q=problem.x_q[: tq - 1], mask=mask))
    np.testing.assert_allclose(fewer.weights, trace.weights[:, : tq - 1], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(fewer.output, trace.output[: tq - 1], rtol=TOL, atol=TOL)


@FAST
@given(mha_problems())
def test_float32_in_float32_throughout_and_close_to_float64(problem):
    as32 = {k: None if v is None else np.asarray(v, dtype=np.float32) for k, v in problem.weights.__dict__.items()}
    x_k = None if problem.x_k is None else problem.x_k.astype(np.float32)
    x_v = None if problem.x_v is None else problem.x_v.astype(np.float32)
    trace32 = multi_head_attention(
        problem.x_q.astype(np.float32),
        AttentionWeights(**as32),
        problem.n_heads,
        x_k=x_k,
        x_v=x_v,
        mask=problem.mask,
        scale=problem.shape.scale,
    )
    for name in ("q", "k", "v", "scores", "logits", "weights", "heads", "concat", "output"):
        assert getattr(trace32, name).dtype == np.float32, name
    np.testing.assert_allclose(trace32.output, run(problem).output, rtol=1e-3, atol=1e-3)


@FAST
@given(logits_rows_k(), st.data())
def test_softmax_is_shift_invariant(logits, data):
    shift = data.draw(hnp.arrays(np.float64, (logits.shape[0], 1), elements=st.floats(-1000, 1000)))
    np.testing.assert_allclose(softmax(logits + shift), softmax(logits), rtol=0, atol=TOL)


@FAST
@given(logits_rows_k(elements=st.floats(-1e307, 1e307, allow_nan=False)))
def test_softmax_of_huge_finite_logits_is_finite_and_sums_to_one(logits):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = softmax(logits)
    assert np.all(np.isfinite(out)) and np.all(out >= 0)
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=0, atol=TOL)
    winners = out[np.arange(len(out)), logits.argmax(axis=-1)]
    assert np.all(winners >= 1 / logits.shape[1] - TOL)  # the largest logit gets at least an even share
