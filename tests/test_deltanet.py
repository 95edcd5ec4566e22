"""Gated DeltaNet (issue 34): the recurrent form, the chunked form and the implied matrix M give the same heads,
M against a slow loop of the paper's matrices written here, the identity "β = 0 and α = 1: the state never
changes", the decoder's constant-size state against full causal attention, and the refusals with their fixes."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.decoder import decoder_config
from mha_core.deltanet import (
    delta_chunked,
    delta_recurrence,
    deltanet_params,
    gates,
    implied_matrix,
    l2_normalise,
)
from mha_core.kernels import KERNELS, kernel_refusal
from mha_core.variant_decoding import decode_variant_run

EXACT = 1e-12


def random_problem(seed: int, n: int = 3, t: int = 9, hs: int = 4, hv: int = 5):
    rng = np.random.default_rng(seed)
    q = l2_normalise(rng.normal(size=(n, t, hs))) / np.sqrt(hs)  # (n, T, hs)
    k = l2_normalise(rng.normal(size=(n, t, hs)))  # (n, T, hs)
    v = rng.normal(size=(n, t, hv))  # (n, T, hv)
    g = -rng.uniform(0.0, 1.5, size=(n, t))  # (n, T): log decays
    beta = rng.uniform(0.0, 1.0, size=(n, t))  # (n, T)
    return q, k, v, g, beta


def paper_loop(q, k, v, g, beta) -> tuple[np.ndarray, np.ndarray]:
    """The paper's S_t = α_t S_{t−1}(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ (S: hv × hs), o_t = S_t q_t, head by head,
    with explicit matrices; and M_ij = β_j q_iᵀ (Π_{m=j+1..i} A_mᵀ) k_j from the same transitions, one entry at a time."""
    n, t, hs = q.shape
    heads = np.zeros((n, t, v.shape[-1]))
    matrix = np.zeros((n, t, t))
    for h in range(n):
        s = np.zeros((v.shape[-1], hs))
        transitions = [np.exp(g[h, m]) * (np.eye(hs) - beta[h, m] * np.outer(k[h, m], k[h, m])) for m in range(t)]
        for i in range(t):
            s = s @ transitions[i] + beta[h, i] * np.outer(v[h, i], k[h, i])
            heads[h, i] = s @ q[h, i]
            for j in range(i + 1):
                product = np.eye(hs)
                for m in range(j + 1, i + 1):
                    product = product @ transitions[m]  # S_i = ... β_j v_j k_jᵀ A_(j+1) ... A_i
                matrix[h, i, j] = beta[h, j] * k[h, j] @ product @ q[h, i]
    return heads, matrix


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_implied_matrix_is_the_papers_product_of_transitions(seed):
    q, k, v, g, beta = random_problem(seed)
    heads, matrix = paper_loop(q, k, v, g, beta)
    np.testing.assert_allclose(implied_matrix(q, k, g, beta), matrix, rtol=0, atol=EXACT)
    np.testing.assert_allclose(matrix @ v, heads, rtol=0, atol=EXACT)  # o = M V


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 9, 64])
def test_recurrent_chunked_and_implied_forms_give_the_same_heads_and_state(chunk):
    q, k, v, g, beta = random_problem(7)
    recurrent, state = delta_recurrence(q, k, v, g, beta)
    chunked, chunk_state = delta_chunked(q, k, v, g, beta, chunk)
    np.testing.assert_allclose(chunked, recurrent, rtol=0, atol=EXACT)
    np.testing.assert_allclose(chunk_state, state, rtol=0, atol=EXACT)
    np.testing.assert_allclose(implied_matrix(q, k, g, beta) @ v, recurrent, rtol=0, atol=EXACT)
    assert np.abs(recurrent).max() > 0.1  # not a comparison of zeros


def test_with_beta_0_and_alpha_1_the_state_never_changes():
    q, k, v, g, beta = random_problem(3)
    zero, one = np.zeros_like(beta), np.zeros_like(g)  # β = 0, g = 0: α = 1
    heads, state = delta_recurrence(q, k, v, one, zero)
    assert np.all(state == 0) and np.all(heads == 0)
    assert np.all(implied_matrix(q, k, one, zero) == 0)
    _, chunk_state = delta_chunked(q, k, v, one, zero)
    assert np.all(chunk_state == 0)
    # β = 1 on token 0 only: S holds k_0 v_0ᵀ and keeps it exactly, whatever comes after
    first = zero.copy()
    first[:, 0] = 1.0
    _, state = delta_recurrence(q, k, v, one, first)
    np.testing.assert_allclose(state, k[:, 0, :, None] * v[:, 0, None, :], rtol=0, atol=EXACT)


def test_beta_1_and_alpha_1_overwrite_the_value_stored_for_a_repeated_key():
    """The delta rule: writing v' for a key already stored replaces v (β = 1), where linear attention adds."""
    q, k, v, g, beta = random_problem(4, n=1, t=2)
    k[:, 1] = k[:, 0]
    _, state = delta_recurrence(q, k, v, np.zeros_like(g), np.ones_like(beta))
    recalled = np.einsum("nd,nde->ne", k[:, 0], state)  # S^T k
    np.testing.assert_allclose(recalled, v[:, 1], rtol=0, atol=1e-5)  # ‖k̂‖² = 1/(1 + 1e-6/‖k‖²): L2_EPS
    assert not np.allclose(recalled, v[:, 0] + v[:, 1], atol=1e-3)  # linear attention's sum


CONFIGS = [
    MHAConfig(kernel="deltanet", mask="causal"),
    MHAConfig(kernel="deltanet", mask="causal", kv_heads=2, seed=3),
    MHAConfig(kernel="deltanet", mask="causal", pe="rope", tokens=tuple("abcdefghij"), seed=5),
    MHAConfig(kernel="deltanet", mask="causal", pe="sinusoidal", d_model=24, n_heads=3),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_the_engines_weights_are_m_and_its_heads_all_three_forms(config):
    result = run(config)
    trace, parts = result.trace, result.trace.kernel_parts
    np.testing.assert_allclose(parts.recurrent_heads, trace.heads, rtol=0, atol=EXACT)
    np.testing.assert_allclose(parts.chunked_heads, trace.heads, rtol=0, atol=EXACT)
    # β and α from x as Qwen3-Next makes them, and M from them, recomputed here
    params = deltanet_params(config.d_model, config.n_heads, config.seed)
    x = result.x_q
    beta = 1 / (1 + np.exp(-(x @ params.w_beta))).T
    g = (-np.exp(params.a_log) * np.log1p(np.exp(x @ params.w_a + params.dt_bias))).T
    np.testing.assert_allclose(parts.beta, beta, rtol=0, atol=EXACT)
    np.testing.assert_allclose(parts.g, g, rtol=0, atol=EXACT)
    group = config.n_heads // config.key_value_heads
    k = np.repeat(trace.k, group, axis=0)
    q_hat = trace.q / np.sqrt((trace.q**2).sum(-1, keepdims=True) + 1e-6) / np.sqrt(config.head_size)
    k_hat = k / np.sqrt((k**2).sum(-1, keepdims=True) + 1e-6)
    _, matrix = paper_loop(q_hat, k_hat, np.repeat(trace.v, group, axis=0), g, beta)
    np.testing.assert_allclose(trace.weights, matrix, rtol=0, atol=EXACT)
    assert (trace.weights < 0).any() and np.all(np.triu(trace.weights[0], 1) == 0)


@pytest.mark.parametrize("config", CONFIGS)
def test_the_decoder_keeps_a_state_of_constant_size_and_gives_the_causal_rows(config):
    result = run(decoder_config(config))
    trace = result.trace
    steps = decode_variant_run(result)
    assert {step.numbers for step in steps} == {config.n_heads * config.head_size * config.head_size}
    for step in steps:
        t = step.position
        np.testing.assert_allclose(step.weights, trace.weights[:, t, : t + 1], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.heads, trace.heads[:, t], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.output, trace.output[t], rtol=0, atol=EXACT)
    (name, state), = steps[-1].held
    assert name == "state S per query head"
    np.testing.assert_allclose(state, trace.kernel_parts.state, rtol=0, atol=EXACT)


@pytest.mark.parametrize("options, setting", [({}, "mask"), ({"mask": "window"}, "mask"),
                                             ({"mask": "causal", "kv_tokens": ("a", "dog")}, "mask"),
                                             ({"mask": "causal", "null_key": True}, "null_key"),
                                             ({"mask": "causal", "pe": "alibi"}, "pe"),
                                             ({"mask": "causal", "scale_rule": "none"}, "scale_rule"),
                                             ({"mask": "causal", "mla_rank": 4}, "mla_rank")])
def test_refusals_name_the_setting_and_their_fix_runs(options, setting):
    config = MHAConfig(kernel="deltanet", **options)
    assert kernel_refusal("deltanet", config).setting == setting
    fixed = config.problem().fix(config)
    assert fixed.problem() is None  # one fix is enough
    assert fixed.kernel == "deltanet" and np.isfinite(run(fixed).trace.output).all()


def test_the_row_reads_x_is_recurrent_and_signed():
    row = KERNELS["deltanet"]
    assert row.reads_input and row.recurrent and row.signed and not row.rows_sum_to_one
    assert row.decoder is not None and row.params is not None


def test_gates_are_per_head_and_in_range():
    params = deltanet_params(16, 4, 0)
    x = np.random.default_rng(0).normal(size=(6, 16))
    beta, g = gates(x, params)
    assert beta.shape == g.shape == (4, 6)
    assert np.all((beta > 0) & (beta < 1)) and np.all(g < 0)
