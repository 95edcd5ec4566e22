"""Gated DeltaNet against code nobody here wrote: transformers 5.23's ``torch_recurrent_gated_delta_rule`` and
``torch_chunk_gated_delta_rule`` (``transformers.models.qwen3_next.modeling_qwen3_next``, pure torch), and Qwen3-Next's
own β and g (``Qwen3NextGatedDeltaNet``: β = b.sigmoid(), g = −A_log.exp() · softplus(a + dt_bias)).

The same q, k, v, g, β go in; transformers L2-normalises q and k (``use_qk_l2norm_in_kernel``) and scales q by
1/√d_k itself; its state is (d_k, d_v), as ours. Both functions cast every input to float32 before they compute
(``.to(torch.float32)``), so they are checked at float32's 1e-6, the chunked path (a triangular solve per chunk,
sums in another order) too: measured here up to 3.6e-7. Our float64 forms agree with one another within 1e-12
(also in tests/test_deltanet.py).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")

from mha_core.config import MHAConfig, run  # noqa: E402
from mha_core.deltanet import delta_chunked, delta_recurrence, gates, implied_matrix, l2_normalise  # noqa: E402

FLOAT32 = 1e-6
FLOAT64 = 1e-12


def problem(seed: int, t: int = 11, n: int = 3, hs: int = 8, hv: int = 6):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(t, n, hs)), rng.normal(size=(t, n, hs)), rng.normal(size=(t, n, hv)),
            -rng.uniform(0.0, 2.0, size=(t, n)), rng.uniform(0.0, 1.0, size=(t, n)))  # transformers' (T, heads, ...)


def theirs(function, q, k, v, g, beta, dtype, **options):
    """transformers' function on a batch of one, (T, n, ...) in; the heads (n, T, hv) and the last state out."""
    given = [torch.tensor(a, dtype=dtype)[None] for a in (q, k, v, g, beta)]
    out, state = function(*given, output_final_state=True, use_qk_l2norm_in_kernel=True, **options)
    return out[0].transpose(0, 1).double().numpy(), state[0].double().numpy()


def ours(q, k, v, g, beta, dtype):
    """Our three forms on the same inputs: normalise q and k, scale q by 1/√d_k, heads first."""
    q, k, v, g, beta = (np.asarray(a, dtype=dtype) for a in (q, k, v, g, beta))
    q_hat = l2_normalise(q.transpose(1, 0, 2)) / np.sqrt(q.shape[-1]).astype(dtype)  # (n, T, hs)
    k_hat = l2_normalise(k.transpose(1, 0, 2))  # (n, T, hs)
    v, g, beta = v.transpose(1, 0, 2), g.T, beta.T  # (n, T, hv), (n, T) x2
    recurrent, state = delta_recurrence(q_hat, k_hat, v, g, beta)
    chunked, chunk_state = delta_chunked(q_hat, k_hat, v, g, beta)
    return recurrent, state, chunked, chunk_state, implied_matrix(q_hat, k_hat, g, beta) @ v


@pytest.mark.parametrize("seed", [0, 1])
def test_float32_against_transformers_recurrent_and_chunked_rules(seed):
    inputs = problem(seed)
    recurrent, state, chunked, chunk_state, by_matrix = ours(*inputs, np.float32)
    assert recurrent.dtype == np.float32
    rec_out, rec_state = theirs(qwen3_next.torch_recurrent_gated_delta_rule, *inputs, torch.float32)
    chunk_out, chunk_final = theirs(qwen3_next.torch_chunk_gated_delta_rule, *inputs, torch.float32)
    np.testing.assert_allclose(recurrent, rec_out, rtol=0, atol=FLOAT32)
    np.testing.assert_allclose(state, rec_state, rtol=0, atol=FLOAT32)
    np.testing.assert_allclose(by_matrix, rec_out, rtol=0, atol=FLOAT32)
    np.testing.assert_allclose(chunked, chunk_out, rtol=0, atol=FLOAT32)
    np.testing.assert_allclose(chunk_state, chunk_final, rtol=0, atol=FLOAT32)
    np.testing.assert_allclose(recurrent, chunk_out, rtol=0, atol=FLOAT32)
    assert np.abs(rec_out).max() > 0.1


@pytest.mark.parametrize("chunk_size", [4, 64])
def test_float64_forms_agree_to_1e_12_and_with_both_transformers_paths_to_float32(chunk_size):
    inputs = problem(5, t=13)
    recurrent, state, chunked, chunk_state, by_matrix = ours(*inputs, np.float64)
    rec_out, rec_state = theirs(qwen3_next.torch_recurrent_gated_delta_rule, *inputs, torch.float64)
    chunk_out, chunk_final = theirs(qwen3_next.torch_chunk_gated_delta_rule, *inputs, torch.float64,
                                    chunk_size=chunk_size)
    np.testing.assert_allclose(chunked, recurrent, rtol=0, atol=FLOAT64)
    np.testing.assert_allclose(by_matrix, recurrent, rtol=0, atol=FLOAT64)
    np.testing.assert_allclose(chunk_state, state, rtol=0, atol=FLOAT64)
    for mine, theirs_out in ((recurrent, rec_out), (recurrent, chunk_out), (state, rec_state), (state, chunk_final)):
        np.testing.assert_allclose(mine, theirs_out, rtol=0, atol=FLOAT32)  # transformers computes in float32


def test_the_engines_heads_are_transformers_on_the_engines_q_k_v_and_qwen3_nexts_gates():
    """The app's run: its q, k, v and x into Qwen3-Next's gate formulas (torch) and the recurrent rule."""
    result = run(MHAConfig(kernel="deltanet", mask="causal", tokens=("the", "cat", "sat", "on", "the", "mat", "and", "ran"),
                           seed=11))
    trace, parts = result.trace, result.trace.kernel_parts
    params = result.kernel_params
    x = torch.tensor(result.x_q)
    b, a = x @ torch.tensor(params.w_beta), x @ torch.tensor(params.w_a)  # in_proj_ba's two halves
    beta = b.sigmoid()
    g = -torch.tensor(params.a_log).exp() * torch.nn.functional.softplus(a + torch.tensor(params.dt_bias))
    np.testing.assert_allclose(parts.beta, beta.numpy().T, rtol=0, atol=FLOAT64)
    np.testing.assert_allclose(parts.g, g.numpy().T, rtol=0, atol=FLOAT64)
    to_time = lambda a: torch.tensor(a.transpose(1, 0, 2))[None]  # noqa: E731  (n, T, d) -> (1, T, n, d)
    out, state = qwen3_next.torch_recurrent_gated_delta_rule(
        to_time(trace.q), to_time(trace.k), to_time(trace.v), g[None], beta[None], output_final_state=True,
        use_qk_l2norm_in_kernel=True)
    np.testing.assert_allclose(trace.heads, out[0].transpose(0, 1).numpy(), rtol=0, atol=FLOAT32)  # float32 inside
    np.testing.assert_allclose(parts.state, state[0].numpy(), rtol=0, atol=FLOAT32)


def test_our_gates_are_qwen3_nexts_formula():
    result = run(MHAConfig(kernel="deltanet", mask="causal", seed=2))
    beta, g = gates(result.x_q, result.kernel_params)
    np.testing.assert_array_equal(beta, result.trace.kernel_parts.beta)
    np.testing.assert_array_equal(g, result.trace.kernel_parts.g)


def test_the_lessons_stack_table_reads_qwen3_nexts_published_config():
    from transformers import Qwen3NextConfig

    from ui.pages.lessons.deltanet import QWEN3_NEXT, stack_table

    c = Qwen3NextConfig()
    assert c.layer_types[:4] == ["linear_attention"] * 3 + ["full_attention"] and c.num_hidden_layers == 48
    assert (c.num_key_value_heads, c.head_dim) == (QWEN3_NEXT["kv_heads"], QWEN3_NEXT["head_dim"])
    assert (c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim) == (
        QWEN3_NEXT["v_heads"], QWEN3_NEXT["k_dim"], QWEN3_NEXT["v_dim"])
    table = stack_table(6, 64, 32)
    assert table.iloc[0, -1] == c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim
    assert table.iloc[3, -1] == 2 * c.num_key_value_heads * c.head_dim * 1_048_576
