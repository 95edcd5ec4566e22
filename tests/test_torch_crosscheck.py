"""The engine against PyTorch, a reference nobody here wrote (float64, 1e-10).

Two torch APIs, two mask senses: ``nn.MultiheadAttention`` takes a boolean ``attn_mask`` with
True = *blocked* (we pass ``~mask``) and a ``key_padding_mask`` with True = padding;
``F.scaled_dot_product_attention`` takes True = *may attend*, as we do. On a query row with no
key at all the policies differ: ``nn.MultiheadAttention`` gives NaN, we give zeros plus a flag;
those rows are compared against that policy explicitly, every other row to 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest
from strategies import MHAProblem, random_problem, random_shape

from content.seeds import SEED000_HEADS, SEED000_VALID_LENS, seed000_inputs
from mha_core import multi_head_attention

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.torch

N_CONFIGS = 200
TOL = 1e-10


def t(a) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))


def or_zeros(b, n: int) -> np.ndarray:
    return np.zeros(n) if b is None else b


def torch_mha(problem: MHAProblem) -> torch.nn.MultiheadAttention:
    """An nn.MultiheadAttention holding our weights (torch stores y = x W^T + b: our w transposed)."""
    s, w = problem.shape, problem.weights
    embed = s.n_heads * s.hs
    mha = torch.nn.MultiheadAttention(
        embed, s.n_heads, bias=s.bias, kdim=s.c_k, vdim=s.c_v, batch_first=True, dtype=torch.float64
    ).eval()
    with torch.no_grad():
        if mha._qkv_same_embed_dim:  # kdim == vdim == embed: one fused (3E, E) matrix
            mha.in_proj_weight.copy_(torch.cat([t(w.w_q.T), t(w.w_k.T), t(w.w_v.T)]))
        else:
            mha.q_proj_weight.copy_(t(w.w_q.T))  # (E, E)
            mha.k_proj_weight.copy_(t(w.w_k.T))  # (E, kdim)
            mha.v_proj_weight.copy_(t(w.w_v.T))  # (E, vdim)
        mha.out_proj.weight.copy_(t(np.eye(embed) if w.w_o is None else w.w_o.T))
        if s.bias:
            mha.in_proj_bias.copy_(torch.cat([t(or_zeros(b, embed)) for b in (w.b_q, w.b_k, w.b_v)]))
            mha.out_proj.bias.copy_(t(or_zeros(w.b_o, embed)))
    return mha


def assert_policy_on_empty_rows(ours: np.ndarray, theirs: np.ndarray, name: str) -> None:
    """Rows with no key: ours exactly 0; torch's NaN (MultiheadAttention) or 0 (SDPA)."""
    np.testing.assert_array_equal(ours, 0.0, err_msg=name)
    assert np.all(np.isnan(theirs) | (theirs == 0)), name


@pytest.mark.parametrize("seed", range(N_CONFIGS))
def test_against_torch_multihead_attention(seed):
    rng = np.random.default_rng(seed)
    problem = random_problem(rng, random_shape(rng, torch_mha=True, allow_fully_masked=seed % 5 == 0))
    trace = multi_head_attention(problem.x_q, problem.weights, problem.n_heads, **problem.kwargs())

    use_padding_argument = problem.shape.mask == "padding" and seed % 2 == 0
    kwargs = {}
    if use_padding_argument:  # key_padding_mask: (B, Tk), True = a padding key
        kwargs["key_padding_mask"] = torch.from_numpy(np.arange(problem.shape.tk) >= problem.valid_len)[None]
    elif problem.mask is not None:  # attn_mask: (Tq, Tk) or (B*nh, Tq, Tk), True = NOT allowed
        kwargs["attn_mask"] = torch.from_numpy(~problem.mask)
    with torch.no_grad():
        out, weights = torch_mha(problem)(
            t(problem.x_q)[None],
            t(problem.keys)[None],
            t(problem.values)[None],
            need_weights=True,
            average_attn_weights=False,
            **kwargs,
        )
    out, weights = out[0].numpy(), weights[0].numpy()  # (Tq, E), (nh, Tq, Tk)

    empty = trace.fully_masked  # (nh, Tq)
    np.testing.assert_allclose(trace.weights[~empty], weights[~empty], rtol=0, atol=TOL, err_msg="weights")
    assert_policy_on_empty_rows(trace.weights[empty], weights[empty], "weights")
    rows_ok = ~empty.any(axis=0)  # (Tq,): every head had a key
    np.testing.assert_allclose(trace.output[rows_ok], out[rows_ok], rtol=0, atol=TOL, err_msg="output")


def torch_pipeline(problem: MHAProblem, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Projections, heads and merge written in torch around F.scaled_dot_product_attention."""
    s, w = problem.shape, problem.weights

    def heads_of(x, weight, bias, size):
        y = F.linear(t(x), t(weight.T), None if bias is None else t(bias))  # (T, nh*size)
        return y.view(y.shape[0], s.n_heads, size).transpose(0, 1)  # (nh, T, size)

    q = heads_of(problem.x_q, w.w_q, w.b_q, s.hs)
    k = heads_of(problem.keys, w.w_k, w.b_k, s.hs)
    v = heads_of(problem.values, w.w_v, w.b_v, s.hv)
    attn_mask = None if mask is None else torch.from_numpy(np.array(mask))  # True = may attend (a writable copy)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=s.scale)  # (nh, Tq, hv)
    concat = heads.transpose(0, 1).reshape(s.tq, s.n_heads * s.hv)  # (Tq, nh*hv)
    out = concat if w.w_o is None else F.linear(concat, t(w.w_o.T), None if w.b_o is None else t(w.b_o))
    return heads.numpy(), out.numpy()


@pytest.mark.parametrize("seed", range(N_CONFIGS))
def test_against_torch_scaled_dot_product_attention(seed):
    rng = np.random.default_rng(10_000 + seed)
    problem = random_problem(rng, random_shape(rng, allow_fully_masked=seed % 5 == 0))
    trace = multi_head_attention(problem.x_q, problem.weights, problem.n_heads, **problem.kwargs())
    with torch.no_grad():
        heads, out = torch_pipeline(problem, None if problem.mask is None else problem.full_mask())

    empty = trace.fully_masked  # (nh, Tq)
    np.testing.assert_allclose(trace.heads[~empty], heads[~empty], rtol=0, atol=TOL, err_msg="heads")
    assert_policy_on_empty_rows(trace.heads[empty], heads[empty], "heads")
    rows_ok = ~empty.any(axis=0)
    np.testing.assert_allclose(trace.output[rows_ok], out[rows_ok], rtol=0, atol=TOL, err_msg="output")


def test_configurations_include_fully_masked_rows_and_both_torch_paths():
    kinds, fused, separate, empty_rows = set(), 0, 0, 0
    for seed in range(N_CONFIGS):
        rng = np.random.default_rng(seed)
        problem = random_problem(rng, random_shape(rng, torch_mha=True, allow_fully_masked=seed % 5 == 0))
        kinds.add(problem.shape.mask)
        same_width = problem.shape.c_k == problem.shape.c_v == problem.shape.c_q
        fused += same_width
        separate += not same_width
        empty_rows += bool((~problem.full_mask().any(axis=-1)).any())
    assert kinds == {"none", "causal", "padding", "window", "random", "random_per_head"}
    assert fused >= 20 and separate >= 20  # in_proj_weight and q/k/v_proj_weight both exercised
    assert empty_rows >= 3


def test_seed_000_batch_against_torch_with_key_padding():
    # The seed-000 example (batch of 2, valid lengths [3, 2], uniform weights) in one batched torch call.
    queries, keys_values, w = seed000_inputs()
    mha = torch.nn.MultiheadAttention(100, SEED000_HEADS, bias=False, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([t(w.w_q.T), t(w.w_k.T), t(w.w_v.T)]))
        mha.out_proj.weight.copy_(t(w.w_o.T))
        padding = torch.from_numpy(np.arange(6)[None, :] >= np.array(SEED000_VALID_LENS)[:, None])  # (B, Tk)
        out, weights = mha(
            t(queries), t(keys_values), t(keys_values), key_padding_mask=padding, need_weights=True,
            average_attn_weights=False,
        )
    for b, valid_len in enumerate(SEED000_VALID_LENS):
        mask = np.arange(6) < valid_len
        trace = multi_head_attention(queries[b], w, SEED000_HEADS, x_k=keys_values[b], mask=mask)
        np.testing.assert_allclose(trace.weights, weights[b].numpy(), rtol=0, atol=TOL)
        np.testing.assert_allclose(trace.output, out[b].numpy(), rtol=1e-12, atol=TOL)  # outputs ~1300
