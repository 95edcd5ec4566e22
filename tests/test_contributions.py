"""Per-head contributions, knock-out and weight x norm, against plain loops, the engine's output and torch.

The loop references share no code with ``mha_core.contributions``: they index W_O's rows head by
head and add products one at a time. Tolerances: float64 inputs of order 1, so only the order of
summation differs (1e-12); torch in float64 (1e-10, as in test_torch_crosscheck.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from strategies import random_problem, random_shape

from mha_core import multi_head_attention
from mha_core.contributions import (
    contribution_identity,
    head_contributions,
    head_output_shares,
    head_share_of_output,
    knock_out,
    output_norm_weights,
    sum_of_contributions,
    value_norm_weights,
)

N_CONFIGS = 60
TOL = 1e-12
TORCH_TOL = 1e-10


def problem_and_trace(seed: int, **shape_options):
    rng = np.random.default_rng(seed)
    problem = random_problem(rng, random_shape(rng, **shape_options))
    return problem, multi_head_attention(problem.x_q, problem.weights, problem.n_heads, **problem.kwargs())


def loop_contributions(heads, w_o) -> np.ndarray:
    """contribution[h][i][c] = sum_d heads[h][i][d] * W_O[h*hv + d][c], one product at a time; no W_O: concat columns."""
    n_heads, tq, hv = heads.shape
    c_out = n_heads * hv if w_o is None else w_o.shape[1]
    out = np.zeros((n_heads, tq, c_out))
    for h in range(n_heads):
        for i in range(tq):
            for c in range(c_out):
                if w_o is None:
                    out[h, i, c] = heads[h, i, c - h * hv] if h * hv <= c < (h + 1) * hv else 0.0
                else:
                    out[h, i, c] = sum(heads[h, i, d] * w_o[h * hv + d, c] for d in range(hv))
    return out


def loop_knock_out(heads, w_o, b_o, off) -> tuple[np.ndarray, list[float]]:
    """The output rebuilt from the kept heads only, and each token's distance to the full output."""
    contributions = loop_contributions(heads, w_o)
    n_heads, tq, c_out = contributions.shape
    bias = [0.0] * c_out if b_o is None else list(b_o)
    kept = np.array([[bias[c] + sum(contributions[h, i, c] for h in range(n_heads) if h not in off)
                      for c in range(c_out)] for i in range(tq)])
    full = np.array([[bias[c] + sum(contributions[h, i, c] for h in range(n_heads))
                      for c in range(c_out)] for i in range(tq)])
    norms = [math.sqrt(sum((kept[i, c] - full[i, c]) ** 2 for c in range(c_out))) for i in range(tq)]
    return kept, norms


# ---- contributions and the identity --------------------------------------------------------


@pytest.mark.parametrize("seed", range(N_CONFIGS))
def test_contributions_match_the_loop_and_add_up_to_the_engines_output(seed):
    problem, trace = problem_and_trace(seed, allow_fully_masked=seed % 4 == 0)
    w = problem.weights
    contributions, gap = contribution_identity(trace.heads, w.w_o, w.b_o, trace.output)
    np.testing.assert_allclose(contributions, loop_contributions(trace.heads, w.w_o), rtol=0, atol=TOL)
    assert gap <= TOL
    np.testing.assert_allclose(sum_of_contributions(contributions, w.b_o), trace.output, rtol=0, atol=TOL)


def test_a_two_head_example_worked_on_paper():
    heads = np.array([[[1.0, 2.0]], [[3.0, -1.0]]])  # (nh=2, Tq=1, hv=2)
    w_o = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0], [1.0, 1.0]])  # (4, 2): rows 0-1 read head 0, 2-3 head 1
    b_o = np.array([0.5, -0.5])
    contributions = head_contributions(heads, w_o)
    # head 0: [1, 2] @ I = [1, 2]; head 1: [3, -1] @ [[2, 1], [1, 1]] = [5, 2]
    np.testing.assert_array_equal(contributions, [[[1.0, 2.0]], [[5.0, 2.0]]])
    np.testing.assert_array_equal(sum_of_contributions(contributions, b_o), [[6.5, 3.5]])
    ko = knock_out(heads, w_o, b_o, [1])
    np.testing.assert_array_equal(ko.output, [[1.5, 1.5]])
    np.testing.assert_array_equal(ko.change, [[-5.0, -2.0]])
    assert ko.change_norm[0] == pytest.approx(math.sqrt(29), abs=TOL)


def test_the_identity_reports_a_wrong_output():
    _, trace = problem_and_trace(3)
    problem, _ = problem_and_trace(3)
    wrong = trace.output.copy()
    wrong[0, 0] += 0.25
    _, gap = contribution_identity(trace.heads, problem.weights.w_o, problem.weights.b_o, wrong)
    assert gap == pytest.approx(0.25, abs=TOL)


# ---- knock-out -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(N_CONFIGS))
def test_knock_out_matches_the_loop(seed):
    problem, trace = problem_and_trace(100 + seed)
    w = problem.weights
    rng = np.random.default_rng(seed)
    off = {int(h) for h in np.flatnonzero(rng.random(problem.n_heads) < 0.5)}
    ko = knock_out(trace.heads, w.w_o, w.b_o, off)
    expected, norms = loop_knock_out(trace.heads, w.w_o, w.b_o, off)
    assert ko.heads_off == tuple(sorted(off))
    np.testing.assert_allclose(ko.output, expected, rtol=0, atol=TOL)
    np.testing.assert_allclose(ko.change, ko.output - trace.output, rtol=0, atol=TOL)
    np.testing.assert_allclose(ko.change_norm, norms, rtol=0, atol=TOL)


def test_knocking_out_nothing_or_everything():
    problem, trace = problem_and_trace(7)
    w = problem.weights
    none = knock_out(trace.heads, w.w_o, w.b_o, [])
    np.testing.assert_allclose(none.output, trace.output, rtol=0, atol=TOL)
    np.testing.assert_array_equal(none.change_norm, 0.0)
    every = knock_out(trace.heads, w.w_o, w.b_o, range(problem.n_heads))
    bias = 0.0 if w.b_o is None else w.b_o
    np.testing.assert_allclose(every.output, np.broadcast_to(bias, trace.output.shape), rtol=0, atol=TOL)


def test_knock_out_refuses_a_head_that_does_not_exist():
    problem, trace = problem_and_trace(8)
    with pytest.raises(ValueError, match=f"choose heads 0 to {problem.n_heads - 1}"):
        knock_out(trace.heads, problem.weights.w_o, problem.weights.b_o, [problem.n_heads])


# ---- weight x norm -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_norm_weighted_attention_matches_the_loop(seed):
    problem, trace = problem_and_trace(200 + seed)
    weights, v, w_o = trace.weights, trace.v, problem.weights.w_o
    n_heads, tq, tk = weights.shape
    hv = v.shape[-1]
    by_v = value_norm_weights(weights, v)
    by_output = output_norm_weights(weights, v, w_o)
    for h in range(n_heads):
        for j in range(tk):
            v_norm = math.sqrt(sum(x * x for x in v[h, j]))
            if w_o is None:
                out_norm = v_norm
            else:
                row = [sum(v[h, j, d] * w_o[h * hv + d, c] for d in range(hv)) for c in range(w_o.shape[1])]
                out_norm = math.sqrt(sum(x * x for x in row))
            for i in range(tq):
                assert by_v[h, i, j] == pytest.approx(weights[h, i, j] * v_norm, abs=TOL)
                assert by_output[h, i, j] == pytest.approx(weights[h, i, j] * out_norm, abs=TOL)


def test_a_key_with_much_weight_can_carry_little():
    weights = np.array([[[0.9, 0.1]]])  # (1, 1, 2): key 0 takes 90% of the weight
    v = np.array([[[0.01, 0.0], [3.0, 4.0]]])  # (1, 2, 2): but its value is tiny; key 1's has norm 5
    np.testing.assert_allclose(value_norm_weights(weights, v), [[[0.009, 0.5]]], rtol=0, atol=TOL)


# ---- shares --------------------------------------------------------------------------------


def test_output_shares_without_w_o_give_each_column_to_one_head():
    heads = np.arange(1.0, 13.0).reshape(3, 2, 2)  # (nh=3, Tq=2, hv=2), no zero entry
    shares = head_output_shares(head_contributions(heads, None))
    np.testing.assert_array_equal(shares, np.kron(np.eye(3), np.ones((1, 2))))
    whole = head_share_of_output(head_contributions(heads, None))
    sizes = [math.sqrt(sum(x * x for x in heads[h].ravel())) for h in range(3)]
    np.testing.assert_allclose(whole, np.array(sizes) / sum(sizes), rtol=0, atol=TOL)


def test_output_shares_of_random_problems_sum_to_one_per_column():
    problem, trace = problem_and_trace(11)
    shares = head_output_shares(head_contributions(trace.heads, problem.weights.w_o))
    written = np.linalg.norm(trace.output - (0 if problem.weights.b_o is None else problem.weights.b_o), axis=0) > 0
    np.testing.assert_allclose(shares.sum(axis=0)[written], 1.0, rtol=0, atol=TOL)


# ---- against torch: zero a head's rows of W_O -----------------------------------------------


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(20))
def test_knock_out_matches_torch_with_the_heads_out_proj_columns_zeroed(seed):
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch cross-check is skipped")
    from test_torch_crosscheck import t, torch_mha

    problem, trace = problem_and_trace(300 + seed, torch_mha=True)
    off = [seed % problem.n_heads]
    hv = problem.shape.hv
    mha = torch_mha(problem)
    with torch.no_grad():
        for h in off:  # torch's out_proj.weight is W_O transposed: head h's rows of W_O are its columns
            mha.out_proj.weight[:, h * hv : (h + 1) * hv] = 0.0
        mask = None if problem.mask is None else torch.from_numpy(~np.array(problem.mask))
        out, _ = mha(t(problem.x_q)[None], t(problem.keys)[None], t(problem.values)[None],
                     attn_mask=mask, need_weights=False)
    out = out[0].numpy()  # (Tq, E)
    w = problem.weights
    ko = knock_out(trace.heads, w.w_o, w.b_o, off)
    rows = ~trace.fully_masked.any(axis=0)  # torch's policy differs on rows with no key (see test_torch_crosscheck)
    np.testing.assert_allclose(ko.output[rows], out[rows], rtol=0, atol=TORCH_TOL)
