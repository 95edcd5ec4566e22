"""The engine against a deliberately slow reference: plain Python loops over heads, rows and keys.

The reference shares no code with ``mha_core``: it projects with explicit sums, takes every
dot product element by element and exponentiates with ``math.exp``. If both agree to 1e-12 on
hundreds of random configurations, the vectorised engine computes what the formulas say.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from strategies import random_problem, random_shape

from mha_core import multi_head_attention

N_CONFIGS = 300
TOL = 1e-12  # float64; inputs of order 1, so only summation order differs


def linear(rows: list[list[float]], w, b) -> list[list[float]]:
    """y[t][j] = sum_c x[t][c] w[c][j] + b[j], one element at a time."""
    n_in, n_out = len(w), len(w[0])
    out = []
    for row in rows:
        out.append([sum(row[c] * w[c][j] for c in range(n_in)) + (0.0 if b is None else b[j]) for j in range(n_out)])
    return out


def reference_attention(x_q, x_k, x_v, weights, n_heads: int, mask, scale):
    """Multi-head attention, one head, one query, one key at a time. Returns a dict of nested lists."""
    as_list = lambda a: None if a is None else np.asarray(a, dtype=float).tolist()  # noqa: E731
    w = {name: as_list(getattr(weights, name)) for name in ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")}
    q_all = linear(as_list(x_q), w["w_q"], w["b_q"])  # Tq rows of nh*hs
    k_all = linear(as_list(x_k), w["w_k"], w["b_k"])  # Tk rows of nh*hs
    v_all = linear(as_list(x_v), w["w_v"], w["b_v"])  # Tk rows of nh*hv
    tq, tk = len(q_all), len(k_all)
    hs, hv = len(q_all[0]) // n_heads, len(v_all[0]) // n_heads
    if scale is None:
        scale = 1 / math.sqrt(hs)

    scores, logits, attn, heads, fully = [], [], [], [], []
    for h in range(n_heads):
        qs, ks = slice(h * hs, (h + 1) * hs), slice(h * hs, (h + 1) * hs)
        vs = slice(h * hv, (h + 1) * hv)
        head_scores, head_logits, head_weights, head_out, head_fully = [], [], [], [], []
        for i in range(tq):
            row_scores, row_logits = [], []
            for j in range(tk):
                s = sum(a * b for a, b in zip(q_all[i][qs], k_all[j][ks], strict=True))
                row_scores.append(s)
                allowed = True if mask is None else bool(mask[h][i][j])
                row_logits.append(s * scale if allowed else -math.inf)
            finite = [x for x in row_logits if x != -math.inf]
            if finite:
                top = max(finite)
                exps = [0.0 if x == -math.inf else math.exp(x - top) for x in row_logits]
                total = sum(exps)
                row_weights = [e / total for e in exps]
            else:
                row_weights = [0.0] * tk  # no key to attend to: zeros, flagged
            out = [sum(row_weights[j] * v_all[j][vs][d] for j in range(tk)) for d in range(hv)]
            head_scores.append(row_scores)
            head_logits.append(row_logits)
            head_weights.append(row_weights)
            head_out.append(out)
            head_fully.append(not finite)
        scores.append(head_scores)
        logits.append(head_logits)
        attn.append(head_weights)
        heads.append(head_out)
        fully.append(head_fully)

    concat = [[value for h in range(n_heads) for value in heads[h][i]] for i in range(tq)]
    output = concat if w["w_o"] is None else linear(concat, w["w_o"], w["b_o"])
    split = lambda rows, size: [[r[h * size : (h + 1) * size] for r in rows] for h in range(n_heads)]  # noqa: E731
    return {
        "q": split(q_all, hs),
        "k": split(k_all, hs),
        "v": split(v_all, hv),
        "scores": scores,
        "logits": logits,
        "weights": attn,
        "heads": heads,
        "concat": concat,
        "output": output,
        "fully_masked": fully,
    }


def test_reference_on_the_paper_example():
    # The 2-token example of test_attention.py: row 1 weights are [1/(1+e^a), e^a/(1+e^a)], a = 1/sqrt(2).
    from mha_core import AttentionWeights

    eye = np.eye(2)
    ref = reference_attention([[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]],
                              AttentionWeights(eye, eye, eye), 1, None, None)
    a = 1 / math.sqrt(2)
    assert ref["weights"][0][1] == pytest.approx([1 / (1 + math.exp(a)), math.exp(a) / (1 + math.exp(a))], abs=1e-15)
    assert ref["output"][0] == pytest.approx([1.0, 0.5], abs=1e-15)


@pytest.mark.parametrize("seed", range(N_CONFIGS))
def test_engine_agrees_with_the_loop_reference(seed):
    rng = np.random.default_rng(seed)
    problem = random_problem(rng, random_shape(rng, allow_fully_masked=seed % 5 == 0))
    trace = multi_head_attention(problem.x_q, problem.weights, problem.n_heads, **problem.kwargs())
    mask = None if problem.mask is None else problem.full_mask()
    ref = reference_attention(problem.x_q, problem.keys, problem.values, problem.weights, problem.n_heads, mask,
                              problem.shape.scale)

    for name in ("q", "k", "v", "scores", "weights", "heads", "concat", "output"):
        np.testing.assert_allclose(getattr(trace, name), np.array(ref[name]).reshape(getattr(trace, name).shape),
                                   rtol=0, atol=TOL, err_msg=name)
    ref_logits = np.array(ref["logits"])
    np.testing.assert_array_equal(trace.logits == -np.inf, ref_logits == -np.inf)
    finite = np.isfinite(ref_logits)
    np.testing.assert_allclose(trace.logits[finite], ref_logits[finite], rtol=0, atol=TOL)
    np.testing.assert_array_equal(trace.fully_masked, ref["fully_masked"])


def test_the_random_configurations_cover_every_option():
    shapes = [random_shape(np.random.default_rng(seed)) for seed in range(N_CONFIGS)]
    assert {s.mask for s in shapes} == {"none", "causal", "padding", "window", "random", "random_per_head"}
    assert any(s.cross for s in shapes) and any(not s.cross for s in shapes)
    assert any(s.separate_v for s in shapes)
    assert any(s.bias for s in shapes) and any(not s.bias for s in shapes)
    assert any(s.c_out is None for s in shapes) and any(s.c_out is not None for s in shapes)
    assert any(s.hs != s.hv for s in shapes)
    assert any(s.tq != s.tk for s in shapes)
    assert any(s.scale is not None for s in shapes) and any(s.scale is None for s in shapes)
    with_empty_rows = 0
    for seed in range(0, N_CONFIGS, 5):
        rng = np.random.default_rng(seed)
        problem = random_problem(rng, random_shape(rng, allow_fully_masked=True))
        with_empty_rows += bool((~problem.full_mask().any(axis=-1)).any())
    assert with_empty_rows >= 3  # the fully-masked policy is exercised, not just allowed
