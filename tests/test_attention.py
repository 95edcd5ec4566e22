"""Hand-computed fixtures for mha_core.attention: small enough to check on paper."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from mha_core import AttentionWeights, merge_heads, multi_head_attention, scaled_dot_product_attention, softmax
from mha_core import split_heads as split

TRACE_ARRAYS = ("q", "k", "v", "scores", "logits", "weights", "heads", "concat", "output")
EXACT = 1e-15  # float64 rounding of a handful of operations on numbers of order 1


def identity_weights(c: int) -> AttentionWeights:
    eye = np.eye(c)
    return AttentionWeights(eye, eye, eye)


def test_two_token_example_worked_on_paper():
    # x = [[1, 0],      W_q = W_k = W_v = I, one head of size 2, so q = k = v = x.
    #      [1, 1]]
    # scores = x x^T = [[1, 1],         logits = scores / sqrt(2)
    #                   [1, 2]]
    # row 0: both logits equal          -> weights [1/2, 1/2]
    #        head = 1/2 [1, 0] + 1/2 [1, 1] = [1, 1/2]
    # row 1: logits differ by 1/sqrt(2) -> weights [1/(1+e^a), e^a/(1+e^a)], a = 1/sqrt(2)
    #        e^a = 2.02811498, so weights = [0.33023845, 0.66976155]
    #        head = 0.33023845 [1, 0] + 0.66976155 [1, 1] = [1, 0.66976155]
    x = np.array([[1.0, 0.0], [1.0, 1.0]])
    trace = multi_head_attention(x, identity_weights(2), 1)

    a = 1 / math.sqrt(2)
    w_far, w_near = 1 / (1 + math.exp(a)), math.exp(a) / (1 + math.exp(a))
    np.testing.assert_allclose(trace.scores[0], [[1, 1], [1, 2]], rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.logits[0], [[a, a], [a, 2 * a]], rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.weights[0], [[0.5, 0.5], [w_far, w_near]], rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.weights[0, 1], [0.33023845, 0.66976155], rtol=0, atol=5e-9)  # the paper's digits
    np.testing.assert_allclose(trace.output, [[1, 0.5], [1, w_near]], rtol=0, atol=EXACT)
    assert trace.scale == pytest.approx(a, abs=EXACT)


def test_two_heads_of_size_one_worked_on_paper():
    # x = I (2 tokens, width 2), W = I, 2 heads of size 1, scale 1/sqrt(1) = 1.
    # Head 0 owns column 0: q = k = v = [1, 0]^T. scores = [[1, 0], [0, 0]].
    #   row 0: softmax([1, 0]) = [e/(1+e), 1/(1+e)] = [0.73105858, 0.26894142] -> head 0.73105858
    #   row 1: softmax([0, 0]) = [1/2, 1/2]                                    -> head 0.5
    # Head 1 owns column 1: q = k = v = [0, 1]^T. scores = [[0, 0], [0, 1]].
    #   row 0: [1/2, 1/2] -> 0.5;  row 1: [1/(1+e), e/(1+e)] -> 0.73105858
    # concat = [[0.73105858, 0.5], [0.5, 0.73105858]]  (seed 002's identity example)
    trace = multi_head_attention(np.eye(2), identity_weights(2), 2)
    p = math.e / (1 + math.e)
    np.testing.assert_allclose(trace.weights[0], [[p, 1 - p], [0.5, 0.5]], rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.weights[1], [[0.5, 0.5], [1 - p, p]], rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.concat, [[p, 0.5], [0.5, p]], rtol=0, atol=EXACT)
    np.testing.assert_allclose(trace.output, trace.concat, rtol=0, atol=0)  # no w_o: output = concat
    assert trace.scale == 1.0


def test_projections_and_biases_worked_on_paper():
    # One token: its only weight is 1, so head = v.
    # v = [1, 0] @ [[1, 2], [3, 4]] + [1, 1] = [2, 3]
    # output = [2, 3] @ [[0, 1], [1, 0]] + [10, 20] = [3, 2] + [10, 20] = [13, 22]
    weights = AttentionWeights(
        w_q=np.eye(2),
        w_k=np.eye(2),
        w_v=np.array([[1.0, 2.0], [3.0, 4.0]]),
        w_o=np.array([[0.0, 1.0], [1.0, 0.0]]),
        b_v=np.array([1.0, 1.0]),
        b_o=np.array([10.0, 20.0]),
    )
    trace = multi_head_attention(np.array([[1.0, 0.0]]), weights, 1)
    assert trace.weights.shape == (1, 1, 1) and trace.weights[0, 0, 0] == 1.0
    np.testing.assert_array_equal(trace.v[0], [[2.0, 3.0]])
    np.testing.assert_array_equal(trace.output, [[13.0, 22.0]])


def test_softmax_of_1000_0_0_is_one_hot_without_overflow():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = softmax(np.array([1000.0, 0.0, 0.0]))
    np.testing.assert_array_equal(out, [1.0, 0.0, 0.0])  # exp(-1000) underflows to exactly 0


@pytest.mark.parametrize(
    ("logits", "expected"),
    [
        ([1000.0, 1000.0, 0.0], [0.5, 0.5, 0.0]),
        ([-1000.0, -1000.0], [0.5, 0.5]),
        ([0.0, -np.inf], [1.0, 0.0]),
        ([3.0], [1.0]),
        ([0.0, math.log(3.0)], [0.25, 0.75]),  # e^0 : e^ln3 = 1 : 3
    ],
)
def test_softmax_small_cases(logits, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = softmax(np.array(logits))
    np.testing.assert_allclose(out, expected, rtol=0, atol=EXACT)


def test_softmax_all_minus_inf_row_is_zero_without_warning():
    logits = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 0.0]])
    with warnings.catch_warnings(), np.errstate(divide="raise", invalid="raise", over="raise"):
        warnings.simplefilter("error")
        out = softmax(logits)
    np.testing.assert_array_equal(out, [[0.0, 0.0, 0.0], [0.5, 0.0, 0.5]])


def test_softmax_along_another_axis():
    logits = np.array([[0.0, 5.0], [0.0, 5.0]])
    np.testing.assert_allclose(softmax(logits, axis=0), [[0.5, 0.5], [0.5, 0.5]], rtol=0, atol=EXACT)


def test_fully_masked_row_gives_zeros_and_flag_without_warning():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4))
    weights = AttentionWeights(*(rng.standard_normal((4, 4)) for _ in range(3)), w_o=rng.standard_normal((4, 4)))
    mask = np.array([[True, True, False], [False, False, False], [True, True, True]])  # query 1 sees no key
    with warnings.catch_warnings(), np.errstate(divide="raise", invalid="raise", over="raise"):
        warnings.simplefilter("error")
        trace = multi_head_attention(x, weights, 2, mask=mask)
    np.testing.assert_array_equal(trace.fully_masked, [[False, True, False], [False, True, False]])
    np.testing.assert_array_equal(trace.weights[:, 1], 0.0)
    np.testing.assert_array_equal(trace.heads[:, 1], 0.0)
    np.testing.assert_array_equal(trace.output[1], 0.0)  # no output bias: a zero concat row stays zero
    for name in TRACE_ARRAYS[:4] + TRACE_ARRAYS[5:]:  # all but the logits, which hold -inf
        assert np.all(np.isfinite(getattr(trace, name))), name
    np.testing.assert_allclose(trace.weights[:, [0, 2]].sum(axis=-1), 1.0, rtol=0, atol=1e-12)


def test_fully_masked_row_output_is_the_output_bias():
    eye = np.eye(2)
    weights = AttentionWeights(eye, eye, eye, w_o=eye, b_o=np.array([0.5, -0.5]))
    trace = multi_head_attention(np.eye(2), weights, 1, mask=np.array([[False, False], [True, True]]))
    np.testing.assert_array_equal(trace.output[0], [0.5, -0.5])


def test_masked_logits_are_exactly_minus_inf_and_the_rest_is_scores_times_scale():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6))
    weights = AttentionWeights(*(rng.standard_normal((6, 6)) for _ in range(3)))
    mask = rng.random((4, 4)) < 0.5
    mask[:, 0] = True
    trace = multi_head_attention(x, weights, 3, mask=mask, scale=0.25)
    full = np.broadcast_to(mask, trace.logits.shape)
    assert np.all(trace.logits[~full] == -np.inf)
    np.testing.assert_array_equal(trace.logits[full], trace.scores[full] * 0.25)
    np.testing.assert_array_equal(trace.weights[~full], 0.0)


def test_mask_true_means_may_attend():
    x = np.eye(3)
    only_key_2 = np.array([False, False, True])  # every query may attend to key 2 only
    trace = multi_head_attention(x, identity_weights(3), 1, mask=only_key_2)
    np.testing.assert_array_equal(trace.weights[0, :, 2], 1.0)
    np.testing.assert_array_equal(trace.weights[0, :, :2], 0.0)
    np.testing.assert_array_equal(trace.output, np.tile([0.0, 0.0, 1.0], (3, 1)))  # every query copies token 2


def test_mask_per_head():
    x = np.eye(2)
    mask = np.array([[[True, False], [True, False]], [[False, True], [False, True]]])  # (nh, Tq, Tk)
    trace = multi_head_attention(x, identity_weights(2), 2, mask=mask)
    np.testing.assert_array_equal(trace.weights[0], [[1, 0], [1, 0]])
    np.testing.assert_array_equal(trace.weights[1], [[0, 1], [0, 1]])


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [(np.float32, np.float32), (np.float64, np.float64), (np.int64, np.float64), (np.int32, np.float64)],
)
def test_dtype_rules(dtype, expected):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 4)) * 3).astype(dtype)
    mats = [(rng.standard_normal((4, 4)) * 3).astype(dtype) for _ in range(4)]
    biases = [(rng.standard_normal(4) * 3).astype(dtype) for _ in range(4)]
    weights = AttentionWeights(*mats, *biases)
    trace = multi_head_attention(x, weights, 2, mask=np.tri(3, dtype=bool), scale=0.3)
    for name in TRACE_ARRAYS:
        assert getattr(trace, name).dtype == expected, name
    assert trace.fully_masked.dtype == np.bool_


def test_float16_inputs_compute_in_float32():
    x = np.eye(2, dtype=np.float16)
    trace = multi_head_attention(x, AttentionWeights(x, x, x), 1)
    for name in TRACE_ARRAYS:
        assert getattr(trace, name).dtype == np.float32, name


def test_float32_default_scale_does_not_promote():
    # 1/sqrt(hs) computed in float64 would promote float32 scores (NumPy 2 rules).
    x = np.ones((2, 4), dtype=np.float32)
    trace = multi_head_attention(x, AttentionWeights(*(np.eye(4, dtype=np.float32) for _ in range(3))), 1)
    assert trace.logits.dtype == np.float32 and trace.weights.dtype == np.float32


def test_trace_arrays_are_read_only():
    trace = multi_head_attention(np.eye(2), identity_weights(2), 1)
    for name in TRACE_ARRAYS + ("fully_masked",):
        with pytest.raises(ValueError, match="read-only"):
            getattr(trace, name)[0] = 0


def test_keys_default_to_queries_and_values_to_keys():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    weights = AttentionWeights(*(rng.standard_normal((4, 4)) for _ in range(3)))
    self_default = multi_head_attention(x, weights, 2)
    self_explicit = multi_head_attention(x, weights, 2, x_k=x, x_v=x)
    cross_default = multi_head_attention(x, weights, 2, x_k=y)
    cross_explicit = multi_head_attention(x, weights, 2, x_k=y, x_v=y)
    np.testing.assert_array_equal(self_default.output, self_explicit.output)
    np.testing.assert_array_equal(cross_default.output, cross_explicit.output)
    assert cross_default.weights.shape == (2, 3, 5)


def test_default_scale_uses_the_query_key_head_size():
    rng = np.random.default_rng(5)
    weights = AttentionWeights(rng.standard_normal((4, 8)), rng.standard_normal((4, 8)), rng.standard_normal((4, 2)))
    trace = multi_head_attention(rng.standard_normal((3, 4)), weights, 2)  # hs = 4, hv = 1
    assert trace.scale == pytest.approx(0.5, abs=EXACT)
    assert trace.heads.shape == (2, 3, 1) and trace.output.shape == (3, 2)
    np.testing.assert_allclose(trace.logits, trace.scores * 0.5, rtol=0, atol=0)


def test_output_without_projection_is_the_concat_of_heads():
    rng = np.random.default_rng(6)
    weights = AttentionWeights(*(rng.standard_normal((4, 6)) for _ in range(3)))
    trace = multi_head_attention(rng.standard_normal((5, 4)), weights, 3)
    np.testing.assert_array_equal(trace.output, trace.concat)
    np.testing.assert_array_equal(trace.concat, merge_heads(trace.heads))
    np.testing.assert_array_equal(trace.concat[:, 2:4], trace.heads[1])  # head 1 owns columns 2:4


def test_split_heads_takes_contiguous_column_blocks():
    x = np.arange(12.0).reshape(2, 6)  # (T, nh*hs) with nh = 3, hs = 2
    heads = split(x, 3)
    assert heads.shape == (3, 2, 2)
    for h in range(3):
        np.testing.assert_array_equal(heads[h], x[:, 2 * h : 2 * h + 2])


def test_scaled_dot_product_attention_on_heads():
    # q = k = [[1, 0], [0, 1]] per head, v = [[1], [3]], scale 1: row 0 softmax([1, 0]).
    q = np.eye(2)[None]  # (1, 2, 2)
    v = np.array([[[1.0], [3.0]]])  # (1, 2, 1)
    scores, logits, weights, heads = scaled_dot_product_attention(q, q, v, scale=1.0)
    p = math.e / (1 + math.e)
    np.testing.assert_array_equal(scores, q)
    np.testing.assert_allclose(heads[0, :, 0], [p * 1 + (1 - p) * 3, (1 - p) * 1 + p * 3], rtol=0, atol=EXACT)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_heads": 4}, "w_q has 6 columns, not divisible by 4 heads"),
        ({"n_heads": 0}, "n_heads must be a positive integer"),
        ({"n_heads": True}, "n_heads must be a positive integer"),
        ({"mask": np.ones((3, 3))}, "mask must be boolean"),
        ({"mask": np.ones((2, 3), dtype=bool)}, r"does not broadcast to \(heads, queries, keys\)"),
        ({"x_k": np.ones((4, 6)), "x_v": np.ones((5, 6))}, "x_k has 4 tokens but x_v has 5"),
        ({"x_k": np.ones((4, 5))}, "w_k has shape"),
        ({"x_k": np.ones(6)}, "x_k must be a \\(tokens, features\\) matrix"),
    ],
)
def test_invalid_calls_raise_value_error(kwargs, message):
    eye = np.eye(6)
    n_heads = kwargs.pop("n_heads", 2)
    with pytest.raises(ValueError, match=message):
        multi_head_attention(np.ones((3, 6)), AttentionWeights(eye, eye, eye), n_heads, **kwargs)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (AttentionWeights(np.eye(4), np.eye(4)[:, :2], np.eye(4)), "must have as many columns"),
        (AttentionWeights(np.eye(4), np.eye(4), np.eye(4), w_o=np.eye(3)), "w_o has 3 rows"),
        (AttentionWeights(np.eye(4), np.eye(4), np.eye(4), b_o=np.zeros(4)), "b_o is set but w_o is None"),
        (AttentionWeights(np.eye(4), np.eye(4), np.eye(4), b_q=np.zeros(3)), r"b_q has shape \(3,\)"),
    ],
)
def test_inconsistent_weights_raise_value_error(weights, message):
    with pytest.raises(ValueError, match=message):
        multi_head_attention(np.ones((2, 4)), weights, 2)


def test_each_step_function_does_its_one_step():
    from mha_core.attention import apply_mask, group_heads, output_projection, scale_scores, weighted_sum

    scores = np.arange(8.0).reshape(2, 2, 2)  # (nh, Tq, Tk)
    np.testing.assert_array_equal(scale_scores(scores, 0.5), scores / 2)
    masked = apply_mask(scores, np.array([[True, False], [True, True]]))
    assert masked[0, 0, 1] == -np.inf and masked[1, 1, 1] == 7.0
    assert apply_mask(scores, None) is scores
    # 4 query heads sharing 2 key/value heads: heads 0, 1 read kv head 0; heads 2, 3 read kv head 1
    assert group_heads(np.zeros((4, 3, 5)), 2).shape == (2, 2, 3, 5)
    weights = np.full((4, 1, 2), 0.5)  # (nh, Tq, Tk)
    v = np.array([[[1.0], [3.0]], [[10.0], [30.0]]])  # (kv=2, Tk=2, hv=1)
    np.testing.assert_array_equal(weighted_sum(weights, v)[:, 0, 0], [2.0, 2.0, 20.0, 20.0])
    concat = np.ones((2, 3))
    copy = output_projection(concat, None, None)
    assert copy is not concat and np.array_equal(copy, concat)
    np.testing.assert_array_equal(output_projection(concat, np.eye(3, 2), np.array([1.0, 2.0])), [[2.0, 3.0]] * 2)
