"""The attention kernels (softmax, differential, linear) and multi-head latent attention, against the papers'
equations written here as slow loops over heads, queries and keys, and hand-computed fixtures.

Each planted bug of issue 26 is shown to break the comparison that guards it: lambda applied to the wrong
map, the absorbed MLA path forgetting the decoupled RoPE part, the linear state read before (or updated
past) the query's own token.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from mha_core import kernels, mla
from mha_core.attention import AttentionWeights, multi_head_attention
from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS, DifferentialParams, elu_plus_one, lambda_init_for_layer
from mha_core.kv_cache import decode
from mha_core.masks import causal_mask

TOL = 1e-12


def rotate_pairs(x: np.ndarray, position: float, base: float = 10000.0) -> np.ndarray:
    """RoPE on one vector, by hand: feature f pairs with f + d/2 and turns by position * base^(-2f/d)."""
    d = x.shape[0]
    out = x.copy()
    for f in range(d // 2):
        angle = position * base ** (-2 * f / d)
        a, b = x[f], x[f + d // 2]
        out[f], out[f + d // 2] = a * math.cos(angle) - b * math.sin(angle), a * math.sin(angle) + b * math.cos(angle)
    return out


def softmax_row(logits: list[float]) -> list[float]:
    top = max(logits)
    e = [math.exp(v - top) for v in logits]
    return [v / sum(e) for v in e]


def layer(seed: int, c: int, nh: int, kv: int | None = None):
    kv = nh if kv is None else kv
    rng = np.random.default_rng(seed)
    hs = c // nh
    w = AttentionWeights(rng.normal(0, 0.5, (c, c)), rng.normal(0, 0.5, (c, kv * hs)), rng.normal(0, 0.5, (c, kv * hs)),
                         rng.normal(0, 0.5, (c, c)))
    return rng.normal(size=(5, c)), w


# ---- differential ----------------------------------------------------------------------------


def differential_loop(x, w, nh, kv, params, mask, pe="none"):
    """The paper's equations one head, one query, one key at a time."""
    t, c = x.shape
    hs = w.w_q.shape[1] // nh
    half = hs // 2
    lam = math.exp(float(params.lambda_q1 @ params.lambda_k1)) - math.exp(float(params.lambda_q2 @ params.lambda_k2)) \
        + params.lambda_init
    q_all, k_all, v_all = x @ w.w_q, x @ w.w_k, x @ w.w_v
    out = np.zeros((t, nh * hs))
    for h in range(nh):
        g = h // (nh // kv)
        for i in range(t):
            q1, q2 = q_all[i, h * hs: h * hs + half], q_all[i, h * hs + half: (h + 1) * hs]
            if pe == "rope":
                q1, q2 = rotate_pairs(q1, i), rotate_pairs(q2, i)
            keys = [j for j in range(t) if mask is None or mask[i, j]]
            l1, l2 = [], []
            for j in keys:
                k1, k2 = k_all[j, g * hs: g * hs + half], k_all[j, g * hs + half: (g + 1) * hs]
                if pe == "rope":
                    k1, k2 = rotate_pairs(k1, j), rotate_pairs(k2, j)
                l1.append(float(q1 @ k1) / math.sqrt(half))
                l2.append(float(q2 @ k2) / math.sqrt(half))
            a1, a2 = softmax_row(l1), softmax_row(l2)
            head = sum((a1[n] - lam * a2[n]) * v_all[j, g * hs:(g + 1) * hs] for n, j in enumerate(keys))
            head = head / math.sqrt(float(np.mean(head ** 2)) + params.norm_eps) * (1 - params.lambda_init)
            out[i, h * hs:(h + 1) * hs] = head
    return out @ w.w_o


def some_params(half: int, seed: int = 3, layer_number: int = 2) -> DifferentialParams:
    rng = np.random.default_rng(seed)
    return DifferentialParams(*rng.normal(0, 0.3, (4, half)), lambda_init=lambda_init_for_layer(layer_number))


@pytest.mark.parametrize("nh, kv, pe, masked", [(2, 2, "none", False), (4, 2, "none", True), (2, 1, "rope", True),
                                                (4, 4, "rope", False)])
def test_differential_equals_the_papers_equations_in_a_loop(nh, kv, pe, masked):
    x, w = layer(1, 16, nh, kv)
    params = some_params(16 // nh // 2)
    mask = causal_mask(5) if masked else None
    trace = multi_head_attention(x, w, nh, kv_heads=kv, mask=mask, kernel="differential", kernel_params=params, pe=pe)
    expected = differential_loop(x, w, nh, kv, params, mask, pe)
    assert np.max(np.abs(trace.output - expected)) <= TOL
    parts = trace.kernel_parts
    np.testing.assert_allclose(trace.weights, parts.map1 - parts.lam * parts.map2, rtol=0, atol=TOL)
    np.testing.assert_allclose(trace.weights.sum(-1), 1 - parts.lam, rtol=0, atol=TOL)  # rows sum to 1 - lambda


def test_lambda_on_the_wrong_map_is_caught(monkeypatch):
    x, w = layer(2, 16, 2)
    params = some_params(4)
    expected = differential_loop(x, w, 2, 2, params, None)

    def wrong(q, k, v, mask, scale, bias=None, null_key=False, params=None):  # planted: A1 * lambda - A2
        out = kernels.differential_kernel(q, k, v, mask, scale, bias, null_key, params)
        swapped = out.parts.lam * out.parts.map1 - out.parts.map2  # (nh, Tq, Tk)
        heads = kernels.weighted_sum(swapped, v)
        normed = kernels.rms_norm(heads, params.norm_eps) * out.parts.output_gain
        return kernels.KernelOutput(out.scores, out.logits, swapped, heads, normed, out.parts)

    planted = {**KERNELS, "differential": replace(KERNELS["differential"], attend=wrong)}
    monkeypatch.setattr(kernels, "KERNELS", planted)
    trace = multi_head_attention(x, w, 2, kernel="differential", kernel_params=params)
    assert np.max(np.abs(trace.output - expected)) > 1e-3  # the comparison above would fail


def test_lambda_follows_the_papers_reparameterisation_and_schedule():
    assert lambda_init_for_layer(1) == pytest.approx(0.2, abs=1e-15)
    assert lambda_init_for_layer(3) == pytest.approx(0.8 - 0.6 * math.exp(-0.6), abs=1e-15)
    p = DifferentialParams(np.array([0.5, 0.0]), np.array([0.2, 9.0]), np.array([0.0, 1.0]), np.array([3.0, -0.1]),
                           lambda_init=0.2)
    assert p.lam == pytest.approx(math.exp(0.1) - math.exp(-0.1) + 0.2, abs=1e-15)


def test_differential_weights_can_be_negative_and_the_table_says_so():
    result = run(MHAConfig(kernel="differential", seed=4))
    assert result.trace.weights.min() < 0
    assert KERNELS["differential"].signed and not KERNELS["differential"].rows_sum_to_one
    assert not KERNELS["softmax"].signed and KERNELS["softmax"].rows_sum_to_one
    lam = result.trace.kernel_parts.lam
    np.testing.assert_allclose(result.trace.weights.sum(-1), 1 - lam, atol=TOL)


# ---- linear ----------------------------------------------------------------------------------


def phi(x):
    return x + 1 if x > 0 else math.exp(x)


def test_phi_by_hand():
    np.testing.assert_allclose(elu_plus_one(np.array([-1.0, 0.0, 2.0, -50.0])), [math.exp(-1), 1.0, 3.0, math.exp(-50)],
                               rtol=1e-15)


def linear_loop(x, w, nh, kv, mask):
    """Katharopoulos et al. eq. 5, one head and query at a time: sum_j phi(q).phi(k_j) v_j / sum_j phi(q).phi(k_j)."""
    t = x.shape[0]
    hs = w.w_q.shape[1] // nh
    q_all, k_all, v_all = x @ w.w_q, x @ w.w_k, x @ w.w_v
    heads = np.zeros((nh, t, hs))
    for h in range(nh):
        g = h // (nh // kv)
        for i in range(t):
            num, den = np.zeros(hs), 0.0
            for j in range(t):
                if mask is not None and not mask[i, j]:
                    continue
                s = sum(phi(q_all[i, h * hs + f]) * phi(k_all[j, g * hs + f]) for f in range(hs))
                num += s * v_all[j, g * hs:(g + 1) * hs]
                den += s
            heads[h, i] = num / den
    return heads


@pytest.mark.parametrize("nh, kv, masked", [(2, 2, True), (4, 1, True), (4, 2, False)])
def test_linear_equals_a_slow_loop_and_its_recurrent_form(nh, kv, masked):
    x, w = layer(5, 16, nh, kv)
    mask = causal_mask(5) if masked else None
    trace = multi_head_attention(x, w, nh, kv_heads=kv, mask=mask, kernel="linear")
    assert np.max(np.abs(trace.heads - linear_loop(x, w, nh, kv, mask))) <= TOL
    np.testing.assert_allclose(trace.weights.sum(-1), 1.0, atol=TOL)
    parts = trace.kernel_parts
    if masked:
        assert np.max(np.abs(parts.recurrent_heads - trace.heads)) <= TOL
        assert parts.state.shape == (nh, 16 // nh, 16 // nh)  # the state's size does not depend on T
    else:
        assert parts.recurrent_heads is None


@pytest.mark.parametrize("order", ["read before update", "update with the next token before the read"])
def test_the_linear_state_read_at_the_wrong_time_is_caught(order, monkeypatch):
    x, w = layer(6, 16, 2)
    mask = causal_mask(5)
    expected = linear_loop(x, w, 2, 2, mask)

    def read_first(state, state_sum, phi_q_t, phi_k_t, v_t):  # planted: the query misses its own token
        num = np.einsum("hd,hde->he", phi_q_t, state)
        den = np.einsum("hd,hd->h", phi_q_t, state_sum)
        out = num / np.where(den > 0, den, 1.0)[:, None]
        return state + phi_k_t[:, :, None] * v_t[:, None, :], state_sum + phi_k_t, out

    def peek(phi_q, phi_k, v):  # planted: the state already holds token t + 1 when query t reads it
        n = phi_q.shape[1]
        order = list(range(1, n)) + [0]
        shifted = kernels._original_recurrence(phi_q, phi_k[:, order], v[:, order])
        return shifted

    if order == "read before update":
        monkeypatch.setattr(kernels, "linear_step", read_first)
    else:
        monkeypatch.setattr(kernels, "_original_recurrence", kernels.linear_recurrence, raising=False)
        monkeypatch.setattr(kernels, "linear_recurrence", peek)
    trace = multi_head_attention(x, w, 2, mask=mask, kernel="linear")
    assert np.max(np.abs(trace.kernel_parts.recurrent_heads - expected)) > 1e-3  # the recurrent check would fail


# ---- multi-head latent attention -------------------------------------------------------------


def mla_loop(x, w_q, w_o, latent_w: mla.MLAWeights, nh, mask, pe):
    """DeepSeek-V2's equations one head, query and key at a time (RMSNorm on the latent, decoupled RoPE)."""
    t = x.shape[0]
    hs = w_q.shape[1] // nh
    dr = latent_w.rope_dims
    dn = hs - dr
    c = x @ latent_w.w_dkv
    c = c / np.sqrt(np.mean(c ** 2, axis=1, keepdims=True) + latent_w.latent_eps) * latent_w.latent_gain
    k_r = [rotate_pairs(x[j] @ latent_w.w_kr, j) if pe == "rope" else x[j] @ latent_w.w_kr for j in range(t)]
    out = np.zeros((t, nh * hs))
    for h in range(nh):
        w_uk = latent_w.w_uk[:, h * dn:(h + 1) * dn]
        w_uv = latent_w.w_uv[:, h * hs:(h + 1) * hs]
        for i in range(t):
            q = x[i] @ w_q[:, h * hs:(h + 1) * hs]
            q_c, q_r = q[:dn], q[dn:]
            if pe == "rope":
                q_r = rotate_pairs(q_r, i)
            keys = [j for j in range(t) if mask is None or mask[i, j]]
            logits = [(float(q_c @ (c[j] @ w_uk)) + float(q_r @ k_r[j])) / math.sqrt(hs) for j in keys]
            a = softmax_row(logits)
            out[i, h * hs:(h + 1) * hs] = sum(a[n] * (c[j] @ w_uv) for n, j in enumerate(keys))
    return out @ w_o


@pytest.mark.parametrize("rank, rope, pe", [(4, 2, "rope"), (6, 0, "none"), (3, 4, "rope")])
def test_mla_equals_deepseeks_equations_in_a_loop_and_absorbed_equals_materialised(rank, rope, pe):
    config = MHAConfig(mla_rank=rank, mla_rope=rope, pe=pe, mask="causal", d_model=16, n_heads=2)
    result = run(config)
    expected = mla_loop(result.x_q, result.weights.w_q, result.weights.w_o, result.mla_weights, 2, result.mask, pe)
    assert np.max(np.abs(result.trace.output - expected)) <= TOL
    parts = result.trace.mla
    assert parts.score_gap <= TOL
    assert np.max(np.abs(parts.absorbed_scores - result.trace.scores)) <= TOL
    heads = mla.absorbed_heads(result.trace.weights, parts.latent, result.mla_weights.w_uv)
    assert np.max(np.abs(heads - result.trace.heads)) <= TOL


def test_the_absorbed_path_forgetting_the_rope_part_is_caught(monkeypatch):
    result = run(MHAConfig(mla_rank=4, mla_rope=2, pe="rope", mask="causal"))
    assert result.trace.mla.score_gap <= TOL
    original = mla.absorbed_scores

    def forgetful(q_content, q_rope, latent, k_rope, w_uk):  # planted: no q_R . k_R
        return original(q_content, q_rope[..., :0], latent, k_rope[..., :0], w_uk)

    monkeypatch.setattr(mla, "absorbed_scores", forgetful)
    planted = run(MHAConfig(mla_rank=4, mla_rope=2, pe="rope", mask="causal"))
    assert planted.trace.mla.score_gap > 1e-3


def test_cache_sizes_per_token_against_the_formula_and_a_real_cache():
    nh, hs, kv, rank, rope = 4, 8, 2, 6, 2
    sizes = mla.cache_per_token(nh, hs, kv, rank, rope)
    assert sizes == {"MHA": 2 * nh * hs, "GQA": 2 * kv * hs, "MLA": rank + rope}
    x, w = layer(7, nh * hs, nh, kv)
    steps = decode(x, w, nh, kv_heads=kv)
    assert steps[-1].cache.numbers == sizes["GQA"] * len(x)  # the engine's own cache holds 2 kv hs per token
    result = run(MHAConfig(mla_rank=rank, mla_rope=rope, pe="rope", d_model=nh * hs, n_heads=nh))
    parts = result.trace.mla
    per_token = (parts.latent.size + parts.k_rope.size) // len(result.config.tokens)
    assert per_token == parts.cache_per_token == rank + rope


def test_every_kernel_runs_from_a_configuration_with_the_options_it_accepts():
    for name, kernel in KERNELS.items():
        for options in ({}, {"mask": "causal"}, {"pe": "rope"}, {"kv_heads": 2}, {"pe": "sinusoidal"},
                        {"kv_tokens": ("a", "dog")}, {"null_key": True}, {"pe": "alibi"}, {"mla_rank": 4}):
            config = MHAConfig(kernel=name, **options)
            problem = config.problem()
            refused = [r for r in kernel.refuses if r.applies(config)]
            if config.mla_rank and name == "softmax":
                continue
            assert (problem is None) == (not refused), (name, options)
            if problem is None:
                trace = run(config).trace
                assert trace.kernel == name and np.all(np.isfinite(trace.output))
                sums = trace.weights.sum(-1)
                if kernel.rows_sum_to_one and not config.null_key:  # softmax₁ rows sum to at most 1
                    np.testing.assert_allclose(sums, 1.0, atol=1e-12)
            else:
                assert problem.fix(config).problem() is None, (name, options)


# ---- properties over random shapes (hypothesis) and dtypes ------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.strategies import mha_problems  # noqa: E402


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mha_problems())
def test_differential_rows_sum_to_one_minus_lambda_on_any_problem(problem):
    if problem.shape.hs % 2:
        return  # differential heads split in halves
    params = some_params(problem.shape.hs // 2, seed=problem.shape.tq)
    trace = multi_head_attention(problem.x_q, problem.weights, problem.n_heads, kernel="differential",
                                 kernel_params=params, **problem.kwargs())
    parts = trace.kernel_parts
    expected = np.where(trace.fully_masked, 0.0, 1.0 - parts.lam)  # (nh, Tq)
    np.testing.assert_allclose(trace.weights.sum(-1), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(trace.weights, parts.map1 - parts.lam * parts.map2, rtol=0, atol=1e-15)
    assert np.all(np.isfinite(trace.output))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mha_problems(self_attention=True, mask="causal"))
def test_linear_parallel_equals_recurrent_on_any_causal_problem(problem):
    trace = multi_head_attention(problem.x_q, problem.weights, problem.n_heads, kernel="linear", **problem.kwargs())
    parts = trace.kernel_parts
    assert parts.recurrent_heads is not None
    scale = max(1.0, float(np.max(np.abs(trace.heads))))
    assert np.max(np.abs(parts.recurrent_heads - trace.heads)) <= 1e-12 * scale
    np.testing.assert_allclose(trace.weights.sum(-1), 1.0, rtol=0, atol=1e-12)
    assert trace.weights.min() >= 0


@pytest.mark.parametrize("options", [{"kernel": "differential"}, {"kernel": "linear"},
                                     {"kernel": "differential", "pe": "rope"}, {"mla": True}])
def test_every_variant_keeps_float32_and_read_only_arrays(options):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = AttentionWeights(*(rng.standard_normal((8, 8)).astype(np.float32) * 0.3 for _ in range(4)))
    extra = dict(options)
    if extra.pop("mla", False):
        w = AttentionWeights(w.w_q, None, None, w.w_o)
        extra = {"mla": mla.mla_weights(8, 2, 4, 3, 2, 0).astype(np.float32), "pe": "rope"}
    trace = multi_head_attention(x, w, 2, mask=causal_mask(4), **extra)
    records = [trace] + [r for r in (trace.kernel_parts, trace.mla) if r is not None]
    for record in records:
        for name, value in record.__dict__.items():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert value.dtype == (np.float64 if name.endswith("_angles") else np.float32), name
                assert not value.flags.writeable, name
